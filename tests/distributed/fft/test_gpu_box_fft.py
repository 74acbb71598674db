"""The distributed FFT on Box distributions on the real cuFFTMp (GPU lane; skipped without a GPU
or without the ``[distributed]`` wheels).

One process, one rank: C2C / R2C / C2R in 2-D and 3-D with one (input Box, output Box) pair,
against numpy's float64 FFTs, through the stateless functions and an FFT object run in both
directions (which checks the orientation in which the boxes are given to
``cufftXtSetDistribution``). Then two processes on one GPU (gloo process group) with boxes that
differ between input and output, where NVSHMEM allows several processes per GPU. Each check runs in
a fresh subprocess (see ``test_gpu_fft.py``).
"""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest
from test_gpu_fft import PRELUDE, _check, _env, _one_rank

pytestmark = pytest.mark.gpu

BOXES = "from nvmath.distributed.distribution import Box\n"


@pytest.mark.parametrize(("shape", "dtype"), [((32, 24, 20), "complex64"), ((30, 45), "complex128")])
def test_box_c2c_one_rank_matches_numpy(shape, dtype):
    """fft on a whole-array box pair equals numpy's fftn; an FFT object's inverse of the input
    equals numpy's ifftn times N; the operand is dense (no padding)."""
    _one_rank(BOXES + f"""
shape, dtype = {shape!r}, "{dtype}"
box = Box((0,) * len(shape), shape)
pair = (box, box)
rng = np.random.default_rng(0)
x = (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)
a = dfft.allocate_operand(shape, torch, input_dtype=getattr(torch, dtype), distribution=pair)
assert a.is_contiguous()
a.copy_(torch.from_numpy(x))
out = dfft.fft(a, distribution=pair)
torch.cuda.synchronize()
tol = 1e-4 if dtype == "complex64" else 1e-10
ref = np.fft.fftn(x.astype(np.complex128))
np.testing.assert_allclose(out.cpu().numpy(), ref, rtol=tol, atol=tol * np.abs(ref).max())
with dfft.FFT(a, distribution=pair) as f:
    f.plan()
    a.copy_(torch.from_numpy(x))
    inv = f.execute(direction="inverse")
    torch.cuda.synchronize()
    ref = np.fft.ifftn(x.astype(np.complex128)) * x.size
    np.testing.assert_allclose(inv.cpu().numpy(), ref, rtol=tol, atol=tol * np.abs(ref).max())
nd.free_symmetric_memory(a)
nd.finalize()
print("ok")
""")


@pytest.mark.parametrize("shape", [(32, 24, 30), (32, 24, 31), (64, 50)])
def test_box_r2c_then_c2r_one_rank_match_numpy(shape):
    """rfft from a dense real box to the complex box equals numpy's rfftn; irfft back (boxes
    swapped, the matching parity) gives the input times N."""
    _one_rank(BOXES + f"""
shape = {shape!r}
half = (*shape[:-1], shape[-1] // 2 + 1)
real, cplx = Box((0,) * len(shape), shape), Box((0,) * len(shape), half)
options = {{"last_axis_parity": "odd" if shape[-1] % 2 else "even"}}
x = np.random.default_rng(1).standard_normal(shape)
a = dfft.allocate_operand(shape, torch, input_dtype=torch.float64, distribution=(real, cplx))
assert a.is_contiguous()
a.copy_(torch.from_numpy(x))
spectrum = dfft.rfft(a, distribution=(real, cplx), options=options)
torch.cuda.synchronize()
ref = np.fft.rfftn(x)
np.testing.assert_allclose(spectrum.cpu().numpy(), ref, rtol=1e-10, atol=1e-10 * np.abs(ref).max())
back = dfft.irfft(spectrum, distribution=(cplx, real), options=options)
torch.cuda.synchronize()
np.testing.assert_allclose(back.cpu().numpy(), x * x.size, rtol=1e-10, atol=1e-9 * x.size)
nd.free_symmetric_memory(a)
nd.finalize()
print("ok")
""")


