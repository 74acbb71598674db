"""Redistribution plans: applied with numpy, they turn one distribution's local arrays into another's exactly."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nvmath.distributed.distribution import BlockCyclic, BlockNonCyclic, Box, ProcessGrid, Slab
from nvmath.distributed.distribution._plan import Exchange, Segment, redistribution_plan

ROW, COL = ProcessGrid.Layout.ROW_MAJOR, ProcessGrid.Layout.COL_MAJOR


def grid_shapes(nranks: int, ndim: int) -> list[tuple[int, ...]]:
    if ndim == 1:
        return [(nranks,)]
    return [
        (p, *rest)
        for p in range(1, nranks + 1)
        if nranks % p == 0
        for rest in grid_shapes(nranks // p, ndim - 1)
    ]


def reference_local(layout, global_array: np.ndarray, nranks: int, rank: int) -> np.ndarray:
    """A rank's local array built without the library's index maps."""
    if isinstance(layout, Slab):
        return np.array_split(global_array, nranks, axis=layout.partition_dim)[rank]
    if isinstance(layout, list):
        box = layout[rank]
        return global_array[tuple(slice(a, b) for a, b in zip(box.lower, box.upper, strict=True))]
    grid = layout.process_grid
    order = "C" if grid.layout == ROW else "F"
    coords = np.unravel_index(rank, grid.shape, order=order)
    blocks = (
        [-(-n // p) for n, p in zip(global_array.shape, grid.shape, strict=True)]
        if isinstance(layout, BlockNonCyclic)
        else layout.block_sizes
    )
    picks = [
        [i for i in range(n) if (i // b + f) % p == c]
        for n, b, p, f, c in zip(
            global_array.shape, blocks, grid.shape, layout.first_process, coords, strict=True
        )
    ]
    return global_array[np.ix_(*picks)]


def apply_plan(
    plan: tuple[Exchange, ...], sources: list[np.ndarray], target_shapes: list[tuple[int, ...]]
) -> list[np.ndarray]:
    targets = [np.full(shape, -1, dtype=np.int64) for shape in target_shapes]
    for exchange in plan:
        for src, dst in exchange.slices():
            targets[exchange.dst_rank][dst] = sources[exchange.src_rank][src]
    return targets


@st.composite
def layouts(draw, nranks: int, shape: tuple[int, ...]):
    ndim = len(shape)
    kind = draw(st.sampled_from(["slab", "cyclic", "noncyclic", "boxes"]))
    if kind == "slab":
        return Slab(draw(st.integers(0, ndim - 1)))
    if kind == "boxes":
        dim = draw(st.integers(0, ndim - 1))
        boxes = []
        for piece in np.array_split(np.arange(shape[dim]), nranks):
            start = int(piece[0]) if piece.size else shape[dim]
            lower = tuple(start if d == dim else 0 for d in range(ndim))
            upper = tuple(start + piece.size if d == dim else n for d, n in enumerate(shape))
            boxes.append(Box(lower, upper))
        return boxes
    grid = ProcessGrid(
        shape=draw(st.sampled_from(grid_shapes(nranks, ndim))), layout=draw(st.sampled_from([ROW, COL]))
    )
    first = tuple(draw(st.integers(0, p - 1)) for p in grid.shape)
    if kind == "noncyclic":
        return BlockNonCyclic(grid, first_process=first)
    return BlockCyclic(grid, draw(st.tuples(*[st.integers(1, 4)] * ndim)), first_process=first)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(nranks=st.integers(1, 8), ndim=st.integers(1, 3), data=st.data())
def test_plan_reassembles_the_target_exactly(runtime, nranks, ndim, data):
    """Applying the plan to the source locals yields the target locals; every element moves exactly once."""
    runtime(nranks)
    shape = data.draw(st.tuples(*[st.integers(1, 9)] * ndim))
    source, target = data.draw(layouts(nranks, shape)), data.draw(layouts(nranks, shape))
    global_array = np.arange(np.prod(shape), dtype=np.int64).reshape(shape)
    sources = [reference_local(source, global_array, nranks, r) for r in range(nranks)]
    expected = [reference_local(target, global_array, nranks, r) for r in range(nranks)]
    plan = redistribution_plan(source, target, shape, nranks)
    result = apply_plan(plan, sources, [e.shape for e in expected])
    for got, want in zip(result, expected, strict=True):
        assert np.array_equal(got, want)
    assert sum(exchange.size for exchange in plan) == global_array.size
    for exchange in plan:
        for (lower, upper), (src, _) in zip(exchange.boxes(), exchange.slices(), strict=True):
            window = tuple(slice(a, b) for a, b in zip(lower, upper, strict=True))
            assert np.array_equal(global_array[window], sources[exchange.src_rank][src])


def test_slab_x_to_slab_y_is_an_all_to_all(runtime):
    """X slabs to Y slabs on 4 ranks: 16 exchanges, (src, dst) exchanges the rows of src and the columns of dst."""
    runtime(4)
    plan = redistribution_plan(Slab.X, Slab.Y, (8, 8), 4)
    assert [(e.src_rank, e.dst_rank) for e in plan] == [(s, d) for s in range(4) for d in range(4)]
    exchange = plan[6]  # rank 1 -> rank 2
    assert list(exchange.boxes()) == [((2, 4), (4, 6))]
    assert exchange.segments == ((Segment(2, 4, 0, 2),), (Segment(4, 6, 4, 0),))


def test_identical_layouts_stay_local(runtime):
    """Redistributing to the same layout only copies each rank's data to itself."""
    runtime(3)
    grid = ProcessGrid(shape=(3, 1))
    plan = redistribution_plan(BlockCyclic(grid, (2, 5)), BlockCyclic(grid, (2, 5)), (11, 5), 3)
    assert all(e.src_rank == e.dst_rank for e in plan) and len(plan) == 3


def test_plan_validates_its_inputs(runtime):
    """Mismatched layouts, shapes or rank counts raise before any plan is made."""
    runtime(2)
    with pytest.raises(ValueError, match="does not fit"):
        redistribution_plan(Slab.Z, Slab.X, (4, 4), 2)
    with pytest.raises(ValueError, match="holds 2 ranks, not nranks=4"):
        redistribution_plan(BlockNonCyclic(ProcessGrid(shape=(2, 1))), Slab.X, (4, 4), 4)
    with pytest.raises(ValueError, match="overlap"):
        redistribution_plan(Slab.X, [Box((0, 0), (3, 4)), Box((2, 0), (4, 4))], (4, 4), 2)
    with pytest.raises(ValueError, match=r"global_shape\[0\]"):
        redistribution_plan(Slab.X, Slab.Y, (0, 4), 2)
