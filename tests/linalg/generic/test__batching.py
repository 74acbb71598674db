"""Batching helpers: collapsing an implicit batch into strided launches; broadcasting explicit sequences."""

from __future__ import annotations

import pytest

from nvmath.linalg.generic._batching import batch_plan, zip_broadcast


def test_contiguous_batch_is_one_launch():
    """A batch every operand walks with one stride is one launch of all matrices."""
    plan = batch_plan((2, 3), {"a": (30, 10), "b": (0, 0), "d": (60, 20)})
    assert plan.count == 6 and plan.strides == {"a": 10, "b": 0, "d": 20} and len(plan.offsets) == 1


def test_mixed_broadcast_loops_the_outer_dims():
    """(4, 1) with (3,): 4 launches of 3 matrices at the right offsets."""
    plan = batch_plan((4, 3), {"a": (6, 0), "b": (0, 6), "d": (18, 6)})
    assert plan.count == 3 and plan.strides == {"a": 0, "b": 6, "d": 6}
    assert [o["a"] for o in plan.offsets] == [0, 6, 12, 18] and [o["d"] for o in plan.offsets] == [
        0,
        18,
        36,
        54,
    ]


def test_per_matrix_plan():
    """strided=False: one launch per matrix."""
    plan = batch_plan((2, 2), {"a": (8, 4)}, strided=False)
    assert plan.count == 1 and [o["a"] for o in plan.offsets] == [0, 4, 8, 12]
    assert batch_plan((), {"a": ()}).offsets == [{"a": 0}]


def test_zip_broadcast():
    """Length-1 sequences and non-sequences repeat; other lengths must agree."""
    n, out = zip_broadcast({"a": [1, 2, 3], "b": [9], "c": None})
    assert n == 3 and out == {"a": [1, 2, 3], "b": [9, 9, 9], "c": [None] * 3}
    with pytest.raises(ValueError, match="a has 2, b has 3"):
        zip_broadcast({"a": [1, 2], "b": [1, 2, 3]})
    with pytest.raises(ValueError, match="empty"):
        zip_broadcast({"a": [], "b": [1]})
