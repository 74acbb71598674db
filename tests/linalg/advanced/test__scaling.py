"""Tests of nvmath.linalg.advanced._scaling: FP8 scale-mode inference, layouts and restrictions (pure)."""

from __future__ import annotations

import re

import pytest

from nvmath.bindings import cublasLt as lt
from nvmath.linalg.advanced import _scaling as S
from nvmath.linalg.advanced._typemaps import resolve_types

SCALAR, OUTER, VEC, BLK = S.SCALAR, S.OUTER, S.VEC128, S.BLK128
E4, E5, BF16, F32 = "float8_e4m3fn", "float8_e5m2", "bfloat16", "float32"
M, N, K = 256, 384, 320  # KB = 3 (K is no multiple of 128), L4 = 4; MB = 2, NB = 3


def test_modes_are_cublaslt_values():
    """The modes are cublasLtMatmulMatrixScale_t's values (the bindings' enum, generated from cublasLt.h)."""
    assert S.ScaleMode is lt.MatmulMatrixScale
    assert (int(SCALAR), int(OUTER), int(VEC), int(BLK)) == (0, 3, 4, 5)


@pytest.mark.parametrize(
    ("name", "shape", "modes"),
    [
        ("a", (), (SCALAR,)),
        ("a", (1,), (SCALAR,)),
        ("a", (M,), (OUTER,)),
        ("a", (M, 1), (OUTER,)),
        ("a", (M, 3), (VEC,)),
        ("a", (2, 3), (BLK,)),
        ("a", (3, M), ()),  # VEC128 of b's orientation
        ("a", (M, 2), ()),  # floor(K/128): the last partial block needs a scale too
        ("a", (1, 1), ()),
        ("b", (), (SCALAR,)),
        ("b", (N,), (OUTER,)),
        ("b", (1, N), (OUTER,)),
        ("b", (N, 1), ()),  # a column of scales for b would be per K row: not a mode
        ("b", (3, N), (VEC,)),
        ("b", (3, 3), (BLK,)),
        ("b", (N, 3), ()),
    ],
)
def test_candidate_modes(name, shape, modes):
    """Each mode has its own shapes in the user's orientation (a: M x K, b: K x N)."""
    assert S.candidate_modes(name, shape, M, N, K) == modes


def test_coinciding_shapes_fit_every_equivalent_mode():
    """Shapes that coincide fit all the modes they describe (these describe the same scaling)."""
    assert S.candidate_modes("a", (64, 1), 64, N, 128) == (OUTER, VEC)  # one K-block: per row
    assert S.candidate_modes("a", (1,), 1, N, K) == (SCALAR, OUTER)  # one row: one scale
    assert S.candidate_modes("a", (1, 3), 1, N, K) == (VEC, BLK)  # one row: per K-block
    assert S.candidate_modes("a", (), 1, N, 100) == (SCALAR, OUTER, VEC, BLK)
    assert S.candidate_modes("b", (1, 1), M, 1, 64) == (OUTER, VEC, BLK)


@pytest.mark.parametrize(
    ("sa", "sb", "modes"),
    [
        ((), (1,), (SCALAR, SCALAR)),
        ((M,), (1, N), (OUTER, OUTER)),
        ((M, 1), (N,), (OUTER, OUTER)),
        ((M, 3), (3, 3), (VEC, BLK)),  # DeepSeek-style: activations 1x128, weights 128x128
        ((2, 3), (3, N), (BLK, VEC)),
        ((M, 3), (3, N), (VEC, VEC)),
    ],
)
def test_infer_pairs(sa, sb, modes):
    """The supported pairs are inferred from the two shapes."""
    got = S.infer_scaling({"a": sa, "b": sb}, M, N, K)
    assert (got.a, got.b) == modes
    assert got.tensor_wide == (modes == (SCALAR, SCALAR))


def test_infer_precedence_on_ambiguity():
    """An ambiguous scale takes the mode that pairs with the other one (first allowed pair wins)."""
    one_row = S.infer_scaling({"a": (1, 3), "b": (3, 3)}, 1, N, K)  # (1, KB): VEC128 or BLK for M = 1
    assert (one_row.a, one_row.b) == (VEC, BLK)
    one_row = S.infer_scaling({"a": (1, 3), "b": (3, N)}, 1, N, K)
    assert (one_row.a, one_row.b) == (VEC, VEC)
    number = S.infer_scaling({"a": (), "b": (N,)}, 1, N, K)  # a one-row a's number is its outer vector
    assert (number.a, number.b) == (OUTER, OUTER)
    short_k = S.infer_scaling({"a": (64, 1), "b": (1, N)}, 64, N, 128)
    assert (short_k.a, short_k.b) == (OUTER, OUTER)
    assert S.infer_scaling({}, M, N, K) is S.TENSOR_WIDE


@pytest.mark.parametrize(
    ("shapes", "match"),
    [
        ({"a": (M, 5), "b": ()}, "scale 'a' of shape (256, 5) fits no scaling mode"),
        ({"a": (), "b": (N, 3)}, "scale 'b' of shape (384, 3) fits no scaling mode"),
        ({"a": (2, 3), "b": (3, 3)}, "not two 128x128 block scales"),
        ({"a": (), "b": (N,)}, "(SCALAR_32F) and b (OUTER_VEC_32F) cannot be combined"),
        ({"a": (M,), "b": (3, N)}, "cannot be combined"),
        ({"a": (), "b": (), "d": (4,)}, "scale 'd' must be a number or a float32 tensor of shape () or (1,)"),
    ],
)
def test_infer_rejections(shapes, match):
    """A shape that fits no mode, or an unsupported pair, raises ValueError naming it."""
    with pytest.raises(ValueError, match=re.escape(match)):
        S.infer_scaling(shapes, M, N, K)


