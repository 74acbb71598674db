"""torch DTensors through the distributed matmul (nvmath.distributed.linalg.advanced._dtensor) on the
fake cuBLASMp (mm_fakes.py), ranks as threads over torch's "fake" process group (which only holds
the mesh: the fake cuBLASMp moves the data): Shard/Replicate placements on a 1-D mesh in, a DTensor
of the documented placement out, ``torch.chunk``'s uneven split; autograd through the
distributed GEMMs against numpy's gradients; what is refused says so."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.distributed as dist
from dist_fakes import SingleRank, ThreadGroup
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.tensor import DTensor, Partial, Replicate, Shard
from torch.testing._internal.distributed.fake_pg import FakeStore

from nvmath._internal.tensors.base import TensorAdapter
from nvmath.distributed.linalg.advanced import _checks, _planner, matmul


class FakeTorch(TensorAdapter):
    """A CPU torch tensor posing as a tensor on CUDA device 0 (the fake GPU's memory is host memory)."""

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
        if strides is None:
            strides = tuple(int(np.prod(shape[i + 1 :])) for i in range(len(shape)))
        return FakeTorch(torch.empty_strided(shape, strides, dtype=getattr(torch, dtype)).fill_(float("nan")))

    def to(self, device_id, stream=None):
        raise AssertionError("nothing is copied between memory spaces")


def close(actual, expected):
    """``actual`` equals the float64 reference ``expected`` to 1e-12 of the reference's largest entry
    (an elementwise relative test fails on random entries near zero, where the GEMMs' summation order
    decides the last bits)."""
    np.testing.assert_allclose(actual, expected, rtol=1e-12, atol=1e-12 * float(np.abs(expected).max()))


@pytest.fixture
def mesh(env, monkeypatch):
    """``mesh(nranks) -> (group, DeviceMesh)``: the fake engines on ``nranks`` thread-ranks, torch
    tensors seen as device tensors, and a fake torch process group holding a 1-D mesh."""
    real = _planner.wrap_operands
    seen_on_device = lambda **ops: real(  # noqa: E731
        **{n: FakeTorch(v) if isinstance(v, torch.Tensor) else v for n, v in ops.items()})  # fmt: skip
    monkeypatch.setattr(_planner, "wrap_operands", seen_on_device)
    monkeypatch.setattr(_checks, "wrap_operands", seen_on_device)

    def make(nranks):
        group = SingleRank() if nranks == 1 else ThreadGroup(nranks)
        env(group)
        dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=nranks)
        return group, DeviceMesh("cpu", list(range(nranks)))

    yield make
    if dist.is_initialized():
        dist.destroy_process_group()


def run(group, function):
    results = group.run(function) if isinstance(group, ThreadGroup) else [function(0)]
    errors = [r for r in results if isinstance(r, BaseException)]
    if errors:
        raise next((e for e in errors if type(e).__name__ != "BrokenBarrierError"), errors[0])
    return results


def chunk(x, placement, nranks, rank):
    if isinstance(placement, Replicate):
        return x.clone()
    return torch.chunk(x, nranks, dim=placement.dim)[rank].contiguous()


def dtensor(x, mesh, placement, nranks, rank, grad=False):
    local = chunk(x, placement, nranks, rank).requires_grad_(grad)
    return local, DTensor.from_local(
        local, mesh, [placement], run_check=False, shape=x.shape, stride=x.stride()
    )


def assemble(parts, placement, shape):
    if isinstance(placement, Replicate):
        return parts[0]
    return torch.cat(parts, dim=placement.dim)


CASES = [(Shard(0), Replicate(), Shard(0)), (Shard(1), Shard(0), Shard(0)), (Replicate(), Shard(1), Shard(1)),
         (Shard(0), Shard(1), Shard(1))]  # fmt: skip


@pytest.mark.parametrize("nranks", [1, 2, 3])
@pytest.mark.parametrize(("pa", "pb", "pd"), CASES, ids=["rows-rep", "k-split", "rep-cols", "rows-cols"])
def test_dtensor_in_and_out(mesh, nranks, pa, pb, pd):
    """matmul(DTensor, DTensor) is a DTensor of the global product, sharded as documented (columns
    when b is Shard(1), else rows), with torch.chunk's uneven split (5 rows, 7 columns)."""
    group, m = mesh(nranks)
    gen = torch.Generator().manual_seed(0)
    A, B = (
        torch.randn(5, 6, generator=gen, dtype=torch.float64),
        torch.randn(6, 7, generator=gen, dtype=torch.float64),
    )

    def body(r):
        out = matmul(dtensor(A, m, pa, nranks, r)[1], dtensor(B, m, pb, nranks, r)[1], alpha=2.0)
        assert isinstance(out, DTensor) and tuple(out.shape) == (5, 7) and out.placements == (pd,)
        return out.to_local()

    parts = run(group, body)
    close(assemble(parts, pd, (5, 7)).numpy(), 2.0 * (A @ B).numpy())


