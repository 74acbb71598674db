"""Redistribute / redistribute on the real cuFFTMp reshape (GPU lane; skipped without a GPU or
without the ``[distributed]`` wheels): one process, one rank, with torch and cupy operands on the
symmetric heap, a strided operand, a 2-D and a 3-D array, and the lifecycle; then two processes on
one GPU moving X slabs to boxes of the last axis. Each check runs in a fresh subprocess (see
``tests/distributed/fft/test_gpu_fft.py``)."""

from __future__ import annotations

import pytest
from test_gpu_box_fft import run_two_ranks
from test_gpu_fft import PRELUDE, _one_rank

pytestmark = pytest.mark.gpu

IMPORTS = "from nvmath.distributed.distribution import Box, Redistribute, redistribute\n"


@pytest.mark.parametrize(
    ("shape", "dtype"), [((6, 8), "float32"), ((5, 6, 7), "complex128"), ((9,), "int64")]
)
def test_one_rank_torch(shape, dtype):
    """At one rank the result is a dense copy of the operand, on the symmetric heap (freeable);
    Slab and Box distributions give the same; a strided operand view is read through its strides."""
    _one_rank(IMPORTS + f"""
shape, dtype = {shape!r}, getattr(torch, "{dtype}")
x = torch.arange(int(np.prod(shape)), dtype=torch.float64).reshape(shape).to(dtype)
a = nd.allocate_symmetric_memory(shape, torch, dtype=dtype)
a.copy_(x)
box = Box((0,) * len(shape), shape)
r1 = redistribute(a, box, box)
r2 = redistribute(a, Slab.X, Slab.X if len(shape) == 1 else Slab.Y)
torch.cuda.synchronize()
assert torch.equal(r1.cpu(), x) and torch.equal(r2.cpu(), x) and r1.is_contiguous()
nd.free_symmetric_memory(r1, r2)
if len(shape) > 1:
    view = a[..., ::2]
    vbox = Box((0,) * len(shape), view.shape)
    r3 = redistribute(view, vbox, vbox)
    torch.cuda.synchronize()
    assert torch.equal(r3.cpu(), x[..., ::2])
    nd.free_symmetric_memory(r3)
with Redistribute(a, box, box) as r:
    r.plan()
    for k in range(2):
        a.copy_(x * (k + 1))
        out = r.execute(sync_symmetric_memory=True)
        torch.cuda.synchronize()
        assert torch.equal(out.cpu(), x * (k + 1))
        nd.free_symmetric_memory(out)
nd.free_symmetric_memory(a)
nd.finalize()
print("ok")
""")


def test_one_rank_cupy_and_off_heap():
    """A cupy operand works alike; a tensor from torch's allocator is refused (not symmetric)."""
    _one_rank(IMPORTS + """
import cupy as cp
a = nd.allocate_symmetric_memory((4, 6), cp, dtype="complex64")
a[...] = cp.arange(24).reshape(4, 6)
out = redistribute(a, Slab.X, Slab.Y)
cp.cuda.Device().synchronize()
assert (out.get() == np.arange(24).reshape(4, 6)).all()
nd.free_symmetric_memory(out, a)
try:
    redistribute(torch.zeros((4, 4), device="cuda"), Slab.X, Slab.Y)
except ValueError as exc:
    assert "symmetric heap" in str(exc), exc
else:
    raise AssertionError("a non-symmetric operand was accepted")
nd.finalize()
print("ok")
""")


TWO_RANKS = (
    PRELUDE
    + IMPORTS
    + """
import os, torch.distributed as dist
rank = int(os.environ["RANK"])
dist.init_process_group("gloo", rank=rank, world_size=2)
torch.cuda.set_device(0)
nd.initialize(0, nd.TorchProcessGroup(device_id="cpu"), backends=["nvshmem"])
shape = (9, 6, 5)
x = torch.arange(9 * 6 * 5, dtype=torch.float64).reshape(shape)
local = Slab.X.shape(rank, shape)
start = 0 if rank == 0 else 5
a = nd.allocate_symmetric_memory(local, torch, dtype=torch.float64, make_symmetric=True)
a.copy_(x[start:start + local[0]])
outs = [Box((0, 0, 2), (9, 6, 5)), Box((0, 0, 0), (9, 6, 2))]
out = redistribute(a, Slab.X, outs[rank])
torch.cuda.synchronize()
lo, up = outs[rank]
assert torch.equal(out.cpu(), x[:, :, lo[2]:up[2]]), (rank, out.cpu(), x[:, :, lo[2]:up[2]])
nd.free_symmetric_memory(out, a)
nd.finalize()
print("ok", rank)
"""
)


def test_two_processes_on_one_gpu():
    """Two ranks (gloo) sharing GPU 0 move uneven X slabs (5 and 4 of 9) to boxes of the last axis
    (rank 0 the far part): each result is its box of the global array."""
    outs = run_two_ranks(TWO_RANKS)
    assert all("ok" in o for o in outs)
