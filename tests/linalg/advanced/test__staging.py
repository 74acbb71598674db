"""Pure parts of the planner-owned operand copies (``_staging``): dense strides and the stage rule."""

from __future__ import annotations

import numpy as np
import pytest

from nvmath.linalg.advanced import _staging as S


@pytest.mark.parametrize(
    ("shape", "order", "want"),
    [
        ((6, 4), "col", (1, 6)),
        ((6, 4), "row", (4, 1)),
        ((2, 3, 6, 4), "col", (72, 24, 1, 6)),
        ((2, 6, 4), "row", (24, 4, 1)),
    ],
)
def test_dense_strides_match_numpy(shape, order, want):
    """Batch dimensions in C order over matrices in the asked order, as numpy lays such a copy out."""
    if order == "col":
        ref = np.swapaxes(np.empty(shape[:-2] + shape[-2:][::-1], np.float32), -1, -2)
    else:
        ref = np.empty(shape, np.float32)
    assert S.dense_strides(shape, order) == want == tuple(s // 4 for s in ref.strides)


def test_dense_strides_refuse_vectors():
    """A 1-D operand is never staged: ValueError naming the shape."""
    with pytest.raises(ValueError, match=r"\(5,\)"):
        S.dense_strides((5,), "col")


def test_stage_without_staged_operand_is_none():
    """A problem that reads its operands directly gets no copy (the planner's hot path is unchanged)."""
    assert S.stage(None, {}, None, None) is None
