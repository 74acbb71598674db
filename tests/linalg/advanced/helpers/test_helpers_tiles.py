"""Tests of nvmath.linalg.advanced.helpers._tiles (through to_block_scale / expand_block_scale)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nvmath.linalg.advanced.helpers import _geometry as G
from nvmath.linalg.advanced.helpers import _tiles
from nvmath.linalg.advanced.helpers.matmul import expand_block_scale, get_block_scale_offset, to_block_scale

torch = pytest.importorskip("torch")
ml_dtypes = pytest.importorskip("ml_dtypes")


def _random_scales(package, shape, fmt, seed=0):
    rng = np.random.default_rng(seed)
    if fmt == "MXFP8":
        raw = rng.integers(0, 255, size=shape, dtype=np.uint8)
        return torch.from_numpy(raw) if package == "torch" else raw
    values = rng.choice([0.5, 1.0, 2.0, 0.125, 3.0, 448.0, 2.0**-9], size=shape).astype(np.float32)
    if package == "torch":
        return torch.from_numpy(values).to(torch.float8_e4m3fn)
    return values.astype(ml_dtypes.float8_e4m3fn)


def _as_numpy(x):
    if isinstance(x, torch.Tensor):
        return x.view(torch.uint8).numpy() if x.dtype != torch.uint8 else x.numpy()
    return x.view(np.uint8)


@st.composite
def problems(draw):
    fmt = draw(st.sampled_from(["MXFP8", "NVFP4"]))
    block = G.BLOCK_SIZES[G.check_format(fmt)]
    batch = tuple(draw(st.lists(st.integers(1, 3), max_size=2)))
    outer = draw(st.sampled_from([1, 5, 128, 131, 256]))
    blocks = draw(st.integers(1, 9))
    axis = draw(st.sampled_from([-1, -2]))
    matrix = (outer, blocks * block) if axis == -1 else (blocks * block, outer)
    return batch + matrix, axis, fmt


@settings(max_examples=60, deadline=None)
@given(problem=problems(), package=st.sampled_from(["torch", "numpy"]))
def test_to_block_scale_and_back_is_the_identity(problem, package):
    """untile(to_block_scale(dense)) == dense, and expand gives each element its block's entry."""
    shape, axis, fmt = problem
    geom = G.resolve_geometry(shape, fmt, axis)
    dense = _random_scales(package, geom.dense_shape, fmt)
    flat = to_block_scale(dense, shape, fmt, axis=axis)
    assert tuple(flat.shape) == (geom.size,) and flat.dtype == dense.dtype
    assert (_as_numpy(_tiles.untile(flat, geom)) == _as_numpy(dense)).all()
    raw = expand_block_scale(flat, shape, fmt, axis=axis, output_dtype=dense.dtype)
    assert tuple(raw.shape) == shape
    assert (_as_numpy(raw) == np.repeat(_as_numpy(dense), geom.block, axis=geom.axis)).all()


