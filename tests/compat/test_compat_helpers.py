"""The block-scale helpers as nvmath-python 1.0 programs call them (torch, CPU): block indices in
``get_block_scale_offset``, ``expand_block_scale``'s ``output_dtype="smallest"`` (the raw scale
entries), uint8 NVFP4 scales, and TypeError for an output dtype the format cannot be expanded to."""

from __future__ import annotations

import pytest

from nvmath.linalg.advanced.helpers.matmul import (
    BlockScalingFormat,
    expand_block_scale,
    get_block_scale_offset,
    to_block_scale,
)

torch = pytest.importorskip("torch")


def test_get_block_scale_offset_takes_the_block_index():
    """nvmath-python's documented example: a (128, 128) NVFP4 ``a``, row 5, K-group 2 -> 82;
    K-group 5 -> 593."""
    a_shape = (128, 128)
    assert get_block_scale_offset((5, 2), a_shape, BlockScalingFormat.NVFP4, axis=-1) == 82
    assert get_block_scale_offset((5, 5), a_shape, BlockScalingFormat.NVFP4, axis=-1) == 593
    x = 40  # the element a[5, 40] lies in block 40 // 16
    assert get_block_scale_offset((5, x // 16), a_shape, BlockScalingFormat.NVFP4, axis=-1) == 82


def test_get_block_scale_offset_tensor_indices_and_range():
    """Tensor indices give the same offsets; a block index past the block count is an IndexError."""
    rows, groups = torch.tensor([5, 5]), torch.tensor([2, 5])
    got = get_block_scale_offset((rows, groups), (128, 128), BlockScalingFormat.NVFP4, axis=-1)
    assert got.tolist() == [82, 593]
    with pytest.raises(IndexError):
        get_block_scale_offset((5, 8), (128, 128), BlockScalingFormat.NVFP4, axis=-1)


def test_expand_block_scale_smallest_nvfp4_is_float8_e4m3fn():
    """NVFP4 scales expand to float8_e4m3fn by default, from float8_e4m3fn or uint8 scales alike."""
    dense = torch.rand(128, 4).mul(8).add(0.5).to(torch.float8_e4m3fn)
    flat = to_block_scale(dense, (128, 64), BlockScalingFormat.NVFP4, axis=-1)
    for scales in (flat, flat.view(torch.uint8)):
        out = expand_block_scale(scales, (128, 64), BlockScalingFormat.NVFP4, axis=-1)
        assert out.dtype == torch.float8_e4m3fn and out.shape == (128, 64)
        assert torch.equal(out.float(), dense.float().repeat_interleave(16, dim=1))
    f32 = expand_block_scale(flat.view(torch.uint8), (128, 64), "NVFP4", axis=-1, output_dtype=torch.float32)
    assert f32.dtype == torch.float32 and torch.equal(f32, dense.float().repeat_interleave(16, dim=1))


def test_expand_block_scale_smallest_mxfp8_is_exponent_bytes():
    """MXFP8 scales expand to their uint8 exponent bytes by default (127 means 1.0, 130 means 8.0)."""
    dense = torch.tensor([[127, 130]] * 128, dtype=torch.uint8)
    flat = to_block_scale(dense, (128, 64), BlockScalingFormat.MXFP8, axis=-1)
    out = expand_block_scale(flat, (128, 64), BlockScalingFormat.MXFP8, axis=-1)
    assert out.dtype == torch.uint8 and out[0, :1].item() == 127 and out[0, 32].item() == 130
    values = expand_block_scale(flat, (128, 64), "MXFP8", axis=-1, output_dtype=torch.float32)
    assert values[0, 0].item() == 1.0 and values[0, 32].item() == 8.0


@pytest.mark.parametrize(
    ("fmt", "dtype"),
    [("NVFP4", torch.uint8), ("NVFP4", torch.int32), ("MXFP8", torch.float8_e4m3fn), ("MXFP8", torch.int64)],
)
def test_expand_block_scale_bad_output_dtype_is_type_error(fmt, dtype):
    """An output dtype that is not allowed for the format raises TypeError, as in nvmath-python."""
    flat = torch.full((512,), 56 if fmt == "NVFP4" else 127, dtype=torch.uint8)  # 56: 1.0 in e4m3
    if fmt == "NVFP4":
        flat = flat.view(torch.float8_e4m3fn)
    shape = (128, 64) if fmt == "NVFP4" else (128, 128)
    with pytest.raises(TypeError):
        expand_block_scale(flat, shape, fmt, axis=-1, output_dtype=dtype)