def test_no_fit_message_lists_the_shapes():
    """The message gives each mode's shape for this problem."""
    with pytest.raises(ValueError) as info:
        S.infer_scaling({"a": (7,), "b": ()}, M, N, K)
    msg = str(info.value)
    for text in ("(256,) or (256, 1)", "(256, 3)", "(2, 3)", "VEC128_32F", "BLK128x128_32F", "tensor-wide"):
        assert text in msg


@pytest.mark.parametrize(
    ("name", "mode", "shape", "strides"),
    [
        ("a", OUTER, (M,), (1,)),
        ("a", OUTER, (M, 1), (1, 1)),
        ("b", OUTER, (1, N), (N, 1)),
        ("a", VEC, (M, 3), (1, M)),  # contiguous along M
        ("b", VEC, (3, N), (N, 1)),  # contiguous along N
        ("a", BLK, (2, 3), (4, 1)),  # contiguous along K, rows padded to L4 = 4
        ("b", BLK, (3, 3), (1, 4)),
    ],
)
def test_layouts(name, mode, shape, strides):
    """The strides cuBLASLt assumes (implicit leading dimensions), in the user's orientation."""
    layout = S.scale_layout(name, mode, shape, M, N, K)
    assert layout == S.ScaleLayout(mode, shape, strides)
    assert layout.fits(strides)


def test_layout_padding_follows_k_blocks():
    """L4 is ceil(K/128) rounded up to a multiple of 4; no padding when it already is one."""
    assert S.scale_layout("a", BLK, (1, 8), 100, 16, 1024).strides == (8, 1)
    assert S.scale_layout("a", BLK, (1, 5), 100, 16, 640).strides == (8, 1)
    assert S.scale_layout("b", BLK, (1, 1), 16, 16, 128).strides == (1, 1)  # one element


def test_layout_fits_ignores_unit_axes():
    """A stride along an axis of extent 1 never matters."""
    layout = S.scale_layout("a", BLK, (1, 3), 100, 16, K)
    assert layout.fits((3, 1)) and layout.fits((99, 1))
    assert not layout.fits((1, 3))  # the axis of extent 3 needs unit stride
    assert not S.scale_layout("a", VEC, (M, 3), M, N, K).fits((3, 1))  # row-major is not cuBLASLt's


def test_descriptor_attributes_follow_the_orientation():
    """A_SCALE_MODE is the mode of the operand that feeds cuBLASLt's A (b in the transposed product)."""
    s = S.infer_scaling({"a": (M, 3), "b": (3, 3)}, M, N, K)
    assert s.descriptor_attributes("a", "b") == [("A_SCALE_MODE", 4), ("B_SCALE_MODE", 5)]
    assert s.descriptor_attributes("b", "a") == [("A_SCALE_MODE", 5), ("B_SCALE_MODE", 4)]
    assert S.TENSOR_WIDE.descriptor_attributes("b", "a") == []
    assert s.layout("a").mode == VEC and s.layout("c") is None
    assert s.describe() == "a: VEC128_32F, b: BLK128x128_32F"


BLOCK = S.infer_scaling({"a": (M, 3), "b": (3, 3)}, M, N, K)


@pytest.mark.parametrize(
    ("types", "batch", "block", "match"),
    [
        ((E4, E4), 1, False, "the result dtype is float8_e4m3fn"),
        ((E4, E4, BF16), 2, False, "batch of 2"),
        ((E4, E4, BF16), 1, True, "block_scaling=True"),
        ((F32, F32), 1, False, "need FP8 operands"),
    ],
)
def test_check_scaling_rejections(types, batch, block, match):
    """Outer-vector / block scales need FP8 operands, a wide result, no batch and no MXFP8 option."""
    with pytest.raises(ValueError, match=re.escape(match)):
        S.check_scaling(BLOCK, resolve_types(*types), batch_count=batch, block_scaling=block)


@pytest.mark.parametrize("d", [BF16, "float16", F32])
def test_check_scaling_accepts_wide_results(d):
    """bf16, fp16 and fp32 results are accepted (with the matching C dtype): the same block scales that
    are refused for an FP8 result pass for a wide one; tensor-wide scales pass even where block
    scales are refused (batch, block_scaling, FP8 result)."""
    types = resolve_types(E4, E5, d)
    assert types.d_dtype == d and not types.narrow_result and types.narrow_inputs
    assert S.check_scaling(BLOCK, types, batch_count=1, block_scaling=False) is None
    with pytest.raises(ValueError, match="the result dtype is float8_e4m3fn"):
        S.check_scaling(BLOCK, resolve_types(E4, E4), batch_count=1, block_scaling=False)
    assert S.check_scaling(S.TENSOR_WIDE, resolve_types(E4, E4), batch_count=8, block_scaling=True) is None
    with pytest.raises(ValueError, match="batch of 8"):
        S.check_scaling(BLOCK, types, batch_count=8, block_scaling=False)


@pytest.mark.parametrize(
    ("cc", "version", "match"),
    [((8, 9), 130100, "this device has 8.9"), ((9, 0), 120800, "cuBLASLt >= 120900 (12.9); loaded: 120800")],
)
def test_device_support(cc, version, match):
    """Compute capability 9.0 and cuBLASLt 12.9 are needed; the message names what the device has."""
    with pytest.raises(ValueError, match=re.escape(match)):
        S.check_scaling_support(BLOCK, cc, version)
    S.check_scaling_support(BLOCK, (9, 0), 120900)
    S.check_scaling_support(BLOCK, (10, 0), 130100)
    S.check_scaling_support(S.TENSOR_WIDE, (8, 9), 120800)
