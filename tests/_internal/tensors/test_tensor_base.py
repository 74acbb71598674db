"""Tests of nvmath._internal.tensors.base: the layout helpers."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from nvmath._internal.tensors.base import axis_order, check_strides, dense_strides, is_dense, span


def test_dense_strides_orders():
    """dense_strides gives C, F and permuted dense layouts."""
    assert dense_strides((2, 3, 4)) == (12, 4, 1)
    assert dense_strides((2, 3, 4), "F") == (1, 2, 6)
    assert dense_strides((2, 3, 4), (1, 0, 2)) == (4, 8, 1)
    assert dense_strides(()) == ()
    assert dense_strides((0, 3)) == (3, 1)
    with pytest.raises(ValueError, match="permutation"):
        dense_strides((2, 3), (0, 0))


def test_axis_order_round_trips_dense_strides():
    """axis_order of a dense layout reproduces the order that made it."""
    for order in [(0, 1, 2), (2, 1, 0), (1, 2, 0)]:
        assert axis_order((2, 3, 4), dense_strides((2, 3, 4), order)) == order


@pytest.mark.parametrize(
    "shape,strides,dense",
    [
        ((2, 3), (3, 1), True),
        ((2, 3), (1, 2), True),
        ((2, 3), (6, 1), False),  # gap
        ((2, 3), (0, 1), False),  # broadcast
        ((2, 3), (-3, 1), False),  # negative
        ((1, 3), (99, 1), True),  # size-1 axis stride is irrelevant
        ((0, 3), (5, 7), True),
        ((), (), True),
    ],
)
def test_is_dense(shape, strides, dense):
    """is_dense is True only for layouts covering one block exactly."""
    assert is_dense(shape, strides) is dense


def test_span():
    """span gives the lowest and highest element offsets, negative strides included."""
    assert span((2, 3), (3, 1)) == (0, 5)
    assert span((2, 3), (-3, 1)) == (-3, 2)
    assert span((0, 3), (3, 1)) == (0, -1)
    assert span((), ()) == (0, 0)


def test_check_strides():
    """check_strides defaults to C order and rejects wrong lengths and negative strides."""
    assert check_strides((2, 3), None) == (3, 1)
    assert check_strides((2, 3), [1, 2]) == (1, 2)
    with pytest.raises(ValueError, match="non-negative"):
        check_strides((2, 3), (1,))
    with pytest.raises(ValueError, match="non-negative"):
        check_strides((2, 3), (-1, 1))


@given(st.lists(st.integers(1, 4), min_size=1, max_size=4), st.randoms())
def test_dense_matches_numpy(shape, rnd):
    """For random permutations, dense_strides agrees with numpy's transposed C arrays."""
    order = list(range(len(shape)))
    rnd.shuffle(order)
    a = np.empty([shape[i] for i in order], dtype=np.int8)
    inverse = [order.index(i) for i in range(len(shape))]
    t = a.transpose(inverse)
    strides = dense_strides(tuple(shape), tuple(order))
    assert is_dense(tuple(shape), strides)
    for n, s, ns in zip(shape, strides, t.strides):
        if n > 1:
            assert s == ns
