"""FFT callbacks see the layout the FFT reports (nvmath-python 1.0), or are refused: never a silently
wrong transform.

Prologs / epilogs here weight each element by ``1 + offset % 7`` (``offset`` as cuFFT passes it). The
references apply the same weights on the host through the layouts the planner reports
(``get_input_layout()`` / ``internal_operand_layout`` for the prolog, ``get_output_layout()`` for the
epilog) to a transform without callbacks. Needs numba-cuda that can compile (GPU machine: numpy 2.3.5
first on ``PYTHONPATH``, see GPU.md); test names contain "callback" for ``-k callback``.
"""

from __future__ import annotations

import numpy as np
import pytest

import nvmath.fft as nf
from nvmath.bindings.cufft import cuFFTError
from nvmath.fft import FFT, DeviceCallable

pytestmark = pytest.mark.gpu

SEVEN = np.uint64(7)
ONE = np.uint64(1)


def prolog_c64(data_in, offset, user_info, unused):
    return data_in[offset] * np.float32(offset % SEVEN + ONE)


def prolog_c128(data_in, offset, user_info, unused):
    return data_in[offset] * np.float64(offset % SEVEN + ONE)


def epilog_c64(data_out, offset, value, user_info, unused):
    data_out[offset] = value * np.float32(offset % SEVEN + ONE)


def epilog_c128(data_out, offset, value, user_info, unused):
    data_out[offset] = value * np.float64(offset % SEVEN + ONE)


def epilog_f32(data_out, offset, value, user_info, unused):
    data_out[offset] = value * np.float32(offset % SEVEN + ONE)


def epilog_f64(data_out, offset, value, user_info, unused):
    data_out[offset] = value * np.float64(offset % SEVEN + ONE)


FUNCS = {
    ("prolog", "complex64"): prolog_c64,
    ("prolog", "complex128"): prolog_c128,
    ("epilog", "complex64"): epilog_c64,
    ("epilog", "complex128"): epilog_c128,
    ("epilog", "float32"): epilog_f32,
    ("epilog", "float64"): epilog_f64,
}


def callback(kind, dtype):
    """A compiled weighting callback, or skip with the reason numba cannot compile here."""
    try:
        return DeviceCallable(getattr(nf, f"compile_{kind}")(FUNCS[kind, dtype], dtype, "float32"))
    except RuntimeError as exc:
        pytest.skip(f"numba cannot compile FFT callbacks here: {exc}")


def weights(layout):
    """``1 + offset % 7`` for every element of a ``(shape, strides)`` layout, in float64."""
    shape, strides = layout
    offset = np.zeros(shape, dtype=np.int64)
    for axis, (n, s) in enumerate(zip(shape, strides)):
        idx = np.arange(n, dtype=np.int64) * s
        offset = offset + idx.reshape([-1 if a == axis else 1 for a in range(len(shape))])
    return (offset % 7 + 1).astype(np.float64)


def host(torch, x):
    return x.detach().cpu().numpy() if x.is_cuda else x.detach().numpy()


def rel_err(got, ref):
    got, ref = np.asarray(got, dtype=np.complex128), np.asarray(ref, dtype=np.complex128)
    return float(np.linalg.norm(got - ref) / np.linalg.norm(ref))


def run_with_callbacks(x, axes, options, execution, prolog, epilog, direction=None):
    """Plan with callbacks; return (result, input layout, output layout) as reported."""
    with FFT(x, axes=axes, options=options, execution=execution) as f:
        layouts = f.get_input_layout(), f.get_output_layout()
        assert f.internal_operand_layout.shape == layouts[0][0]
        assert f.internal_operand_layout.strides == layouts[0][1]
        f.plan(prolog=prolog, epilog=epilog)
        y = f.execute(direction=direction)
    return y, layouts


def check_weighted(torch, x, axes, options, execution, use_prolog, use_epilog, direction=None):
    """Callbacks vs the same weights applied around a plain transform (through nvmath itself)."""
    fft_type = (options or {}).get("fft_type", "C2C")
    in_dtype = str(x.dtype).replace("torch.", "")
    out_dtype = {"C2R": {"complex64": "float32", "complex128": "float64"}[in_dtype]}.get(fft_type, in_dtype)
    prolog = callback("prolog", in_dtype) if use_prolog else None
    epilog = callback("epilog", out_dtype) if use_epilog else None
    y, (lin, lout) = run_with_callbacks(x, axes, options, execution, prolog, epilog, direction)
    xw = x
    if use_prolog:
        w = torch.from_numpy(weights(lin)).to(x.device)
        xw = (x.to(torch.complex128) * w).to(x.dtype)
    with FFT(xw, axes=axes, options=options, execution=execution) as f:
        f.plan()
        ref = host(torch, f.execute(direction=direction))
    if use_epilog:
        ref = ref * weights(lout)
    tol = 1e-4 if in_dtype == "complex64" else 1e-10
    assert rel_err(host(torch, y), ref) < tol


