"""Pure planning facts of the distributed matmul on cuBLASMp (no GPU, no communication).

cuBLASMp describes each distributed matrix by a 2-D block-cyclic descriptor over a process grid --
``cublasMpGridCreate(nprow, npcol, layout, comm)`` and ``cublasMpMatrixDescriptorCreate(m, n, mb,
nb, rsrc, csrc, lld, type, grid)`` -- and stores every local block column-major (Fortran order).
This module maps nvmath's distributions onto those descriptors:

* :class:`~nvmath.distributed.distribution.BlockCyclic` -> its block sizes and first process;
  :class:`~nvmath.distributed.distribution.BlockNonCyclic` -> one block of ``ceil(n / p)`` per
  process; a ``Slab`` of a matrix -> a ``P x 1`` (``Slab.X``, rows split) or ``1 x P`` grid
  (``Slab.Y``), when the slab split is the block split (the extent divides evenly);
* the process grid's rank numbering -> ``COL_MAJOR`` or ``ROW_MAJOR`` (other arrangements cannot
  be given to cuBLASMp);
* a C-ordered local tensor is the Fortran-ordered local block of the *transposed* matrix: it is
  described as that (global shape, blocks, grid and layout transposed) and the transpose moves to
  the operation (:func:`operation`), so users never transpose by hand.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from nvmath.distributed.distribution import BlockCyclic, ProcessGrid, Slab
from nvmath.distributed.distribution._block import block_sizes_for
from nvmath.distributed.distribution._index import numroc

__all__ = [
    "GridArgs",
    "MatrixDescriptorArgs",
    "block_args",
    "expected_local_shape",
    "grid_args",
    "local_shape",
    "matmul_shapes",
    "matrix_descriptor",
    "operation",
]


@dataclass(frozen=True)
class GridArgs:
    """``cublasMpGridCreate`` arguments: grid shape and rank numbering."""

    nprow: int
    npcol: int
    layout: str  # "COL_MAJOR" (rank = row + col * nprow) or "ROW_MAJOR" (rank = row * npcol + col)

    def __post_init__(self) -> None:
        # A one-row or one-column grid numbers its ranks the same in either layout: it is always
        # described COL_MAJOR, so equal grids are one cuBLASMp grid (at one rank every matrix of a
        # plan then shares the grid its registered workspace is on).
        if self.nprow == 1 or self.npcol == 1:
            object.__setattr__(self, "layout", "COL_MAJOR")

    def rank(self, row: int, col: int) -> int:
        """The rank at grid coordinates ``(row, col)``."""
        return row + col * self.nprow if self.layout == "COL_MAJOR" else row * self.npcol + col

    def transposed(self) -> GridArgs:
        """The same ranks seen on the transposed grid (``(col, row)``)."""
        return GridArgs(self.npcol, self.nprow, "ROW_MAJOR" if self.layout == "COL_MAJOR" else "COL_MAJOR")


@dataclass(frozen=True)
class MatrixDescriptorArgs:
    """``cublasMpMatrixDescriptorCreate`` arguments of one rank's matrix, and its orientation.

    ``transposed``: the local tensor is C-ordered, so this describes the transpose of the user's
    matrix (``m``, ``n`` and everything else already swapped).
    """

    m: int
    n: int
    mb: int
    nb: int
    rsrc: int
    csrc: int
    lld: int
    grid: GridArgs
    transposed: bool
    local_shape: tuple[int, int]  # in the described orientation


def grid_args(grid: ProcessGrid) -> GridArgs:
    """The cuBLASMp grid of a 2-D :class:`ProcessGrid`.

    Raises:
        ValueError: not 2-D, or ranks arranged neither column- nor row-major.
    """
    if len(grid.shape) != 2:
        raise ValueError(f"process grid {grid!r}: cuBLASMp needs a 2-D process grid")
    nprow, npcol = grid.shape
    for layout in ("COL_MAJOR", "ROW_MAJOR"):
        args = GridArgs(nprow, npcol, layout)
        if all(grid.rank((r, c)) == args.rank(r, c) for r in range(nprow) for c in range(npcol)):
            return args
    raise ValueError(
        f"process grid {grid!r}: cuBLASMp numbers ranks column- or row-major across its grid; this "
        "arrangement is neither (use ProcessGrid(shape=..., layout=...))"
    )


def block_args(
    global_shape: tuple[int, int], distribution: Any, nranks: int
) -> tuple[tuple, tuple, GridArgs]:
    """``((mb, nb), (rsrc, csrc), grid)`` of a distribution of a matrix of ``global_shape``."""
    if isinstance(distribution, Slab):
        axis = distribution.partition_dim
        if axis not in (0, 1):
            raise ValueError(f"distribution {distribution!r}: a matrix is split along axis 0 or 1")
        extent = global_shape[axis]
        if extent % nranks:
            raise ValueError(
                f"distribution {distribution!r} of a {global_shape} matrix over {nranks} ranks: cuBLASMp's "
                f"blocks are equal, and {extent} rows/columns do not split evenly; use "
                "BlockNonCyclic(ProcessGrid(...)) (blocks of ceil(n / P), the last ones shorter)"
            )
        blocks = [global_shape[0], global_shape[1]]
        blocks[axis] = max(extent // nranks, 1)
        grid = GridArgs(nranks, 1, "COL_MAJOR") if axis == 0 else GridArgs(1, nranks, "ROW_MAJOR")
        return tuple(max(b, 1) for b in blocks), (0, 0), grid
    if isinstance(distribution, BlockCyclic):
        grid = grid_args(distribution.process_grid)
        blocks = tuple(max(b, 1) for b in block_sizes_for(distribution, global_shape))
        return blocks, tuple(distribution.first_process), grid
    raise TypeError(
        f"distribution must be a BlockCyclic, BlockNonCyclic or Slab of the matrix; got "
        f"{type(distribution).__name__}: {distribution!r}"
    )


def expected_local_shape(global_shape: tuple[int, int], blocks: tuple, first: tuple, grid: GridArgs,
                          rank: int) -> tuple[int, int]:  # fmt: skip
    coords = next((r, c) for r in range(grid.nprow) for c in range(grid.npcol) if grid.rank(r, c) == rank)
    return tuple(  # type: ignore[return-value]
        numroc(n, b, x, f, p)
        for n, b, x, f, p in zip(global_shape, blocks, coords, first, (grid.nprow, grid.npcol), strict=True)
    )


def local_shape(global_shape: tuple[int, int], distribution: Any, rank: int, nranks: int) -> tuple[int, int]:
    """This rank's local shape of a ``global_shape`` matrix distributed as ``distribution``."""
    blocks, first, grid = block_args(global_shape, distribution, nranks)
    return expected_local_shape(global_shape, blocks, first, grid, rank)


