"""Pure traits: result shapes, the order (row / col formulation), ops, leading dimensions, structured
routine parameters, the operands that need a copy, and the shape / dtype / stride errors."""

from __future__ import annotations

import pytest

from nvmath.bindings.cublas import FillMode, Operation, SideMode
from nvmath.linalg.generic._qualifiers import GENERAL, Qualifier
from nvmath.linalg.generic._traits import OperandInfo, broadcast_batch, problem_traits


def info(shape, order="row", dtype="float32", conj=False, pad=0):
    """OperandInfo of a dense matrix batch (C-ordered batch) in row / col order, rows padded by ``pad``."""
    *batch, r, c = shape
    if order == "row":
        mat = (c + pad, 1)
        step = r * (c + pad)
    else:
        mat = (1, r + pad)
        step = c * (r + pad)
    strides = []
    for d in reversed(batch):
        strides.append(step)
        step *= d
    return OperandInfo(tuple(shape), tuple(reversed(strides)) + mat, dtype, conj)


def test_row_major_is_the_transposed_formulation():
    """Row-major operands: D^T = B^T A^T, both op N, ld the row pitch; D row-major."""
    t = problem_traits(info((3, 4), pad=2), info((4, 5)))
    assert (t.kind, t.order, t.x1, t.cm) == ("gemm", "row", "b", (5, 3, 4))
    assert (t.layouts["a"].op, t.layouts["a"].ld, t.layouts["b"].op, t.layouts["b"].ld) == (0, 6, 0, 5)
    assert t.result_shape == (3, 5) and t.result_strides == (5, 1)


def test_column_major_operand_is_transposed_op():
    """A column-major operand is read with op T in the row formulation (and C when conjugated)."""
    t = problem_traits(info((3, 4), "col", "complex64", conj=True), info((4, 5), dtype="complex64"))
    assert t.order == "row" and t.layouts["a"].op == Operation.C and t.layouts["a"].ld == 3
    assert not t.copies


def test_conjugated_row_major_switches_order():
    """A conjugated row-major operand is readable only transposed: the column formulation is chosen."""
    t = problem_traits(info((3, 4), "row", "complex64", conj=True), info((4, 5), "col", "complex64"))
    assert t.order == "col" and t.layouts["a"].op == Operation.C and not t.copies
    assert t.result_strides == (1, 3)


def test_conflicting_conjugations_need_a_copy():
    """Two conjugated operands in opposite layouts: one copy, in the chosen order."""
    t = problem_traits(info((3, 4), "row", "complex64", True), info((4, 5), "col", "complex64", True))
    assert len(t.copies) == 1


def test_batch_broadcast_and_vectors():
    """Batch dims broadcast as numpy.matmul ((4, 1) with (3,)); 1-D operands are promoted and squeezed."""
    t = problem_traits(info((4, 1, 2, 3)), info((3, 3, 2)))
    assert t.batch == (4, 3) and t.result_shape == (4, 3, 2, 2)
    assert t.layouts["a"].batch_strides == (6, 0) and t.layouts["b"].batch_strides == (0, 6)
    t = problem_traits(OperandInfo((4,), (1,), "float32"), info((4, 5)))
    assert t.result_shape == (5,)
    t = problem_traits(info((3, 4)), OperandInfo((4,), (2,), "float32"))
    assert t.result_shape == (3,)
    assert broadcast_batch([(2, 1), (5,)]) == (2, 5)


def test_symmetric_row_major_flips_the_triangle():
    """A row-major symmetric operand is read transposed: its stored triangle flips; side follows x1."""
    q = (Qualifier("sy", lower=True), GENERAL, GENERAL)
    t = problem_traits(info((4, 4)), info((4, 3)), qualifiers=q)
    assert (t.kind, t.structured, t.order) == ("symm", "a", "row")
    assert t.uplo == FillMode.UPPER and t.side == SideMode.RIGHT
    t = problem_traits(info((4, 4), "col"), info((4, 3), "col"), qualifiers=q)
    assert t.order == "col" and t.uplo == FillMode.LOWER and t.side == SideMode.LEFT


def test_hermitian_layout_rule():
    """A Hermitian operand read transposed is its conjugate: the layout decides which order avoids copies."""
    q = (GENERAL, Qualifier("he", conjugate=True), GENERAL)
    t = problem_traits(
        info((3, 4), "row", "complex64"), info((4, 4), "col", "complex64", conj=True), qualifiers=q
    )
    assert t.kind == "hemm" and t.order == "row" and not t.copies
    real = problem_traits(info((4, 4)), info((4, 2)), qualifiers=(Qualifier("he"), GENERAL, GENERAL))
    assert real.kind == "symm"  # a real Hermitian matrix is symmetric


def test_diagonal_operand():
    """A diagonal qualifier needs a 1-D vector; its length (with incx) sets the dimension."""
    q = (Qualifier("dg", incx=-2), GENERAL, GENERAL)
    t = problem_traits(OperandInfo((7,), (3,), "float64"), info((4, 2), dtype="float64"), qualifiers=q)
    assert t.kind == "dgmm" and t.incx == -6 and (t.m, t.k) == (4, 4)
    with pytest.raises(ValueError, match="1-D vector"):
        problem_traits(info((4, 4)), info((4, 2)), qualifiers=q)
    with pytest.raises(ValueError, match="inner dimensions"):
        problem_traits(
            OperandInfo((5,), (1,), "float32"), info((4, 2)), qualifiers=(Qualifier("dg"), GENERAL, GENERAL)
        )


@pytest.mark.parametrize(
    ("a", "b", "c", "match"),
    [
        (info((3, 4)), info((5, 2)), None, "inner dimensions"),
        (info((3, 4)), info((4, 2), dtype="float64"), None, "dtypes must match"),
        (info((3, 4), dtype="int8"), info((4, 2), dtype="int8"), None, "not supported"),
        (OperandInfo((3, 4), (-4, 1), "float32"), info((4, 2)), None, "negative strides"),
        (info((2, 3, 4)), info((3, 4, 2)), None, "do not broadcast"),
        (info((3, 4)), info((4, 2)), info((3, 1)), "result's shape"),
        (info((3, 4)), info((4, 2)), info((2, 3, 2)), "result.s shape"),
    ],
)
def test_errors(a, b, c, match):
    """Bad shapes, dtypes and strides are ValueErrors naming the values."""
    with pytest.raises(ValueError, match=match):
        problem_traits(a, b, c)


def test_structured_must_be_square():
    """symm / hemm / trmm operands must be square."""
    with pytest.raises(ValueError, match="square"):
        problem_traits(info((3, 4)), info((4, 2)), qualifiers=(Qualifier("tr"), GENERAL, GENERAL))


def test_inplace_needs_row_or_col_c():
    """inplace: c's layout fixes the order; a c with no BLAS layout is refused."""
    t = problem_traits(info((3, 4)), info((4, 2)), info((3, 2), "col"), inplace=True)
    assert t.order == "col" and t.layouts["d"].ld == 3
    with pytest.raises(ValueError, match="inplace"):
        problem_traits(info((3, 4)), info((4, 2)), OperandInfo((3, 2), (4, 2), "float32"), inplace=True)
