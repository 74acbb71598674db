"""FFT traits: axes, transform types, shapes, precision rules and result layouts (pure)."""

from __future__ import annotations

import numpy as np
import pytest

from nvmath.fft import FFTOptions
from nvmath.fft._traits import (
    cufft_order,
    logical_shapes,
    make_traits,
    normalize_axes,
    resolve_fft_type,
    suggest_permutation,
)


def test_axes_default_to_all():
    """axes=None means every axis."""
    assert normalize_axes(None, 3) == (0, 1, 2)


def test_axes_are_normalized_and_keep_order():
    """Negative axes are normalized; the caller's order is kept; numpy ints are accepted."""
    assert normalize_axes([-1, np.int64(0)], 3) == (2, 0)


@pytest.mark.parametrize(
    "axes, ndim, error, text",
    [
        ((3,), 3, ValueError, "axis 3 is out of range"),
        ((-4,), 3, ValueError, "axis -4"),
        ((0, -3), 3, ValueError, "repeat"),
        ((), 2, ValueError, "at least one"),
        ("01", 2, TypeError, "'01'"),
        ((0.0,), 2, TypeError, "0.0"),
        ((True,), 2, TypeError, "True"),
        (None, 0, ValueError, "0-dimensional"),
        (5, 2, TypeError, "5"),
    ],
)
def test_bad_axes(axes, ndim, error, text):
    """Bad axes raise with the offending value in the message."""
    with pytest.raises(error, match=text):
        normalize_axes(axes, ndim)


@pytest.mark.parametrize(
    "dtype, requested, expected",
    [
        ("float32", None, ("R2C", "complex64")),
        ("float64", "R2C", ("R2C", "complex128")),
        ("float16", None, ("R2C", "complex32")),
        ("complex64", None, ("C2C", "complex64")),
        ("complex128", "C2R", ("C2R", "float64")),
        ("complex32", "C2R", ("C2R", "float16")),
    ],
)
def test_fft_type_and_result_dtype(dtype, requested, expected):
    """The transform type defaults from the dtype; the result dtype follows the type."""
    assert resolve_fft_type(dtype, requested) == expected


@pytest.mark.parametrize(
    "dtype, requested, text",
    [
        ("float32", "C2C", "needs a complex operand; got float32"),
        ("float32", "C2R", "C2R transform needs a complex operand"),
        ("complex64", "R2C", "needs a real operand; got complex64"),
        ("bfloat16", None, "'bfloat16' is not supported"),
        ("int32", None, "'int32' is not supported"),
    ],
)
def test_bad_dtype_for_type(dtype, requested, text):
    """Dtypes that do not suit the transform raise ValueError naming the dtype."""
    with pytest.raises(ValueError, match=text):
        resolve_fft_type(dtype, requested)


def test_logical_shapes():
    """R2C halves the last axis; C2R doubles it by the parity."""
    assert logical_shapes("R2C", (4, 9), (0, 1), "even") == ((4, 9), (4, 5))
    assert logical_shapes("C2R", (4, 5), (0, 1), "even") == ((4, 8), (4, 8))
    assert logical_shapes("C2R", (4, 5), (1, 0), "odd") == ((5, 7), (7, 5))


def test_zero_sizes_raise():
    """Zero-size axes raise ValueError naming them."""
    with pytest.raises(ValueError, match=r"zero-size axes \[1\]"):
        logical_shapes("C2C", (3, 0), (0,), "even")


def test_c2r_even_needs_two_elements():
    """C2R with even parity and one element along the last axis would be empty."""
    with pytest.raises(ValueError, match="at least 2 elements"):
        logical_shapes("C2R", (3, 1), (0, 1), "even")


