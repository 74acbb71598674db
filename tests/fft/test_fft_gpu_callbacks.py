"""LTO callbacks on the GPU: numba-compiled prologs/epilogs fused into cuFFT.

Needs numba-cuda that can compile (on the GPU machine: numpy 2.3.5 first on PYTHONPATH, see
GPU.md); otherwise every test skips with the compiler's reason.
"""

from __future__ import annotations

import numpy as np
import pytest

import nvmath.fft as nf
from nvmath.fft import FFT, DeviceCallable

pytestmark = pytest.mark.gpu


def compiled(kind, function, element, info):
    """The LTO-IR of ``function``, or skip with the reason numba cannot compile it."""
    try:
        return getattr(nf, f"compile_{kind}")(function, element, info)
    except RuntimeError as exc:
        pytest.skip(f"numba cannot compile FFT callbacks here: {exc}")


def scale_epilog(data_out, offset, value, user_info, unused):
    data_out[offset] = value * user_info[0]


N256 = np.uint64(256)  # callback offsets are uint64: keep index arithmetic unsigned
N513 = np.uint64(513)


def window_prolog(data_in, offset, user_info, unused):
    return data_in[offset] * user_info[offset % N256]


def test_epilog_normalizes(torch_cuda):
    """An epilog multiplying by 1/N fuses the normalization into the forward C2C."""
    torch = torch_cuda
    x = torch.randn(64, 128, dtype=torch.complex64, device="cuda")
    scale = torch.tensor([1.0 / 128], dtype=torch.float32, device="cuda")
    ltoir = compiled("epilog", scale_epilog, "complex64", "float32")
    with FFT(x, axes=[1]) as f:
        f.plan(epilog=DeviceCallable(ltoir, data=scale.data_ptr()))
        y = f.execute()
    torch.testing.assert_close(y, torch.fft.fft(x, dim=1) / 128, rtol=1e-4, atol=1e-4)


def test_prolog_windows_r2c(torch_cuda):
    """A prolog multiplying by a window (indexed from the element offset) fuses into R2C."""
    torch = torch_cuda
    x = torch.randn(32, 256, dtype=torch.float32, device="cuda")
    window = torch.hann_window(256, dtype=torch.float32, device="cuda")
    ltoir = compiled("prolog", window_prolog, "float32", "float32")
    y = nf.rfft(x, axes=[1], prolog={"ltoir": ltoir, "data": window.data_ptr()})
    torch.testing.assert_close(y, torch.fft.rfft(x * window, dim=1), rtol=1e-4, atol=1e-3)


def test_fused_gaussian_filter(torch_cuda):
    """Forward R2C with a Gaussian epilog, then C2R with a 1/N epilog, equals the unfused filter."""
    torch = torch_cuda
    n = 1024
    x = torch.randn(16, n, dtype=torch.float32, device="cuda")
    m = n // 2 + 1
    gauss = torch.exp(-((torch.arange(m, device="cuda", dtype=torch.float32) / 60.0) ** 2))
    inv_n = torch.tensor([1.0 / n], dtype=torch.float32, device="cuda")

    def gaussian(data_out, offset, value, user_info, unused):
        data_out[offset] = value * user_info[offset % N513]

    fwd = compiled("epilog", gaussian, "complex64", "float32")
    inv = compiled("epilog", scale_epilog, "float32", "float32")
    spectrum = nf.rfft(x, axes=[1], epilog=DeviceCallable(fwd, data=gauss.data_ptr()))
    y = nf.irfft(spectrum, axes=[1], epilog=DeviceCallable(inv, data=inv_n.data_ptr()))
    ref = torch.fft.irfft(torch.fft.rfft(x, dim=1) * gauss, n=n, dim=1)
    torch.testing.assert_close(y, ref, rtol=1e-4, atol=1e-4)


def test_epilog_times_two_small_c2c(torch_cuda):
    """The smallest case cuFFT 12 used to refuse (CUFFT_INVALID_SIZE): a 64-point C2C, epilog 2*x."""
    torch = torch_cuda

    def twice(data_out, offset, value, user_info, unused):
        data_out[offset] = value * 2

    x = torch.randn(64, dtype=torch.complex64, device="cuda")
    y = nf.fft(x, epilog={"ltoir": compiled("epilog", twice, "complex64", "complex64")})
    torch.testing.assert_close(y, 2 * torch.fft.fft(x), rtol=1e-4, atol=1e-4)


def test_complex128_prolog_and_epilog_with_user_info(torch_cuda):
    """Double-complex prolog and epilog both read user_info (the by-value double2 element path)."""
    torch = torch_cuda
    n = np.uint64(96)
    x = torch.randn(8, 96, dtype=torch.complex128, device="cuda")
    w = torch.linspace(0.5, 1.5, 96, dtype=torch.float64, device="cuda")
    scale = torch.tensor([0.25 + 0.5j], dtype=torch.complex128, device="cuda")

    def windowed(data_in, offset, user_info, unused):
        return data_in[offset] * user_info[offset % n]

    pro = compiled("prolog", windowed, "complex128", "float64")
    epi = compiled("epilog", scale_epilog, "complex128", "complex128")
    with FFT(x, axes=[1]) as f:
        f.plan(
            prolog=DeviceCallable(pro, data=w.data_ptr()), epilog=DeviceCallable(epi, data=scale.data_ptr())
        )
        y = f.execute()
    torch.testing.assert_close(y, torch.fft.fft(x * w, dim=1) * scale[0], rtol=1e-10, atol=1e-10)


def test_callback_for_another_dtype_is_a_value_error(torch_cuda):
    """An epilog compiled for complex128 on a complex64 result raises ValueError naming both."""
    torch = torch_cuda
    x = torch.randn(64, dtype=torch.complex64, device="cuda")
    epi = compiled("epilog", scale_epilog, "complex128", "complex128")
    with pytest.raises(ValueError, match=r"complex64.*epilog for complex128"):
        nf.fft(x, epilog=epi)


def test_bad_ltoir_names_the_library(torch_cuda):
    """LTO-IR cuFFT cannot link raises cuFFT's error (a cuFFTError, as nvmath-python, and a
    RuntimeError) with its status, naming cuFFT's version and path."""
    from nvmath.bindings.cufft import cuFFTError

    torch = torch_cuda
    x = torch.randn(64, dtype=torch.complex64, device="cuda")
    f = FFT(x)
    expected = r"cuFFT \d+\.\d+.*refused the LTO callback.*prolog on complex64"
    with pytest.raises(RuntimeError, match=expected) as info:
        f.plan(prolog=DeviceCallable(b"not LTO-IR" * 8))
    assert isinstance(info.value, cuFFTError) and info.value.status != 0
    f.free()


def test_callbacks_refuse_half_precision(torch_cuda):
    """Half-precision transforms take no callbacks (ValueError before any cuFFT call)."""
    torch = torch_cuda
    x = torch.randn(64, device="cuda").half()
    with pytest.raises(ValueError, match="float16"):
        nf.rfft(x, epilog=DeviceCallable(b"\x01"))