def matrix_descriptor(
    global_shape: Sequence[int], distribution: Any, rank: int, nranks: int, local_shape: Sequence[int],
    local_strides: Sequence[int], order: str | None = None,
) -> MatrixDescriptorArgs:  # fmt: skip
    """The cuBLASMp descriptor of this rank's part of a distributed matrix.

    Args:
        global_shape: the matrix's ``(rows, columns)``.
        distribution: how it is distributed (see the module documentation).
        rank, nranks: this rank and the number of ranks.
        local_shape, local_strides: this rank's tensor (element strides).
        order: ``"F"`` or ``"C"`` to describe the local block in that order (every rank must describe
            a matrix in one orientation, and a one-row, one-column or empty block fits both);
            ``None``: Fortran when it fits.

    Raises:
        ValueError: not a matrix, a distribution cuBLASMp cannot describe, a local shape other than
            the distribution's, or a local layout that is neither C nor Fortran order.
        TypeError: a distribution of another kind.
    """
    if len(global_shape) != 2 or len(local_shape) != 2 or len(local_strides) != 2:
        raise ValueError(f"global shape {tuple(global_shape)}: cuBLASMp multiplies matrices (2-D, no batch)")
    shape = (int(global_shape[0]), int(global_shape[1]))
    blocks, first, grid = block_args(shape, distribution, nranks)
    expected = expected_local_shape(shape, blocks, first, grid, rank)
    rows, cols = (int(n) for n in local_shape)
    if (rows, cols) != expected:
        raise ValueError(
            f"rank {rank}'s part of the {shape} matrix is {(rows, cols)}, but {distribution!r} gives it "
            f"{expected}"
        )
    s0, s1 = (int(s) for s in local_strides)
    empty = rows == 0 or cols == 0  # nothing here: any leading dimension >= 1 describes it
    if empty and order != "C":
        return MatrixDescriptorArgs(shape[0], shape[1], blocks[0], blocks[1], first[0], first[1],
                                    max(rows, 1), grid, False, (rows, cols))  # fmt: skip
    if empty:
        return MatrixDescriptorArgs(shape[1], shape[0], blocks[1], blocks[0], first[1], first[0],
                                    max(cols, 1), grid.transposed(), True, (cols, rows))  # fmt: skip
    if order != "C" and (s0 == 1 or rows <= 1) and (s1 >= max(rows, 1) or cols <= 1):
        return MatrixDescriptorArgs(shape[0], shape[1], blocks[0], blocks[1], first[0], first[1],
                                    max(rows, 1) if cols <= 1 else s1, grid, False, (rows, cols))  # fmt: skip
    if order != "F" and (s1 == 1 or cols <= 1) and (s0 >= max(cols, 1) or rows <= 1):
        return MatrixDescriptorArgs(shape[1], shape[0], blocks[1], blocks[0], first[1], first[0],
                                    max(cols, 1) if rows <= 1 else s0, grid.transposed(), True,
                                    (cols, rows))  # fmt: skip
    raise ValueError(
        f"rank {rank}'s tensor has strides {tuple(local_strides)}: cuBLASMp needs each local block in "
        "Fortran (column-major) or C (row-major) order, dense along its fast axis"
    )


