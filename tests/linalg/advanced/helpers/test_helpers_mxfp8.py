"""Tests of nvmath.linalg.advanced.helpers._mxfp8: create, invert and apply MXFP8 scales."""

from __future__ import annotations

import math

import numpy as np
import pytest

from nvmath.linalg.advanced.helpers.matmul import (
    apply_mxfp8_scale,
    create_mxfp8_scale,
    expand_block_scale,
    invert_mxfp8_scale,
    to_block_scale,
)

torch = pytest.importorskip("torch")


def _fp8(shape, dtype=torch.float8_e4m3fn, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=g) * 8).to(dtype)


@pytest.mark.parametrize("exponent", [-127, -3, 0, 5, 127])
def test_create_with_an_int_fills_every_scale(exponent):
    """An int exponent gives size // 32 uint8 scales of 127 + exponent."""
    x = _fp8((2, 128, 128))
    scales = create_mxfp8_scale(x, exponent)
    assert scales.dtype == torch.uint8 and scales.shape == (2 * 128 * 128 // 32,)
    assert (scales == 127 + exponent).all()


def test_create_with_a_tensor_sets_each_block():
    """A per-block exponent tensor lands on each block (checked through expand_block_scale)."""
    b = _fp8((256, 128)).T  # (K, N) = (128, 256) column-major: blocks along K
    exps = torch.arange(4 * 256, dtype=torch.int16).reshape(4, 256) % 41 - 20
    scales = create_mxfp8_scale(b, exps)
    per_element = expand_block_scale(scales, b, "MXFP8", output_dtype=torch.float64)
    assert torch.equal(per_element, torch.exp2(exps.double()).repeat_interleave(32, dim=0))


def test_create_broadcasts_the_exponent_tensor():
    """An exponent tensor broadcasts to the per-block shape (here one exponent per row)."""
    x = _fp8((128, 128))
    rows = torch.arange(128, dtype=torch.int64).reshape(128, 1) - 64
    scales = create_mxfp8_scale(x, rows)
    assert torch.equal(scales, to_block_scale((rows + 127).expand(128, 4).to(torch.uint8), x, "MXFP8"))


def test_create_works_for_numpy():
    """numpy operands get numpy uint8 scales."""
    scales = create_mxfp8_scale(np.zeros((128, 128), np.float32), np.int32(2))
    assert isinstance(scales, np.ndarray) and scales.dtype == np.uint8 and (scales == 129).all()


@pytest.mark.parametrize(
    ("exponent", "error", "match"),
    [
        (128, ValueError, r"\[-127, 127\].*got 128"),
        (-128, ValueError, "got -128"),
        (torch.tensor([[200]]), ValueError, "got 200"),
        (1.5, TypeError, "int or an integer tensor"),
        (True, TypeError, "int or an integer tensor"),
        (torch.zeros(128, 2), ValueError, "integer tensor; got dtype float32"),
        (torch.zeros(3, 2, dtype=torch.int32), ValueError, "does not broadcast"),
        (np.zeros((128, 2), np.int32), TypeError, "x's package"),
    ],
)
def test_create_rejects_bad_exponents(exponent, error, match):
    """Out-of-range, non-integer, non-broadcasting and foreign exponents raise typed errors."""
    with pytest.raises(error, match=match):
        create_mxfp8_scale(_fp8((128, 64)), exponent)


def test_create_rejects_shapes_unfit_for_mxfp8():
    """K must be a multiple of 32."""
    with pytest.raises(ValueError, match="multiple of the MXFP8 block size 32"):
        create_mxfp8_scale(_fp8((128, 48)), 0)


@pytest.mark.parametrize(
    ("dtype", "exponent", "want"),
    [
        (torch.float8_e4m3fn, 0, torch.float16),
        (torch.float8_e4m3fn, 7, torch.float16),
        (torch.float8_e4m3fn, 8, torch.bfloat16),
        (torch.float8_e4m3fn, -127, torch.float32),
        (torch.float8_e4m3fn, 127, torch.float64),
        (torch.float8_e5m2, -8, torch.float16),
        (torch.float8_e5m2, -9, torch.bfloat16),
        (torch.float16, 3, torch.float32),
        (torch.bfloat16, 1, torch.float64),
    ],
)
def test_apply_of_create_scales_by_a_power_of_two_exactly(dtype, exponent, want):
    """apply(x, create(x, e)) == x * 2**e exactly, in the narrowest dtype that holds it."""
    x = _fp8((2, 128, 64), dtype)
    y = apply_mxfp8_scale(x, create_mxfp8_scale(x, exponent))
    assert y.dtype == want and y.shape == x.shape
    assert torch.equal(y.double(), x.double() * math.ldexp(1.0, exponent))


def test_apply_uses_each_blocks_scale():
    """Different blocks get their own scale; the result keeps a column-major b column-major."""
    b = _fp8((256, 128)).T  # (K, N) = (128, 256)
    exps = (torch.arange(4 * 256, dtype=torch.int32).reshape(4, 256) % 9) - 4
    y = apply_mxfp8_scale(b, create_mxfp8_scale(b, exps))
    assert y.stride() == (1, 128)
    assert torch.equal(y.double(), b.double() * torch.exp2(exps.double()).repeat_interleave(32, dim=0))


def test_apply_honours_an_explicit_dtype_and_nan_scales():
    """An explicit output dtype rounds once (overflow to inf); a NaN scale (255) gives NaN."""
    x = torch.full((128, 64), 448.0).to(torch.float8_e4m3fn)
    scales = create_mxfp8_scale(x, 127)
    assert torch.isinf(apply_mxfp8_scale(x, scales, output_dtype=torch.float32)).all()
    scales[0] = 255
    y = apply_mxfp8_scale(x, scales, output_dtype="float64")
    assert torch.isnan(y).sum() == 32 and y.dtype == torch.float64


def test_apply_works_for_numpy():
    """numpy float operands are scaled in numpy (no bfloat16 candidate there)."""
    x = np.linspace(-4, 4, 128 * 64, dtype=np.float16).reshape(128, 64)
    y = apply_mxfp8_scale(x, create_mxfp8_scale(x, -20))
    assert y.dtype == np.float32 and np.array_equal(y, x.astype(np.float64) * 2.0**-20)


@pytest.mark.parametrize(
    ("x", "scales", "kwargs", "error", "match"),
    [
        (torch.zeros(128, 128, dtype=torch.int8), None, {}, ValueError, "real floating dtype"),
        (torch.zeros(128, 128), np.zeros(512, np.uint8), {}, TypeError, "x's package"),
        (torch.zeros(128, 128), torch.zeros(128, dtype=torch.uint8), {}, ValueError, r"shape \(512,\)"),
        (torch.zeros(128, 128), torch.zeros(512), {}, ValueError, "uint8 or float8_e8m0fnu"),
        (torch.zeros(128, 128), None, {"output_dtype": torch.int32}, ValueError, "output_dtype"),
        (
            torch.zeros(128, 128),
            torch.zeros(512, dtype=torch.uint8, device="meta"),
            {},
            ValueError,
            "x's device",
        ),
    ],
)
def test_apply_rejects_bad_inputs(x, scales, kwargs, error, match):
    """Bad dtypes, foreign packages, wrong lengths and bad output dtypes raise typed errors."""
    scales = torch.full((512,), 127, dtype=torch.uint8) if scales is None else scales
    with pytest.raises(error, match=match):
        apply_mxfp8_scale(x, scales, **kwargs)


def test_invert_maps_x_to_254_minus_x_and_keeps_nan():
    """Every finite byte x becomes 254 - x (the reciprocal power of two); 255 stays 255."""
    raw = torch.arange(256, dtype=torch.uint8)
    inv = invert_mxfp8_scale(raw)
    assert (
        inv.dtype == torch.uint8 and inv[:255].tolist() == [254 - x for x in range(255)] and inv[255] == 255
    )
    assert (invert_mxfp8_scale(inv) == raw).all()
    assert invert_mxfp8_scale(raw.numpy()).tolist() == inv.tolist()


def test_invert_gives_reciprocal_scales():
    """expand(invert(s)) * expand(s) == 1 for every element."""
    x = _fp8((128, 128))
    scales = create_mxfp8_scale(x, torch.arange(-64, 64).reshape(128, 1))
    product = expand_block_scale(scales, x, "MXFP8", output_dtype=torch.float64) * expand_block_scale(
        invert_mxfp8_scale(scales), x, "MXFP8", output_dtype=torch.float64
    )
    assert (product == 1).all()


def test_invert_keeps_float8_e8m0fnu():
    """torch float8_e8m0fnu scales invert to float8_e8m0fnu."""
    raw = torch.tensor([0, 127, 200, 255], dtype=torch.uint8)
    inv = invert_mxfp8_scale(raw.view(torch.float8_e8m0fnu))
    assert inv.dtype == torch.float8_e8m0fnu and inv.view(torch.uint8).tolist() == [254, 127, 54, 255]


def test_invert_rejects_other_dtypes():
    """Non-UE8M0 scales raise ValueError naming the dtype; non-tensors TypeError."""
    with pytest.raises(ValueError, match="got int32"):
        invert_mxfp8_scale(torch.zeros(4, dtype=torch.int32))
    with pytest.raises(TypeError, match="mx_scales"):
        invert_mxfp8_scale([127, 128])
