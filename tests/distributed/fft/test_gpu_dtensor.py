"""torch DTensors through the distributed FFT on the real cuFFTMp at one rank (GPU lane; skipped
without a GPU or without the ``[distributed]`` wheels): a Shard(0) / Shard(1) DTensor into fft,
ifft, rfft, irfft and FFT gives a DTensor of numpy's float64 transform, sharded where the result
lies, and leaves no symmetric allocation behind (finalize succeeds). Each check runs in a fresh
subprocess (see ``test_gpu_fft.py``)."""

from __future__ import annotations

import gpu_child
import pytest
from test_gpu_fft import _one_rank

pytestmark = pytest.mark.gpu

MESH = """
import tempfile, torch.distributed as dist
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.tensor import DTensor, Shard
dist.init_process_group("gloo", init_method="file://" + tempfile.mktemp(), rank=0, world_size=1)
mesh = DeviceMesh("cuda", [0])
def as_dtensor(x, dim):
    return DTensor.from_local(x.cuda(), mesh, [Shard(dim)], run_check=False)
"""


@pytest.fixture(autouse=True)
def _canary_guard(request):
    """Skipped with the canary's diagnosis when the session's one-rank canary FFT hung."""
    gpu_child.skip_if_canary_hung()


@pytest.mark.parametrize(("dim", "redistribute"), [(0, True), (1, False)])
def test_one_rank_dtensor_c2c_r2c_c2r(dim, redistribute):
    """fft / ifft of a complex Shard(dim) DTensor, rfft / irfft of a real one, and an FFT object of
    a DTensor equal numpy's float64 transforms; the results are DTensors of the documented placement."""
    _one_rank(MESH + f"""
dim, redistribute = {dim}, {redistribute}
out_dim = dim if redistribute else 1 - dim
rng = np.random.default_rng(0)
shape = (24, 16, 10)
x = torch.from_numpy(rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).to(torch.complex64)
STEP("fft")
y = dfft.fft(as_dtensor(x, dim), options={{"redistribute": redistribute}})
assert isinstance(y, DTensor) and y.placements == (Shard(out_dim),) and tuple(y.shape) == shape
ref = np.fft.fftn(x.numpy().astype(np.complex128))
assert np.allclose(y.to_local().cpu().numpy(), ref, atol=1e-3 * np.abs(ref).max()), "fft"
back = dfft.ifft(y, options={{"redistribute": redistribute}})
assert np.allclose(back.to_local().cpu().numpy() / x.numel(), x.numpy(), atol=1e-4), "ifft"
STEP("rfft")
r = torch.from_numpy(rng.standard_normal(shape))
spectrum = dfft.rfft(as_dtensor(r, dim))
assert spectrum.placements == (Shard(dim),) and tuple(spectrum.shape) == (24, 16, 6)
assert np.allclose(spectrum.to_local().cpu().numpy(), np.fft.rfftn(r.numpy()), atol=1e-9 * r.numel())
real = dfft.irfft(spectrum)
assert real.placements == (Shard(dim),) and tuple(real.shape) == shape
assert np.allclose(real.to_local().cpu().numpy() / r.numel(), r.numpy(), atol=1e-12)
STEP("FFT object")
with dfft.FFT(as_dtensor(x, dim), options={{"redistribute": redistribute}}) as f:
    f.plan()
    for k in range(2):
        out = f.execute()
        assert np.allclose(out.to_local().cpu().numpy(), ref, atol=1e-3 * np.abs(ref).max()), k
STEP("finalize")
nd.finalize()
dist.destroy_process_group()
print("ok")
""")
