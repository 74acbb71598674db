"""nvmath.distributed.fft on Box distributions (one (input Box, output Box) pair per rank) against
the fake cuFFTMp (mp_fakes.py, which moves the data between the boxes with numpy): C2C, R2C and C2R
in 2-D and 3-D on P = 1..8 ranks against numpy's float64 FFTs, the engine calls
(cufftXtSetDistribution before planning, the distributed subformats, no reshape),
allocate_operand, and boxes that do not tile the global arrays raised on every rank naming the
rank at fault."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from dist_fakes import SingleRank, ThreadGroup
from mp_fakes import FakeDevice

import nvmath.distributed as nd
import nvmath.distributed.fft as dfft
from nvmath.distributed.distribution import Box, Slab


def group_of(nranks):
    return SingleRank() if nranks == 1 else ThreadGroup(nranks)


def ok(results):
    errors = [r for r in results if isinstance(r, BaseException)]
    first = [e for e in errors if type(e).__name__ != "BrokenBarrierError"]
    if errors:
        raise (first or errors)[0]
    return results


def _factor(nranks):
    """A process grid (p0, p1) with p0 * p1 == nranks, as square as possible."""
    p0 = max(d for d in range(1, int(nranks**0.5) + 1) if nranks % d == 0)
    return p0, nranks // p0


def pencils(shape, nranks, axes, reverse=False):
    """One Box per rank: ``shape`` split over a 2-D grid along ``axes`` (numpy.array_split bounds);
    ``reverse`` numbers the ranks from the far end (a tiling that is no slab order)."""
    grid = _factor(nranks)
    bounds = [np.cumsum([0] + [len(c) for c in np.array_split(np.arange(shape[a]), g)])
              for a, g in zip(axes, grid, strict=True)]  # fmt: skip
    boxes = []
    for i, j in itertools.product(range(grid[0]), range(grid[1])):
        lower, upper = [0] * len(shape), list(shape)
        for axis, b, k in zip(axes, bounds, (i, j), strict=True):
            lower[axis], upper[axis] = int(b[k]), int(b[k + 1])
        boxes.append(Box(lower, upper))
    return boxes[::-1] if reverse else boxes


def scatter(env, x, boxes, dtype):
    """Each rank's box of ``x`` as a dense operand on the fake heap (one buffer size for all)."""
    nbytes = 16 * x.size + 4096
    operands = []
    for box in boxes:
        local = x[tuple(slice(a, b) for a, b in zip(box.lower, box.upper, strict=True))]
        op = env.operand(local.shape, dtype, nbytes=nbytes)
        op.tensor[...] = local
        operands.append(op)
    return operands


def gather(parts, boxes, shape, dtype):
    out = np.full(shape, np.nan, dtype=dtype)
    for part, box in zip(parts, boxes, strict=True):
        out[tuple(slice(a, b) for a, b in zip(box.lower, box.upper, strict=True))] = part
    return out


CASES = [((8, 8, 5), (0, 1), (2, 1)), ((8, 9), (0, 1), (1, 0))]