def test_dtensor_with_c(mesh):
    """A sharded DTensor c is updated in place (beta * c added) and sets the result's placement."""
    group, m = mesh(2)
    A, B, C = (torch.randn(s, dtype=torch.float64) for s in ((4, 3), (3, 6), (4, 6)))

    def body(r):
        c_local, c = dtensor(C, m, Shard(1), 2, r)
        out = matmul(dtensor(A, m, Shard(0), 2, r)[1], dtensor(B, m, Shard(1), 2, r)[1], c, beta=0.5)
        assert out.placements == (Shard(1),) and out.to_local().data_ptr() == c_local.data_ptr()
        return out.to_local()

    parts = run(group, body)
    close(torch.cat(parts, 1).numpy(), (A @ B + 0.5 * C).numpy())


@pytest.mark.parametrize(("pa", "pb"), [(Shard(0), Shard(1)), (Shard(1), Shard(0)), (Shard(0), Shard(0))])
def test_autograd_through_distributed_gemms(mesh, pa, pb):
    """loss = <G, alpha * A @ B>: the gradients of the local shards equal numpy's alpha * G @ B^T and
    alpha * A^T @ G, sharded as A and B; the backward ran two distributed GEMMs per rank."""
    group, m = mesh(2)
    lib_calls_before = None
    A, B, G = (torch.randn(s, dtype=torch.float64) for s in ((6, 4), (4, 8), (6, 8)))

    def body(r):
        a_local, a = dtensor(A, m, pa, 2, r, grad=True)
        b_local, b = dtensor(B, m, pb, 2, r, grad=True)
        out = matmul(a, b, alpha=1.5)
        g_local = chunk(G, out.placements[0], 2, r)
        (out.to_local() * g_local).sum().backward()
        return a_local.grad, b_local.grad

    grads = run(group, body)
    del lib_calls_before
    close(
        assemble([g[0] for g in grads], pa, None).numpy(), 1.5 * (G @ B.T).numpy())
    close(
        assemble([g[1] for g in grads], pb, None).numpy(), 1.5 * (A.T @ G).numpy())


def test_autograd_replicated_operand_one_rank(mesh):
    """A replicated operand's gradient is replicated (one rank: no gather needed); only the operand
    that requires a gradient gets one."""
    _, m = mesh(1)
    A, B = torch.randn(3, 4, dtype=torch.float64), torch.randn(4, 5, dtype=torch.float64)
    a_local, a = dtensor(A, m, Replicate(), 1, 0, grad=True)
    b_local, b = dtensor(B, m, Shard(1), 1, 0)
    out = matmul(a, b)
    out.to_local().sum().backward()
    close(
        a_local.grad.numpy(), (torch.ones(3, 5, dtype=torch.float64) @ B.T).numpy())
    assert b_local.grad is None


def test_refusals(mesh):
    """Partial placements, a mesh other than the runtime's ranks, a DTensor with a plain tensor,
    distributions given, qualifiers, and autograd with c or an epilog raise typed errors."""
    _, m = mesh(1)
    A = torch.randn(2, 2, dtype=torch.float64)
    a = dtensor(A, m, Shard(0), 1, 0)[1]
    partial = DTensor.from_local(A.clone(), m, [Partial()], run_check=False)
    with pytest.raises(ValueError, match="pending reduction"):
        matmul(partial, a)
    with pytest.raises(TypeError, match="every operand must be a DTensor"):
        matmul(a, A)
    with pytest.raises(ValueError, match="placements"):
        matmul(a, a, distributions=[None] * 3)
    with pytest.raises(ValueError, match="qualifiers"):
        matmul(a, a, qualifiers=np.zeros(2, dtype=[("is_transpose", "<i4")]))
    g = dtensor(A, m, Shard(0), 1, 0, grad=True)[1]
    with pytest.raises(NotImplementedError, match="autograd"):
        matmul(g, a, epilog=4)
    dist.destroy_process_group()
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=2)
    wide = DTensor.from_local(A.clone(), DeviceMesh("cpu", [0, 1]), [Shard(0)], run_check=False)
    with pytest.raises(ValueError, match="1-D device mesh of all 1 ranks"):
        matmul(wide, wide)
