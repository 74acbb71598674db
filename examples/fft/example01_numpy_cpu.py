"""FFTs of numpy arrays, run on the CPU (the default for host data).

Transforms are unnormalized in both directions, as cuFFT's: ifft(fft(x)) == N * x.
"""

import numpy as np

import nvmath.fft

rng = np.random.default_rng(0)
x = rng.standard_normal((64, 256)) + 1j * rng.standard_normal((64, 256))

# N-D C2C over all axes (like numpy.fft.fftn), and over the last axis only.
y = nvmath.fft.fft(x)
assert np.allclose(y, np.fft.fftn(x))
y1 = nvmath.fft.fft(x, axes=[-1])
assert np.allclose(y1, np.fft.fft(x, axis=-1))

# No normalization: the inverse of the forward transform is N times the input.
assert np.allclose(nvmath.fft.ifft(y), x.size * x)

# Real transforms keep single precision: float32 -> complex64 -> float32.
r = rng.standard_normal((64, 255)).astype(np.float32)
spectrum = nvmath.fft.rfft(r)  # last axis: 255 // 2 + 1 = 128
restored = nvmath.fft.irfft(spectrum, options={"last_axis_parity": "odd"})  # 2 * 128 - 1 = 255
print(spectrum.dtype, spectrum.shape, restored.dtype, restored.shape)
assert np.allclose(restored / r.size, r, atol=1e-5)