def operation(transposed_layout: bool, is_transpose: bool, is_conjugate: bool, is_complex: bool) -> str:
    """The cuBLAS operation (``"N"``, ``"T"``, ``"C"``) applying a matrix as the user asked, given
    its descriptor's orientation.

    Raises:
        ValueError: a conjugate without a transpose in the end (cuBLASMp has no conjugate-only op).
    """
    transpose = bool(transposed_layout) != bool(is_transpose)
    if is_conjugate and is_complex:
        if not transpose:
            raise ValueError(
                "a conjugated operand that is not transposed in the end (after its layout) cannot be "
                "given to cuBLASMp, which only conjugates with a transpose (OP_C)"
            )
        return "C"
    return "T" if transpose else "N"


def matmul_shapes(a: tuple[int, int], b: tuple[int, int], c: tuple[int, int] | None,
                  a_transpose: bool = False, b_transpose: bool = False) -> tuple[int, int, int]:  # fmt: skip
    """``(m, n, k)`` of ``op(a) @ op(b)`` (+ ``c``) from the user's global shapes.

    Raises:
        ValueError: the shapes do not chain, or ``c`` is not ``(m, n)``.
    """
    m, k = (a[1], a[0]) if a_transpose else a
    k2, n = (b[1], b[0]) if b_transpose else b
    if k != k2:
        raise ValueError(f"the matrices do not chain: op(a) is {(m, k)} and op(b) is {(k2, n)}")
    if c is not None and tuple(c) != (m, n):
        raise ValueError(f"c is {tuple(c)}; op(a) @ op(b) is {(m, n)}")
    return m, n, k
