"""Pure checks that one box per rank tiles a global array (no runtime, no communication).

The distributed FFT with Box distributions and :class:`~nvmath.distributed.distribution.Redistribute`
gather every rank's box in one collective, then run these checks on the gathered list: every rank
holds the same list, so every rank raises the same error, which names the ranks at fault (or, for
a gap, an element no rank holds).

A box here is a ``(lower, upper)`` pair of int tuples: the global indices ``lower <= i < upper``.
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Sequence
from typing import Any

from ._distribution import Box

__all__ = ["BoxBounds", "as_bounds", "check_tiling", "global_box_shape"]

BoxBounds = tuple[tuple[int, ...], tuple[int, ...]]

_GAP_SEARCH_CELLS = 1 << 20
"""The largest compressed grid searched for an element no box holds (beyond: only the count)."""


def as_bounds(box: Any, name: str) -> BoxBounds:
    """``(lower, upper)`` of a :class:`Box` or of a ``(lower, upper)`` pair of integer sequences.

    Raises:
        TypeError: neither a Box nor a pair of sequences of integers.
        ValueError: lower and upper differ in length, are negative or ``lower > upper``.
    """
    if isinstance(box, Box):
        return box.lower, box.upper
    if isinstance(box, (tuple, list)) and len(box) == 2:
        try:
            checked = Box(*box)
        except (TypeError, ValueError) as exc:
            raise type(exc)(f"{name}: {exc}") from None
        return checked.lower, checked.upper
    raise TypeError(f"{name} must be a Box or a (lower, upper) pair of integer sequences; got {box!r}")


def global_box_shape(boxes: Sequence[BoxBounds]) -> tuple[int, ...]:
    """The smallest global shape holding every non-empty box: the largest ``upper`` along each
    dimension (the boxes must have one dimensionality; :func:`check_tiling` checks the rest)."""
    full = [b for b in boxes if all(lo < up for lo, up in zip(*b, strict=True))] or list(boxes)
    return tuple(max(upper[d] for _, upper in full) for d in range(len(boxes[0][1])))


def _overlap(a: BoxBounds, b: BoxBounds) -> bool:
    return all(max(la, lb) < min(ua, ub) for la, lb, ua, ub in zip(a[0], b[0], a[1], b[1], strict=True))


def _gap(boxes: Sequence[BoxBounds], shape: tuple[int, ...]) -> tuple[int, ...] | None:
    """An element no box holds, searched on the grid of the boxes' boundaries (``None`` if that grid
    is too large to search)."""
    cuts = [sorted({0, n, *(b[0][d] for b in boxes), *(b[1][d] for b in boxes)}) for d, n in enumerate(shape)]
    if math.prod(len(c) for c in cuts) > _GAP_SEARCH_CELLS:
        return None
    for cell in itertools.product(*(c[:-1] for c in cuts)):
        if not any(all(lo <= i < up for i, lo, up in zip(cell, *b, strict=True)) for b in boxes):
            return cell
    return None


def check_tiling(boxes: Sequence[BoxBounds], shape: tuple[int, ...], what: str) -> None:
    """Raise unless ``boxes`` (rank ``r``'s box at index ``r``) tile an array of ``shape`` exactly.

    Args:
        boxes: every rank's box, by rank.
        shape: the global shape they must tile.
        what: names the operation and the side, for the message (``"the FFT's input boxes"``).

    Raises:
        ValueError: a box of another dimensionality or reaching outside ``shape`` (naming its
            rank), two boxes overlapping (naming both ranks), or elements that no box holds.
    """
    for rank, (lower, upper) in enumerate(boxes):
        if len(lower) != len(shape):
            raise ValueError(
                f"{what}: the box of rank {rank} {list(lower)}..{list(upper)} is {len(lower)}-D; the "
                f"global shape {shape} is {len(shape)}-D"
            )
        if any(u > n for u, n in zip(upper, shape, strict=True)):
            raise ValueError(
                f"{what}: the box of rank {rank} [{list(lower)}, {list(upper)}) reaches outside the "
                f"global shape {shape}"
            )
    nonempty = [(r, b) for r, b in enumerate(boxes) if all(lo < up for lo, up in zip(*b, strict=True))]
    starts = sorted((b[0][0], r) for r, b in nonempty)  # sweep along dimension 0: O(P log P + overlaps)
    by_rank = dict(nonempty)
    for i, (start, r) in enumerate(starts):
        stop = by_rank[r][1][0]
        for _, s in starts[i + 1 : bisect.bisect_left(starts, (stop, -1))]:
            if _overlap(by_rank[r], by_rank[s]):
                first, second = sorted((r, s))
                raise ValueError(
                    f"{what}: the boxes of rank {first} {_text(boxes[first])} and rank {second} "
                    f"{_text(boxes[second])} overlap"
                )
    covered = sum(math.prod(u - lo for lo, u in zip(*b, strict=True)) for _, b in nonempty)
    total = math.prod(shape)
    if covered != total:
        gap = _gap([b for _, b in nonempty], shape)
        example = "" if gap is None else f"; no rank holds the element {list(gap)}"
        raise ValueError(
            f"{what}: the boxes of the {len(boxes)} ranks hold {covered} of the {total} elements of "
            f"the global shape {shape}{example}. The boxes must tile the global array."
        )


def _text(box: BoxBounds) -> str:
    return f"[{list(box[0])}, {list(box[1])})"
