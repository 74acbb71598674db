"""FFTs of torch CUDA tensors: results are torch tensors on the same device and stream.
"""

from nvmath._diagnostics.requirements import require

require("gpu", "torch")  # or exit 77 ("skipped") with a message saying what is missing

import torch

import nvmath.fft

x = torch.randn(4096, 8192, dtype=torch.complex64, device="cuda")

# Runs on torch's current stream; returns without waiting (blocking="auto").
y = nvmath.fft.fft(x, axes=[1])
torch.testing.assert_close(y, torch.fft.fft(x, dim=1), rtol=1e-4, atol=1e-2)

# Real-to-complex and back, over the last two axes of a batch of images.
images = torch.randn(64, 512, 512, device="cuda")
spectra = nvmath.fft.rfft(images, axes=[1, 2])
back = nvmath.fft.irfft(spectra, axes=[1, 2]) / (512 * 512)
torch.testing.assert_close(back, images, rtol=1e-4, atol=1e-4)

# Another stream: the work is ordered after what is already queued on it.
s = torch.cuda.Stream()
with torch.cuda.stream(s):
    z = nvmath.fft.fft(x, axes=[0])
s.synchronize()
print("plan cache:", nvmath.fft.plan_cache.stats)