@pytest.mark.parametrize("cbs", [(True, False), (True, True)], ids=["prolog", "prolog-epilog"])
def test_callback_c2r_permuted_operand_optimized(torch_cuda, cbs):
    """C2R inverse, shape (2005, 7, 3) permuted (2, 1, 0), axes (0, 1), complex128, optimized result."""
    torch = torch_cuda
    g = torch.Generator().manual_seed(3)
    base = torch.randn(3, 7, 2005, dtype=torch.complex128, generator=g).cuda()
    x = base.permute(2, 1, 0)
    check_weighted(torch, x, (0, 1), {"fft_type": "C2R", "result_layout": "optimized"}, "cuda", *cbs)


@pytest.mark.parametrize("m", [4952, 4097])
@pytest.mark.parametrize("cbs", [(True, False), (True, True)], ids=["prolog", "prolog-epilog"])
def test_callback_c2r_transposed_operand_optimized(torch_cuda, cbs, m):
    """C2R inverse, shape (m, 3) transposed, axis 0, complex64, optimized result. For m = 4952 the
    size 9902 = 2 x 4951 (a prime above 127) makes cuFFT refuse callback plans: cuFFTError with
    CUFFT_NOT_SUPPORTED, as nvmath-python raises; 4097 (size 8192) runs and must be right."""
    torch = torch_cuda
    g = torch.Generator().manual_seed(4)
    x = torch.randn(3, m, dtype=torch.complex64, generator=g).cuda().T
    # a Hermitian-consistent half spectrum (real DC and Nyquist bins): C2R kernels treat the
    # imaginary parts there differently, with and without callbacks
    x[0] = x[0].real.to(x.dtype)
    x[-1] = x[-1].real.to(x.dtype)
    try:
        check_weighted(torch, x, (0,), {"fft_type": "C2R", "result_layout": "optimized"}, "cuda", *cbs)
    except cuFFTError as exc:
        assert m == 4952 and exc.status_name == "CUFFT_NOT_SUPPORTED", exc
        assert isinstance(exc, RuntimeError)


@pytest.mark.parametrize("shape", [(44100, 49, 15), (1, 17775, 3), (4, 17775, 3)], ids=str)
def test_callback_filters_on_host_torch_operands(torch_cuda, shape):
    """Forward with a prolog filter, inverse with an epilog filter, host torch operands, axes (0, 1)."""
    torch = torch_cuda
    g = torch.Generator().manual_seed(5)
    x = torch.randn(*shape, dtype=torch.complex64, generator=g)
    options = {"result_layout": "natural"}
    check_weighted(torch, x, (0, 1), options, "cuda", True, False, direction="forward")
    check_weighted(torch, x, (0, 1), options, "cuda", False, True, direction="inverse")
    check_weighted(torch, x, (0, 1), options, "cuda", True, True, direction="forward")


def test_callback_plan_cufft_cannot_run_is_cufft_error(torch_cuda):
    """cuFFT refusing a callback plan (a size with a prime factor > 127) raises cuFFTError with its status."""
    torch = torch_cuda
    x = torch.randn(4, 2 * 131 * 2, dtype=torch.float32, device="cuda")
    epilog = callback("epilog", "complex64")
    try:
        nf.rfft(x, axes=(1,), epilog=epilog)
    except cuFFTError as exc:
        allowed = ("CUFFT_NOT_SUPPORTED", "CUFFT_NVJITLINK_FAILURE", "CUFFT_INVALID_SIZE")
        assert exc.status_name in allowed, exc
    # cuFFT versions that run this plan are fine too: what matters is no RuntimeError


def test_callback_for_another_dtype_is_refused_as_cufft_error(torch_cuda):
    """A prolog compiled for complex128 on a complex64 transform: cuFFTError (and ValueError), no plan."""
    torch = torch_cuda
    x = torch.randn(8, 64, dtype=torch.complex64, device="cuda")
    prolog = callback("prolog", "complex128")
    with pytest.raises(cuFFTError):
        nf.fft(x, axes=(1,), prolog=prolog)
    with pytest.raises(ValueError):
        nf.fft(x, axes=(1,), prolog=prolog)


@pytest.mark.parametrize("axes", [(1,), (0, 1)], ids=["1d", "2d"])
def test_callback_on_overlapping_operand(torch_cuda, axes):
    """An operand whose rows overlap ((4, 64) with strides (32, 1)), accepted with a prolog and an
    epilog as nvmath-python does; offsets index the operand's own layout."""
    torch = torch_cuda
    base = torch.randn(4 * 32 + 32, dtype=torch.complex64, device="cuda")
    x = base.as_strided((4, 64), (32, 1))
    check_weighted(torch, x, axes, None, "cuda", True, True)
