"""torch DTensors into the distributed FFT (nvmath.distributed.fft._dtensor) on the fake cuFFTMp
(mp_fakes.py computes with numpy), ranks as threads over torch's "fake" process group (it only
holds the mesh): Shard(0) / Shard(1) DTensors through fft, ifft, rfft, irfft and FFT give a DTensor
of the global transform (numpy's, in float64), sharded where the result lies, with the staging
buffer freed; what is refused is refused on every rank before any allocation."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.distributed as dist
from dist_fakes import SingleRank, ThreadGroup
from mp_fakes import OWNERS, host_view
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.tensor import DTensor, Replicate, Shard
from torch.testing._internal.distributed.fake_pg import FakeStore

import nvmath.distributed as nd
import nvmath.distributed.fft as dfft
from nvmath._internal.tensors import wrap as real_wrap
from nvmath._internal.tensors.base import TensorAdapter
from nvmath.distributed.distribution import ConvertDistributionError, Slab
from nvmath.distributed.fft import _planner, _stateless


class FakeTorch(TensorAdapter):
    """A CPU torch tensor (a view of the fake symmetric heap) posing as a tensor on CUDA device 0."""

    __slots__ = ("device_id",)
    package = "torch"
    device = "cuda"
    is_conjugate = False

    def __init__(self, t):
        self.tensor, self.data_ptr = t, t.data_ptr()
        self.shape, self.strides = tuple(t.shape), tuple(t.stride())
        self.itemsize, self.size = t.element_size(), t.numel()
        self.dtype, self.device_id = str(t.dtype).removeprefix("torch."), 0

    def empty(self, shape, dtype, *, strides=None, device_id=None, stream=None):
        raise AssertionError("the distributed FFT allocates nothing outside the symmetric heap")

    def to(self, device_id, stream=None):
        raise AssertionError("the distributed FFT copies nothing between memory spaces")


def torch_view(address, shape, strides, dtype, device_id, owner, package):
    """Symmetric tensors as torch views of the fake heap."""
    OWNERS.append(owner)
    return torch.from_numpy(host_view(address, shape, strides, dtype))


@pytest.fixture
def mesh(make_env, monkeypatch):
    """``mesh(nranks) -> (env, DeviceMesh)``: the fake engines on ``nranks`` thread-ranks, symmetric
    tensors as torch tensors seen as device tensors, a fake torch process group holding a 1-D mesh."""

    def seen_on_device(operand, name="operand"):
        is_plain = isinstance(operand, torch.Tensor) and not isinstance(operand, DTensor)
        return FakeTorch(operand) if is_plain else real_wrap(operand, name)

    monkeypatch.setattr(_planner, "wrap", seen_on_device)
    monkeypatch.setattr(_stateless, "wrap", seen_on_device)

    def make(nranks):
        env = make_env(SingleRank() if nranks == 1 else ThreadGroup(nranks), torch_view)
        dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=nranks)
        return env, DeviceMesh("cpu", list(range(nranks)))

    yield make
    if dist.is_initialized():
        dist.destroy_process_group()


def run(env, function):
    results = env.run(function)
    errors = [r for r in results if isinstance(r, BaseException)]
    if errors:
        raise next((e for e in errors if type(e).__name__ != "BrokenBarrierError"), errors[0])
    return results


def as_dtensor(x, m, dim, nranks, rank):
    local = torch.chunk(x, nranks, dim=dim)[rank].contiguous()
    return DTensor.from_local(local, m, [Shard(dim)], run_check=False, shape=x.shape, stride=x.stride())


def no_live_allocations():
    from nvmath.distributed import _runtime

    return not any(r() is not None and not r().freed for r in _runtime.symmetric_registry().values())


def complex_input(shape, seed=0):
    rng = np.random.default_rng(seed)
    return torch.from_numpy(rng.standard_normal(shape) + 1j * rng.standard_normal(shape))


@pytest.mark.parametrize("nranks", [1, 2, 3])
@pytest.mark.parametrize("dim", [0, 1])
@pytest.mark.parametrize("redistribute", [True, False])
def test_c2c_dtensor_in_dtensor_out(mesh, nranks, dim, redistribute):
    """fft of a Shard(dim) DTensor is a DTensor of numpy's fftn, Shard(dim) (redistribute=True) or
    Shard(1 - dim); ifft of a redistributed result brings the input back times N; no symmetric
    allocation stays live (the staging buffer is freed per call)."""
    env, m = mesh(nranks)
    shape = (6, 5, 4)
    x = complex_input(shape)
    out_dim = dim if redistribute else 1 - dim
    options = {"redistribute": redistribute}

    def body(r):
        y = dfft.fft(as_dtensor(x, m, dim, nranks, r), options=options)
        assert isinstance(y, DTensor) and tuple(y.shape) == shape and y.placements == (Shard(out_dim),)
        back = dfft.ifft(y, options=options) if redistribute else None
        return y.to_local(), None if back is None else back.to_local()

    results = run(env, body)
    np.testing.assert_allclose(torch.cat([r[0] for r in results], out_dim).numpy(), np.fft.fftn(x.numpy()),
                               atol=1e-9 * x.numel())  # fmt: skip
    if redistribute:
        np.testing.assert_allclose(torch.cat([r[1] for r in results], dim).numpy(), x.numpy() * x.numel(),
                                   atol=1e-9 * x.numel())  # fmt: skip
    assert no_live_allocations()


@pytest.mark.parametrize("nranks", [1, 2])
@pytest.mark.parametrize(("shape", "dim"), [((6, 4, 9), 0), ((4, 6, 8), 1), ((6, 10), 0)])
def test_r2c_then_c2r_dtensors(mesh, nranks, shape, dim):
    """rfft of a real Shard(dim) DTensor is a DTensor of numpy's rfftn (the last axis n // 2 + 1);
    irfft of it (the parity of n) is the input times N, a DTensor of the input's shape. A 2-D C2R
    takes Y slabs: there the rfft keeps its result in the Y slab (redistribute=False, Shard(1))."""
    env, m = mesh(nranks)
    x = torch.from_numpy(np.random.default_rng(3).standard_normal(shape))
    half = (*shape[:-1], shape[-1] // 2 + 1)
    parity = "odd" if shape[-1] % 2 else "even"
    spectrum_dim = dim if len(shape) == 3 else 1

    def body(r):
        spectrum = dfft.rfft(as_dtensor(x, m, dim, nranks, r), options={"redistribute": len(shape) == 3})
        assert tuple(spectrum.shape) == half and spectrum.placements == (Shard(spectrum_dim),)
        assert spectrum.dtype == torch.complex128
        real = dfft.irfft(spectrum, options={"last_axis_parity": parity})
        assert tuple(real.shape) == shape and real.placements == (Shard(spectrum_dim),)
        return spectrum.to_local(), real.to_local()

    results = run(env, body)
    np.testing.assert_allclose(torch.cat([r[0] for r in results], spectrum_dim).numpy(),
                               np.fft.rfftn(x.numpy()), atol=1e-9 * x.numel())  # fmt: skip
    np.testing.assert_allclose(torch.cat([r[1] for r in results], spectrum_dim).numpy(),
                               x.numpy() * x.numel(), atol=1e-9 * x.numel())  # fmt: skip
    assert no_live_allocations()


def test_fft_object_of_a_dtensor_plans_once_and_frees_its_staging(mesh):
    """FFT(dtensor) needs no distribution; execute() returns a DTensor each time (reading the DTensor's
    current values); reset_operand takes another DTensor of the same layout; free() frees the staging
    buffer, after which finalize succeeds."""
    env, m = mesh(2)
    x, z = complex_input((4, 6, 3)), complex_input((4, 6, 3), seed=1)

    def body(r):
        a, b = as_dtensor(x, m, 1, 2, r), as_dtensor(z, m, 1, 2, r)
        with dfft.FFT(a) as f:
            assert type(f).__name__ == "DTensorFFT" and isinstance(f, dfft.FFT)
            assert f.result_distribution == "Slab.Y"
            f.plan()
            first = f.execute().to_local()
            a.to_local().mul_(2)
            second = f.execute().to_local()
            f.reset_operand(b)
            third = f.execute(direction="inverse").to_local()
            with pytest.raises(ValueError, match="differs from the planned"):
                f.reset_operand(as_dtensor(x.to(torch.complex64), m, 1, 2, r))
        assert not f.is_planned
        return first, second, third

    results = run(env, body)
    ref = np.fft.fftn(x.numpy())
    np.testing.assert_allclose(torch.cat([r[0] for r in results], 1).numpy(), ref, atol=1e-9 * x.numel())
    np.testing.assert_allclose(torch.cat([r[1] for r in results], 1).numpy(), 2 * ref, atol=1e-9 * x.numel())
    np.testing.assert_allclose(torch.cat([r[2] for r in results], 1).numpy(),
                               np.fft.ifftn(z.numpy()) * z.numel(), atol=1e-9 * z.numel())  # fmt: skip
    assert no_live_allocations()
    run(env, lambda r: nd.finalize() if r == 0 else None)


def test_stateless_dtensor_calls_reuse_one_cached_plan(mesh):
    """Three fft() calls of DTensors of one layout plan once per rank (the staging buffer is new each
    call, the cached plan is not), and each call frees its staging buffer."""
    env, m = mesh(2)
    x = complex_input((4, 6, 3))

    def body(r):
        for _ in range(3):
            dfft.fft(as_dtensor(x, m, 0, 2, r))

    run(env, body)
    plans = [c for c in env.lib.calls if c[1] == "make_plan"]
    assert sorted(c[0] for c in plans) == [0, 1]
    frees = [e for e in env.nvshmem.log if e[0] == "free"]
    assert len(frees) == 3 * 2 and no_live_allocations()


def test_a_dtensor_that_requires_grad_is_refused(mesh):
    """No autograd through the distributed FFT: a DTensor requiring a gradient raises
    NotImplementedError (before any allocation) instead of returning a result without one; under
    torch.no_grad() it is transformed."""
    env, m = mesh(1)
    x = complex_input((4, 6, 3))
    operand = DTensor.from_local(x.clone().requires_grad_(), m, [Shard(0)], run_check=False)
    before = mallocs(env)
    with pytest.raises(NotImplementedError, match="no_grad"):
        dfft.fft(operand)
    assert mallocs(env) == before
    with torch.no_grad():
        out = dfft.fft(operand)
    np.testing.assert_allclose(out.to_local().numpy(), np.fft.fftn(x.numpy()), atol=1e-9 * x.numel())


def mallocs(env):
    return len([e for e in env.nvshmem.log if e[0] == "malloc"])


@pytest.mark.parametrize(
    ("make", "kwargs", "error", "match"),
    [
        (lambda x, m: DTensor.from_local(x, m, [Replicate()], run_check=False), {}, ValueError, "Replicate"),
        (lambda x, m: DTensor.from_local(x[..., :2], m, [Shard(2)], run_check=False, shape=(6, 5, 4),
                                         stride=(20, 4, 1)), {}, ValueError, r"Shard\(2\)"),  # fmt: skip
        (lambda x, m: DTensor.from_local(x[:3], m, [Shard(0)], run_check=False, shape=(6, 5, 4),
                                         stride=(20, 4, 1)), {"distribution": Slab.Y}, ValueError,
         "contradicts"),  # fmt: skip
        (lambda x, m: DTensor.from_local(x[:3].real.contiguous(), m, [Shard(0)], run_check=False,
                                         shape=(6, 5, 4), stride=(20, 4, 1)), {}, ValueError,
         "needs a complex operand"),  # fmt: skip
        (lambda x, m: DTensor.from_local(x[0, 0, :2].contiguous(), m, [Shard(0)], run_check=False,
                                         shape=(4,), stride=(1,)), {}, ValueError, "2-D and 3-D"),
    ],
    ids=["replicate", "shard-2", "contradicting-distribution", "real-into-fft", "1-D"],
)
def test_refused_dtensors_raise_before_any_allocation(mesh, make, kwargs, error, match):
    """A replicated DTensor, Shard(2), a distribution contradicting the placement, a real DTensor
    given to fft() and a 1-D one raise a clear error on every rank before any symmetric allocation."""
    env, m = mesh(2)
    x = complex_input((6, 5, 4))
    before = mallocs(env)

    def body(r):
        operand = make(x, m)
        with pytest.raises(error, match=match):
            dfft.fft(operand, **kwargs)

    run(env, body)
    assert mallocs(env) == before


@pytest.mark.parametrize(
    ("shape", "dim", "options"),
    [((7, 6, 4), 0, {}), ((7, 6, 4), 1, {"redistribute": False})],
    ids=["operand-split", "result-split"],
)
def test_chunk_splits_that_are_no_slabs_are_refused(mesh, shape, dim, options):
    """torch.chunk splits 7 over 3 ranks as 3 + 3 + 1, a Slab as 3 + 2 + 2: a DTensor so split (the
    operand, or the result in the other slab with redistribute=False) raises
    ConvertDistributionError on every rank, before any allocation."""
    env, m = mesh(3)
    x = complex_input(shape)
    before = mallocs(env)

    def body(r):
        operand = as_dtensor(x, m, dim, 3, r)
        with pytest.raises(ConvertDistributionError, match="Slab"):
            dfft.fft(operand, options=options)

    run(env, body)
    assert mallocs(env) == before


def test_a_plain_operand_still_needs_a_distribution(mesh):
    """Only a DTensor takes its distribution from its placement: a plain tensor without one raises
    a TypeError naming ``distribution``."""
    env, _ = mesh(1)
    with pytest.raises(TypeError, match="distribution="):
        dfft.fft(env.operand((4, 4, 4), np.complex64))
