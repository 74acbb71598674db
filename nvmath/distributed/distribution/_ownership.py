"""Global index ranges owned by each rank, for any distribution (pure: ``nranks`` explicit).

A *layout* here is a :class:`Slab`, :class:`BlockCyclic` / :class:`BlockNonCyclic`, or a sequence
of one :class:`Box` per rank (a single ``Box`` only knows its own rank's part).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from ._block import BlockCyclic, block_sizes_for
from ._check import as_extent, as_shape
from ._distribution import Box, Distribution, Slab, check_rank
from ._index import Ownership, block_cyclic_intervals, normalize_ownership, slab_interval

__all__ = ["Layout", "check_layout", "ownership_map", "rank_ownership", "same_ownership"]

Layout = Distribution | Sequence[Box]


def check_layout(layout: Layout, global_shape: Sequence[int], nranks: int) -> tuple[int, ...]:
    """Validate ``layout`` against ``global_shape`` and ``nranks``; return the shape as a tuple.

    Raises:
        ValueError: the dimensionality differs, a process grid or box list does not have
            ``nranks`` members, or boxes overlap, leave a gap or reach outside the array.
        TypeError: ``layout`` is not a distribution or a sequence of boxes.
    """
    shape = as_shape(global_shape)
    as_extent(nranks, "nranks", 1)
    if isinstance(layout, Slab):
        if layout.ndim not in (None, len(shape)) or layout.partition_dim >= len(shape):
            raise ValueError(f"{layout!r} does not fit a {len(shape)}-D global shape {shape}")
    elif isinstance(layout, BlockCyclic):
        if layout.ndim != len(shape):
            raise ValueError(f"{layout!r} is {layout.ndim}-D; global shape {shape} is {len(shape)}-D")
        if layout.process_grid.nranks != nranks:
            raise ValueError(
                f"the process grid of {layout!r} holds {layout.process_grid.nranks} ranks, not nranks={nranks}"
            )
    elif isinstance(layout, Box):
        raise TypeError("a single Box describes one rank's part: give a sequence of one Box per rank")
    elif isinstance(layout, Sequence) and all(isinstance(box, Box) for box in layout):
        _check_boxes(layout, shape, nranks)
    else:
        raise TypeError(f"expected a Slab, BlockCyclic, BlockNonCyclic or a sequence of Box, got {layout!r}")
    return shape


def _check_boxes(boxes: Sequence[Box], shape: tuple[int, ...], nranks: int) -> None:
    """The boxes (one per rank) must tile the global array exactly."""
    if len(boxes) != nranks:
        raise ValueError(f"expected one Box per rank ({nranks}), got {len(boxes)}")
    for box in boxes:
        box.check_inside(shape)
    for i, a in enumerate(boxes):
        for j in range(i + 1, len(boxes)):
            b = boxes[j]
            if all(max(a.lower[d], b.lower[d]) < min(a.upper[d], b.upper[d]) for d in range(len(shape))):
                raise ValueError(f"the boxes of rank {i} {a!r} and rank {j} {b!r} overlap")
    covered = sum(math.prod(box.box_shape) for box in boxes)
    if covered != math.prod(shape):
        raise ValueError(
            f"the boxes cover {covered} of the {math.prod(shape)} elements of global shape {shape}"
        )


def rank_ownership(layout: Layout, global_shape: tuple[int, ...], nranks: int, rank: int) -> Ownership:
    """The global intervals ``rank`` owns along each dimension (``layout`` already checked)."""
    rank = check_rank(rank, nranks)
    if isinstance(layout, Slab):
        dim = layout.partition_dim
        return tuple(
            (slab_interval(n, nranks, rank),) if d == dim else ((0, n),) for d, n in enumerate(global_shape)
        )
    if isinstance(layout, BlockCyclic):
        grid = layout.process_grid
        coords = grid.coords(rank)
        blocks = block_sizes_for(layout, global_shape)
        parts = zip(global_shape, blocks, coords, layout.first_process, grid.shape, strict=True)
        return tuple(block_cyclic_intervals(*part) for part in parts)
    box = layout[rank]  # type: ignore[index]
    return tuple(((a, b),) if b > a else () for a, b in zip(box.lower, box.upper, strict=True))


def ownership_map(layout: Layout, global_shape: Sequence[int], nranks: int) -> tuple[Ownership, ...]:
    """The ownership of every rank, after validating the layout."""
    shape = check_layout(layout, global_shape, nranks)
    return tuple(rank_ownership(layout, shape, nranks, rank) for rank in range(nranks))


def same_ownership(a: Layout, b: Layout, global_shape: Sequence[int], nranks: int) -> bool:
    """True when every rank owns exactly the same elements, in the same local order, under both."""
    first = ownership_map(a, global_shape, nranks)
    second = ownership_map(b, global_shape, nranks)
    return all(normalize_ownership(x) == normalize_ownership(y) for x, y in zip(first, second, strict=True))
