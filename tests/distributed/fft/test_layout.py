"""Pure memory layouts of cuFFTMp's in-place slab FFTs (nvmath.distributed.fft._layout), checked with
numpy: padded real rows, views that fit every rank's buffer, and reshape boxes that tile the array."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from nvmath.distributed.fft._layout import (
    engine_output_view,
    operand_view,
    padded_extent,
    reshape_boxes,
    result_view,
    slab_capacity_bytes,
    slab_offset,
)
from nvmath.distributed.fft._traits import slab_fft_traits, slab_shape


def test_padded_extent_holds_the_complex_half_spectrum():
    """A real row of n is padded to 2 * (n // 2 + 1) reals: exactly the n // 2 + 1 complex results."""
    for n in range(1, 40):
        assert padded_extent(n) == 2 * (n // 2 + 1) and padded_extent(n) >= n


def test_r2c_operand_is_padded_and_result_is_dense_complex():
    """An R2C X-slab operand has padded rows; its result (redistributed) is C-contiguous complex."""
    traits = slab_fft_traits((6, 4, 10), "float32", 0, 1, 2, fft_type="R2C")
    op = operand_view(traits)
    assert (op.shape, op.strides, op.dtype) == ((3, 4, 10), (48, 12, 1), "float32")
    res = result_view(traits)
    assert (res.shape, res.strides, res.dtype) == ((3, 4, 6), (24, 6, 1), "complex64")
    assert op.nbytes == res.nbytes  # the same bytes, read as real or complex


def test_c2r_result_is_padded_real_and_engine_writes_the_complementary_slab():
    """A C2R's real result has padded rows; cuFFTMp leaves it in the other slab first."""
    traits = slab_fft_traits((5, 4, 4), "complex128", 0, 0, 2, fft_type="C2R", last_axis_parity="odd")
    assert traits.global_result_shape == (5, 4, 7)
    res = result_view(traits)
    assert (res.shape, res.strides, res.dtype) == ((3, 4, 7), (32, 8, 1), "float64")
    out = engine_output_view(traits, 0, 2)
    assert (out.shape, out.strides) == ((5, 2, 7), (16, 8, 1))


def test_c2c_views_are_c_contiguous():
    """Complex operand and result are dense C order, the result in the complementary slab when
    redistribute=False."""
    traits = slab_fft_traits((7, 5), "complex64", 1, 2, 3, redistribute=False)
    assert operand_view(traits).shape == (7, 1) and operand_view(traits).strides == (1, 1)
    assert result_view(traits).shape == (2, 5) and result_view(traits).strides == (5, 1)


@pytest.mark.parametrize("nranks", [1, 2, 3, 4])
@pytest.mark.parametrize(
    ("shape", "dtype", "partition", "fft_type"),
    [((9, 7, 5), "complex64", 0, None), ((8, 6, 11), "float64", 1, None), ((6, 5), "float32", 0, None),
     ((5, 9), "complex128", 1, "C2R"), ((4, 7, 3), "complex64", 0, "C2R")],
)  # fmt: skip
def test_capacity_fits_every_view_of_every_rank(nranks, shape, dtype, partition, fft_type):
    """The symmetric size fits each rank's operand, engine output and result under either
    redistribute setting, and is attained by some rank (no over-allocation)."""
    capacity = slab_capacity_bytes(shape, dtype, partition, nranks, fft_type=fft_type)
    sizes = []
    for rank, redistribute in itertools.product(range(nranks), (True, False)):
        t = slab_fft_traits(
            shape, dtype, partition, rank, nranks, fft_type=fft_type, redistribute=redistribute
        )
        sizes += [operand_view(t).nbytes, result_view(t).nbytes, engine_output_view(t, rank, nranks).nbytes]
    assert max(sizes) == capacity


def test_padded_buffer_round_trip_matches_numpy_rfftn():
    """Real data in the padded operand view, transformed and written through the complex result
    view of the same bytes, reads back as numpy's rfftn (the views alias correctly)."""
    rng = np.random.default_rng(0)
    traits = slab_fft_traits((4, 6, 9), "float64", 0, 0, 1)
    op, res = operand_view(traits), result_view(traits)
    buffer = np.zeros(slab_capacity_bytes((4, 6, 9), "float64", 0, 1), np.uint8)

    def as_view(v):
        item = np.dtype(v.dtype).itemsize
        return np.lib.stride_tricks.as_strided(
            buffer.view(v.dtype), v.shape, tuple(s * item for s in v.strides)
        )

    x = rng.standard_normal((4, 6, 9))
    as_view(op)[...] = x
    spectrum = np.fft.rfftn(as_view(op).copy())
    as_view(res)[...] = spectrum
    np.testing.assert_allclose(as_view(res), np.fft.rfftn(x), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("nranks", [1, 2, 3, 5])
@pytest.mark.parametrize(("shape", "dtype", "partition", "fft_type"),
                         [((7, 6, 5), "complex64", 0, None), ((6, 5, 8), "float32", 1, None),
                          ((6, 7, 3), "complex128", 0, "C2R")])  # fmt: skip
def test_reshape_boxes_move_the_engine_output_to_the_result_slab(nranks, shape, dtype, partition, fft_type):
    """Applying every rank's reshape boxes with numpy turns the complementary slabs of a global
    array into the result slabs (the boxes tile the array; strides address the padded rows)."""
    traits = [slab_fft_traits(shape, dtype, partition, r, nranks, fft_type=fft_type) for r in range(nranks)]
    rng = np.random.default_rng(1)
    full = rng.standard_normal(traits[0].global_result_shape)
    out = np.full(full.shape, np.nan)
    for rank, t in enumerate(traits):
        boxes = reshape_boxes(t, rank, nranks)
        src = tuple(slice(lo, hi) for lo, hi in zip(boxes.lower_input, boxes.upper_input, strict=True))
        dst = tuple(slice(lo, hi) for lo, hi in zip(boxes.lower_output, boxes.upper_output, strict=True))
        assert full[src].shape == engine_output_view(t, rank, nranks).shape
        assert out[dst].shape == result_view(t).shape and boxes.strides_output == result_view(t).strides
        assert np.all(np.isnan(out[dst]))  # no two ranks write the same element
        out[dst] = full[dst]
        assert boxes.element_size == np.dtype(t.result_dtype).itemsize
    np.testing.assert_array_equal(out, full)


def test_slab_offset_matches_slab_shapes():
    """Offsets are the running sum of the slab extents (the first n % P ranks one larger)."""
    for n, p in itertools.product(range(1, 12), range(1, 6)):
        extents = [slab_shape((n,), 0, r, p)[0] for r in range(p)]
        assert [slab_offset(n, r, p) for r in range(p)] == list(np.cumsum([0] + extents)[:-1])
