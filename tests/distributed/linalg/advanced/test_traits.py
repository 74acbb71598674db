"""Distributions -> cuBLASMp matrix descriptors (nvmath.distributed.linalg.advanced._traits), checked
with numpy: reading each rank's local block out of a global matrix with ScaLAPACK's block-cyclic
rule and the descriptor's (m, n, mb, nb, rsrc, csrc, grid) gives exactly the part the distribution
itself assigns to that rank, for Fortran- and C-ordered local tensors."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from nvmath.distributed.distribution import BlockCyclic, BlockNonCyclic, Box, ProcessGrid, Slab
from nvmath.distributed.distribution._ownership import rank_ownership
from nvmath.distributed.linalg.advanced._traits import (
    GridArgs,
    block_args,
    grid_args,
    matmul_shapes,
    matrix_descriptor,
    operation,
)


def owned_block(g: np.ndarray, distribution, nranks: int, rank: int) -> np.ndarray:
    """The distribution's own idea of ``rank``'s part (its ownership intervals)."""
    rows, cols = (
        np.concatenate([np.arange(a, b) for a, b in dim] or [np.arange(0)])
        for dim in rank_ownership(distribution, g.shape, nranks, rank)
    )
    return g[np.ix_(rows, cols)]


def scalapack_local(g: np.ndarray, d, rank: int) -> np.ndarray:
    """``rank``'s local matrix by the block-cyclic rule of the descriptor ``d`` (independent code)."""
    prow, pcol = next(
        (r, c) for r in range(d.grid.nprow) for c in range(d.grid.npcol) if d.grid.rank(r, c) == rank
    )
    rows = [i for i in range(d.m) if (i // d.mb + d.rsrc) % d.grid.nprow == prow]
    cols = [j for j in range(d.n) if (j // d.nb + d.csrc) % d.grid.npcol == pcol]
    return g[np.ix_(rows, cols)]


def local_tensor(block: np.ndarray, order: str) -> np.ndarray:
    return np.asfortranarray(block) if order == "F" else np.ascontiguousarray(block)


def strides_of(a: np.ndarray) -> tuple[int, ...]:
    return tuple(s // a.itemsize for s in a.strides)


def check_all_ranks(set_nranks, nranks, shape, make_distribution):
    set_nranks(nranks)
    distribution = make_distribution()
    g = np.arange(np.prod(shape), dtype=np.float64).reshape(shape)
    for rank, order in itertools.product(range(nranks), "FC"):
        block = owned_block(g, distribution, nranks, rank)
        local = local_tensor(block, order)
        d = matrix_descriptor(shape, distribution, rank, nranks, local.shape, strides_of(local))
        if min(local.shape) > 1:  # a single row or column is both C and Fortran ordered
            assert d.transposed == (order == "C")
        described = g.T if d.transposed else g
        expected = block.T if d.transposed else block
        np.testing.assert_array_equal(scalapack_local(described, d, rank), expected)
        assert d.local_shape == expected.shape and d.lld >= max(1, expected.shape[0])


@pytest.mark.parametrize("nranks", [1, 2, 3, 4])
@pytest.mark.parametrize("shape", [(12, 24), (24, 12)])
@pytest.mark.parametrize("slab", ["X", "Y"])
def test_even_slabs_are_one_dimensional_grids(nranks, shape, slab, set_nranks):
    """Slab.X / Slab.Y of a matrix whose split is even map to P x 1 / 1 x P grids of equal blocks."""
    check_all_ranks(set_nranks, nranks, shape, lambda: getattr(Slab, slab))


def test_uneven_slab_is_refused_with_the_fix(set_nranks):
    """A slab split that is not equal blocks (7 rows over 3 ranks: 3, 2, 2) cannot be described:
    ValueError naming BlockNonCyclic."""
    set_nranks(3)
    with pytest.raises(ValueError, match="BlockNonCyclic"):
        matrix_descriptor((7, 4), Slab.X, 0, 3, (3, 4), (1, 3))


@pytest.mark.parametrize(
    ("nranks", "grid", "layout", "shape"),
    [(4, (2, 2), "COL_MAJOR", (9, 7)), (6, (2, 3), "ROW_MAJOR", (10, 11)), (4, (4, 1), None, (7, 5)),
     (3, (1, 3), None, (5, 8)), (8, (2, 4), "COL_MAJOR", (16, 9))],
)  # fmt: skip
def test_block_noncyclic_on_grids(nranks, grid, layout, shape, set_nranks):
    """BlockNonCyclic (blocks of ceil(n / p), last ones shorter) on 2-D and 1-D grids of either
    numbering."""
    kw = {"shape": grid} | ({"layout": getattr(ProcessGrid.Layout, layout)} if layout else {})
    check_all_ranks(set_nranks, nranks, shape, lambda: BlockNonCyclic(ProcessGrid(**kw)))


@pytest.mark.parametrize(
    ("nranks", "grid", "layout", "blocks", "first", "shape"),
    [(4, (2, 2), "COL_MAJOR", (2, 3), None, (9, 10)), (6, (3, 2), "ROW_MAJOR", (1, 2), (1, 1), (8, 7)),
     (2, (2, 1), "COL_MAJOR", (3, 4), (1, 0), (11, 4)), (4, (2, 2), "ROW_MAJOR", (4, 4), (0, 1), (5, 5))],
)  # fmt: skip
def test_block_cyclic(nranks, grid, layout, blocks, first, shape, set_nranks):
    """BlockCyclic with any block sizes and first process maps to the same descriptor fields."""
    kw = {"first_process": first} if first else {}
    check_all_ranks(
        set_nranks, nranks, shape,
        lambda: BlockCyclic(ProcessGrid(shape=grid, layout=ProcessGrid.Layout[layout]), blocks, **kw),
    )  # fmt: skip


def test_explicit_process_array(set_nranks):
    """A process_array numbered column- or row-major is accepted; any other arrangement is refused."""
    set_nranks(4)
    assert grid_args(ProcessGrid(process_array=[[0, 2], [1, 3]])) == GridArgs(2, 2, "COL_MAJOR")
    assert grid_args(ProcessGrid(process_array=[[0, 1], [2, 3]])) == GridArgs(2, 2, "ROW_MAJOR")
    with pytest.raises(ValueError, match="neither"):
        grid_args(ProcessGrid(process_array=[[0, 3], [1, 2]]))


def test_transposed_grid_keeps_every_rank_in_place():
    """Seen transposed, each rank sits at the swapped coordinates."""
    for args in (GridArgs(2, 3, "COL_MAJOR"), GridArgs(3, 2, "ROW_MAJOR")):
        t = args.transposed()
        assert all(args.rank(r, c) == t.rank(c, r) for r in range(args.nprow) for c in range(args.npcol))


def test_one_row_or_column_grids_are_column_major():
    """A 1 x P or P x 1 grid numbers its ranks alike in both layouts: it is always COL_MAJOR, so
    Slab.X, Slab.Y and their transposes at one rank are one cuBLASMp grid."""
    assert GridArgs(1, 4, "ROW_MAJOR") == GridArgs(1, 4, "COL_MAJOR")
    assert (
        GridArgs(3, 1, "ROW_MAJOR").layout == "COL_MAJOR"
        and GridArgs(2, 2, "ROW_MAJOR").layout == "ROW_MAJOR"
    )
    one = {block_args((8, 6), s, 1)[2] for s in (Slab.X, Slab.Y)}
    one |= {block_args((8, 6), s, 1)[2].transposed() for s in (Slab.X, Slab.Y)}
    assert one == {GridArgs(1, 1, "COL_MAJOR")}
    args = block_args((8, 6), Slab.Y, 2)[2]
    assert args == GridArgs(1, 2, "COL_MAJOR") and [args.rank(0, c) for c in range(2)] == [0, 1]


def test_bad_inputs(set_nranks):
    """A wrong local shape, a non-matrix, a strided local layout and other distribution kinds are
    refused with typed errors."""
    set_nranks(2)
    with pytest.raises(ValueError, match=r"is \(3, 4\), but"):
        matrix_descriptor((8, 4), Slab.X, 0, 2, (3, 4), (1, 3))
    with pytest.raises(ValueError, match="2-D, no batch"):
        matrix_descriptor((2, 8, 4), Slab.X, 0, 2, (1, 8, 4), (32, 4, 1))
    with pytest.raises(ValueError, match="Fortran .* or C"):
        matrix_descriptor((8, 4), Slab.X, 0, 2, (4, 4), (2, 8))
    with pytest.raises(TypeError, match="BlockCyclic"):
        matrix_descriptor((8, 4), Box((0, 0), (4, 4)), 0, 2, (4, 4), (1, 4))
    with pytest.raises(ValueError, match="axis 0 or 1"):
        matrix_descriptor((8, 4), Slab.Z, 0, 2, (8, 4), (1, 8))


@pytest.mark.parametrize(
    ("layout_t", "transpose", "conj", "cplx", "op"),
    [(False, False, False, False, "N"), (True, False, False, False, "T"), (False, True, False, True, "T"),
     (True, True, False, True, "N"), (False, True, True, True, "C"), (True, False, True, True, "C"),
     (False, False, True, False, "N")],
)  # fmt: skip
def test_operation(layout_t, transpose, conj, cplx, op):
    """The op is the transpose asked for XOR the layout's; conjugation rides on a transpose; real
    operands ignore conjugation."""
    assert operation(layout_t, transpose, conj, cplx) == op


def test_conjugate_without_transpose_is_refused():
    """cuBLASMp has no conjugate-only op: a conjugated Fortran-ordered, untransposed operand raises."""
    with pytest.raises(ValueError, match="OP_C"):
        operation(False, False, True, True)


def test_matmul_shapes():
    """(m, n, k) from the operands' shapes and transposes; shapes that do not chain raise."""
    assert matmul_shapes((4, 3), (3, 5), (4, 5)) == (4, 5, 3)
    assert matmul_shapes((3, 4), (5, 3), None, a_transpose=True, b_transpose=True) == (4, 5, 3)
    with pytest.raises(ValueError, match="do not chain"):
        matmul_shapes((4, 3), (4, 5), None)
    with pytest.raises(ValueError, match="c is"):
        matmul_shapes((4, 3), (3, 5), (5, 4))
