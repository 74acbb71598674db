"""Redistribute / redistribute on the fake cuFFTMp reshape (tests/distributed/fft/mp_fakes.py moves
every rank's box between the ranks' host buffers with numpy): results against the global numpy
array for P = 1..8 (slabs, pencils, arbitrary boxes; 1-D to 3-D), the engine calls, bad input raised
on every rank naming the rank, options and the lifecycle."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from dist_fakes import SingleRank, ThreadGroup
from mp_fakes import OWNERS, FakeDevice, host_view

import nvmath.distributed as nd
from nvmath.distributed import _symmetric
from nvmath.distributed.distribution import (
    Box,
    InvalidRedistributeState,
    Redistribute,
    RedistributeOptions,
    Slab,
    redistribute,
)


def fake_views(address, shape, strides, dtype, device_id, owner, package):
    """Symmetric tensors as FakeDevice views of the fake heap (freeable by address)."""
    OWNERS.append(owner)
    return FakeDevice(host_view(address, shape, strides, dtype))


@pytest.fixture
def env_of(make_env, monkeypatch):
    """``env_of(nranks) -> Env`` whose symmetric allocations accept the fake GPU package."""
    monkeypatch.setattr(_symmetric, "PACKAGES", (*_symmetric.PACKAGES, "fakegpu"))
    return lambda nranks: make_env(SingleRank() if nranks == 1 else ThreadGroup(nranks), views=fake_views)


def ok(results):
    errors = [r for r in results if isinstance(r, BaseException)]
    first = [e for e in errors if type(e).__name__ != "BrokenBarrierError"]
    if errors:
        raise (first or errors)[0]
    return results


def grid_boxes(shape, nranks, axes, reverse=False):
    """One Box per rank: ``shape`` cut along ``axes`` over a grid of ``nranks`` (array_split bounds)."""
    counts = [1] * len(axes)
    left = nranks
    for i in range(len(axes) - 1):  # as square as the factors allow
        counts[i] = max(d for d in range(1, int(left ** (1 / (len(axes) - i))) + 1) if left % d == 0)
        left //= counts[i]
    counts[-1] = left
    cuts = {a: np.cumsum([0] + [len(c) for c in np.array_split(np.arange(shape[a]), n)])
            for a, n in zip(axes, counts, strict=True)}  # fmt: skip
    boxes = []
    for index in itertools.product(*(range(n) for n in counts)):
        lower, upper = [0] * len(shape), list(shape)
        for a, k in zip(axes, index, strict=True):
            lower[a], upper[a] = int(cuts[a][k]), int(cuts[a][k + 1])
        boxes.append(Box(lower, upper))
    return boxes[::-1] if reverse else boxes


def slab_boxes(shape, nranks, axis):
    return grid_boxes(shape, nranks, (axis,))


def scatter(env, x, boxes):
    ops = []
    for box in boxes:
        local = x[tuple(slice(a, b) for a, b in zip(box.lower, box.upper, strict=True))]
        op = env.operand(local.shape, x.dtype, nbytes=max(local.nbytes, 1) + 64)
        op.tensor[...] = local
        ops.append(op)
    return ops


def gather(parts, boxes, x):
    out = np.zeros_like(x)
    seen = np.zeros(x.shape, int)
    for part, box in zip(parts, boxes, strict=True):
        index = tuple(slice(a, b) for a, b in zip(box.lower, box.upper, strict=True))
        out[index] = part
        seen[index] += 1
    assert (seen == 1).all()
    return out


LAYOUTS = {
    "X slab -> pencils": ((7, 9, 5), lambda s, p: Slab.X, lambda s, p: grid_boxes(s, p, (1, 2))),
    "pencils -> Y slab": ((8, 9, 4), lambda s, p: grid_boxes(s, p, (0, 1)), lambda s, p: Slab.Y),
    "boxes -> reversed boxes": ((6, 10), lambda s, p: grid_boxes(s, p, (0, 1)),
                                lambda s, p: grid_boxes(s, p, (1, 0), reverse=True)),
    "1-D slab -> 1-D slab": ((13,), lambda s, p: Slab.X, lambda s, p: slab_boxes(s, p, 0)[::-1]),
}  # fmt: skip


@pytest.mark.parametrize("nranks", range(1, 9))
@pytest.mark.parametrize("case", LAYOUTS)
@pytest.mark.parametrize("dtype", [np.float32, np.complex128])
def test_redistribute_matches_numpy(env_of, nranks, case, dtype):
    """Each rank's result is its output box of the global array, whatever the two distributions."""
    shape, make_in, make_out = LAYOUTS[case]
    env = env_of(nranks)
    x = np.random.default_rng(nranks).standard_normal(shape).astype(dtype)
    source, target = make_in(shape, nranks), make_out(shape, nranks)
    in_boxes = slab_boxes(shape, nranks, source.partition_dim) if isinstance(source, Slab) else source
    out_boxes = slab_boxes(shape, nranks, target.partition_dim) if isinstance(target, Slab) else target
    ops = scatter(env, x, in_boxes)

    def body(rank):
        src = source if isinstance(source, Slab) else source[rank]
        dst = target if isinstance(target, Slab) else (target[rank].lower, target[rank].upper)
        result = redistribute(ops[rank], src, dst)
        local = np.array(result.tensor)
        nd.free_symmetric_memory(result)
        return local

    results = ok(env.run(body))
    np.testing.assert_array_equal(gather(results, out_boxes, x), x)
    assert not env.lib.live  # the stateless call destroyed its reshape


