"""ProcessGrid: shape/layout/process_array semantics, rank <-> coordinates, validation."""

from __future__ import annotations

import numpy as np
import pytest

from nvmath.distributed.distribution import ProcessGrid

ROW, COL = ProcessGrid.Layout.ROW_MAJOR, ProcessGrid.Layout.COL_MAJOR


def test_layout_values_match_nvmath_python():
    """COL_MAJOR is 0 and ROW_MAJOR is 1 (cuBLASMp's grid layout enum)."""
    assert (int(COL), int(ROW)) == (0, 1)


@pytest.mark.parametrize("layout", [ROW, COL])
@pytest.mark.parametrize("shape", [(2, 3), (3, 2), (6,), (1, 6), (6, 1), (3, 1, 2)])
def test_coords_follow_the_layout(runtime, shape, layout):
    """Row-major numbers the grid in C order, column-major in Fortran order; rank() inverts coords()."""
    runtime(6)
    grid = ProcessGrid(shape=shape, layout=layout)
    expected = np.arange(6).reshape(shape, order="C" if layout == ROW else "F")
    for point in np.ndindex(*shape):
        assert grid.rank(point) == expected[point]
        assert grid.coords(int(expected[point])) == point
    assert grid.shape == shape and grid.layout == layout and grid.nranks == 6 and grid.process_array is None


def test_column_major_2x2_picture(runtime):
    """The documented 2x2 column-major grid: [[0, 2], [1, 3]]."""
    runtime(4)
    grid = ProcessGrid(shape=(2, 2), layout=COL)
    assert [[grid.rank((i, j)) for j in range(2)] for i in range(2)] == [[0, 2], [1, 3]]


def test_layout_may_be_omitted_only_for_a_one_dimensional_partition(runtime):
    """A P x 1 / 1 x P grid defaults to ROW_MAJOR; a grid splitting two dimensions needs a layout."""
    runtime(4)
    assert ProcessGrid(shape=(1, 4)).layout == ROW
    assert ProcessGrid(shape=(4, 1)).partition_dim == 0
    assert ProcessGrid(shape=(1, 4)).partition_dim == 1
    with pytest.raises(ValueError, match="layout is required"):
        ProcessGrid(shape=(2, 2))
    assert ProcessGrid(shape=(2, 2), layout=ROW).partition_dim is None


def test_explicit_process_array(runtime):
    """process_array places each rank explicitly; shape follows it and it cannot be modified."""
    runtime(4)
    grid = ProcessGrid(process_array=[[3, 0], [1, 2]])
    assert grid.shape == (2, 2) and grid.layout is None
    assert grid.coords(3) == (0, 0) and grid.rank((1, 1)) == 2
    assert not grid.process_array.flags.writeable
    assert ProcessGrid(process_array=[[0, 1], [2, 3]], layout=ROW) == ProcessGrid(shape=(2, 2), layout=ROW)


def test_equality_compares_the_rank_placement(runtime):
    """Grids are equal when every grid point holds the same rank; 1-D grids ignore the layout."""
    runtime(4)
    assert ProcessGrid(shape=(1, 4), layout=ROW) == ProcessGrid(shape=(1, 4), layout=COL)
    assert ProcessGrid(shape=(2, 2), layout=ROW) != ProcessGrid(shape=(2, 2), layout=COL)
    assert ProcessGrid(shape=(2, 2), layout=COL) == ProcessGrid(process_array=[[0, 2], [1, 3]])
    assert hash(ProcessGrid(shape=(1, 4), layout=ROW)) == hash(ProcessGrid(shape=(1, 4), layout=COL))


def test_promoted_appends_unit_dimensions_keeping_the_numbering(runtime):
    """promoted(ndim) appends size-1 grid dimensions; every rank keeps its leading coordinates."""
    runtime(6)
    for grid in (ProcessGrid(shape=(2, 3), layout=COL), ProcessGrid(process_array=[[5, 1, 2], [0, 3, 4]])):
        bigger = grid.promoted(4)
        assert bigger.shape == (2, 3, 1, 1)
        assert all(bigger.coords(r) == grid.coords(r) + (0, 0) for r in range(6))


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({}, ValueError, "shape .*or process_array"),
        ({"shape": (2, 3), "layout": ROW}, ValueError, r"6 places but there are 4 processes"),
        ({"shape": (-1, 4), "layout": ROW}, ValueError, r"shape\[0\] must be an integer >= 1, got -1"),
        ({"shape": (0, 4), "layout": ROW}, ValueError, r"shape\[0\]"),
        ({"shape": (2.0, 2), "layout": ROW}, TypeError, r"shape\[0\] must be an integer, got 2.0"),
        ({"shape": (2, 2), "layout": 1}, TypeError, "layout must be a ProcessGrid.Layout"),
        ({"process_array": [[0, 1], [1, 2]]}, ValueError, "exactly once"),
        ({"process_array": [0, 1, 2]}, ValueError, "3 places but there are 4"),
        ({"process_array": [[0.0, 1.0], [2.0, 3.0]]}, TypeError, "integer ranks"),
        (
            {"process_array": [[0, 1], [2, 3]], "shape": (4, 1)},
            ValueError,
            "does not match process_array.shape",
        ),
        ({"process_array": [[0, 1], [2, 3]], "layout": COL}, ValueError, "COL_MAJOR order"),
    ],
)
def test_bad_grids_are_refused(runtime, kwargs, error, match):
    """Missing, non-integer, non-positive, mis-sized or inconsistent grids raise typed errors naming the value."""
    runtime(4)
    with pytest.raises(error, match=match):
        ProcessGrid(**kwargs)


def test_bad_ranks_and_coords(runtime):
    """coords() and rank() refuse ranks and points outside the grid."""
    runtime(4)
    grid = ProcessGrid(shape=(2, 2), layout=ROW)
    with pytest.raises(ValueError, match=r"rank must be in \[0, 4\), got 4"):
        grid.coords(4)
    with pytest.raises(ValueError, match="outside the process grid"):
        grid.rank((2, 0))
