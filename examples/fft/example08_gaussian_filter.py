"""A fused Gaussian low-pass filter: R2C with the filter in its epilog, then C2R with 1/N in its epilog.

Two passes over memory instead of three (forward, multiply, inverse).
"""

from nvmath._diagnostics.requirements import require

require("gpu", "torch", "numba")  # or exit 77 ("skipped") with a message saying what is missing

import sys

import numpy as np
import torch

import nvmath.fft

N = 4096
M = N // 2 + 1
M_U64 = np.uint64(M)  # callback offsets are unsigned 64-bit: keep the arithmetic unsigned


def gaussian(data_out, offset, value, user_info, unused):
    data_out[offset] = value * user_info[offset % M_U64]  # the frequency index of this element


def scale(data_out, offset, value, user_info, unused):
    data_out[offset] = value * user_info[0]


try:
    filter_epilog = nvmath.fft.compile_epilog(gaussian, "complex64", "float32")
    scale_epilog = nvmath.fft.compile_epilog(scale, "float32", "float32")
except RuntimeError as exc:
    print("skipped:", exc)
    sys.exit(77)

signals = torch.randn(512, N, device="cuda")
weights = torch.exp(-((torch.arange(M, device="cuda", dtype=torch.float32) / 200.0) ** 2))
inv_n = torch.tensor([1.0 / N], device="cuda")

spectrum_layout = torch.empty(512, M, dtype=torch.complex64, device="cuda")  # what the inverse will take
with (
    nvmath.fft.FFT(signals, axes=[1]) as forward,
    nvmath.fft.FFT(spectrum_layout, axes=[1], options={"fft_type": "C2R"}) as inverse,
):
    forward.plan(epilog=nvmath.fft.DeviceCallable(filter_epilog, data=weights.data_ptr()))
    inverse.plan(epilog=nvmath.fft.DeviceCallable(scale_epilog, data=inv_n.data_ptr()))
    spectrum = forward.execute()
    inverse.reset_operand(spectrum)
    filtered = inverse.execute()

reference = torch.fft.irfft(torch.fft.rfft(signals, dim=1) * weights, n=N, dim=1)
torch.testing.assert_close(filtered, reference, rtol=1e-4, atol=1e-4)
print("filtered", tuple(filtered.shape))
