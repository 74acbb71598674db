"""check_tiling / global_box_shape / as_bounds against numpy: random tilings of P = 1..8 boxes (by
recursive bisection) pass; shrinking, growing or moving one box is caught with the verdict numpy's
coverage count gives, naming the rank (or an element no rank holds)."""

from __future__ import annotations

import re

import numpy as np
import pytest

from nvmath.distributed.distribution import Box
from nvmath.distributed.distribution._tiling import as_bounds, check_tiling, global_box_shape


def bisect(lower, upper, n, rng):
    """``n`` boxes tiling ``[lower, upper)``: cut the longest axis at a random point, recursively."""
    if n == 1:
        return [(tuple(lower), tuple(upper))]
    axis = int(np.argmax(np.subtract(upper, lower)))
    left = n // 2
    extent = upper[axis] - lower[axis]
    cut = lower[axis] + max(1, min(extent - 1, round(extent * left / n) + int(rng.integers(-1, 2))))
    up_a, lo_b = list(upper), list(lower)
    up_a[axis] = lo_b[axis] = cut
    return bisect(lower, up_a, left, rng) + bisect(lo_b, upper, n - left, rng)


def coverage(boxes, shape):
    count = np.zeros(shape, int)
    for lower, upper in boxes:
        count[tuple(slice(a, b) for a, b in zip(lower, upper, strict=True))] += 1
    return count


@pytest.mark.parametrize("nranks", range(1, 9))
@pytest.mark.parametrize("shape", [(9, 8, 7), (12, 5), (10,)])
def test_random_tilings_pass_and_perturbed_ones_fail_like_numpy(nranks, shape):
    """Bisection tilings pass; after moving one face of one box by one, check_tiling raises exactly
    when numpy's coverage count is not all ones (or the box leaves the array), naming the rank for
    overlaps and boxes outside, an uncovered element for gaps."""
    rng = np.random.default_rng(nranks * 31 + len(shape))
    boxes = bisect([0] * len(shape), list(shape), nranks, rng)
    assert global_box_shape(boxes) == shape
    check_tiling(boxes, shape, "test")
    for _ in range(10):
        rank, axis, side, step = (int(rng.integers(nranks)), int(rng.integers(len(shape))),
                                  int(rng.integers(2)), int(rng.choice([-1, 1])))  # fmt: skip
        bounds = [list(boxes[rank][0]), list(boxes[rank][1])]
        bounds[side][axis] += step
        if bounds[0][axis] < 0 or bounds[0][axis] > bounds[1][axis]:
            continue
        changed = list(boxes)
        changed[rank] = (tuple(bounds[0]), tuple(bounds[1]))
        if bounds[1][axis] > shape[axis]:
            with pytest.raises(ValueError, match=f"box of rank {rank} .* reaches outside"):
                check_tiling(changed, shape, "test")
            continue
        count = coverage(changed, shape)
        if (count == 1).all():
            check_tiling(changed, shape, "test")
        elif (count > 1).any():
            with pytest.raises(ValueError, match=rf"rank {rank}\b.*overlap|overlap"):
                check_tiling(changed, shape, "test")
        else:
            with pytest.raises(ValueError, match="no rank holds the element") as info:
                check_tiling(changed, shape, "test")
            element = re.search(r"element \[([\d, ]+)\]", str(info.value)).group(1)
            assert count[tuple(int(i) for i in element.split(","))] == 0


def test_overlap_message_names_both_ranks():
    """Two overlapping boxes are named by rank, lower rank first."""
    boxes = [((0, 0), (2, 4)), ((2, 0), (4, 4)), ((1, 1), (2, 2))]
    with pytest.raises(ValueError, match=r"rank 0 \[\[0, 0\], \[2, 4\]\) and rank 2 .* overlap"):
        check_tiling(boxes, (4, 4), "test")


def test_wrong_dimensionality_names_the_rank():
    """A box of another dimensionality than the global shape is named by rank."""
    with pytest.raises(ValueError, match="box of rank 1 .* is 3-D"):
        check_tiling([((0, 0), (2, 4)), ((2, 0, 0), (4, 4, 1))], (4, 4), "test")


def test_empty_boxes_are_allowed():
    """A rank may hold an empty box (no elements) as long as the others tile the array; empty boxes
    do not widen the global shape, but must lie inside it."""
    boxes = [((0, 0), (4, 4)), ((4, 4), (4, 4)), ((0, 2), (0, 2))]
    assert global_box_shape(boxes) == (4, 4)
    check_tiling(boxes, (4, 4), "test")
    far = [((0, 0), (4, 4)), ((5, 5), (5, 5))]
    assert global_box_shape(far) == (4, 4)
    with pytest.raises(ValueError, match="box of rank 1 .* reaches outside"):
        check_tiling(far, (4, 4), "test")


def test_as_bounds():
    """Boxes and (lower, upper) pairs give int tuples; anything else is refused, naming the argument."""
    assert as_bounds(Box((0, 1), (2, 3)), "d") == ((0, 1), (2, 3))
    assert as_bounds([np.array([0, 1]), (2, 3)], "d") == ((0, 1), (2, 3))
    with pytest.raises(TypeError, match="d must be a Box"):
        as_bounds("box", "d")
    with pytest.raises(ValueError, match="d: lower .* must not exceed upper"):
        as_bounds(((3,), (2,)), "d")
    with pytest.raises(TypeError, match="d: lower"):
        as_bounds(((0.5,), (2,)), "d")
