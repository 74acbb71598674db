"""Tests of nvmath.linalg.advanced.helpers._fp4: quantize_to_fp4 and unpack_fp4."""

from __future__ import annotations

import math

import numpy as np
import pytest

from nvmath.linalg.advanced.helpers._fp4 import FP4_VALUES
from nvmath.linalg.advanced.helpers.matmul import (
    expand_block_scale,
    get_block_scale_offset,
    quantize_to_fp4,
    to_block_scale,
    unpack_fp4,
)

torch = pytest.importorskip("torch")
if not hasattr(torch, "float4_e2m1fn_x2"):
    pytest.skip("this torch has no float4_e2m1fn_x2", allow_module_level=True)

ALL_VALUES = [*FP4_VALUES, *(-v for v in FP4_VALUES)]  # codes 0..15


def _bytes(t):
    return t.view(torch.uint8)


def test_every_byte_unpacks_to_its_two_codes():
    """Byte b unpacks to (value of b & 15, value of b >> 4): the low nibble comes first."""
    packed = torch.arange(256, dtype=torch.uint8).view(torch.float4_e2m1fn_x2)
    values = unpack_fp4(packed, axis=0)
    assert values.dtype == torch.float32 and values.shape == (512,)
    want = [v for b in range(256) for v in (ALL_VALUES[b & 15], ALL_VALUES[b >> 4])]
    assert values.tolist() == want
    assert [math.copysign(1, v) for v in values[1::2].tolist()] == [
        math.copysign(1, ALL_VALUES[b >> 4]) for b in range(256)
    ]


def test_representable_values_round_trip_bit_exactly():
    """quantize(unpack(p)) == p for every byte p, -0 included."""
    packed = torch.arange(256, dtype=torch.uint8).reshape(16, 16).view(torch.float4_e2m1fn_x2)
    again = quantize_to_fp4(unpack_fp4(packed, axis=-1), axis=-1)
    assert again.dtype == torch.float4_e2m1fn_x2 and torch.equal(_bytes(again), _bytes(packed))


@pytest.mark.parametrize(
    ("value", "want"),
    [
        (0.25, 0.0),
        (0.2500001, 0.5),
        (0.75, 1.0),
        (0.7499, 0.5),
        (1.25, 1.0),
        (1.75, 2.0),
        (2.5, 2.0),
        (3.5, 4.0),
        (5.0, 4.0),
        (5.01, 6.0),
        (1e30, 6.0),
        (math.inf, 6.0),
        (-0.1, -0.0),
        (-math.inf, -6.0),
        (math.nan, 0.0),
    ],
)
def test_rounding_is_nearest_even_and_saturating(value, want):
    """Midpoints round to the even code, large magnitudes saturate to 6, NaN becomes 0."""
    x = torch.tensor([value, 1.0], dtype=torch.float64)
    got = unpack_fp4(quantize_to_fp4(x, axis=0), axis=0)[0].item()
    assert got == want and math.copysign(1, got) == math.copysign(1, want)


@pytest.mark.parametrize(
    "dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.float8_e4m3fn]
)
def test_random_values_go_to_the_nearest_fp4_value(dtype):
    """Away from ties, every value maps to the FP4 value closest to it."""
    x = (torch.randn(64, 32, generator=torch.Generator().manual_seed(1)) * 3).to(dtype)
    got = unpack_fp4(quantize_to_fp4(x, axis=-1), axis=-1)
    table = np.array(ALL_VALUES[:8])
    mags = np.abs(x.double().numpy())
    nearest = table[np.argmin(np.abs(mags[..., None] - table), axis=-1)]
    ties = np.isin(mags, [0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0])
    assert np.array_equal(np.abs(got.numpy())[~ties], nearest[~ties])
    assert (np.sign(got.numpy()) * np.sign(x.double().numpy()) >= 0).all()


def test_packing_along_axis_minus_2_is_column_major():
    """Packing b (K, N) along K gives (K // 2, N) with K contiguous; unpacking restores b."""
    b = torch.tensor(ALL_VALUES * 8).reshape(128, 1).repeat(1, 3)  # (K, N) = (128, 3)
    packed = quantize_to_fp4(b, axis=-2)
    assert packed.shape == (64, 3) and packed.stride() == (1, 64)
    assert _bytes(packed)[0, 0].item() == 0x10  # codes 0 (low nibble) and 1 (high nibble)
    assert torch.equal(unpack_fp4(packed, axis=-2), b)


def test_batched_and_inner_axes():
    """Any axis of any rank packs and unpacks."""
    x = torch.tensor(ALL_VALUES).repeat(32).reshape(2, 16, 4, 4)
    for axis in range(4):
        packed = quantize_to_fp4(x, axis)
        assert packed.shape[axis] == x.shape[axis] // 2 and torch.equal(unpack_fp4(packed, axis), x)


def test_fp4_operand_scales_use_the_logical_shape():
    """An NVFP4 operand (M, K // 2) addresses its scales by logical (M, K) indices."""
    a = quantize_to_fp4(torch.ones(128, 64), axis=-1)  # logical (128, 64): 4 blocks per row
    scales = to_block_scale(torch.ones(128, 4, dtype=torch.float8_e4m3fn), a, "NVFP4")
    assert scales.shape == (512,)
    assert get_block_scale_offset((5, 3), a, "NVFP4") == get_block_scale_offset((5, 3), (128, 64), "NVFP4")
    assert expand_block_scale(scales, a, "NVFP4").shape == (128, 64)


def test_dequantize_nvfp4_matches_the_scaled_values():
    """unpack(q) * expand(scales) reproduces x when x is FP4 values times the block scales."""
    codes = torch.randint(0, 16, (128, 64), generator=torch.Generator().manual_seed(2))
    values = torch.tensor(ALL_VALUES)[codes]
    block_scales = torch.tensor([0.5, 2.0, 448.0, 2.0**-9]).repeat(128, 1).to(torch.float8_e4m3fn)
    x = values * block_scales.float().repeat_interleave(16, dim=1)
    q = quantize_to_fp4(x / block_scales.float().repeat_interleave(16, dim=1), axis=-1)
    scales = to_block_scale(block_scales, (128, 64), "NVFP4")
    assert torch.equal(unpack_fp4(q, -1) * expand_block_scale(scales, q, "NVFP4").float(), x)


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda: quantize_to_fp4(np.ones((2, 2), np.float32), -1), TypeError, "torch-only"),
        (lambda: quantize_to_fp4(torch.ones(2, 2, dtype=torch.int32), -1), ValueError, "real floating"),
        (lambda: quantize_to_fp4(torch.ones(2, 3), -1), ValueError, "even"),
        (lambda: quantize_to_fp4(torch.ones(2, 2), 2), ValueError, "axis"),
        (lambda: quantize_to_fp4(torch.ones(2, 2), "last"), TypeError, "axis must be an int"),
        (lambda: unpack_fp4(torch.ones(2, 2, dtype=torch.uint8), -1), ValueError, "float4_e2m1fn_x2"),
        (lambda: unpack_fp4([1, 2], -1), TypeError, "fp4_tensor"),
    ],
)
def test_bad_inputs_are_rejected(call, error, match):
    """Non-torch inputs, bad dtypes, odd extents and bad axes raise typed errors."""
    with pytest.raises(error, match=match):
        call()
