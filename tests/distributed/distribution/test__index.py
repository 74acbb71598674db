"""Pure index arithmetic against independent numpy constructions."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nvmath.distributed.distribution._index import (
    block_cyclic_intervals,
    grid_coords,
    grid_rank,
    merge_intervals,
    noncyclic_block_size,
    normalize_ownership,
    numroc,
    ownership_shape,
    slab_interval,
)


def _indices(intervals) -> list[int]:
    return [i for start, stop in intervals for i in range(start, stop)]


def _cyclic_owner(extent: int, block: int, first: int, nprocs: int) -> np.ndarray:
    """Owner coordinate of every index, by a direct loop over the indices."""
    return np.array([(i // block + first) % nprocs for i in range(extent)], dtype=int)


@pytest.mark.parametrize("nranks", range(1, 9))
@pytest.mark.parametrize("extent", [1, 2, 3, 5, 7, 8, 9, 16, 17, 31, 100])
def test_slab_interval_matches_array_split(extent, nranks):
    """Slab splits equal np.array_split: the first extent % P ranks hold one index more."""
    parts = np.array_split(np.arange(extent), nranks)
    for rank, part in enumerate(parts):
        start, stop = slab_interval(extent, nranks, rank)
        assert list(range(start, stop)) == part.tolist()
        assert stop - start == extent // nranks + (rank < extent % nranks)


@settings(max_examples=300, deadline=None)
@given(
    extent=st.integers(1, 200),
    block=st.integers(1, 40),
    nprocs=st.integers(1, 8),
    data=st.data(),
)
def test_block_cyclic_intervals_and_numroc_match_a_direct_loop(extent, block, nprocs, data):
    """Block-cyclic ownership and NUMROC equal the owner of each index computed one index at a time."""
    first = data.draw(st.integers(0, nprocs - 1))
    owner = _cyclic_owner(extent, block, first, nprocs)
    for coord in range(nprocs):
        expected = np.flatnonzero(owner == coord).tolist()
        intervals = block_cyclic_intervals(extent, block, coord, first, nprocs)
        assert _indices(intervals) == expected
        assert numroc(extent, block, coord, first, nprocs) == len(expected)


def test_numroc_scalapack_example():
    """A 9-long dimension in blocks of 2 over 2 processes: 5 and 4 indices (ScaLAPACK's worked case)."""
    assert [numroc(9, 2, p, 0, 2) for p in range(2)] == [5, 4]
    assert [numroc(9, 2, p, 1, 2) for p in range(2)] == [4, 5]


@pytest.mark.parametrize(
    ("extent", "nprocs", "expected"), [(10, 4, 3), (8, 4, 2), (3, 4, 1), (1, 1, 1), (7, 1, 7)]
)
def test_noncyclic_block_size_is_ceiling(extent, nprocs, expected):
    """One block per process: ceil(extent / nprocs), never below 1."""
    assert noncyclic_block_size(extent, nprocs) == expected


@pytest.mark.parametrize("grid_shape", [(1,), (4,), (2, 2), (2, 3), (3, 2), (1, 8), (2, 2, 2), (2, 1, 3)])
@pytest.mark.parametrize("row_major", [True, False])
def test_grid_coords_match_unravel_index(grid_shape, row_major):
    """Row-major numbering is C order, column-major is Fortran order; grid_rank inverts grid_coords."""
    order = "C" if row_major else "F"
    for rank in range(int(np.prod(grid_shape))):
        coords = grid_coords(rank, grid_shape, row_major)
        assert coords == tuple(int(c) for c in np.unravel_index(rank, grid_shape, order=order))
        assert grid_rank(coords, grid_shape, row_major) == rank


def test_merge_intervals_drops_empty_and_joins_touching():
    """Empty intervals vanish and touching ones join; separate ones stay apart."""
    assert merge_intervals([(0, 2), (2, 2), (2, 5), (7, 9)]) == ((0, 5), (7, 9))
    assert merge_intervals([]) == ()


def test_ownership_shape_and_normalization():
    """The local shape is the owned length per dimension; normalization empties a rank empty in one dimension."""
    ownership = (((0, 2), (4, 5)), ())
    assert ownership_shape(ownership) == (3, 0)
    assert normalize_ownership(ownership) == ((), ())
    assert normalize_ownership((((0, 2), (2, 3)), ((1, 4),))) == (((0, 3),), ((1, 4),))