@pytest.mark.parametrize(
    ("shape", "axis", "fmt"),
    [((2, 130, 96), -1, "MXFP8"), ((64, 40), -2, "NVFP4"), ((3, 128, 256), -2, "MXFP8")],
)
def test_entries_sit_at_get_block_scale_offset(shape, axis, fmt):
    """flat[get_block_scale_offset(b)] is the dense scale of block b (the block index along the block
    axis, as in nvmath-python), for every element's block."""
    geom = G.resolve_geometry(shape, fmt, axis)
    scales = _random_scales("torch", geom.dense_shape, fmt, seed=1)
    dense, flat = _as_numpy(scales), _as_numpy(to_block_scale(scales, shape, fmt, axis=axis))
    for idx in itertools.product(*map(range, shape)):
        block_idx = idx[: geom.axis] + (idx[geom.axis] // geom.block,) + idx[geom.axis + 1 :]
        assert flat[get_block_scale_offset(block_idx, shape, fmt, axis=axis)] == dense[block_idx]


def test_padding_entries_are_zero():
    """Entries of partial tiles that no block uses are zero."""
    shape = (130, 96)
    flat = to_block_scale(torch.full((130, 3), 200, dtype=torch.uint8), shape, "MXFP8")
    used = {get_block_scale_offset((i, j), shape, "MXFP8") for i in range(130) for j in range(3)}
    unused = sorted(set(range(flat.numel())) - used)
    assert (
        len(unused) == 256 * 4 - 130 * 3 and (flat[unused] == 0).all() and (flat[sorted(used)] == 200).all()
    )


def test_matches_torch_to_blocked(torch_to_blocked):
    """The layout equals PyTorch's to_blocked (used for torch._scaled_mm), for a and for b."""
    a_scales = torch.randint(0, 255, (200, 7), dtype=torch.uint8)
    assert torch.equal(to_block_scale(a_scales, (200, 7 * 32), "MXFP8"), torch_to_blocked(a_scales))
    b = torch.empty(384, 256).T  # (K, N) column-major; torch passes b's scales as (N, K // 32)
    b_scales = torch.randint(0, 127, (16, 384), dtype=torch.uint8).view(torch.float8_e4m3fn)
    got, want = to_block_scale(b_scales, b, "NVFP4"), torch_to_blocked(b_scales.T.contiguous())
    assert torch.equal(got.view(torch.uint8), want.view(torch.uint8))


def test_non_contiguous_dense_scales_are_read_logically():
    """A transposed view of the dense scales lays out by logical index, not memory order."""
    dense = torch.randint(0, 255, (8, 128), dtype=torch.uint8)
    view = dense.T.contiguous().T
    want = to_block_scale(dense, (256, 128), "MXFP8", axis=-2)
    assert not view.is_contiguous() and torch.equal(to_block_scale(view, (256, 128), "MXFP8", axis=-2), want)


@pytest.mark.parametrize("package", ["torch", "numpy"])
def test_out_is_filled_and_returned(package):
    """to_block_scale(out=buf) writes the layout into buf and returns buf itself."""
    dense = _random_scales(package, (2, 130, 3), "MXFP8")
    want = _as_numpy(to_block_scale(dense, (2, 130, 96), "MXFP8"))
    buf = torch.full((2048,), 7, dtype=torch.uint8) if package == "torch" else np.full(2048, 7, np.uint8)
    got = to_block_scale(dense, (2, 130, 96), "MXFP8", out=buf)
    assert got is buf and (_as_numpy(buf) == want).all()


@pytest.mark.parametrize(
    ("out", "error", "match"),
    [
        (torch.empty(100, dtype=torch.uint8), ValueError, "1-D with 2048"),
        (torch.empty(2048, dtype=torch.int32), ValueError, "dtype"),
        (torch.empty(4096, dtype=torch.uint8)[::2], ValueError, "contiguous"),
        (np.empty(2048, np.uint8), TypeError, "package"),
        (torch.empty(2048, dtype=torch.uint8, device="meta"), ValueError, "device"),
    ],
)
def test_bad_out_is_rejected(out, error, match):
    """out of the wrong length, dtype, strides or package raises before writing."""
    dense = torch.zeros(2, 130, 3, dtype=torch.uint8)
    with pytest.raises(error, match=match):
        to_block_scale(dense, (2, 130, 96), "MXFP8", out=out)


def test_wrong_dense_shape_and_scale_dtype_are_rejected():
    """The dense shape must be the operand's with the block axis divided; dtypes follow the format."""
    with pytest.raises(ValueError, match=r"shape \(128, 4\) .* got \(4, 128\)"):
        to_block_scale(torch.zeros(4, 128, dtype=torch.uint8), (128, 128), "MXFP8")
    with pytest.raises(ValueError, match="float8_e4m3fn for NVFP4 .* got uint8"):
        to_block_scale(torch.zeros(128, 8, dtype=torch.uint8), (128, 128), "NVFP4")
    with pytest.raises(ValueError, match="uint8 or float8_e8m0fnu .* got float32"):
        to_block_scale(torch.zeros(128, 4), (128, 128), "MXFP8")
    with pytest.raises(TypeError, match="scale_tensor must be a torch tensor"):
        to_block_scale([[1, 2]], (128, 128), "MXFP8")


def test_wrong_1d_length_is_rejected():
    """expand_block_scale names the length the operand needs."""
    with pytest.raises(ValueError, match=r"must have shape \(512,\); got \(256,\)"):
        expand_block_scale(torch.zeros(256, dtype=torch.uint8), (128, 128), "MXFP8")


@pytest.mark.parametrize("package", ["torch", "numpy"])
def test_expanded_scales_keep_the_block_axis_contiguous(package):
    """expand_block_scale lays its result out with the block axis of unit stride (b: column-major)."""
    flat = to_block_scale(_random_scales(package, (4, 256), "MXFP8"), (128, 256), "MXFP8", axis=-2)
    expanded = expand_block_scale(flat, (128, 256), "MXFP8", axis=-2)
    strides = (
        expanded.stride() if package == "torch" else tuple(s // expanded.itemsize for s in expanded.strides)
    )
    assert expanded.shape == (128, 256) and strides == (1, 128)