@pytest.mark.parametrize("nranks", range(1, 9))
@pytest.mark.parametrize(("shape", "in_axes", "out_axes"), CASES)
def test_c2c_boxes_match_numpy(make_env, nranks, shape, in_axes, out_axes):
    """A C2C FFT from pencils (or 2-D blocks) to differently split boxes gives numpy's fftn in each
    rank's output box; the inverse of the result brings the input back (times N) in the input boxes."""
    env = make_env(group_of(nranks))
    rng = np.random.default_rng(nranks)
    x = (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(np.complex128)
    ins, outs = pencils(shape, nranks, in_axes), pencils(shape, nranks, out_axes, reverse=True)
    operands = scatter(env, x, ins, np.complex128)

    def body(rank):
        pair = (ins[rank], outs[rank])
        local = np.array(operands[rank].tensor)
        with dfft.FFT(operands[rank], distribution=pair) as f:
            f.plan()
            result = f.execute()
            out = np.array(result)
            assert f.result_distribution == outs[rank]
            back = np.array(dfft.ifft(FakeDevice(result), distribution=(outs[rank], ins[rank])))
            operands[rank].tensor[...] = local
            inverse = np.array(f.execute(direction="inverse"))
        return out, back, inverse

    results = ok(env.run(body))
    spectrum = gather([r[0] for r in results], outs, shape, np.complex128)
    np.testing.assert_allclose(spectrum, np.fft.fftn(x), rtol=1e-10, atol=1e-10 * x.size)
    back = gather([r[1] for r in results], ins, shape, np.complex128)
    np.testing.assert_allclose(back, x * x.size, rtol=1e-10, atol=1e-9 * x.size)
    inverse = gather([r[2] for r in results], outs, shape, np.complex128)
    np.testing.assert_allclose(inverse, np.fft.ifftn(x) * x.size, rtol=1e-10, atol=1e-10 * x.size)
    assert not [c for c in env.lib.calls if c[1] in ("create_reshape", "exec_reshape_async")]
    env.run(lambda r: dfft.plan_cache.clear() if r == 0 else None)
    assert not env.lib.live


@pytest.mark.parametrize("nranks", range(1, 9))
@pytest.mark.parametrize("shape", [(8, 8, 6), (8, 9, 7), (9, 16)])
def test_r2c_then_c2r_boxes_match_numpy(make_env, nranks, shape):
    """rfft of dense real boxes gives numpy's rfftn in the output boxes; irfft of that spectrum
    (boxes swapped, the parity of the real length) gives the real input times N."""
    env = make_env(group_of(nranks))
    x = np.random.default_rng(7).standard_normal(shape)
    half = (*shape[:-1], shape[-1] // 2 + 1)
    ins = pencils(shape, nranks, (0, 1))
    outs = pencils(half, nranks, (1, 0), reverse=True)
    operands = scatter(env, x, ins, np.float64)
    options = {"last_axis_parity": "odd" if shape[-1] % 2 else "even"}

    def body(rank):
        spectrum = dfft.rfft(operands[rank], distribution=(ins[rank], outs[rank]), options=options)
        copy = np.array(spectrum)
        real = dfft.irfft(FakeDevice(spectrum), distribution=(outs[rank], ins[rank]), options=options)
        return copy, np.array(real)

    results = ok(env.run(body))
    np.testing.assert_allclose(gather([r[0] for r in results], outs, half, np.complex128), np.fft.rfftn(x),
                               rtol=1e-10, atol=1e-10 * x.size)  # fmt: skip
    np.testing.assert_allclose(gather([r[1] for r in results], ins, shape, np.float64), x * x.size,
                               rtol=1e-10, atol=1e-9 * x.size)  # fmt: skip
    env.run(lambda r: dfft.plan_cache.clear() if r == 0 else None)


def test_engine_calls_set_the_distribution_before_planning(make_env):
    """A Box plan attaches NVSHMEM, sets this rank's boxes (forward orientation: a forward plan gets
    the operand's box as input, an inverse plan the result's) with dense strides and the distributed
    subformats, then plans; execution makes no reshape."""
    env = make_env(ThreadGroup(2))
    shape = (4, 6, 5)
    ins, outs = pencils(shape, 2, (0, 1)), pencils(shape, 2, (1, 2))
    operands = scatter(env, np.ones(shape, np.complex64), ins, np.complex64)

    def body(rank):
        with dfft.FFT(operands[rank], distribution=(ins[rank], outs[rank])) as f:
            f.plan()
            f.execute()
            f.execute(direction="inverse")

    ok(env.run(body))
    mine = [c[1:] for c in env.lib.calls if c[0] == 1]
    names = [c[0] for c in mine]
    assert names[:5] == ["create", "attach_comm", "xt_set_distribution", "xt_set_subformat_default",
                         "make_plan"]  # fmt: skip
    assert mine[3][2:] == (5, 6)  # DISTRIBUTED_INPUT forward, DISTRIBUTED_OUTPUT inverse
    assert "create_reshape" not in names and "exec_reshape_async" not in names
    plans = [h for h, p in env.lib.plans.items() if p["rank"] == 1]
    forward, inverse = (env.lib.plans[h]["distribution"] for h in plans)
    box_in, box_out = (ins[1].lower, ins[1].upper), (outs[1].lower, outs[1].upper)
    in_shape = tuple(b - a for a, b in zip(*box_in, strict=True))
    out_shape = tuple(b - a for a, b in zip(*box_out, strict=True))
    dense = lambda s: (s[1] * s[2], s[2], 1)
    assert forward == (*box_in, *box_out, dense(in_shape), dense(out_shape))
    assert inverse == (*box_out, *box_in, dense(out_shape), dense(in_shape))


def test_boxes_as_lower_upper_pairs_and_tuples(make_env):
    """``((lower, upper), (lower, upper))`` works as a pair of Boxes; the stateless cache keys on it."""
    env = make_env(SingleRank())
    x = np.arange(16, dtype=np.complex64).reshape(4, 4)
    (op,) = scatter(env, x, [Box((0, 0), (4, 4))], np.complex64)
    out = dfft.fft(op, distribution=[((0, 0), (4, 4)), ((0, 0), (4, 4))])
    np.testing.assert_allclose(np.array(out), np.fft.fftn(x), rtol=1e-5, atol=1e-4)
    dfft.fft(op, distribution=(Box((0, 0), (4, 4)), Box((0, 0), (4, 4))))
    assert len(dfft.plan_cache) == 1
    dfft.plan_cache.clear()


def _boxes_error(make_env, nranks, ins, outs, shape=None, dtype=np.complex64, options=None):
    env = make_env(ThreadGroup(nranks))
    ops = [env.operand(b.box_shape, dtype, nbytes=4096) for b in ins]
    results = env.run(lambda r: dfft.FFT(ops[r], distribution=(ins[r], outs[r]), options=options))
    assert not [c for c in env.lib.calls if c[1] == "create"]  # no rank went on to plan
    return results


def test_input_boxes_with_a_gap_raise_on_every_rank(make_env):
    """Input boxes that leave elements on no rank raise ValueError on every rank, naming an element."""
    ins = [Box((0, 0), (2, 4)), Box((3, 0), (4, 4))]
    outs = pencils((4, 4), 2, (1, 0))
    results = _boxes_error(make_env, 2, ins, outs)
    assert all(isinstance(e, ValueError) and "no rank holds the element [2, 0]" in str(e) for e in results)


def test_overlapping_output_boxes_name_both_ranks(make_env):
    """Output boxes that overlap raise on every rank, naming the two ranks."""
    ins = pencils((4, 4, 4), 3, (0, 1))
    outs = [Box((0, 0, 0), (4, 4, 2)), Box((0, 0, 1), (4, 2, 4)), Box((0, 2, 2), (4, 4, 4))]
    results = _boxes_error(make_env, 3, ins, outs)
    assert all(isinstance(e, ValueError) and "rank 0" in str(e) and "rank 1" in str(e) and "overlap" in str(e)
               for e in results), results  # fmt: skip


def test_output_box_outside_the_result_names_its_rank(make_env):
    """An output box reaching past the result's global shape raises on every rank, naming the rank."""
    ins = pencils((4, 4), 2, (0, 1))
    outs = [Box((0, 0), (2, 4)), Box((2, 0), (4, 5))]
    results = _boxes_error(make_env, 2, ins, outs)
    assert all(isinstance(e, ValueError) and "box of rank 1" in str(e) and "outside" in str(e)
               for e in results)  # fmt: skip


def test_c2r_output_boxes_of_the_other_parity_say_so(make_env):
    """C2R output boxes tiling the odd-length real result, with the default even parity, raise
    saying to set last_axis_parity."""
    ins = pencils((4, 4), 2, (0, 1))  # complex (4, 4): real length 6 (even) or 7 (odd)
    outs = pencils((4, 7), 2, (1, 0))
    results = _boxes_error(make_env, 2, ins, outs, options={"fft_type": "C2R"})
    assert all(isinstance(e, ValueError) and "last_axis_parity" in str(e) for e in results), results


def test_operand_not_of_its_box_shape_raises_on_every_rank(make_env):
    """Rank 1's operand shape differing from its input box raises there and, naming rank 1, on rank 0."""
    env = make_env(ThreadGroup(2))
    ins, outs = pencils((4, 4), 2, (0, 1)), pencils((4, 4), 2, (1, 0))
    assert [b.box_shape for b in ins] == [(4, 2), (4, 2)]
    ops = [env.operand((4, 2), np.complex64, nbytes=4096), env.operand((3, 4), np.complex64, nbytes=4096)]
    results = env.run(lambda r: dfft.FFT(ops[r], distribution=(ins[r], outs[r])))
    assert isinstance(results[1], ValueError) and "needs complex64 (4, 2)" in str(results[1])
    assert isinstance(results[0], ValueError) and "rank(s) [1]" in str(results[0])


def test_box_on_one_rank_slab_on_another_disagree(make_env):
    """A Box pair on rank 0 and Slab.X on rank 1 raise RankDisagreementError on both, naming rank 1."""
    env = make_env(ThreadGroup(2))
    ops = [env.operand((2, 4), np.complex64, nbytes=4096) for _ in range(2)]
    dists = [(Box((0, 0), (2, 4)), Box((0, 0), (2, 4))), Slab.X]
    results = env.run(lambda r: dfft.FFT(ops[r], distribution=dists[r]))
    assert all(isinstance(e, nd.RankDisagreementError) and "rank(s) [1]" in str(e) for e in results), results


def test_too_small_buffer_for_the_largest_output_box(make_env):
    """A symmetric buffer holding the real input box but not the complex output box is refused,
    saying how many bytes every rank needs."""
    make_env(SingleRank())
    flat = nd.allocate_symmetric_memory((16,), "cupy", dtype="float32")  # fake view_at: numpy
    operand = FakeDevice(flat.reshape(2, 8))  # R2C (2, 8) -> complex64 (2, 5): 80 bytes
    with pytest.raises(ValueError, match="needs 80 on every rank"):
        dfft.FFT(operand, distribution=(Box((0, 0), (2, 8)), Box((0, 0), (2, 5))))
    nd.free_symmetric_memory(FakeDevice(flat))


def test_allocate_operand_for_boxes(make_env):
    """allocate_operand with box pairs gives dense operands of the input box's shape, on buffers of
    one size on every rank: the largest input or output box of any rank; a shape that is not the
    input box's is refused on every rank, naming the rank; non-tiling boxes allocate nothing."""
    import torch
    from test_allocate import mallocs, torch_view

    env = make_env(ThreadGroup(3), views=torch_view)
    ins = [Box((0, 0, 0), (3, 4, 8)), Box((3, 0, 0), (6, 4, 8)), Box((0, 4, 0), (6, 6, 8))]
    outs = [Box((0, 0, 0), (6, 1, 5)), Box((0, 1, 0), (6, 3, 5)), Box((0, 3, 0), (6, 6, 5))]
    made = ok(env.run(lambda r: dfft.allocate_operand(ins[r].box_shape, torch, input_dtype=torch.float64,
                                                      distribution=(ins[r], outs[r]))))  # fmt: skip
    assert [(tuple(a.shape), a.is_contiguous()) for a in made] == [(b.box_shape, True) for b in ins]
    assert mallocs(env) == [6 * 3 * 5 * 16] * 3  # rank 2's complex output box is the largest
    env.run(lambda r: nd.free_symmetric_memory(made[r]))
    bad = env.run(
        lambda r: dfft.allocate_operand(
            (3, 4, 7) if r == 1 else ins[r].box_shape,
            torch,
            input_dtype=torch.float64,
            distribution=(ins[r], outs[r]),
        )
    )
    assert all(isinstance(e, ValueError) and "rank(s) [1]" in str(e) for e in bad), bad
    gap = [Box((0, 0, 0), (3, 4, 8)), Box((3, 0, 0), (6, 4, 8)), Box((0, 4, 0), (5, 6, 8))]
    bad = env.run(lambda r: dfft.allocate_operand(gap[r].box_shape, torch, input_dtype=torch.float64,
                                                  distribution=(gap[r], outs[r])))  # fmt: skip
    assert all(isinstance(e, ValueError) and "no rank holds the element [5, 4, 0]" in str(e)
               for e in bad), bad  # fmt: skip
    assert len(mallocs(env)) == 3


def test_reset_operand_with_other_boxes_is_refused(make_env):
    """reset_operand with another box pair than planned raises ValueError naming the planned pair."""
    env = make_env(SingleRank())
    pair = (Box((0, 0), (4, 4)), Box((0, 0), (4, 4)))
    op = env.operand((4, 4), np.complex64, nbytes=4096)
    with dfft.FFT(op, distribution=pair) as f:
        f.plan()
        f.reset_operand(env.operand((4, 4), np.complex64, nbytes=4096), distribution=pair)
        with pytest.raises(ValueError, match="planned for"):
            f.reset_operand(op, distribution=(Box((0, 0), (4, 4)), Box((0, 0), (2, 4))))
        with pytest.raises(ValueError, match="planned for"):
            f.reset_operand(op, distribution=Slab.X)
        assert "Box" in repr(f)


def test_strided_box_operand_is_refused_as_not_dense(make_env):
    """A real box operand with padded rows is refused: box operands are dense (no padding named)."""
    env = make_env(SingleRank())
    op = env.operand((4, 6), np.float32, padded=8)
    with pytest.raises(ValueError, match=r"\(6, 1\), C order\): allocate it"):
        dfft.FFT(op, distribution=(Box((0, 0), (4, 6)), Box((0, 0), (4, 4))))
