"""Pure planning facts of Box FFTs (fft/_boxes.py) and the 3-D lifting of cuFFTMp reshapes: the
distribution argument parsed into box pairs, result shapes against numpy.fft.rfftn / irfftn, the
orientation of the boxes given to cufftXtSetDistribution, the symmetric capacity; and reshapes
of 1-D / 2-D boxes lifted to 3-D moving the same elements (applied with numpy)."""

from __future__ import annotations

import numpy as np
import pytest

from nvmath.distributed.distribution import Box, Slab
from nvmath.distributed.fft._boxes import (
    BoxPair,
    box_capacity_bytes,
    box_fft_traits,
    box_pair,
    distribution_arguments,
)
from nvmath.distributed.fft._layout import ReshapeBoxes, lift_to_3d


def test_box_pair_parses_boxes_and_pairs():
    """Two Boxes, or two (lower, upper) pairs (lists or tuples), give the same BoxPair; anything
    that is no pair of boxes gives None (the slab path then decides)."""
    expected = BoxPair(((0, 0), (2, 4)), ((0, 0), (4, 2)))
    assert box_pair((Box((0, 0), (2, 4)), Box((0, 0), (4, 2))), 2) == expected
    assert box_pair([[(0, 0), [2, 4]], ((0, 0), (4, 2))], 2) == expected
    assert box_pair(Slab.X, 2) is None and box_pair(Box((0,), (2,)), 1) is None
    assert box_pair((Slab.X, Slab.Y), 2) is None
    with pytest.raises(ValueError, match=r"distribution\[1\] .* is 1-D; the operand is 2-D"):
        box_pair((Box((0, 0), (2, 4)), Box((0,), (4,))), 2)
    with pytest.raises(ValueError, match=r"distribution\[0\]: lower .* must not exceed"):
        box_pair((((2, 0), (0, 4)), Box((0, 0), (4, 2))), 2)


@pytest.mark.parametrize("shape", [(6, 5, 8), (6, 5, 7), (9, 6)])
def test_r2c_and_c2r_result_shapes_match_numpy(shape):
    """An R2C on boxes tiling ``shape`` has numpy's rfftn shape; a C2R of that spectrum has the
    real shape of the chosen parity."""
    x = np.zeros(shape)
    half = np.fft.rfftn(x).shape
    whole = lambda s: BoxPair(((0,) * len(s), s), ((0,) * len(s), s))
    r2c = box_fft_traits({0: BoxPair(((0,) * len(shape), shape), ((0,) * len(shape), half))}, "float64", 0,
                         fft_type=None, last_axis_parity="even", what="t")  # fmt: skip
    assert (r2c.fft_type, r2c.result_dtype, r2c.global_result_shape) == ("R2C", "complex128", half)
    parity = "odd" if shape[-1] % 2 else "even"
    c2r = box_fft_traits({0: BoxPair(((0,) * len(shape), half), ((0,) * len(shape), shape))}, "complex64", 0,
                         fft_type="C2R", last_axis_parity=parity, what="t")  # fmt: skip
    assert c2r.global_result_shape == np.fft.irfftn(np.zeros(half), s=shape, axes=range(len(shape))).shape
    assert (c2r.local_shape, c2r.local_result_shape, c2r.result_dtype) == (half, shape, "float32")
    c2c = box_fft_traits({0: whole(shape)}, "complex64", 0, fft_type=None, last_axis_parity="even", what="t")
    assert c2c.global_result_shape == shape


def test_distribution_arguments_are_in_the_forward_orientation():
    """A plan executed forward gets the operand's box as cuFFTMp's input; one executed inverse (a
    C2R, or a C2C run inverse) gets the result's box as input and the operand's as output; the
    strides are dense C strides of each box."""
    pairs = {0: BoxPair(((0, 0, 0), (4, 6, 8)), ((0, 0, 0), (8, 3, 5))),
             1: BoxPair(((4, 0, 0), (8, 6, 8)), ((0, 3, 0), (8, 6, 5)))}  # fmt: skip
    r2c = box_fft_traits(pairs, "float32", 1, fft_type="R2C", last_axis_parity="even", what="t")
    assert distribution_arguments(r2c, -1) == ((4, 0, 0), (8, 6, 8), (0, 3, 0), (8, 6, 5), (48, 8, 1),
                                               (15, 5, 1))  # fmt: skip
    swapped = {r: BoxPair(p.output, p.input) for r, p in pairs.items()}
    c2r = box_fft_traits(swapped, "complex64", 1, fft_type="C2R", last_axis_parity="even", what="t")
    assert distribution_arguments(c2r, 1) == distribution_arguments(r2c, -1)


def test_capacity_is_the_largest_box_of_any_rank():
    """Every rank's buffer holds the largest input or output box of any rank, in its dtype."""
    pairs = {0: BoxPair(((0, 0), (1, 8)), ((0, 0), (4, 5))), 1: BoxPair(((1, 0), (4, 8)), ((0, 0), (0, 0)))}
    assert box_capacity_bytes(pairs, "float32", "complex64") == max(3 * 8 * 4, 4 * 5 * 8)


def test_a_too_small_problem_for_the_ranks_is_refused():
    """cuFFTMp's limit (the first two extents >= the number of ranks) holds for boxes too."""
    pairs = {r: BoxPair(((r, 0), (r + 1, 2)), ((r, 0), (r + 1, 2))) for r in range(3)}
    with pytest.raises(ValueError, match="first two extents"):
        box_fft_traits(pairs, "complex64", 0, fft_type=None, last_axis_parity="even", what="t")


def _apply(boxes: ReshapeBoxes, source: np.ndarray, out_size: int) -> np.ndarray:
    """Move the elements of one box to the other with the boxes' own strides (one rank)."""
    shape_in = tuple(u - lo for lo, u in zip(boxes.lower_input, boxes.upper_input, strict=True))
    shape_out = tuple(u - lo for lo, u in zip(boxes.lower_output, boxes.upper_output, strict=True))
    strided = np.lib.stride_tricks.as_strided
    src = strided(source, shape_in, tuple(s * source.itemsize for s in boxes.strides_input))
    out = np.zeros(out_size, source.dtype)
    dst = strided(out, shape_out, tuple(s * out.itemsize for s in boxes.strides_output))
    dst[...] = src
    return out


@pytest.mark.parametrize(("shape", "strides_in"), [((5,), (1,)), ((4, 6), (6, 1)), ((4, 6), (12, 2))])
def test_lift_to_3d_moves_the_same_elements(shape, strides_in):
    """A 1-D or 2-D reshape lifted to 3-D (leading extents of 1) has rank 3 and moves the same
    elements to the same places (checked on one rank with numpy); 3-D boxes are unchanged."""
    lower = (0,) * len(shape)
    dense = tuple(int(np.prod(shape[i + 1 :])) for i in range(len(shape)))
    boxes = ReshapeBoxes(8, lower, shape, strides_in, lower, shape, dense)
    lifted = lift_to_3d(boxes)
    assert len(lifted.lower_input) == len(lifted.strides_output) == 3
    source = np.arange(int(np.prod(shape)) * max(strides_in), dtype=np.float64)
    size = int(np.prod(shape))
    np.testing.assert_array_equal(_apply(lifted, source, size), _apply(boxes, source, size))
    three = ReshapeBoxes(4, (0, 0, 0), (1, 2, 3), (6, 3, 1), (0, 0, 0), (1, 2, 3), (6, 3, 1))
    assert lift_to_3d(three) is three
