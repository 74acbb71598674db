"""A fused 1/N normalization: an LTO epilog scales each output element as cuFFT stores it.
"""

from nvmath._diagnostics.requirements import require

require("gpu", "torch", "numba")  # or exit 77 ("skipped") with a message saying what is missing

import sys

import torch

import nvmath.fft


def scale(data_out, offset, value, user_info, unused):
    data_out[offset] = value * user_info[0]


try:
    epilog = nvmath.fft.compile_epilog(scale, "complex64", "float32")
except RuntimeError as exc:  # numba-cuda missing or unable to compile here
    print("skipped:", exc)
    sys.exit(77)

x = torch.randn(256, 4096, dtype=torch.complex64, device="cuda")
inv_n = torch.tensor([1.0 / 4096], dtype=torch.float32, device="cuda")
with nvmath.fft.FFT(x, axes=[1]) as fft:
    fft.plan(epilog=nvmath.fft.DeviceCallable(epilog, data=inv_n.data_ptr()))
    y = fft.execute()
torch.testing.assert_close(y, torch.fft.fft(x, dim=1, norm="forward"), rtol=1e-4, atol=1e-5)
print("normalized in the epilog")
