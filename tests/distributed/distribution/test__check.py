"""Validation of integers and shapes: typed errors naming the argument and the value."""

from __future__ import annotations

import numpy as np
import pytest

from nvmath.distributed.distribution._check import as_extent, as_int, as_int_tuple, as_shape
from nvmath.distributed.distribution._errors import NotAnIntegerError


def test_integers_are_accepted_including_numpy():
    """Python and numpy integers pass; sequences and 1-D arrays become tuples of int."""
    assert as_int(np.int64(3), "x") == 3 and type(as_int(np.int64(3), "x")) is int
    assert as_shape([2, np.int32(5)]) == (2, 5)
    assert as_shape(np.array([4, 1])) == (4, 1)


@pytest.mark.parametrize("value", [2.0, "3", None, True])
def test_non_integers_raise_a_type_error_that_is_also_a_value_error(value):
    """A non-integer is a TypeError (and a ValueError, as nvmath-python raises) naming the value."""
    with pytest.raises(NotAnIntegerError, match="rank must be an integer") as info:
        as_int(value, "rank")
    assert isinstance(info.value, TypeError) and isinstance(info.value, ValueError)


def test_bounds_name_the_minimum():
    """Values below the minimum raise ValueError naming the argument, the minimum and the value."""
    with pytest.raises(ValueError, match=r"ndim must be an integer >= 1, got 0"):
        as_extent(0, "ndim", 1)
    with pytest.raises(ValueError, match=r"global_shape\[1\] must be an integer >= 1, got -2"):
        as_shape((3, -2))


@pytest.mark.parametrize("values", ["ab", {1, 2}, {1: 2}, 5, np.array(3)])
def test_unordered_or_scalar_sequences_are_type_errors(values):
    """Strings, sets, mappings and scalars are not shapes (a TypeError, and a ValueError as in nvmath-python)."""
    with pytest.raises(NotAnIntegerError, match="shape must be a sequence"):
        as_int_tuple(values, "shape", 1)


def test_length_is_checked():
    """An empty sequence, or a wrong length when one is required, raises ValueError."""
    with pytest.raises(ValueError, match="at least one element"):
        as_shape(())
    with pytest.raises(ValueError, match="block_sizes must have 2 elements, got 3"):
        as_int_tuple((1, 2, 3), "block_sizes", 1, 2)