def test_engine_calls_and_symmetric_sizes(env_of):
    """A 2-D redistribution is made as a 3-D cuFFTMp reshape (a leading extent of 1); the workspace
    is the largest size any rank needs; the result has the same symmetric size on every rank (the
    largest output box); execution syncs before and after the reshape on the caller's stream."""
    env = env_of(2)
    x = np.arange(24, dtype=np.complex64).reshape(4, 6)
    ins, outs = slab_boxes(x.shape, 2, 0), [Box((0, 0), (4, 1)), Box((0, 1), (4, 6))]
    ops = scatter(env, x, ins)

    def body(rank):
        with Redistribute(ops[rank], ins[rank], outs[rank]) as r:
            r.plan()
            assert r.workspace_bytes == 1010
            result = r.execute(stream=33)
            assert (r.global_shape, r.input_box, r.output_box) == ((4, 6), ins[rank], outs[rank])
        local = np.array(result.tensor)
        nd.free_symmetric_memory(result)
        return local

    results = ok(env.run(body))
    np.testing.assert_array_equal(gather(results, outs, x), x)
    (made,) = [c for c in env.lib.calls if c[0] == 1 and c[1] == "make_reshape"]
    assert made[3:5] == (8, 3)  # complex64 elements, rank 3
    boxes = next(iter(v["boxes"] for h, v in env.lib.reshapes.items() if (1, "make_reshape", h) in
                      [c[:3] for c in env.lib.calls]))  # fmt: skip
    assert boxes[0] == (0, 2, 0) and boxes[1] == (1, 4, 6) and boxes[2] == (12, 6, 1)
    assert boxes[3] == (0, 0, 1) and boxes[4] == (1, 4, 6) and boxes[5] == (20, 5, 1)
    mallocs = [e[1] for e in env.nvshmem.log if e[0] == "malloc"]
    assert sorted(mallocs[2:]) == [4 * 5 * 8] * 2 + [1010] * 2  # after the operands: results, workspaces
    assert [e for e in env.nvshmem.log if e[0] == "sync_all_on_stream"] == [("sync_all_on_stream", 33)] * 4


def _errors(env, ops, sources, targets):
    results = env.run(lambda r: Redistribute(ops[r], sources[r], targets[r]))
    assert not [c for c in env.lib.calls if c[1] == "create_reshape"]  # no rank went on to plan
    return results


def test_output_boxes_with_a_gap_raise_on_every_rank(env_of):
    """Output boxes leaving elements on no rank raise ValueError on every rank, naming an element."""
    env = env_of(2)
    ops = scatter(env, np.zeros((4, 4), np.float32), slab_boxes((4, 4), 2, 0))
    results = _errors(env, ops, slab_boxes((4, 4), 2, 0), [Box((0, 0), (4, 2)), Box((0, 3), (4, 4))])
    assert all(isinstance(e, ValueError) and "no rank holds the element [0, 2]" in str(e) for e in results)


def test_overlapping_input_boxes_name_both_ranks(env_of):
    """Overlapping input boxes raise on every rank, naming both ranks."""
    env = env_of(3)
    ins = [Box((0, 0), (3, 4)), Box((2, 0), (4, 4)), Box((4, 0), (6, 4))]
    ops = [env.operand(b.box_shape, np.float32) for b in ins]
    results = _errors(env, ops, ins, [Slab.Y] * 3)
    assert all(isinstance(e, ValueError) and "rank 0" in str(e) and "rank 1" in str(e) and "overlap" in str(e)
               for e in results), results  # fmt: skip


def test_operand_shape_not_its_box_names_the_rank(env_of):
    """An operand whose shape is not its input box's raises on every rank, naming the rank."""
    env = env_of(2)
    ins = slab_boxes((4, 4), 2, 0)
    ops = [env.operand((2, 4), np.float32), env.operand((2, 3), np.float32)]
    results = _errors(env, ops, ins, [Slab.Y] * 2)
    assert all(isinstance(e, ValueError) and "rank(s) [1]" in str(e) for e in results), results


def test_uneven_slab_operands_name_the_rank(env_of):
    """With a Slab input, local extents that are no slab split (1 and 3 of 4) raise on every rank."""
    env = env_of(2)
    ops = [env.operand((1, 4), np.float32), env.operand((3, 4), np.float32)]
    results = _errors(env, ops, [Slab.X] * 2, [Slab.Y] * 2)
    assert all(isinstance(e, ValueError) and "no slab split" in str(e) for e in results), results


