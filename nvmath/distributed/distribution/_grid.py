"""``ProcessGrid``: the ranks arranged in an N-dimensional grid, for the block distributions."""

from __future__ import annotations

import math
from collections.abc import Sequence
from enum import IntEnum
from typing import Any

import numpy as np

from . import _runtime
from ._check import as_int, as_int_tuple
from ._index import grid_coords, grid_rank

__all__ = ["ProcessGrid"]


class ProcessGrid:
    """An N-dimensional grid of the processes, used by :class:`BlockCyclic` and :class:`BlockNonCyclic`.

    Give either ``shape`` (and ``layout``, which may be left out when one dimension holds every
    process) or ``process_array``, an integer array whose element at grid coordinates ``c`` is the
    rank placed there. The grid must hold every process exactly once, so it can only be made after
    :func:`nvmath.distributed.initialize`. A 2x2 grid in column-major layout::

        +---+---+
        | 0 | 2 |
        +---+---+
        | 1 | 3 |
        +---+---+

    Args:
        shape: the number of processes along each grid dimension (positive integers).
        layout: how ranks are numbered across the grid: :attr:`Layout.ROW_MAJOR` (the last
            coordinate varies fastest) or :attr:`Layout.COL_MAJOR` (the first varies fastest).
        process_array: an explicit arrangement of the ranks (each rank exactly once).

    Raises:
        RuntimeError: the distributed runtime is not initialized.
        ValueError: a missing or inconsistent argument, or a grid size other than the number of
            processes.
        TypeError: ``layout`` is not a :class:`ProcessGrid.Layout`.
    """

    class Layout(IntEnum):
        """How ranks are numbered across a process grid."""

        COL_MAJOR = 0
        ROW_MAJOR = 1

    def __init__(
        self,
        *,
        shape: Sequence[int] | None = None,
        layout: ProcessGrid.Layout | None = None,
        process_array: Any = None,
    ) -> None:
        _, self._nranks = _runtime.current_process()
        if layout is not None and not isinstance(layout, ProcessGrid.Layout):
            raise TypeError(f"layout must be a ProcessGrid.Layout (ROW_MAJOR or COL_MAJOR), got {layout!r}")
        if process_array is None:
            if shape is None:
                raise ValueError("ProcessGrid needs shape (with layout) or process_array; got neither")
            self._shape = as_int_tuple(shape, "shape", 1)
            self._check_size()
            if layout is None and self.partition_dim is None:
                raise ValueError(
                    f"layout is required for a process grid of shape {self._shape} that partitions "
                    "more than one dimension: give ProcessGrid.Layout.ROW_MAJOR or COL_MAJOR"
                )
            self._layout: ProcessGrid.Layout | None = (
                ProcessGrid.Layout.ROW_MAJOR if layout is None else layout
            )
            self._array: np.ndarray | None = None
        else:
            self._array = _rank_array(process_array)
            self._shape = tuple(int(n) for n in self._array.shape)
            if shape is not None and as_int_tuple(shape, "shape", 1) != self._shape:
                raise ValueError(f"shape {tuple(shape)} does not match process_array.shape {self._shape}")
            self._check_size()
            if layout is not None and not np.array_equal(self._array, _layout_array(self._shape, layout)):
                raise ValueError(
                    f"process_array does not number the ranks in {layout.name} order: {self._array.tolist()}"
                )
            self._layout = layout

    def _check_size(self) -> None:
        if math.prod(self._shape) != self._nranks:
            raise ValueError(
                f"process grid of shape {self._shape} has {math.prod(self._shape)} places but there are "
                f"{self._nranks} processes: the sizes must be equal"
            )

    @property
    def shape(self) -> tuple[int, ...]:
        """Number of processes along each grid dimension."""
        return self._shape

    @property
    def layout(self) -> ProcessGrid.Layout | None:
        """Rank numbering (ROW_MAJOR or COL_MAJOR); None for an explicit ``process_array``."""
        return self._layout

    @property
    def process_array(self) -> np.ndarray | None:
        """The explicit rank arrangement (a read-only array), or None when ``layout`` numbers the ranks."""
        return self._array

    @property
    def nranks(self) -> int:
        """Number of processes in the grid."""
        return self._nranks

    @property
    def partition_dim(self) -> int | None:
        """The one grid dimension that holds every process, or None when more than one is partitioned.

        With a single process this is 0.
        """
        return self._shape.index(self._nranks) if self._nranks in self._shape else None

    def coords(self, rank: int) -> tuple[int, ...]:
        """Grid coordinates of ``rank``."""
        rank = as_int(rank, "rank")
        if not 0 <= rank < self._nranks:
            raise ValueError(f"rank must be in [0, {self._nranks}), got {rank}")
        if self._array is None:
            return grid_coords(rank, self._shape, self._layout == ProcessGrid.Layout.ROW_MAJOR)
        return tuple(int(c) for c in np.argwhere(self._array == rank)[0])

    def rank(self, coords: Sequence[int]) -> int:
        """The rank at grid coordinates ``coords``."""
        point = as_int_tuple(coords, "coords", 0, len(self._shape))
        if any(c >= n for c, n in zip(point, self._shape, strict=True)):
            raise ValueError(f"coords {point} lie outside the process grid of shape {self._shape}")
        if self._array is None:
            return grid_rank(point, self._shape, self._layout == ProcessGrid.Layout.ROW_MAJOR)
        return int(self._array[point])

    def promoted(self, ndim: int) -> ProcessGrid:
        """This grid with trailing size-1 dimensions up to ``ndim`` (the rank numbering is unchanged)."""
        extra = (1,) * (ndim - len(self._shape))
        if self._array is None:
            return ProcessGrid(shape=self._shape + extra, layout=self._layout)
        return ProcessGrid(process_array=self._array.reshape(self._shape + extra), layout=self._layout)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ProcessGrid):
            return NotImplemented
        return self._shape == other.shape and _rank_table(self) == _rank_table(other)

    def __hash__(self) -> int:
        return hash(self._shape)

    def __repr__(self) -> str:
        if self._array is not None:
            return f"ProcessGrid(process_array={self._array.tolist()})"
        return f"ProcessGrid(shape={self._shape}, layout=ProcessGrid.Layout.{self._layout.name})"  # type: ignore[union-attr]


def _rank_table(grid: ProcessGrid) -> tuple[int, ...]:
    """The rank at every grid point, in C order (what grid equality compares)."""
    return tuple(grid.rank(point) for point in np.ndindex(*grid.shape))


def _rank_array(process_array: Any) -> np.ndarray:
    """Validate an explicit rank arrangement: integers, each of ``0..size-1`` exactly once."""
    array = np.array(process_array)
    if array.ndim == 0 or array.size == 0:
        raise ValueError(f"process_array must be a non-empty array of ranks, got {process_array!r}")
    if not np.issubdtype(array.dtype, np.integer):
        raise TypeError(f"process_array must hold integer ranks, got dtype {array.dtype}")
    if sorted(array.ravel().tolist()) != list(range(array.size)):
        raise ValueError(
            f"process_array must hold each rank 0..{array.size - 1} exactly once, got {array.tolist()}"
        )
    array.setflags(write=False)
    return array


def _layout_array(shape: tuple[int, ...], layout: ProcessGrid.Layout) -> np.ndarray:
    order = "C" if layout == ProcessGrid.Layout.ROW_MAJOR else "F"
    return np.arange(math.prod(shape)).reshape(shape, order=order)
