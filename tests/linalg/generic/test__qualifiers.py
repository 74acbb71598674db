"""Matrix qualifiers: the record dtype and factories of nvmath-python 1.0, and their parsing/checks."""

from __future__ import annotations

import numpy as np
import pytest

import nvmath.linalg as la
from nvmath.linalg.generic._qualifiers import GENERAL, Qualifier, parse_qualifiers


def test_dtype_and_enums_match_nvmath_python():
    """matrix_qualifiers_dtype fields and the enum values are nvmath-python's (cuBLAS's)."""
    assert la.matrix_qualifiers_dtype.names == ("abbreviation", "conjugate", "uplo", "diag", "incx")
    assert (la.FillMode.LOWER, la.FillMode.UPPER, la.FillMode.FULL) == (0, 1, 2)
    assert (la.DiagType.NON_UNIT, la.DiagType.UNIT) == (0, 1)
    assert (la.SideMode.LEFT, la.SideMode.RIGHT) == (0, 1)


@pytest.mark.parametrize(
    ("factory", "abbr"),
    [
        (la.GeneralMatrixQualifier, "ge"),
        (la.SymmetricMatrixQualifier, "sy"),
        (la.HermitianMatrixQualifier, "he"),
        (la.TriangularMatrixQualifier, "tr"),
        (la.DiagonalMatrixQualifier, "dg"),
    ],
)
def test_create_records(factory, abbr):
    """create() gives a record of matrix_qualifiers_dtype; the classes cannot be instantiated."""
    rec = factory.create()
    assert rec.dtype == la.matrix_qualifiers_dtype and rec["abbreviation"] == abbr
    assert not rec["conjugate"] and rec["incx"] == 1
    with pytest.raises(RuntimeError, match="create"):
        factory()


def test_records_assemble_into_arrays():
    """Records go into arrays by np.array([...]) and by item assignment, as users write them."""
    q = np.full(3, la.GeneralMatrixQualifier.create(), dtype=la.matrix_qualifiers_dtype)
    q[1] = la.TriangularMatrixQualifier.create(conjugate=True, uplo=la.FillMode.UPPER, diag=la.DiagType.UNIT)
    a, b, c = parse_qualifiers(q, has_c=True)
    assert a == GENERAL and c == GENERAL
    assert b == Qualifier("tr", True, False, True, 1)
    q2 = np.array([la.DiagonalMatrixQualifier.create(incx=-2), la.GeneralMatrixQualifier.create()])
    assert parse_qualifiers(q2, has_c=False)[0] == Qualifier("dg", False, True, False, -2)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [({"conjugate": 1}, "conjugate"), ({"uplo": 2}, "uplo"), ({"uplo": 7}, "uplo")],
)
def test_factory_bad_values(kwargs, match):
    """Bad factory arguments are typed errors naming the value and the allowed set."""
    with pytest.raises((TypeError, ValueError), match=match):
        la.SymmetricMatrixQualifier.create(**kwargs)
    with pytest.raises(ValueError, match="incx"):
        la.DiagonalMatrixQualifier.create(incx=0)


def test_parse_errors():
    """Wrong length, a structured c, two structured operands and non-qualifier values are refused."""
    G, S = la.GeneralMatrixQualifier.create(), la.SymmetricMatrixQualifier.create()
    with pytest.raises(ValueError, match="2 \\(a, b\\)"):
        parse_qualifiers(np.array([G, G, G]), has_c=False)
    with pytest.raises(ValueError, match="3 \\(a, b, c\\) or 2"):
        parse_qualifiers(np.array([G]), has_c=True)
    with pytest.raises(ValueError, match="c must carry a general"):
        parse_qualifiers(np.array([G, G, S]), has_c=True)
    with pytest.raises(ValueError, match="only one operand"):
        parse_qualifiers(np.array([S, S]), has_c=False)
    with pytest.raises(TypeError, match="matrix_qualifiers_dtype"):
        parse_qualifiers("sy", has_c=False)
    bad = np.array([G, G])
    bad[0]["abbreviation"] = "xx"
    with pytest.raises(ValueError, match="'xx'"):
        parse_qualifiers(bad, has_c=False)


def test_compute_type_and_matrix_qualifier_are_exported():
    """nvmath.linalg exports cuBLAS's ComputeType and the MatrixQualifier type alias (numpy arrays of
    matrix_qualifiers_dtype), as nvmath-python 1.0 does."""
    from nvmath.bindings import cublas

    assert la.ComputeType is cublas.ComputeType
    assert la.ComputeType.COMPUTE_32F == cublas.ComputeType.COMPUTE_32F
    assert la.MatrixQualifier is la.generic.MatrixQualifier
    assert isinstance(la.GeneralMatrixQualifier.create(), np.ndarray)
    assert {"ComputeType", "MatrixQualifier"} <= set(la.__all__)


@pytest.mark.parametrize(
    ("cls", "record", "valid"),
    [
        (la.GeneralMatrixQualifier, la.GeneralMatrixQualifier.create(), True),
        (la.GeneralMatrixQualifier, la.SymmetricMatrixQualifier.create(), False),
        (la.SymmetricMatrixQualifier, la.SymmetricMatrixQualifier.create(uplo=la.FillMode.UPPER), True),
        (la.HermitianMatrixQualifier, la.HermitianMatrixQualifier.create(conjugate=True), True),
        (la.TriangularMatrixQualifier, la.TriangularMatrixQualifier.create(diag=la.DiagType.UNIT), True),
        (la.TriangularMatrixQualifier, la.GeneralMatrixQualifier.create(), False),
        (la.DiagonalMatrixQualifier, la.DiagonalMatrixQualifier.create(), True),
        (la.DiagonalMatrixQualifier, la.DiagonalMatrixQualifier.create(incx=-1), True),
        (la.DiagonalMatrixQualifier, la.DiagonalMatrixQualifier.create(incx=2), False),
        (la.DiagonalMatrixQualifier, la.TriangularMatrixQualifier.create(), False),
    ],
)
def test_is_valid_checks_records_of_its_class(cls, record, valid):
    """is_valid is True exactly for records the class builds (abbreviation and field rules; a
    diagonal's incx must be 1 or -1, as nvmath-python 1.0 checks); it returns a numpy bool."""
    got = cls.is_valid(record)
    assert isinstance(got, np.bool_)
    assert bool(got) is valid


def test_is_valid_on_arrays_and_bad_fields():
    """is_valid checks every record of an array; a triangular record with an unknown diag or uplo
    value, or an array mixing kinds, is not valid."""
    q = np.full(2, la.TriangularMatrixQualifier.create(), dtype=la.matrix_qualifiers_dtype)
    assert la.TriangularMatrixQualifier.is_valid(q)
    bad = q.copy()
    bad[1]["diag"] = 7
    assert not la.TriangularMatrixQualifier.is_valid(bad)
    bad = q.copy()
    bad[0]["uplo"] = int(la.FillMode.FULL)
    assert not la.TriangularMatrixQualifier.is_valid(bad)
    mixed = q.copy()
    mixed[1] = la.GeneralMatrixQualifier.create()
    assert not la.TriangularMatrixQualifier.is_valid(mixed)
