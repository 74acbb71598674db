"""nvmath.distributed.fft.FFT and the stateless functions against a fake cuFFTMp that computes with
numpy (mp_fakes.py): results on 1-3 ranks against numpy's float64 FFTs, the engine call sequence,
bad input raised on every rank, and the lifecycle."""

from __future__ import annotations

import numpy as np
import pytest
from dist_fakes import SingleRank, ThreadGroup

import nvmath.distributed as nd
import nvmath.distributed.fft as dfft
from nvmath.distributed.distribution import Box, Slab


def split(n, p):
    return np.array_split(np.arange(n), p)


def scatter(env, global_array, partition, dtype, padded=False):
    """Each rank's slab of ``global_array`` as an operand on the fake heap (same-size buffers)."""
    nbytes = 4 * global_array.size * 16 + 4096
    operands = []
    for idx in split(global_array.shape[partition], env.group.nranks):
        local = np.take(global_array, idx, axis=partition)
        pad = 2 * (local.shape[-1] // 2 + 1) if padded else None
        op = env.operand(local.shape, dtype, padded=pad, nbytes=nbytes)
        op.tensor[...] = local
        operands.append(op)
    return operands


def gather(results, partition):
    return np.concatenate([np.asarray(r) for r in results], axis=partition)


def group_of(nranks):
    return SingleRank() if nranks == 1 else ThreadGroup(nranks)


def ok(results):
    errors = [r for r in results if isinstance(r, BaseException)]
    first = [e for e in errors if type(e).__name__ != "BrokenBarrierError"]  # the cause, not its echo
    if errors:
        raise (first or errors)[0]
    return results


@pytest.mark.parametrize("nranks", [1, 2, 3])
@pytest.mark.parametrize("shape", [(6, 5, 4), (7, 6)])
@pytest.mark.parametrize("partition", [0, 1])
@pytest.mark.parametrize("redistribute", [True, False])
def test_c2c_forward_and_inverse_match_numpy(make_env, nranks, shape, partition, redistribute):
    """A C2C FFT of X or Y slabs gives numpy's fftn in the operand's slab (redistribute=True) or the
    complementary one; the inverse of a redistributed result brings the input back (times N)."""
    env = make_env(group_of(nranks))
    x = np.random.default_rng(0).standard_normal(shape) + 1j * np.random.default_rng(1).standard_normal(shape)
    operands = scatter(env, x.astype(np.complex64), partition, np.complex64)
    slab = (Slab.X, Slab.Y)[partition]
    options = {"redistribute": redistribute}

    def body(rank):
        with dfft.FFT(operands[rank], distribution=slab, options=options) as f:
            f.plan()
            out = np.array(f.execute())
            back = np.array(f.execute(direction="inverse")) if redistribute else None
            return out, back, f.result_distribution

    results = ok(env.run(body))
    out_partition = partition if redistribute else 1 - partition
    assert {r[2] for r in results} == {"Slab." + "XY"[out_partition]}
    np.testing.assert_allclose(gather([r[0] for r in results], out_partition), np.fft.fftn(x), rtol=1e-4,
                               atol=1e-4 * np.sqrt(x.size))  # fmt: skip
    if redistribute:
        np.testing.assert_allclose(gather([r[1] for r in results], partition), x * x.size, rtol=1e-4,
                                   atol=1e-3 * x.size)  # fmt: skip
    assert not env.lib.live  # every plan and reshape destroyed by free()


@pytest.mark.parametrize("nranks", [1, 2, 3])
@pytest.mark.parametrize(("shape", "partition"), [((6, 5, 9), 0), ((5, 6, 8), 1), ((6, 10), 0)])
@pytest.mark.parametrize("redistribute", [True, False])
def test_r2c_then_c2r_match_numpy(make_env, nranks, shape, partition, redistribute):
    """rfft of padded real slabs gives numpy's rfftn; irfft of that spectrum (in its slab) gives the
    real input times N, with padded rows."""
    env = make_env(group_of(nranks))
    x = np.random.default_rng(2).standard_normal(shape)
    operands = scatter(env, x.astype(np.float64), partition, np.float64, padded=True)
    slab = (Slab.X, Slab.Y)[partition]
    out_partition = partition if redistribute else 1 - partition
    options = {"redistribute": redistribute, "last_axis_parity": "odd" if shape[-1] % 2 else "even"}

    def body(rank):
        spectrum = dfft.rfft(operands[rank], distribution=slab, options=options)
        assert spectrum.dtype == np.complex128
        copy = np.array(spectrum)  # the irfft below overwrites the buffer
        if len(shape) == 2 and out_partition == 0:
            return copy, None  # a 2-D C2R needs a Slab.Y operand
        from mp_fakes import FakeDevice

        real = dfft.irfft(FakeDevice(spectrum), distribution=(Slab.X, Slab.Y)[out_partition], options=options)
        return copy, np.array(real)

    results = ok(env.run(body))
    np.testing.assert_allclose(gather([r[0] for r in results], out_partition), np.fft.rfftn(x), rtol=1e-10,
                               atol=1e-10 * x.size)  # fmt: skip
    if results[0][1] is not None:
        back_partition = out_partition if redistribute else partition
        np.testing.assert_allclose(gather([r[1] for r in results], back_partition), x * x.size, rtol=1e-10,
                                   atol=1e-9 * x.size)  # fmt: skip
    dfft.plan_cache.clear() if nranks == 1 else env.run(lambda r: dfft.plan_cache.clear() if r == 0 else None)


def test_engine_call_sequence_and_symmetric_workspace(make_env):
    """A plan attaches NVSHMEM (CUFFT_COMM_NONE, null handle), sets the slab subformats before
    planning, runs on the caller's stream after a symmetric sync, and reshapes back with one
    symmetric workspace of the largest size any rank needs."""
    env = make_env(ThreadGroup(2))
    x = np.ones((4, 4, 4), np.complex64)
    operands = scatter(env, x, 0, np.complex64)

    def body(rank):
        f = dfft.FFT(operands[rank], distribution=Slab.X)
        f.plan()
        f.execute(stream=55)
        f.free()

    ok(env.run(body))
    mine = [c[1:] for c in env.lib.calls if c[0] == 1]
    names = [c[0] for c in mine]
    assert names[:4] == ["create", "attach_comm", "xt_set_subformat_default", "make_plan"]
    assert mine[1][2:] == (1, 0)  # CUFFT_COMM_NONE, NULL
    assert mine[2][2:] == (2, 3)  # forward input X-slab (INPLACE), inverse input Y-slab (SHUFFLED)
    assert names[4:] == ["create_reshape", "make_reshape", "set_stream", "xt_exec", "exec_reshape_async",
                         "destroy", "destroy_reshape"]  # fmt: skip
    syncs = [e for e in env.nvshmem.log if e[0] == "sync_all_on_stream"]
    assert syncs == [("sync_all_on_stream", 55)] * 4  # before the FFT and after the reshape, on 2 ranks
    assert ("set_stream", mine[0][1], 55) in mine and ("sync_all_on_stream", 55) in env.nvshmem.log
    mallocs = [e[1] for e in env.nvshmem.log if e[0] == "malloc"]
    assert mallocs.count(1010) == 2  # the workspace: max(1000, 1010) on both ranks


def test_sync_and_blocking_options(make_env):
    """sync_symmetric_memory=False skips the symmetric sync before the transform; blocking=True
    synchronizes the stream."""
    env = make_env(SingleRank())
    (op,) = scatter(env, np.ones((4, 4), np.complex64), 0, np.complex64)
    options = {"blocking": True, "redistribute": False}  # (a redistribution syncs after its reshape)
    dfft.fft(op, distribution=Slab.X, sync_symmetric_memory=False, options=options, stream=9)
    assert not [e for e in env.nvshmem.log if e[0] == "sync_all_on_stream"] and env.syncs == [9]
    dfft.plan_cache.clear()


def test_stateless_calls_reuse_one_cached_plan(make_env):
    """Two fft() calls on same-layout operands plan once; finalize clears the cache (no live plan)."""
    env = make_env(SingleRank())
    a, b = (scatter(env, np.full((4, 4), v, np.complex64), 0, np.complex64)[0] for v in (1, 2))
    ra = np.array(dfft.fft(a, distribution=Slab.X))
    rb = np.array(dfft.fft(b, distribution=Slab.X))
    np.testing.assert_allclose(rb, 2 * ra)
    assert [c[1] for c in env.lib.calls].count("make_plan") == 1 and len(dfft.plan_cache) == 1
    nd.finalize()
    assert len(dfft.plan_cache) == 0 and not env.lib.live


def test_rank_disagreement_raises_on_every_rank(make_env):
    """A dtype on rank 1 that differs from rank 0's raises RankDisagreementError on both ranks,
    naming rank 1, before any plan."""
    env = make_env(ThreadGroup(2))
    ops = [env.operand((2, 4), np.complex64), env.operand((2, 4), np.complex128)]
    results = env.run(lambda r: dfft.FFT(ops[r], distribution=Slab.X))
    assert all(isinstance(e, nd.RankDisagreementError) for e in results), results
    assert all("rank(s) [1]" in str(e) and "dtype" in str(e) for e in results)
    assert not [c for c in env.lib.calls if c[1] == "create"]


def test_extents_that_are_no_slab_split_raise_on_every_rank(make_env):
    """Local extents 1 and 3 are not the slab split of 4 over 2 ranks (2 and 2): every rank raises."""
    env = make_env(ThreadGroup(2))
    ops = [env.operand((1, 4), np.complex64), env.operand((3, 4), np.complex64)]
    results = env.run(lambda r: dfft.FFT(ops[r], distribution=Slab.X))
    assert all(isinstance(e, nd.RankDisagreementError) and "[2, 2]" in str(e) for e in results), results


def test_operand_off_the_symmetric_heap_raises_on_every_rank(make_env):
    """An operand off the heap on rank 1 raises there (saying to use allocate_operand) and on rank 0
    (naming rank 1); no rank goes on to plan."""
    env = make_env(ThreadGroup(2))
    from mp_fakes import FakeDevice

    ops = [env.operand((2, 4), np.complex64), FakeDevice(np.zeros((2, 4), np.complex64))]
    results = env.run(lambda r: dfft.FFT(ops[r], distribution=Slab.X))
    assert isinstance(results[1], ValueError) and "allocate_operand" in str(results[1])
    assert isinstance(results[0], ValueError) and "rank(s) [1]" in str(results[0])


@pytest.mark.parametrize(
    ("make", "error", "match"),
    [
        (lambda env: np.zeros((4, 4), np.complex64), TypeError, "host memory"),
        (lambda env: env.operand((4, 4), np.float16), ValueError, "no half precision"),
        (lambda env: env.operand((4, 4), np.float32), ValueError, "not the in-place layout"),
    ],
)
def test_bad_operands(make_env, make, error, match):
    """Host arrays, half precision and unpadded real operands are refused with the fix."""
    env = make_env(SingleRank())
    with pytest.raises(error, match=match):
        dfft.FFT(make(env), distribution=Slab.X)


def test_bad_distributions(make_env):
    """A single Box (not a pair), boxes of another dimensionality, Slab.Z and other objects are
    refused, saying what is allowed."""
    env = make_env(SingleRank())
    op = env.operand((4, 4, 4), np.complex64)
    with pytest.raises(TypeError, match=r"pair \(input Box, output Box\)"):
        dfft.FFT(op, distribution=Box((0, 0, 0), (4, 4, 4)))
    with pytest.raises(ValueError, match="is 2-D; the operand is 3-D"):
        dfft.FFT(op, distribution=(Box((0, 0), (4, 4)), Box((0, 0), (4, 4))))
    with pytest.raises(ValueError, match="Slab.X or Slab.Y"):
        dfft.FFT(op, distribution=Slab.Z)
    with pytest.raises(TypeError, match="distribution must be"):
        dfft.fft(op, distribution="X")
    with pytest.raises(ValueError, match="needs a real operand"):
        dfft.rfft(op, distribution=Slab.X)
    with pytest.raises(ValueError, match="contradicts"):
        dfft.fft(op, distribution=Slab.X, options={"fft_type": "R2C"})


def test_use_before_initialize_names_initialize():
    """Without the runtime, the transforms and allocate_operand say to call initialize()."""
    with pytest.raises(RuntimeError, match=r"initialize\(device_id, process_group\)"):
        dfft.FFT(np.zeros((4, 4), np.complex64), distribution=Slab.X)
    with pytest.raises(RuntimeError, match="initialize"):
        dfft.allocate_operand((4, 4), "torch", input_dtype=None, distribution=Slab.X)


def test_lifecycle_and_finalize_with_live_plan(make_env):
    """execute before plan, after release_operand and after free raise InvalidFFTState; a live plan
    blocks finalize until freed; a bad reset_operand leaves the old operand."""
    env = make_env(SingleRank())
    op = env.operand((4, 4), np.complex64)
    f = dfft.FFT(op, distribution=Slab.X)
    with pytest.raises(dfft.InvalidFFTState, match="before plan"):
        f.execute()
    f.plan()
    with pytest.raises(RuntimeError, match="plan"):
        nd.finalize()
    with pytest.raises(ValueError, match="needs complex64"):
        f.reset_operand(env.operand((4, 5), np.complex64), distribution=Slab.X)
    with pytest.raises(ValueError, match="direction must be"):
        f.execute(direction="sideways")
    f.execute()
    f.release_operand()
    with pytest.raises(dfft.InvalidFFTState, match="release_operand"):
        f.execute()
    f.reset_operand(env.operand((4, 4), np.complex64), distribution=Slab.X)
    f.execute()
    f.free()
    f.free()  # idempotent
    with pytest.raises(dfft.InvalidFFTState, match="after free"):
        f.execute()
    nd.finalize()


def test_r2c_and_c2r_directions_are_fixed(make_env):
    """An R2C runs forward only and a C2R inverse only (ValueError otherwise)."""
    env = make_env(SingleRank())
    op = env.operand((4, 4), np.float32, padded=6)
    with dfft.FFT(op, distribution=Slab.X) as f:
        f.plan()
        with pytest.raises(ValueError, match="R2C transform runs forward only"):
            f.execute(direction="inverse")


def test_planned_fft_collected_without_free_warns(make_env):
    """A planned FFT dropped without free() warns (its collective destroy cannot run from the
    garbage collector) and no longer blocks finalize; a freed one does not warn."""
    import gc
    import warnings

    from nvmath._errors import NvmathWarning

    env = make_env(SingleRank())
    held = [dfft.FFT(env.operand((4, 4), np.complex64), distribution=Slab.X)]
    held[0].plan()
    with pytest.warns(NvmathWarning, match="without free"):
        held.clear()  # the last reference
    g = dfft.FFT(env.operand((4, 4), np.complex64), distribution=Slab.X)
    g.plan()
    g.free()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        del g
        gc.collect()
    nd.finalize()
