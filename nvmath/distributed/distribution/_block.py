"""``BlockCyclic`` and ``BlockNonCyclic``: blocks dealt over a :class:`ProcessGrid` (ScaLAPACK / PBLAS style)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from . import _runtime
from ._check import as_int_tuple, as_shape
from ._distribution import Distribution, check_rank
from ._errors import BindDistributionError
from ._grid import ProcessGrid
from ._index import noncyclic_block_size, numroc

__all__ = ["BlockCyclic", "BlockNonCyclic", "block_sizes_for"]


class BlockCyclic(Distribution):
    """Blocks of ``block_sizes`` dealt round-robin over the process grid along each dimension.

    Along dimension ``d`` the global indices are cut into blocks of ``block_sizes[d]`` (the last
    may be partial); block ``k`` goes to grid coordinate ``(first_process[d] + k) % grid.shape[d]``.
    A process's local array holds its blocks in global order (ScaLAPACK's ``NUMROC`` gives its
    extent). cuBLASMp uses the 2-D case.

    Args:
        process_grid: the :class:`ProcessGrid`; its dimensionality is the distribution's.
        block_sizes: the block size along each dimension (positive integers).
        first_process: grid coordinates of the process holding the first block (default all 0).
    """

    def __init__(
        self,
        process_grid: ProcessGrid,
        block_sizes: Sequence[int],
        *,
        first_process: Sequence[int] | None = None,
    ) -> None:
        self._init_grid(process_grid, first_process)
        self._block_sizes = as_int_tuple(block_sizes, "block_sizes", 1, self.ndim)

    def _init_grid(self, process_grid: Any, first_process: Sequence[int] | None) -> None:
        if not isinstance(process_grid, ProcessGrid):
            raise TypeError(
                f"process_grid must be a ProcessGrid, got {process_grid!r} ({type(process_grid).__name__})"
            )
        self._process_grid = process_grid
        ndim = len(process_grid.shape)
        if first_process is None:
            self._first_process = (0,) * ndim
            return
        self._first_process = as_int_tuple(first_process, "first_process", 0, ndim)
        if any(c >= n for c, n in zip(self._first_process, process_grid.shape, strict=True)):
            raise ValueError(
                f"first_process {self._first_process} lies outside the process grid of shape {process_grid.shape}"
            )

    @property
    def process_grid(self) -> ProcessGrid:
        """The process grid."""
        return self._process_grid

    @property
    def ndim(self) -> int:
        return len(self._process_grid.shape)

    @property
    def block_sizes(self) -> tuple[int, ...]:
        """The block size along each dimension."""
        return self._block_sizes

    @property
    def first_process(self) -> tuple[int, ...]:
        """Grid coordinates of the process that holds the first block."""
        return self._first_process

    def _check_fits(self, global_shape: tuple[int, ...]) -> None:
        if len(global_shape) != self.ndim:
            raise ValueError(
                f"global_shape {global_shape} has {len(global_shape)} dimensions; the process grid "
                f"{self._process_grid.shape} has {self.ndim}"
            )

    def shape(self, rank: int, global_shape: Sequence[int] | None = None) -> tuple[int, ...]:
        """The local shape of process ``rank`` (``NUMROC`` along each dimension)."""
        rank = check_rank(rank, self._process_grid.nranks)
        resolved = self._resolve_global_shape(global_shape)
        self._check_fits(resolved)
        return block_local_shape(self, resolved, rank)

    def bind(self, global_shape: Sequence[int], *, shape: Sequence[int] | None = None) -> BlockCyclic:
        resolved = as_shape(global_shape)
        self._check_rebind(resolved)
        self._check_fits(resolved)
        rank, _ = _runtime.current_process()
        local = block_local_shape(self, resolved, rank)
        if shape is not None and as_int_tuple(shape, "shape", 0) != local:
            raise BindDistributionError(
                f"local shape {tuple(shape)} on rank {rank} does not fit {self!r} with global shape {resolved}: "
                f"expected {local}"
            )
        return self._with_binding(resolved)  # type: ignore[return-value]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, BlockCyclic):
            return NotImplemented
        return (self._process_grid, self._first_process) == (other.process_grid, other.first_process) and (
            self.block_sizes == other.block_sizes
        )

    def __hash__(self) -> int:
        return hash((self._process_grid, self._first_process))

    def __repr__(self) -> str:
        first = "" if not any(self._first_process) else f", first_process={self._first_process}"
        return f"BlockCyclic({self._process_grid!r}, block_sizes={self._block_sizes}{first}){self._binding_repr()}"


class BlockNonCyclic(BlockCyclic):
    """One block per process along each dimension: the block size is ``ceil(extent / grid extent)``.

    The block sizes follow from the global shape, so they are known once bound (before that
    :attr:`block_sizes` is ``-1`` in every dimension). When an extent does not divide evenly the
    last processes along that dimension hold a shorter block or nothing (as ``torch.chunk`` does).

    Args:
        process_grid: the :class:`ProcessGrid`.
        first_process: grid coordinates of the process holding the first block (default all 0).
    """

    def __init__(self, process_grid: ProcessGrid, *, first_process: Sequence[int] | None = None) -> None:
        self._init_grid(process_grid, first_process)
        self._block_sizes = (-1,) * self.ndim

    def _set_global_shape(self, global_shape: tuple[int, ...]) -> None:
        super()._set_global_shape(global_shape)
        self._block_sizes = block_sizes_for(self, global_shape)

    def __eq__(self, other: object) -> bool:
        """Block distributions without cycles on the same grid are equal when either is unbound."""
        if isinstance(other, BlockNonCyclic) and (self.global_shape is None or other.global_shape is None):
            return (self._process_grid, self._first_process) == (other.process_grid, other.first_process)
        return super().__eq__(other)

    def __hash__(self) -> int:
        return super().__hash__()

    def __repr__(self) -> str:
        first = "" if not any(self._first_process) else f", first_process={self._first_process}"
        return f"BlockNonCyclic({self._process_grid!r}{first}){self._binding_repr()}"


def block_sizes_for(distribution: BlockCyclic, global_shape: tuple[int, ...]) -> tuple[int, ...]:
    """The block sizes ``distribution`` uses for ``global_shape`` (inferred for ``BlockNonCyclic``)."""
    if isinstance(distribution, BlockNonCyclic):
        grid = distribution.process_grid.shape
        return tuple(noncyclic_block_size(n, p) for n, p in zip(global_shape, grid, strict=True))
    return distribution.block_sizes


def block_local_shape(distribution: BlockCyclic, global_shape: tuple[int, ...], rank: int) -> tuple[int, ...]:
    """Local shape of ``rank``: ``NUMROC`` along each dimension."""
    grid = distribution.process_grid
    coords = grid.coords(rank)
    blocks = block_sizes_for(distribution, global_shape)
    return tuple(
        numroc(n, b, c, f, p)
        for n, b, c, f, p in zip(
            global_shape, blocks, coords, distribution.first_process, grid.shape, strict=True
        )
    )
