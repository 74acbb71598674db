"""Redistribution plans: which global elements each (source rank, destination rank) pair exchanges.

Pure functions (``nranks`` explicit). ``Redistribute`` and the DTensor glue turn a plan into
engine calls; tests apply it with numpy. Along each dimension the elements one pair exchanges
are a list of :class:`Segment` s (global range plus where it sits in the two local arrays); the
exchanged set is their Cartesian product over the dimensions.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from ._index import DimIntervals, Ownership
from ._ownership import Layout, check_layout, rank_ownership

__all__ = ["Exchange", "Segment", "redistribution_plan"]


@dataclass(frozen=True)
class Segment:
    """Global indices ``start:stop`` along one dimension, at ``src_offset`` / ``dst_offset`` locally."""

    start: int
    stop: int
    src_offset: int
    dst_offset: int

    @property
    def length(self) -> int:
        """Number of indices in the segment."""
        return self.stop - self.start


@dataclass(frozen=True)
class Exchange:
    """The elements rank ``src_rank`` sends to rank ``dst_rank`` (a rank may send to itself)."""

    src_rank: int
    dst_rank: int
    segments: tuple[tuple[Segment, ...], ...]

    @property
    def size(self) -> int:
        """Number of elements exchanged."""
        return math.prod(sum(s.length for s in dim) for dim in self.segments)

    def boxes(self) -> Iterator[tuple[tuple[int, ...], tuple[int, ...]]]:
        """The exchanged elements as global ``(lower, upper)`` boxes."""
        for parts in itertools.product(*self.segments):
            yield tuple(s.start for s in parts), tuple(s.stop for s in parts)

    def slices(self) -> Iterator[tuple[tuple[slice, ...], tuple[slice, ...]]]:
        """For each box, the slices of the source local array and of the destination local array."""
        for parts in itertools.product(*self.segments):
            src = tuple(slice(s.src_offset, s.src_offset + s.length) for s in parts)
            dst = tuple(slice(s.dst_offset, s.dst_offset + s.length) for s in parts)
            yield src, dst


def redistribution_plan(
    source: Layout, target: Layout, global_shape: Sequence[int], nranks: int
) -> tuple[Exchange, ...]:
    """Every non-empty exchange that turns ``source``-distributed local arrays into ``target``-distributed ones.

    Args:
        source: the distribution of the input (a Slab, block distribution, or one Box per rank).
        target: the distribution of the output.
        global_shape: the global array shape.
        nranks: the number of processes.

    Returns:
        The exchanges, ordered by source rank then destination rank.
    """
    shape = check_layout(source, global_shape, nranks)
    check_layout(target, shape, nranks)
    sources = [rank_ownership(source, shape, nranks, r) for r in range(nranks)]
    targets = [rank_ownership(target, shape, nranks, r) for r in range(nranks)]
    plan = []
    for src_rank, src in enumerate(sources):
        for dst_rank, dst in enumerate(targets):
            segments = _pair_segments(src, dst)
            if segments is not None:
                plan.append(Exchange(src_rank, dst_rank, segments))
    return tuple(plan)


def _pair_segments(src: Ownership, dst: Ownership) -> tuple[tuple[Segment, ...], ...] | None:
    per_dim = []
    for a, b in zip(src, dst, strict=True):
        segments = _intersect(a, b)
        if not segments:
            return None
        per_dim.append(segments)
    return tuple(per_dim)


def _with_offsets(intervals: DimIntervals) -> list[tuple[int, int, int]]:
    """``(start, stop, local offset)`` of each interval in a local array holding them in order."""
    out, offset = [], 0
    for start, stop in intervals:
        out.append((start, stop, offset))
        offset += stop - start
    return out


def _intersect(a: DimIntervals, b: DimIntervals) -> tuple[Segment, ...]:
    """The overlaps of two increasing interval lists, with their local offsets on both sides."""
    left, right = _with_offsets(a), _with_offsets(b)
    i = j = 0
    out = []
    while i < len(left) and j < len(right):
        a_start, a_stop, a_off = left[i]
        b_start, b_stop, b_off = right[j]
        start, stop = max(a_start, b_start), min(a_stop, b_stop)
        if start < stop:
            out.append(Segment(start, stop, a_off + start - a_start, b_off + start - b_start))
        if a_stop <= b_stop:
            i += 1
        else:
            j += 1
    return tuple(out)
