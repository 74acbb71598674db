"""Tests of nvmath.linalg.advanced.helpers._geometry: formats, block axes and scale offsets."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from nvmath.linalg.advanced.helpers import _geometry as G
from nvmath.linalg.advanced.helpers._geometry import BlockScalingFormat as F

torch = pytest.importorskip("torch")

# (shape, axis, fmt): aligned and padded, both block axes, batched
CASES = [
    ((128, 128), -1, "MXFP8"),
    ((128, 256), -2, "MXFP8"),
    ((256, 64), -1, "NVFP4"),
    ((2, 3, 128, 64), -1, "NVFP4"),
    ((2, 64, 128), -2, "NVFP4"),
    ((130, 96), -1, "MXFP8"),
    ((32, 200), -2, "MXFP8"),
    ((3, 1, 48), -1, "NVFP4"),
]


def _all_offsets(shape, axis, fmt):
    geom = G.resolve_geometry(shape, fmt, axis)
    return geom, {idx: G.scale_offset(idx, geom) for idx in itertools.product(*map(range, shape))}


def test_format_is_a_str_enum_with_two_members():
    """BlockScalingFormat is a str enum of NVFP4 and MXFP8 with blocks of 16 and 32."""
    assert [f.name for f in F] == ["NVFP4", "MXFP8"] and issubclass(F, str)
    assert F.MXFP8 == "MXFP8" and G.BLOCK_SIZES[F.MXFP8] == 32 and G.BLOCK_SIZES[F.NVFP4] == 16


def test_check_format_accepts_members_and_names_in_any_case():
    """check_format takes a member or its name in any case."""
    assert G.check_format(F.NVFP4) is F.NVFP4
    assert G.check_format("mxfp8") is F.MXFP8 and G.check_format("NvFp4") is F.NVFP4


def test_check_format_rejects_unknown_names_and_types():
    """An unknown name is a ValueError listing the formats; a non-string a TypeError."""
    with pytest.raises(ValueError, match=r"'NVFP4', 'MXFP8'.*'fp8'"):
        G.check_format("fp8")
    with pytest.raises(TypeError, match="int"):
        G.check_format(32)


def test_normalize_axis_limits_block_axes_to_the_last_two():
    """Only the last two axes may be block axes; any in-range axis when not matrix_only."""
    assert G.normalize_axis(-2, 4, matrix_only=True) == 2 and G.normalize_axis(3, 4, matrix_only=True) == 3
    assert G.normalize_axis(0, 4, matrix_only=False) == 0
    with pytest.raises(ValueError, match=r"-2, -1, 2 or 3 .* got 1"):
        G.normalize_axis(1, 4, matrix_only=True)
    with pytest.raises(ValueError, match="got 4"):
        G.normalize_axis(4, 4, matrix_only=False)
    with pytest.raises(TypeError, match="axis must be an int"):
        G.normalize_axis(1.0, 4, matrix_only=True)


def test_shape_defaults_to_the_last_axis():
    """A shape's block axis defaults to its last axis; its geometry counts padded tiles."""
    geom = G.resolve_geometry((2, 130, 96), "MXFP8")
    assert (geom.axis, geom.outer, geom.blocks, geom.padded_outer, geom.padded_blocks) == (2, 130, 3, 256, 4)
    assert geom.size == 2 * 256 * 4 and geom.dense_shape == (2, 130, 3)


def test_tensor_block_axis_is_its_unit_stride_axis():
    """A row-major tensor blocks along its last axis, a column-major one along the next-to-last."""
    a, b = torch.empty(128, 64), torch.empty(256, 64).T
    assert G.resolve_geometry(a, "MXFP8").axis == 1 and G.resolve_geometry(b, "MXFP8").axis == 0
    assert G.resolve_geometry(np.empty((2, 32, 64)).swapaxes(-1, -2), "NVFP4").axis == 1
    assert G.resolve_geometry(b, "MXFP8", axis=-1).axis == 1  # an explicit axis wins


def test_tensor_without_unit_stride_needs_an_axis():
    """Neither of the last two axes contiguous: ValueError asking for axis."""
    x = torch.empty(128, 128)[::2, ::2]
    with pytest.raises(ValueError, match="pass axis=-1 or axis=-2"):
        G.resolve_geometry(x, "NVFP4")
    assert G.resolve_geometry(x, "NVFP4", axis=-1).axis == 1


def test_fp4_tensor_counts_two_values_per_element():
    """A float4_e2m1fn_x2 operand's logical extent along the block axis is twice its own."""
    a = torch.zeros(128, 32, dtype=torch.uint8).view(torch.float4_e2m1fn_x2)
    b = torch.zeros(128, 32, dtype=torch.uint8).view(torch.float4_e2m1fn_x2).T  # (32, 128) column-major
    assert G.resolve_geometry(a, "NVFP4").shape == (128, 64)
    assert G.resolve_geometry(b, "NVFP4").shape == (64, 128)


