"""Slab and Box: local shapes, binding, equality, validation (Distribution base behaviour included)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nvmath.distributed.distribution import BindDistributionError, Box, Distribution, Slab

shapes = st.lists(st.integers(1, 12), min_size=1, max_size=4).map(tuple)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(shape=shapes, nranks=st.integers(1, 8), data=st.data())
def test_slab_shape_matches_array_split(runtime, shape, nranks, data):
    """Slab(d).shape(rank, global_shape) is the shape of np.array_split(global, P, axis=d)[rank]."""
    runtime(nranks)
    dim = data.draw(st.integers(0, len(shape) - 1))
    pieces = np.array_split(np.empty(shape), nranks, axis=dim)
    for rank in range(nranks):
        assert Slab(dim).shape(rank, shape) == pieces[rank].shape


def test_slab_xyz_and_extra_index_to_first_ranks(runtime):
    """Slab.X/Y/Z split dimensions 0/1/2; the first s % P ranks get one more index."""
    runtime(4)
    assert (Slab.X.partition_dim, Slab.Y.partition_dim, Slab.Z.partition_dim) == (0, 1, 2)
    assert (Slab.X.name, Slab.Y.name, Slab.Z.name, Slab(3).name) == ("Slab.X", "Slab.Y", "Slab.Z", "Slab")
    assert [Slab.Y.shape(r, (5, 10, 2))[1] for r in range(4)] == [3, 3, 2, 2]
    assert [Slab.Z.shape(r, (1, 1, 3)) for r in range(4)] == [(1, 1, 1)] * 3 + [(1, 1, 0)]
    assert Slab.X.ndim is None


def test_slab_equality_ignores_an_unset_ndim(runtime):
    """Slabs on the same dimension are equal unless both have different dimensionalities."""
    assert Slab(0) == Slab.X == Slab(0, ndim=3)
    assert Slab(0, ndim=2) != Slab(0, ndim=3)
    assert Slab.X != Slab.Y and Slab.X != "Slab.X"
    assert len({Slab.X, Slab(0, 2), Slab.Y}) == 2


def test_binding_returns_a_bound_copy(runtime):
    """bind() returns a copy bound to the global shape; the shared Slab.X stays unbound."""
    runtime(3, rank=2)
    bound = Slab.X.bind((7, 4), shape=(2, 4))
    assert bound.global_shape == (7, 4) and bound.ndim == 2
    assert Slab.X.global_shape is None and Slab.X.ndim is None
    assert bound.shape(0) == (3, 4) and bound.shape(2, (7, 4)) == (2, 4)
    assert bound.bind((7, 4)).global_shape == (7, 4)
    assert (
        isinstance(bound.copy(), Slab) and bound.copy() is not bound and bound.copy().global_shape == (7, 4)
    )


def test_binding_checks_the_local_shape(runtime):
    """A local shape other than this rank's slab raises BindDistributionError; rebinding elsewhere too."""
    runtime(3, rank=0)
    with pytest.raises(BindDistributionError, match=r"expected \(3, 4\)"):
        Slab.X.bind((7, 4), shape=(2, 4))
    with pytest.raises(BindDistributionError, match="already bound"):
        Slab.X.bind((7, 4)).bind((8, 4))


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda: Slab.X.shape(0), RuntimeError, "not bound .*pass global_shape"),
        (lambda: Slab.X.shape(4, (8, 8)), ValueError, r"rank must be in \[0, 4\) for 4 processes, got 4"),
        (lambda: Slab.X.shape(-1, (8, 8)), ValueError, "got -1"),
        (lambda: Slab.X.shape(1.0, (8, 8)), TypeError, "rank must be an integer"),
        (lambda: Slab.X.shape(0, (8, 0)), ValueError, r"global_shape\[1\] must be an integer >= 1, got 0"),
        (lambda: Slab.Z.shape(0, (8, 8)), ValueError, "splits dimension 2"),
        (lambda: Slab(0, ndim=3).shape(0, (8, 8)), ValueError, "has 2 dimensions"),
        (lambda: Slab.X.bind((8, 8)).shape(0, (8, 9)), ValueError, "differs from the shape"),
        (lambda: Slab(-1), ValueError, "partition_dim must be an integer >= 0, got -1"),
        (lambda: Slab("x"), TypeError, "partition_dim must be an integer"),
        (lambda: Slab(2, ndim=2), ValueError, r"partition_dim \(2\) must be < ndim \(2\)"),
        (lambda: Slab(0, ndim=0), ValueError, "ndim must be an integer >= 1"),
    ],
)
def test_slab_bad_input(runtime, call, error, match):
    """Bad ranks, shapes and constructor arguments raise typed errors naming the value."""
    runtime(4)
    with pytest.raises(error, match=match):
        call()


def test_box_basics(runtime):
    """A Box is this rank's lower/upper corners: shape upper - lower, unpacking, indexing, equality."""
    runtime(2, rank=1)
    box = Box((2, 0), [4, np.int64(3)])
    lower, upper = box
    assert (lower, upper, box[0], box[1]) == ((2, 0), (4, 3), (2, 0), (4, 3))
    assert (
        box.ndim == 2
        and box.box_shape == (2, 3)
        and box.shape(1) == (2, 3)
        and box.shape(1, (4, 3)) == (2, 3)
    )
    assert (
        box == Box([2, 0], (4, 3)) and box != Box((2, 0), (4, 4)) and hash(box) == hash(Box((2, 0), (4, 3)))
    )
    assert Box((1, 1), (1, 5)).box_shape == (0, 4)
    assert isinstance(box, Distribution) and box.bind((4, 3), shape=(2, 3)).global_shape == (4, 3)


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda: Box((3, 0), (2, 4)), ValueError, "must not exceed upper"),
        (lambda: Box((0,), (2, 4)), ValueError, "same number of dimensions"),
        (lambda: Box((-1, 0), (2, 4)), ValueError, r"lower\[0\] must be an integer >= 0, got -1"),
        (lambda: Box((0.5, 0), (2, 4)), TypeError, r"lower\[0\] must be an integer"),
        (lambda: Box((), ()), ValueError, "at least one element"),
        (lambda: Box((0, 0), (2, 4)).shape(0), RuntimeError, "only this process's part"),
        (lambda: Box((0, 0), (2, 4)).shape(1, (2, 3)), ValueError, "reaches outside"),
        (lambda: Box((0, 0), (2, 4)).bind((2, 4), shape=(2, 3)), BindDistributionError, "not the shape"),
        (lambda: Box((0, 0), (2, 4)).bind((2, 4, 1)), ValueError, "has 3 dimensions"),
        (lambda: Box((0, 0), (2, 4))[2], IndexError, "two items"),
    ],
)
def test_box_bad_input(runtime, call, error, match):
    """Inverted, mismatched, negative, non-integer, foreign-rank and out-of-bounds boxes are refused."""
    runtime(2, rank=1)
    with pytest.raises(error, match=match):
        call()


def test_distribution_is_abstract():
    """The base class cannot be instantiated."""
    with pytest.raises(TypeError):
        Distribution()  # type: ignore[abstract]
