"""``Distribution.to``: exact conversions between distribution types.

A conversion that depends on the global shape is checked against it when the source is bound
(every rank must own the same elements in the same local order) and refused with
:class:`ConvertDistributionError` otherwise. Unbound conversions are structural and allowed only
where nvmath-python allows them: Slab -> BlockNonCyclic on a one-dimensional grid, and
BlockNonCyclic -> Slab when the grid numbers the ranks in order from the first block.
"""

from __future__ import annotations

from typing import Any

from . import _runtime
from ._block import BlockCyclic, BlockNonCyclic
from ._check import as_extent
from ._distribution import Box, Distribution, Slab, register_converter
from ._errors import ConvertDistributionError
from ._grid import ProcessGrid
from ._ownership import rank_ownership, same_ownership

__all__ = ["convert"]


def convert(source: Distribution, cls: Any, *, ndim: int | None, copy: bool) -> Distribution:
    """Convert ``source`` into an equivalent distribution of type ``cls`` (see :meth:`Distribution.to`)."""
    if not isinstance(cls, type):
        raise TypeError(f"cls must be a Distribution class, got {cls!r}")
    if cls is Distribution or not issubclass(cls, Distribution):
        raise ValueError(
            f"cls must be a concrete Distribution class (Slab, Box, BlockCyclic, BlockNonCyclic), got {cls!r}"
        )
    if ndim is not None:
        ndim = as_extent(ndim, "ndim", 1)
        if source.ndim is not None and ndim < source.ndim:
            raise ValueError(f"ndim ({ndim}) must be >= the dimensionality of {source!r} ({source.ndim})")
    if isinstance(source, Slab):
        return _from_slab(source, cls, ndim, copy)
    if isinstance(source, Box):
        return _from_box(source, cls, ndim, copy)
    if isinstance(source, BlockCyclic):
        return _from_block(source, cls, ndim if ndim is not None else source.ndim, copy)
    raise ConvertDistributionError(f"no conversion from {type(source).__name__} to {cls.__name__}")


def _promoted(global_shape: tuple[int, ...] | None, ndim: int) -> tuple[int, ...] | None:
    return None if global_shape is None else global_shape + (1,) * (ndim - len(global_shape))


def _bound_like(target: Distribution, global_shape: tuple[int, ...] | None) -> Distribution:
    return target if global_shape is None else target.bind(global_shape)


def _check_exact(source: Distribution, target: Distribution, global_shape: tuple[int, ...]) -> None:
    _, nranks = _runtime.current_process()
    if not same_ownership(source, target, global_shape, nranks):
        raise ConvertDistributionError(
            f"{source!r} and {target!r} place the elements of global shape {global_shape} differently "
            f"over {nranks} processes: no exact conversion"
        )


def _from_slab(source: Slab, cls: type, ndim: int | None, copy: bool) -> Distribution:
    if ndim is not None and source.partition_dim >= ndim:
        raise ValueError(
            f"ndim ({ndim}) must exceed the partition dimension {source.partition_dim} of {source!r}"
        )
    target_ndim = ndim if ndim is not None else source.ndim
    if cls is Slab:
        if target_ndim != source.ndim:
            shape = _promoted(source.global_shape, target_ndim)  # type: ignore[arg-type]
            return _bound_like(Slab(source.partition_dim, target_ndim), shape)
        return source.copy() if copy else source
    if cls is Box and source.global_shape is None:
        raise ConvertDistributionError(
            f"{source!r} is not bound: bind it to a global shape before converting to Box"
        )
    if target_ndim is None:
        raise ConvertDistributionError(
            f"{source!r} has no dimensionality: pass ndim to convert it to {cls.__name__}"
        )
    shape = _promoted(source.global_shape, target_ndim)
    if issubclass(cls, BlockCyclic):
        _, nranks = _runtime.current_process()
        grid_shape = tuple(nranks if d == source.partition_dim else 1 for d in range(target_ndim))
        target = BlockNonCyclic(ProcessGrid(shape=grid_shape, layout=ProcessGrid.Layout.ROW_MAJOR))
        if shape is not None:
            _check_exact(Slab(source.partition_dim, target_ndim), target, shape)
        return _bound_like(target, shape)
    if cls is Box:
        return _this_rank_box(Slab(source.partition_dim, target_ndim), shape)  # type: ignore[arg-type]
    raise ConvertDistributionError(f"no conversion from Slab to {cls.__name__}")


