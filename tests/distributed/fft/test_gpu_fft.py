"""The distributed FFT on the real cuFFTMp (GPU lane; skipped without a GPU or without the
``[distributed]`` wheels: cuFFTMp, NVSHMEM).

One process, one rank (cuFFTMp runs at one rank): C2C / R2C / C2R in 2-D and 3-D on X and Y slabs,
with and without ``redistribute``, against numpy's float64 FFTs and single-GPU ``nvmath.fft``;
the stateless plan cache; finalize with the cache populated. Then two processes on one GPU (gloo
process group), where NVSHMEM allows several processes per GPU. Each check runs in a fresh
subprocess with NVLink multicast off and a sized symmetric heap, so an engine crash fails the test
instead of the suite.
"""

from __future__ import annotations

import gpu_child
import pytest

pytestmark = pytest.mark.gpu

PRELUDE = """
from nvmath._errors import LibraryNotFoundError
from nvmath.bindings import _loader
for lib in ("nvshmem_host", "cufftMp"):
    try:
        _loader.library_info(lib)
    except LibraryNotFoundError as exc:
        print("SKIP: the [distributed] wheels are not installed here:", exc)
        raise SystemExit(0)
STEP("import")
import numpy as np, torch
import nvmath.distributed as nd
import nvmath.distributed.fft as dfft
from nvmath.distributed.distribution import Slab
"""

ONE_RANK = """
class OneRank(nd.ProcessGroup):
    rank, nranks = 0, 1
    def broadcast_buffer(self, array, *, root=0): pass
    def allreduce_buffer(self, array, *, op): pass

torch.cuda.init()
STEP("initialize")
nd.initialize(0, OneRank(), backends=["nvshmem"])
"""


def _one_rank(code: str) -> str:
    """Run ``code`` after the wheels' check and a one-rank initialize (NVSHMEM only), in a child with
    the hang-proof harness of ``gpu_child``."""
    return gpu_child.run_child(PRELUDE + ONE_RANK + code)


@pytest.fixture(autouse=True)
def _canary_guard(request):
    """Every test but the canary is skipped when the session's one-rank canary FFT hung."""
    if request.node.name != "test_canary_one_rank_fft":
        gpu_child.skip_if_canary_hung()


def test_canary_one_rank_fft():
    """One tiny one-rank 8x8 C2C (without, then with the redistribution; again after single-GPU
    cuFFT is loaded) equals numpy's; prints the engines' versions and mapped libraries. Run once
    per session (the other GPU modules reuse its verdict) and first in this module: if it hangs,
    the rest of the distributed FFT lane is skipped with its diagnosis."""
    gpu_child.check_canary()


@pytest.mark.parametrize(
    ("shape", "dtype", "slab", "redistribute"),
    [((64, 32, 48), "complex64", "X", True), ((64, 32, 48), "complex64", "X", False),
     ((30, 45, 16), "complex128", "Y", True), ((128, 96), "complex64", "Y", False)],
)  # fmt: skip
def test_c2c_one_rank_matches_numpy_and_single_gpu(shape, dtype, slab, redistribute):
    """fft at one rank equals numpy's float64 fftn and nvmath.fft's result; ifft brings the input
    back (times N); the FFT object reuses its plan."""
    _one_rank(f"""
import nvmath.fft
shape, slab = {shape!r}, Slab.{slab}
rng = np.random.default_rng(0)
x = (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype("{dtype}")
a = dfft.allocate_operand(shape, torch, input_dtype=getattr(torch, "{dtype}"), distribution=slab)
a.copy_(torch.from_numpy(x))
STEP("single-GPU nvmath.fft")
single = nvmath.fft.fft(torch.from_numpy(x).cuda()).cpu().numpy()
STEP("fft")
out = dfft.fft(a, distribution=slab, options={{"redistribute": {redistribute}}})
WAIT()
ref = np.fft.fftn(x.astype(np.complex128))
tol = 1e-4 if "{dtype}" == "complex64" else 1e-10
np.testing.assert_allclose(out.cpu().numpy(), ref, rtol=tol, atol=tol * np.abs(ref).max())
np.testing.assert_allclose(out.cpu().numpy(), single, rtol=tol, atol=tol * np.abs(ref).max())
if {redistribute}:
    STEP("ifft")
    back = dfft.ifft(out, distribution=slab)
    WAIT("ifft")
    np.testing.assert_allclose(back.cpu().numpy(), x * x.size, rtol=tol, atol=tol * x.size * np.abs(x).max())
STEP("FFT object")
with dfft.FFT(a, distribution=slab) as f:
    f.plan()
    STEP("FFT executes")
    for _ in range(2):
        f.execute(); f.execute(direction="inverse")
WAIT()
nd.free_symmetric_memory(a)
nd.finalize()   # clears the stateless plan cache first
print("ok")
""")