TWO_RANKS = (
    PRELUDE
    + BOXES
    + """
import os, torch.distributed as dist
rank = int(os.environ["RANK"])
dist.init_process_group("gloo", rank=rank, world_size=2)
torch.cuda.set_device(0)
nd.initialize(0, nd.TorchProcessGroup(device_id="cpu"), backends=["nvshmem"])
def part(array, box):
    return array[tuple(slice(a, b) for a, b in zip(box.lower, box.upper))]
shape = (16, 12, 10)
ins = [Box((0, 0, 0), (8, 12, 10)), Box((8, 0, 0), (16, 12, 10))]
outs = [Box((0, 0, 5), (16, 12, 10)), Box((0, 0, 0), (16, 12, 5))]  # rank 0 holds the far half
pair = (ins[rank], outs[rank])
x = np.random.default_rng(3).standard_normal(shape) + 1j * np.random.default_rng(4).standard_normal(shape)
a = dfft.allocate_operand(ins[rank].box_shape, torch, input_dtype=torch.complex128, distribution=pair)
with dfft.FFT(a, distribution=pair) as f:
    f.plan()
    a.copy_(torch.from_numpy(part(x, ins[rank])))
    out = f.execute()
    torch.cuda.synchronize()
    np.testing.assert_allclose(out.cpu().numpy(), part(np.fft.fftn(x), outs[rank]), rtol=1e-10, atol=1e-8)
    a.copy_(torch.from_numpy(part(x, ins[rank])))
    out = f.execute(direction="inverse")
    torch.cuda.synchronize()
    np.testing.assert_allclose(out.cpu().numpy(), part(np.fft.ifftn(x) * x.size, outs[rank]), rtol=1e-10,
                               atol=1e-8)
nd.free_symmetric_memory(a)
real_out = [Box((0, 0, 0), (16, 6, 6)), Box((0, 6, 0), (16, 12, 6))]
xr = x.real.copy()
b = dfft.allocate_operand(ins[rank].box_shape, torch, input_dtype=torch.float64,
                          distribution=(ins[rank], real_out[rank]))
b.copy_(torch.from_numpy(part(xr, ins[rank])))
spectrum = dfft.rfft(b, distribution=(ins[rank], real_out[rank]))
torch.cuda.synchronize()
np.testing.assert_allclose(spectrum.cpu().numpy(), part(np.fft.rfftn(xr), real_out[rank]), rtol=1e-10,
                           atol=1e-8)
back = dfft.irfft(spectrum, distribution=(real_out[rank], ins[rank]))
torch.cuda.synchronize()
np.testing.assert_allclose(back.cpu().numpy(), part(xr, ins[rank]) * xr.size, rtol=1e-10, atol=1e-7)
nd.free_symmetric_memory(b)
nd.finalize()
print("ok", rank)
"""
)


def run_two_ranks(code: str) -> list[str]:
    """Run ``code`` as ranks 0 and 1 (RANK, MASTER_ADDR/PORT set for gloo); the outputs."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code],
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**_env(), "RANK": str(r), "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)},
        )
        for r in range(2)
    ]
    outs = []
    for p in procs:
        try:
            out, err = p.communicate(timeout=300)
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            raise
        outs.append(_check(subprocess.CompletedProcess(p.args, p.returncode, out, err)))
    return outs


def test_box_fft_two_processes_on_one_gpu():
    """Two ranks (gloo) sharing GPU 0: a C2C from X halves to Z halves (rank 0 holding the far
    half) equals numpy's fftn in each output box, and in the inverse direction numpy's ifftn times
    N; an R2C to Y halves of the spectrum and the C2R back give numpy's results."""
    outs = run_two_ranks(TWO_RANKS)
    assert all("ok" in o for o in outs)