def test_operand_off_the_heap_raises_on_every_rank(env_of):
    """A rank's operand off the symmetric heap raises there and on the other rank, naming it."""
    env = env_of(2)
    ops = [env.operand((2, 4), np.float32), FakeDevice(np.zeros((2, 4), np.float32))]
    results = _errors(env, ops, [Slab.X] * 2, [Slab.Y] * 2)
    assert all(isinstance(e, ValueError) and "rank(s) [1]" in str(e) and "symmetric heap" in str(e)
               for e in results)  # fmt: skip


def test_box_on_one_rank_slab_on_the_other_disagree(env_of):
    """A Box input on rank 0 and Slab.X on rank 1 raise RankDisagreementError on both, naming rank 1."""
    env = env_of(2)
    ops = [env.operand((2, 4), np.float32) for _ in range(2)]
    results = _errors(env, ops, [Box((0, 0), (2, 4)), Slab.X], [Slab.Y] * 2)
    assert all(isinstance(e, nd.RankDisagreementError) and "rank(s) [1]" in str(e) for e in results), results


@pytest.mark.parametrize(
    ("operand", "source", "target", "error", "match"),
    [
        (lambda env: np.zeros((4, 4), np.float32), Slab.X, Slab.Y, TypeError, "host memory"),
        (lambda env: env.operand((4, 4), np.float16), Slab.X, Slab.Y, ValueError, "2-byte elements"),
        (lambda env: env.operand((4, 4), np.float32), Box((0,), (4,)), Slab.Y, ValueError, "is 1-D"),
        (lambda env: env.operand((4, 4), np.float32), Slab.Z, Slab.Y, ValueError, "does not fit"),
        (lambda env: env.operand((4, 4), np.float32), Slab.X, "Y", TypeError, "output_distribution"),
        (lambda env: env.operand((4, 4), np.float32), ((0, 0), (5, 4)), Slab.Y, ValueError,
         "input box.s shape"),
    ],
)  # fmt: skip
def test_bad_input(env_of, operand, source, target, error, match):
    """Host arrays, unsupported element sizes, distributions of another dimensionality or type are
    refused with typed errors naming the value."""
    env = env_of(1)
    with pytest.raises(error, match=match):
        Redistribute(operand(env), source, target)


def test_use_before_initialize_names_initialize():
    """Without the runtime, Redistribute says to call initialize()."""
    with pytest.raises(RuntimeError, match="initialize"):
        redistribute(np.zeros(4, np.float32), Slab.X, Slab.X)


def test_options(env_of):
    """RedistributeOptions checks its fields; blocking=True synchronizes the stream; a dict works."""
    assert RedistributeOptions() == RedistributeOptions(logger=None, blocking="auto")
    with pytest.raises((TypeError, ValueError), match="blocking"):
        RedistributeOptions(blocking="yes")
    env = env_of(1)
    (op,) = scatter(env, np.ones((4, 4), np.float32), [Box((0, 0), (4, 4))])
    result = redistribute(op, Slab.X, Slab.Y, options={"blocking": True}, stream=5)
    assert env.syncs == [5]
    nd.free_symmetric_memory(result)


def test_lifecycle(env_of):
    """execute before plan, after release_operand and after free raise InvalidRedistributeState; a
    live plan blocks finalize; reset_operand checks the layout; free is idempotent and results
    outlive it."""
    env = env_of(1)
    x = np.arange(16, dtype=np.float64).reshape(4, 4)
    a, b = scatter(env, x, [Box((0, 0), (4, 4))] * 2)
    r = Redistribute(a, Slab.X, Slab.Y)
    with pytest.raises(InvalidRedistributeState, match="before plan"):
        r.execute()
    r.plan()
    r.plan()  # planning twice is harmless
    with pytest.raises(RuntimeError, match="plan"):
        nd.finalize()
    with pytest.raises(ValueError, match="differs from the planned"):
        r.reset_operand(env.operand((4, 3), np.float64))
    with pytest.raises(ValueError, match="symmetric heap"):
        r.reset_operand(FakeDevice(np.zeros((4, 4))))
    r.release_operand()
    with pytest.raises(InvalidRedistributeState, match="release_operand"):
        r.execute()
    b.tensor[...] = 2 * x
    r.reset_operand(b)
    result = r.execute()
    r.free()
    r.free()
    with pytest.raises(InvalidRedistributeState, match="after free"):
        r.execute()
    np.testing.assert_array_equal(result.tensor, 2 * x)
    nd.free_symmetric_memory(result)
    assert "Redistribute" in repr(r)
    nd.finalize()


def test_planned_redistribute_collected_without_free_warns(env_of):
    """A planned Redistribute dropped without free() warns (its collective destroy cannot run from
    the garbage collector)."""
    from nvmath._errors import NvmathWarning

    env = env_of(1)
    (op,) = scatter(env, np.ones((4, 4), np.float32), [Box((0, 0), (4, 4))])
    held = [Redistribute(op, Slab.X, Slab.Y)]
    held[0].plan()
    with pytest.warns(NvmathWarning, match="without free"):
        held.clear()