@pytest.mark.parametrize(
    ("shape", "slab", "redistribute"),
    [((32, 24, 30), "X", True), ((32, 24, 31), "Y", False), ((64, 50), "X", True)],
)
def test_r2c_and_c2r_one_rank_match_numpy(shape, slab, redistribute):
    """rfft of a padded real operand equals numpy's rfftn; irfft of the spectrum gives the input
    times N (a 2-D C2R needs a Y-slab spectrum: checked when the R2C left it there)."""
    _one_rank(f"""
shape, slab = {shape!r}, Slab.{slab}
parity = "odd" if shape[-1] % 2 else "even"
options = {{"redistribute": {redistribute}, "last_axis_parity": parity}}
x = np.random.default_rng(1).standard_normal(shape)
a = dfft.allocate_operand(shape, torch, input_dtype=torch.float64, distribution=slab)
assert a.stride()[-2] == 2 * (shape[-1] // 2 + 1)
a.copy_(torch.from_numpy(x))
STEP("rfft")
spectrum = dfft.rfft(a, distribution=slab, options=options)
WAIT()
ref = np.fft.rfftn(x)
np.testing.assert_allclose(spectrum.cpu().numpy(), ref, rtol=1e-10, atol=1e-10 * np.abs(ref).max())
out_slab = slab if {redistribute} else (Slab.Y if slab == Slab.X else Slab.X)
if len(shape) == 3 or out_slab == Slab.Y:
    STEP("irfft")
    real = dfft.irfft(spectrum, distribution=out_slab, options=options)
    WAIT()
    np.testing.assert_allclose(real.cpu().numpy(), x * x.size, rtol=1e-10, atol=1e-9 * x.size)
nd.free_symmetric_memory(a)
nd.finalize()
print("ok")
""")


def test_operand_off_the_heap_and_finalize_with_live_plan():
    """A torch tensor from torch's allocator is refused (not symmetric); finalize refuses while an
    FFT is alive and succeeds after free()."""
    _one_rank("""
try:
    dfft.FFT(torch.zeros((8, 8), dtype=torch.complex64, device="cuda"), distribution=Slab.X)
except ValueError as exc:
    assert "symmetric heap" in str(exc), exc
else:
    raise AssertionError("a non-symmetric operand was accepted")
a = dfft.allocate_operand((8, 8), torch, input_dtype=torch.complex64, distribution=Slab.X)
f = dfft.FFT(a, distribution=Slab.X)
STEP("plan")
f.plan()
try:
    nd.finalize()
except RuntimeError as exc:
    assert "plan" in str(exc)
else:
    raise AssertionError("finalize with a live plan succeeded")
f.free()
nd.free_symmetric_memory(a)
nd.finalize()
print("ok")
""")


TWO_RANKS = (
    PRELUDE
    + """
import os, torch.distributed as dist
rank = int(os.environ["RANK"])
dist.init_process_group("gloo", rank=rank, world_size=2)
torch.cuda.set_device(0)
STEP("initialize")
nd.initialize(0, nd.TorchProcessGroup(device_id="cpu"), backends=["nvshmem"])
shape = (16, 12, 10)
x = np.random.default_rng(3).standard_normal(shape) + 0j
local = Slab.X.shape(rank, shape)
start = 0 if rank == 0 else Slab.X.shape(0, shape)[0]
a = dfft.allocate_operand(local, torch, input_dtype=torch.complex128, distribution=Slab.X)
a.copy_(torch.from_numpy(x[start:start + local[0]]))
STEP("fft")
out = dfft.fft(a, distribution=Slab.X)
WAIT()
np.testing.assert_allclose(out.cpu().numpy(), np.fft.fftn(x)[start:start + local[0]], rtol=1e-10, atol=1e-8)
nd.free_symmetric_memory(a)
nd.finalize()
print("ok", rank)
"""
)


def test_two_processes_on_one_gpu():
    """Two ranks (gloo) sharing GPU 0 compute a 3-D C2C equal to numpy's, each holding its X-slab
    (needs NVSHMEM's support for several processes per GPU)."""
    outs = gpu_child.run_ranks(TWO_RANKS, 2)
    assert all("ok" in o for o in outs)
