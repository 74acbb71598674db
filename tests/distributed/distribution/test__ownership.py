"""Ownership maps: every element owned exactly once, local arrays as the numpy references build them."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nvmath.distributed.distribution import BlockCyclic, BlockNonCyclic, Box, ProcessGrid, Slab
from nvmath.distributed.distribution._index import ownership_shape
from nvmath.distributed.distribution._ownership import check_layout, ownership_map, same_ownership

ROW, COL = ProcessGrid.Layout.ROW_MAJOR, ProcessGrid.Layout.COL_MAJOR
SETTINGS = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def grid_shapes(nranks: int, ndim: int) -> list[tuple[int, ...]]:
    """Every grid shape of ``ndim`` dimensions holding ``nranks`` places."""
    if ndim == 1:
        return [(nranks,)]
    return [
        (p, *rest)
        for p in range(1, nranks + 1)
        if nranks % p == 0
        for rest in grid_shapes(nranks // p, ndim - 1)
    ]


def owned_indices(ownership) -> list[np.ndarray]:
    return [np.array([i for a, b in intervals for i in range(a, b)], dtype=int) for intervals in ownership]


def local_array(global_array: np.ndarray, ownership) -> np.ndarray:
    return global_array[np.ix_(*owned_indices(ownership))]


def assert_partition(ownerships, shape) -> None:
    """Each global element is owned by exactly one rank."""
    count = np.zeros(shape, dtype=int)
    for ownership in ownerships:
        count[np.ix_(*owned_indices(ownership))] += 1
    assert (count == 1).all()


def block_reference(global_array, blocks, grid_shape, first, coords) -> np.ndarray:
    """The rank's local array built from a per-index owner loop (ScaLAPACK ordering: global order)."""
    picks = [
        [i for i in range(n) if (i // b + f) % p == c]
        for n, b, p, f, c in zip(global_array.shape, blocks, grid_shape, first, coords, strict=True)
    ]
    return global_array[np.ix_(*picks)]


@SETTINGS
@given(
    shape=st.lists(st.integers(1, 10), min_size=1, max_size=3).map(tuple),
    nranks=st.integers(1, 8),
    data=st.data(),
)
def test_slab_ownership_is_array_split(runtime, shape, nranks, data):
    """Slab ownership partitions the array; each local array is np.array_split's piece and matches .shape."""
    runtime(nranks)
    dim = data.draw(st.integers(0, len(shape) - 1))
    global_array = np.arange(np.prod(shape)).reshape(shape)
    ownerships = ownership_map(Slab(dim), shape, nranks)
    assert_partition(ownerships, shape)
    for rank, (own, piece) in enumerate(
        zip(ownerships, np.array_split(global_array, nranks, axis=dim), strict=True)
    ):
        assert np.array_equal(local_array(global_array, own), piece)
        assert ownership_shape(own) == Slab(dim).shape(rank, shape)


@SETTINGS
@given(nranks=st.integers(1, 8), layout=st.sampled_from([ROW, COL]), cyclic=st.booleans(), data=st.data())
def test_block_ownership_matches_the_owner_loop(runtime, nranks, layout, cyclic, data):
    """Block (non)cyclic ownership partitions the array and each local array equals the owner-loop reference."""
    runtime(nranks)
    ndim = data.draw(st.integers(1, 3))
    grid_shape = data.draw(st.sampled_from(grid_shapes(nranks, ndim)))
    shape = data.draw(st.tuples(*[st.integers(1, 14)] * ndim))
    first = tuple(data.draw(st.integers(0, p - 1)) for p in grid_shape)
    grid = ProcessGrid(shape=grid_shape, layout=layout)
    if cyclic:
        blocks = data.draw(st.tuples(*[st.integers(1, 5)] * ndim))
        dist = BlockCyclic(grid, blocks, first_process=first)
    else:
        blocks = tuple(-(-n // p) for n, p in zip(shape, grid_shape, strict=True))
        dist = BlockNonCyclic(grid, first_process=first)
    global_array = np.arange(np.prod(shape)).reshape(shape)
    ownerships = ownership_map(dist, shape, nranks)
    assert_partition(ownerships, shape)
    order = "C" if layout == ROW else "F"
    for rank, own in enumerate(ownerships):
        coords = tuple(int(c) for c in np.unravel_index(rank, grid_shape, order=order))
        expected = block_reference(global_array, blocks, grid_shape, first, coords)
        assert np.array_equal(local_array(global_array, own), expected)
        assert ownership_shape(own) == dist.shape(rank, shape)


@pytest.mark.parametrize("nranks", range(1, 9))
def test_box_lists_tile_like_the_slabs_they_came_from(runtime, nranks):
    """One Box per rank cut from a Y slab owns what the slab owns."""
    runtime(nranks)
    shape = (5, 11, 3)
    boxes = []
    for piece in np.array_split(np.arange(shape[1]), nranks):
        start, stop = (int(piece[0]), int(piece[-1]) + 1) if piece.size else (shape[1], shape[1])
        boxes.append(Box((0, start, 0), (shape[0], stop, shape[2])))
    assert same_ownership(boxes, Slab.Y, shape, nranks)
    assert_partition(ownership_map(boxes, shape, nranks), shape)


@pytest.mark.parametrize(
    ("layout", "shape", "nranks", "error", "match"),
    [
        ([Box((0, 0), (2, 4)), Box((1, 0), (4, 4))], (4, 4), 2, ValueError, "overlap"),
        ([Box((0, 0), (2, 4)), Box((2, 0), (3, 4))], (4, 4), 2, ValueError, "cover 12 of the 16"),
        ([Box((0, 0), (2, 4)), Box((2, 0), (5, 4))], (4, 4), 2, ValueError, "reaches outside"),
        ([Box((0, 0), (4, 4))], (4, 4), 2, ValueError, r"one Box per rank \(2\), got 1"),
        (Box((0, 0), (4, 4)), (4, 4), 1, TypeError, "a single Box"),
        ("Slab.X", (4, 4), 1, TypeError, "expected a Slab"),
        (Slab.Z, (4, 4), 2, ValueError, "does not fit a 2-D"),
        (Slab.X, (4, 4), 0, ValueError, "nranks must be an integer >= 1"),
    ],
)
def test_bad_layouts_are_refused(layout, shape, nranks, error, match):
    """Overlapping, incomplete, outside or miscounted boxes and mismatched distributions raise naming the problem."""
    with pytest.raises(error, match=match):
        check_layout(layout, shape, nranks)


def test_grid_size_must_match_nranks(runtime):
    """A block distribution's grid size must equal the nranks a plan is made for."""
    runtime(4)
    dist = BlockNonCyclic(ProcessGrid(shape=(2, 2), layout=ROW))
    with pytest.raises(ValueError, match="holds 4 ranks, not nranks=2"):
        check_layout(dist, (8, 8), 2)
    with pytest.raises(ValueError, match="is 2-D; global shape"):
        check_layout(dist, (8,), 4)
