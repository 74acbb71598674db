"""Tests of nvmath.linalg.advanced._layout: matrix views, batch broadcasting and collapsing."""

from __future__ import annotations

import math

import pytest

from nvmath.linalg.advanced import _layout as L
from nvmath.linalg.advanced._layout import MatrixView, OperandSpec, Order

S = OperandSpec


def test_dense_batch_strides_follow_order():
    """dense_batch_strides lays batch axes out in the batch order (outer to inner)."""
    bt = L.BatchTraits((2, 1, 3), 6, (2, 0), (("a", 1),))
    assert L.dense_batch_strides(bt, 10) == (10, 60, 20)
    natural = L.BatchTraits((2, 1, 3), 6, (0, 2), (("a", 1),))
    assert L.dense_batch_strides(natural, 10) == (30, 30, 10)


def test_matrix_view_col_ld_rules():
    """col_ld: unit row stride and ld >= rows; vectors accept any stride; ld 0 only when allowed."""
    assert MatrixView(3, 4, 1, 3).col_ld() == 3
    assert MatrixView(3, 4, 1, 2).col_ld() is None
    assert MatrixView(1, 4, 9, 5).col_ld() == 5
    assert MatrixView(3, 1, 1, 99).col_ld() == 3
    assert MatrixView(3, 4, 1, 0).col_ld() is None and MatrixView(3, 4, 1, 0).col_ld(allow_zero_ld=True) == 0
    assert MatrixView(3, 4, 4, 1).hint() == Order.ROW and MatrixView(1, 4, 4, 1).hint() is None


def test_tile_stride_rejects_non_broadcastable_extra_tensor():
    """tile_stride names the tensor whose batch shape does not broadcast to the problem's."""
    bt = L.collapse_batch([("a", (2, 3), (3, 1))])
    with pytest.raises(ValueError, match="'bias'"):
        L.tile_stride("bias", (4,), (1,), bt)
    with pytest.raises(ValueError, match="single"):
        L.tile_stride("bias", (1, 3), (0, 5), bt)
    assert L.tile_stride("bias", (2, 3), (3, 1), bt) == 1 and L.tile_stride("bias", (), (), bt) == 0


def test_batch_count_is_product_of_broadcast_shape():
    """The batch count is the product of the broadcast batch shape."""
    bt = L.collapse_batch([("a", (2, 1), (12, 12)), ("b", (1, 1), (15, 15))])
    assert bt.shape == (2, 1) and bt.count == math.prod((2, 1)) and bt.order == (0,)


@pytest.mark.parametrize(
    ("operands", "shape", "order", "strides"),
    [
        ([("a", (4,), (12,)), ("b", (), ())], (4,), (0,), (("a", 12), ("b", 0))),
        ([("a", (2, 3), (3, 1)), ("b", (1, 3), (0, 5))], None, None, None),
        ([("a", (2, 3), (1, 2)), ("b", (2, 3), (10, 20))], (2, 3), (1, 0), (("a", 1), ("b", 10))),
        ([("a", (2, 3), (3, 1)), ("b", (2, 3), (1, 2))], None, None, None),
        ([("a", (2, 1, 3), (30, 30, 10)), ("c", (2, 4, 3), (0, 0, 0))], None, None, None),
        ([("a", (2, 3), (40, 10)), ("b", (2, 3), (0, 0)), ("c", (1, 3), (9, 3))], None, None, None),
        ([("a", (2, 3), (30, 10)), ("b", (2, 3), (0, 0))], (2, 3), (0, 1), (("a", 10), ("b", 0))),
        ([("a", (2, 3), (40, 10)), ("b", (2, 3), (0, 0))], None, None, None),
    ],
)
def test_collapse_batch_cases(operands, shape, order, strides):
    """collapse_batch: broadcast operands get stride 0, permuted batches keep their order, mixtures fail."""
    if shape is None:
        with pytest.raises(ValueError, match="operand '|do not broadcast"):
            L.collapse_batch(operands)
        return
    bt = L.collapse_batch(operands)
    assert (bt.shape, bt.order, bt.strides, bt.count) == (shape, order, strides, math.prod(shape))


def test_check_operand_spec_normalizes_tuples():
    """check_operand_spec accepts a plain tuple of fields and returns int tuples."""
    spec = L.check_operand_spec("a", ((2, 3), (3, 1), "float32"))
    assert spec == S((2, 3), (3, 1), "float32", False)


def test_batch_stride_lookup_unknown_name():
    """BatchTraits.stride raises KeyError for an unknown operand name."""
    bt = L.collapse_batch([("a", (2,), (6,))])
    with pytest.raises(KeyError):
        bt.stride("z")


@pytest.mark.parametrize("module", ["_options", "_typemaps", "_epilogs", "_layout", "_traits"])
def test_all_names_exist(module):
    """Every name a module lists in __all__ exists in it."""
    import importlib

    mod = importlib.import_module(f"nvmath.linalg.advanced.{module}")
    assert [n for n in mod.__all__ if not hasattr(mod, n)] == []
