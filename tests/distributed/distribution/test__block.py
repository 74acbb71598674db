"""BlockCyclic and BlockNonCyclic: local shapes against a direct ownership loop, binding, equality, validation."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nvmath.distributed.distribution import BindDistributionError, BlockCyclic, BlockNonCyclic, ProcessGrid

ROW, COL = ProcessGrid.Layout.ROW_MAJOR, ProcessGrid.Layout.COL_MAJOR


def _factorizations(nranks: int, ndim: int) -> list[tuple[int, ...]]:
    if ndim == 1:
        return [(nranks,)]
    return [
        (p,) + rest
        for p in range(1, nranks + 1)
        if nranks % p == 0
        for rest in _factorizations(nranks // p, ndim - 1)
    ]


def expected_local_shape(global_shape, blocks, grid_shape, first, coords) -> tuple[int, ...]:
    """Count the indices whose block lands on ``coords``, one index at a time."""
    return tuple(
        sum(1 for i in range(n) if (i // b + f) % p == c)
        for n, b, p, f, c in zip(global_shape, blocks, grid_shape, first, coords, strict=True)
    )


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(nranks=st.integers(1, 8), ndim=st.integers(1, 3), layout=st.sampled_from([ROW, COL]), data=st.data())
def test_block_cyclic_shape_matches_a_direct_count(runtime, nranks, ndim, layout, data):
    """BlockCyclic.shape agrees with counting, per dimension, the indices whose block maps to the rank's grid point."""
    runtime(nranks)
    grid_shape = data.draw(st.sampled_from(_factorizations(nranks, ndim)))
    global_shape = data.draw(st.tuples(*[st.integers(1, 30)] * ndim))
    blocks = data.draw(st.tuples(*[st.integers(1, 9)] * ndim))
    first = tuple(data.draw(st.integers(0, p - 1)) for p in grid_shape)
    dist = BlockCyclic(ProcessGrid(shape=grid_shape, layout=layout), blocks, first_process=first)
    order = "C" if layout == ROW else "F"
    for rank in range(nranks):
        coords = tuple(int(c) for c in np.unravel_index(rank, grid_shape, order=order))
        assert dist.shape(rank, global_shape) == expected_local_shape(
            global_shape, blocks, grid_shape, first, coords
        )


@pytest.mark.parametrize("nranks", range(1, 9))
@pytest.mark.parametrize("extent", [1, 3, 8, 10, 17])
def test_block_noncyclic_is_torch_chunk_like(runtime, nranks, extent):
    """BlockNonCyclic on a P x 1 grid gives rank r min(c, n - r*c) rows (c = ceil(n/P)): np.array_split would differ."""
    runtime(nranks)
    dist = BlockNonCyclic(ProcessGrid(shape=(nranks, 1)))
    chunk = math.ceil(extent / nranks)
    assert [dist.shape(r, (extent, 4)) for r in range(nranks)] == [
        (max(0, min(chunk, extent - r * chunk)), 4) for r in range(nranks)
    ]


def test_block_cyclic_2x2_example(runtime):
    """A 5x5 matrix in 2x2 blocks on a 2x2 column-major grid: local shapes (3,3), (2,3), (3,2), (2,2)."""
    runtime(4)
    dist = BlockCyclic(ProcessGrid(shape=(2, 2), layout=COL), (2, 2))
    assert [dist.shape(r, (5, 5)) for r in range(4)] == [(3, 3), (2, 3), (3, 2), (2, 2)]
    assert dist.ndim == 2 and dist.block_sizes == (2, 2) and dist.first_process == (0, 0)
    shifted = BlockCyclic(ProcessGrid(shape=(2, 2), layout=COL), (2, 2), first_process=(1, 0))
    assert shifted.shape(0, (5, 5)) == (2, 3)


def test_noncyclic_block_sizes_appear_when_bound(runtime):
    """Unbound BlockNonCyclic reports block sizes -1; bound, ceil(extent / grid extent)."""
    runtime(4, rank=3)
    dist = BlockNonCyclic(ProcessGrid(shape=(2, 2), layout=ROW))
    assert dist.block_sizes == (-1, -1)
    bound = dist.bind((7, 4), shape=(3, 2))
    assert bound.block_sizes == (4, 2) and bound.global_shape == (7, 4) and bound.shape(0) == (4, 2)
    assert dist.block_sizes == (-1, -1)
    with pytest.raises(BindDistributionError, match=r"expected \(3, 2\)"):
        dist.bind((7, 4), shape=(4, 2))


def test_equality(runtime):
    """Block distributions are equal on equal grids, blocks and first process; unbound BlockNonCyclic ignores blocks."""
    runtime(4)
    grid = ProcessGrid(shape=(2, 2), layout=ROW)
    assert BlockCyclic(grid, (2, 3)) == BlockCyclic(ProcessGrid(shape=(2, 2), layout=ROW), [2, 3])
    assert BlockCyclic(grid, (2, 3)) != BlockCyclic(grid, (3, 2))
    assert BlockCyclic(grid, (2, 3)) != BlockCyclic(grid, (2, 3), first_process=(1, 1))
    assert BlockNonCyclic(grid) == BlockNonCyclic(grid).bind((8, 8))
    assert BlockNonCyclic(grid).bind((8, 8)) == BlockCyclic(grid, (4, 4))
    assert hash(BlockNonCyclic(grid)) == hash(BlockNonCyclic(grid).bind((8, 8)))


@pytest.mark.parametrize(
    ("make", "error", "match"),
    [
        (lambda g: BlockCyclic(g, (0, 2)), ValueError, r"block_sizes\[0\] must be an integer >= 1, got 0"),
        (lambda g: BlockCyclic(g, (-3, 2)), ValueError, r"got -3"),
        (lambda g: BlockCyclic(g, (2,)), ValueError, "block_sizes must have 2 elements"),
        (lambda g: BlockCyclic(g, (2, 2.5)), TypeError, r"block_sizes\[1\] must be an integer"),
        (lambda g: BlockCyclic(g, None), TypeError, "block_sizes must be a sequence"),
        (lambda g: BlockCyclic((2, 2), (2, 2)), TypeError, "process_grid must be a ProcessGrid"),
        (lambda g: BlockCyclic(g, (2, 2), first_process=(2, 0)), ValueError, "outside the process grid"),
        (lambda g: BlockNonCyclic(g, first_process=(0,)), ValueError, "first_process must have 2 elements"),
        (lambda g: BlockCyclic(g, (2, 2)).shape(4, (8, 8)), ValueError, r"rank must be in \[0, 4\)"),
        (lambda g: BlockCyclic(g, (2, 2)).shape(0, (8, 8, 8)), ValueError, "has 3 dimensions"),
        (lambda g: BlockCyclic(g, (2, 2)).shape(0), RuntimeError, "not bound"),
        (lambda g: BlockNonCyclic(g).shape(0, (8, -8)), ValueError, r"global_shape\[1\]"),
    ],
)
def test_bad_input(runtime, make, error, match):
    """Non-positive or non-integer block sizes, wrong lengths, bad first process, ranks and shapes raise typed errors."""
    runtime(4)
    with pytest.raises(error, match=match):
        make(ProcessGrid(shape=(2, 2), layout=ROW))