def _from_box(source: Box, cls: type, ndim: int | None, copy: bool) -> Distribution:
    if cls is not Box:
        raise ConvertDistributionError(
            f"a Box describes only this process's part; it cannot be converted to {cls.__name__} without the other ranks' boxes"
        )
    if ndim is not None and ndim > source.ndim:
        extra = ndim - source.ndim
        target = Box(source.lower + (0,) * extra, source.upper + (1,) * extra)
        return _bound_like(target, _promoted(source.global_shape, ndim))
    return source.copy() if copy else source


def _from_block(source: BlockCyclic, cls: type, ndim: int, copy: bool) -> Distribution:
    shape = _promoted(source.global_shape, ndim)
    if issubclass(cls, BlockCyclic):
        if cls is BlockNonCyclic and not isinstance(source, BlockNonCyclic):
            return _block_to_noncyclic(source, ndim, shape)
        if ndim > source.ndim:
            return _bound_like(_promote_block(source, ndim), shape)
        return source.copy() if copy else source
    if cls is Slab:
        return _block_to_slab(source, ndim, shape)
    if cls is Box:
        if shape is None:
            raise ConvertDistributionError(
                f"{source!r} is not bound: bind it to a global shape before converting to Box"
            )
        return _this_rank_box(_promote_block(source, ndim), shape)
    raise ConvertDistributionError(f"no conversion from {type(source).__name__} to {cls.__name__}")


def _promote_block(source: BlockCyclic, ndim: int) -> BlockCyclic:
    if ndim == source.ndim:
        return source
    extra = ndim - source.ndim
    grid = source.process_grid.promoted(ndim)
    first = source.first_process + (0,) * extra
    if isinstance(source, BlockNonCyclic):
        return BlockNonCyclic(grid, first_process=first)
    return BlockCyclic(grid, source.block_sizes + (1,) * extra, first_process=first)


def _block_to_noncyclic(source: BlockCyclic, ndim: int, shape: tuple[int, ...] | None) -> Distribution:
    if shape is None:
        raise ConvertDistributionError(
            f"{source!r} is not bound: whether its blocks are one per process depends on the global shape; bind it first"
        )
    promoted = _promote_block(source, ndim)
    target = BlockNonCyclic(promoted.process_grid, first_process=promoted.first_process)
    _check_exact(promoted, target, shape)
    return target.bind(shape)


def _block_to_slab(source: BlockCyclic, ndim: int, shape: tuple[int, ...] | None) -> Distribution:
    grid = source.process_grid
    dim = grid.partition_dim
    if dim is None:
        raise ConvertDistributionError(f"{source!r} splits more than one dimension; a Slab splits one")
    target = Slab(dim, ndim)
    if shape is not None:
        _check_exact(_promote_block(source, ndim), target, shape)
        return target.bind(shape)
    if not isinstance(source, BlockNonCyclic):
        raise ConvertDistributionError(
            f"{source!r} is not bound: a cyclic layout rarely matches a Slab; bind it first (or use BlockNonCyclic)"
        )
    in_order = source.first_process[dim] == 0 and all(grid.coords(r)[dim] == r for r in range(grid.nranks))
    if not in_order:
        raise ConvertDistributionError(
            f"{source!r} does not give the first block to rank 0, the next to rank 1, ...: not a Slab"
        )
    return target


def _this_rank_box(layout: Distribution, shape: tuple[int, ...]) -> Box:
    """This process's part under ``layout`` as a Box; refused when it is not one contiguous box."""
    rank, nranks = _runtime.current_process()
    ownership = rank_ownership(layout, shape, nranks, rank)
    if any(len(intervals) > 1 for intervals in ownership):
        raise ConvertDistributionError(f"rank {rank}'s part under {layout!r} is not one contiguous box")
    lower = tuple(intervals[0][0] if intervals else 0 for intervals in ownership)
    upper = tuple(intervals[0][1] if intervals else 0 for intervals in ownership)
    return Box(lower, upper).bind(shape)


register_converter(convert)