@pytest.mark.parametrize(
    ("bad", "error", "match"),
    [
        ((64,), ValueError, "at least 2"),
        ((0, 64), ValueError, "positive"),
        ((128, 48), ValueError, "multiple of the MXFP8 block size 32"),
        ((128, 2.0), TypeError, "sequence of ints"),
        ("128x64", TypeError, "str"),
        ({"shape": (128, 64)}, TypeError, "dict"),
    ],
)
def test_bad_shapes_are_rejected(bad, error, match):
    """Too few dims, empty extents, misaligned blocks and non-shapes raise typed errors."""
    with pytest.raises(error, match=match):
        G.resolve_geometry(bad, "MXFP8")


@pytest.mark.parametrize(("shape", "axis", "fmt"), CASES)
def test_offsets_match_the_documented_storage_order(shape, axis, fmt, reference_layout):
    """Every scale's offset is where the cuBLAS layout, walked byte by byte, stores it."""
    geom, offsets = _all_offsets(shape, axis, fmt)
    layout, size = reference_layout(shape, axis, G.BLOCK_SIZES[G.check_format(fmt)])
    assert size == geom.size
    ndim, inverse = len(shape), {}
    for idx, off in offsets.items():
        o = idx[-1] if geom.axis == ndim - 2 else idx[-2]
        k = idx[geom.axis] // geom.block
        batch = int(np.ravel_multi_index(idx[:-2], shape[:-2])) if ndim > 2 else 0
        assert layout[off] == (batch, o, k), idx
        inverse.setdefault(off, set()).add(idx)
    assert sorted(inverse) == sorted(layout)  # every real scale is used, no padding entry is


ALIGNED = [
    c for c in CASES if G.resolve_geometry(*c[::2], c[1]).size * G.BLOCK_SIZES[F(c[2])] == math.prod(c[0])
]


@pytest.mark.parametrize(("shape", "axis", "fmt"), ALIGNED)
def test_aligned_offsets_are_a_bijection(shape, axis, fmt):
    """With whole tiles the offsets of the blocks cover range(size // block) exactly once."""
    geom, offsets = _all_offsets(shape, axis, fmt)
    firsts = {off for idx, off in offsets.items() if idx[geom.axis] % geom.block == 0}
    assert sorted(firsts) == list(range(math.prod(shape) // geom.block)) == list(range(geom.size))


@pytest.mark.parametrize(("shape", "axis", "fmt"), CASES)
def test_elements_of_a_block_share_one_offset(shape, axis, fmt):
    """Offsets depend on the block only: equal within a block, distinct across blocks."""
    geom, offsets = _all_offsets(shape, axis, fmt)
    by_block = {}
    for idx, off in offsets.items():
        key = idx[: geom.axis] + (idx[geom.axis] // geom.block,) + idx[geom.axis + 1 :]
        by_block.setdefault(key, set()).add(off)
    assert all(len(v) == 1 for v in by_block.values())
    assert len({next(iter(v)) for v in by_block.values()}) == len(by_block)
    assert all(0 <= off < geom.size for off in offsets.values())


@pytest.mark.parametrize("package", ["torch", "numpy"])
def test_tensor_indices_broadcast_like_scalar_ones(package):
    """Integer-tensor indices broadcast and give the scalar offsets elementwise."""
    shape = (2, 130, 64)
    geom = G.resolve_geometry(shape, "NVFP4")
    grids = np.meshgrid(*[np.arange(n) for n in shape], indexing="ij")
    index = tuple(torch.from_numpy(g) for g in grids) if package == "torch" else tuple(grids)
    got = np.asarray(G.scale_offset(index, geom))
    want = np.vectorize(lambda *i: G.scale_offset(i, geom))(*grids)
    assert got.shape == shape and (got == want).all()


def test_negative_indices_count_from_the_end():
    """(-1, -1) is the last element."""
    geom = G.resolve_geometry((2, 128, 64), "NVFP4")
    assert G.scale_offset((-1, -1, -1), geom) == G.scale_offset((1, 127, 63), geom)


@pytest.mark.parametrize(
    ("index", "error", "match"),
    [
        ((0, 0), ValueError, "2 entries"),
        ((128, 0, 0), IndexError, r"index\[0\] = 128 is out of range"),
        ((0, 0, 1.5), TypeError, r"index\[2\]"),
        ((0, 0, torch.tensor([0.0])), TypeError, "integer tensor"),
        (5, TypeError, "tuple"),
    ],
)
def test_bad_indices_are_rejected(index, error, match):
    """Wrong length, out-of-range ints, floats and non-sequences raise typed errors."""
    geom = G.resolve_geometry((2, 128, 64), "NVFP4", axis=-2)
    with pytest.raises(error, match=match):
        G.scale_offset(index, geom)
