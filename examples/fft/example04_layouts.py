"""Operand layouts cuFFT cannot describe: the error says which transpose works; or let nvmath copy.
"""

from nvmath._diagnostics.requirements import require

require("gpu", "torch")  # or exit 77 ("skipped") with a message saying what is missing

import torch

import nvmath.fft
from nvmath.fft import UnsupportedLayoutError

base = torch.randn(256, 1000, dtype=torch.complex64, device="cuda")
x = base[:, ::3]  # strides (1000, 3): the row stride is not a multiple of the column stride

try:
    nvmath.fft.fft(x)
except UnsupportedLayoutError as exc:
    print(exc)
    # Option 1: the suggested transpose, made contiguous, with the suggested axes.
    y = nvmath.fft.fft(x.permute(*exc.permutation).contiguous(), axes=exc.axes)

# Option 2: let nvmath copy the operand into a supported layout before each execution.
y2 = nvmath.fft.fft(x, options={"layout_fallback": "copy"})
torch.testing.assert_close(y, y2)

# Batch axes on both sides of the transformed axis are fine (several cuFFT launches),
# and so is any number of axes (several cuFFT plans).
z_in = torch.randn(8, 1024, 16, dtype=torch.complex64, device="cuda")
z = nvmath.fft.fft(z_in, axes=[1])
torch.testing.assert_close(z, torch.fft.fft(z_in, dim=1), rtol=1e-4, atol=1e-3)
w_in = torch.randn(4, 8, 8, 8, 8, dtype=torch.complex64, device="cuda")
w = nvmath.fft.fft(w_in)
torch.testing.assert_close(w, torch.fft.fftn(w_in), rtol=1e-4, atol=1e-3)
print("strided, looped and 5-axis transforms agree with torch.fft")