def test_half_precision_sizes_are_left_to_cufft():
    """fp16 transforms of any size get traits: cuFFT decides at planning which sizes it runs."""
    for n in (6, 8, 177):
        t = make_traits((4, n), (n, 1), "float16", axes=(1,), execution="cuda", package="torch")
        assert t.fft_shape == (n,) and t.result_shape == (4, n // 2 + 1)


def test_half_precision_real_side_needs_unit_stride():
    """fp16 R2C reads, and fp16 C2R writes, the halved axis with unit stride (else staged/optimized)."""
    from nvmath._errors import UnsupportedLayoutError

    with pytest.raises(UnsupportedLayoutError, match="half-precision R2C needs unit-stride input"):
        make_traits((4, 8), (8, 1), "float16", axes=(0,), execution="cuda", package="torch")
    t = make_traits(
        (4, 8), (8, 1), "float16", axes=(0,), options=FFTOptions(layout_fallback="copy"),
        execution="cuda", package="torch",
    )  # fmt: skip
    assert t.staging_strides == (1, 4) and t.steps[0].istride == 1
    t = make_traits(
        (5, 8), (8, 1), "complex32", axes=(0,), options=FFTOptions(fft_type="C2R", result_layout="natural"),
        execution="cuda", package="torch",
    )  # fmt: skip
    assert t.steps[-1].ostride == 1 and t.result_strides == (1, 8)


def test_half_precision_not_on_cpu():
    """CPU execution refuses fp16."""
    with pytest.raises(ValueError, match="CPU execution does not support float16"):
        make_traits((8,), (1,), "float16", execution="cpu", package="torch", operand_space="cpu")


def test_complex32_needs_torch():
    """A half-precision R2C of a numpy/cupy operand would need complex32: TypeError."""
    with pytest.raises(TypeError, match="numpy operand cannot hold complex32"):
        make_traits((8,), (1,), "float16", execution="cuda", package="numpy")


def test_inplace_needs_c2c():
    """inplace with a real operand (R2C by default) raises."""
    with pytest.raises(ValueError, match="only supported for C2C"):
        make_traits((8,), (1,), "float32", options=FFTOptions(inplace=True))


def test_cufft_order_sorts_by_stride_and_keeps_halved_axis_last():
    """C2C axes are sorted by decreasing stride; R2C/C2R keep the caller's last axis innermost."""
    assert cufft_order("C2C", (2, 0, 1), (4, 5, 6), (30, 6, 1)) == (0, 1, 2)
    assert cufft_order("C2C", (2, 0), (4, 5, 6), (1, 4, 20)) == (2, 0)
    assert cufft_order("R2C", (1, 0), (4, 5), (5, 1)) == (1, 0)
    assert cufft_order("C2R", (2, 1, 0), (4, 5, 6), (1, 4, 20)) == (2, 1, 0)


def test_suggest_permutation():
    """The suggestion puts the batch axes first and the transformed axes last, in the caller's order."""
    assert suggest_permutation(4, (3, 1)) == ((0, 2, 3, 1), (2, 3))


def test_cpu_traits_never_raise_unsupported_layout():
    """CPU execution takes any strides (no cuFFT layout is needed)."""
    t = make_traits((8, 4), (10, 3), "complex64", execution="cpu", package="numpy", operand_space="cpu")
    assert t.steps == () and t.result_strides == (4, 1)


def test_cpu_result_layouts():
    """On the CPU too, 'optimized' puts the transformed axes innermost and 'natural' keeps the order."""
    opt = make_traits(
        (16, 10), (10, 1), "complex64", axes=(0,), execution="cpu", package="numpy", operand_space="cpu"
    )
    nat = make_traits(
        (16, 10), (10, 1), "complex64", axes=(0,), options=FFTOptions(result_layout="natural"),
        execution="cpu", package="numpy", operand_space="cpu",
    )  # fmt: skip
    assert opt.result_strides == (1, 16) and nat.result_strides == (10, 1)


def test_strides_must_match_shape():
    """Mismatched strides and shape raise ValueError."""
    with pytest.raises(ValueError, match="do not match"):
        make_traits((4, 4), (1,), "complex64")


def test_overwrite_operand_drops_the_c2r_copy_only():
    """overwrite_operand removes the staging copy of a one-launch device C2R; nothing else changes."""

    def traits(dtype, fft_type, operand_space="cuda", **opts):
        options = FFTOptions(fft_type=fft_type, **opts)
        return make_traits((4, 5), (5, 1), dtype, options=options, operand_space=operand_space)

    assert traits("complex64", "C2R").staging_strides is not None
    assert traits("complex64", "C2R", overwrite_operand=True).staging_strides is None
    assert traits("complex64", "C2R", "cpu", overwrite_operand=True).staging_strides is not None  # host copy
    assert traits("complex64", "C2C", overwrite_operand=True) == traits("complex64", "C2C")
    assert traits("float32", "R2C", overwrite_operand=True) == traits("float32", "R2C")


def test_overwrite_operand_needs_a_gap_free_operand():
    """A strided C2R operand with other data between its elements keeps the copy (cuFFT's scratch use
    could touch the gaps)."""
    options = FFTOptions(fft_type="C2R", overwrite_operand=True)
    assert make_traits((4, 5), (10, 1), "complex64", options=options).staging_strides is not None
    assert make_traits((2, 4, 5), (20, 5, 1), "complex64", options=options, axes=(1, 2)).staging_strides is None
