"""Pure index arithmetic of the distributions: no objects, no runtime, ``nranks`` always explicit.

Conventions: an *interval* is a half-open ``(start, stop)`` pair of global indices along one
dimension; a rank's ownership along a dimension is a tuple of disjoint, increasing, non-empty
intervals; the rank's local array holds the owned indices of every dimension in increasing global
order (the ScaLAPACK convention), so its local shape is the total length per dimension.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

__all__ = [
    "DimIntervals",
    "Interval",
    "Ownership",
    "block_cyclic_intervals",
    "grid_coords",
    "grid_rank",
    "merge_intervals",
    "noncyclic_block_size",
    "normalize_ownership",
    "numroc",
    "ownership_shape",
    "slab_interval",
]

Interval = tuple[int, int]
DimIntervals = tuple[Interval, ...]
Ownership = tuple[DimIntervals, ...]


def slab_interval(extent: int, nranks: int, rank: int) -> Interval:
    """The indices ``rank`` owns when ``extent`` indices are split over ``nranks`` slabs.

    The first ``extent % nranks`` ranks own ``extent // nranks + 1`` indices, the others
    ``extent // nranks``; rank 0 owns the lowest indices.
    """
    base, extra = divmod(extent, nranks)
    start = rank * base + min(rank, extra)
    return start, start + base + (1 if rank < extra else 0)


def numroc(extent: int, block: int, coord: int, first: int, nprocs: int) -> int:
    """Number of the ``extent`` indices owned by grid coordinate ``coord`` (ScaLAPACK ``NUMROC``).

    Blocks of ``block`` indices are dealt round-robin over ``nprocs`` processes, the first one to
    coordinate ``first``; the last block may be partial.
    """
    distance = (coord - first) % nprocs
    full_blocks, tail = divmod(extent, block)
    count = (full_blocks // nprocs) * block
    leftover = full_blocks % nprocs
    if distance < leftover:
        count += block
    elif distance == leftover:
        count += tail
    return count


def block_cyclic_intervals(extent: int, block: int, coord: int, first: int, nprocs: int) -> DimIntervals:
    """The global intervals owned by grid coordinate ``coord`` (the blocks that :func:`numroc` counts)."""
    distance = (coord - first) % nprocs
    starts = range(distance * block, extent, nprocs * block)
    return merge_intervals((start, min(start + block, extent)) for start in starts)


def noncyclic_block_size(extent: int, nprocs: int) -> int:
    """Block size of a block distribution without cycles: ``ceil(extent / nprocs)`` (at least 1)."""
    return max(1, -(-extent // nprocs))


def grid_coords(rank: int, grid_shape: Sequence[int], row_major: bool) -> tuple[int, ...]:
    """Coordinates of ``rank`` in a process grid numbered in row-major (C) or column-major (F) order."""
    coords = []
    dims = reversed(grid_shape) if row_major else grid_shape
    for size in dims:
        rank, coord = divmod(rank, size)
        coords.append(coord)
    return tuple(reversed(coords)) if row_major else tuple(coords)


def grid_rank(coords: Sequence[int], grid_shape: Sequence[int], row_major: bool) -> int:
    """Inverse of :func:`grid_coords`."""
    pairs = list(zip(coords, grid_shape, strict=True))
    if not row_major:
        pairs.reverse()
    rank = 0
    for coord, size in pairs:
        rank = rank * size + coord
    return rank


def merge_intervals(intervals: Iterable[Interval]) -> DimIntervals:
    """Drop empty intervals and join touching ones; the input must be increasing and disjoint."""
    merged: list[list[int]] = []
    for start, stop in intervals:
        if stop <= start:
            continue
        if merged and merged[-1][1] == start:
            merged[-1][1] = stop
        else:
            merged.append([start, stop])
    return tuple((start, stop) for start, stop in merged)


def normalize_ownership(per_dim: Sequence[Sequence[Interval]]) -> Ownership:
    """Merge each dimension's intervals; a rank empty along one dimension owns nothing at all."""
    merged = tuple(merge_intervals(intervals) for intervals in per_dim)
    if any(not intervals for intervals in merged):
        return tuple(() for _ in merged)
    return merged


def ownership_shape(ownership: Ownership) -> tuple[int, ...]:
    """Local shape of a rank's array: the number of owned indices along each dimension."""
    return tuple(sum(stop - start for start, stop in intervals) for intervals in ownership)
