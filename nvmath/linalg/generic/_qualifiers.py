"""Matrix qualifiers of the generic matmul: what structure an operand has and how to read it.

Call-compatible with nvmath-python 1.0: :data:`matrix_qualifiers_dtype` is a numpy structured dtype
``[("abbreviation", "U2"), ("conjugate", "?"), ("uplo", int), ("diag", int), ("incx", int)]``, one
record per operand (``a``, ``b`` and, when given, ``c``), built with the ``create()`` class methods::

    q = np.full(2, GeneralMatrixQualifier.create(), dtype=matrix_qualifiers_dtype)
    q[0] = SymmetricMatrixQualifier.create(uplo=FillMode.UPPER)   # a is symmetric, upper stored

The qualifier classes cannot be instantiated (``RuntimeError``), as in nvmath-python. This dtype is
not the one of :mod:`nvmath.linalg.advanced` (which has ``structure`` / ``is_conjugate``): the two
APIs define different records, so each keeps its own.

:func:`parse_qualifiers` turns a user value into one :class:`Qualifier` per operand (pure, checked).
"""

from __future__ import annotations

import dataclasses
import numbers
from collections.abc import Sequence
from typing import Any, TypeAlias

import numpy as np
import numpy.typing as npt

from nvmath.bindings.cublas import DiagType, FillMode, SideMode

__all__ = [
    "DiagType",
    "DiagonalMatrixQualifier",
    "FillMode",
    "GeneralMatrixQualifier",
    "HermitianMatrixQualifier",
    "MatrixQualifier",
    "Qualifier",
    "SideMode",
    "SymmetricMatrixQualifier",
    "TriangularMatrixQualifier",
    "matrix_qualifiers_dtype",
    "parse_qualifiers",
]

matrix_qualifiers_dtype = np.dtype(
    [("abbreviation", "U2"), ("conjugate", "?"), ("uplo", int), ("diag", int), ("incx", int)]
)
"""One record per operand: structure abbreviation (``ge``, ``sy``, ``he``, ``tr``, ``dg``),
conjugation, stored triangle (:class:`FillMode`), unit diagonal (:class:`DiagType`) and the
stride of a diagonal vector."""

MatrixQualifier: TypeAlias = npt.NDArray
"""The type of qualifier values: numpy arrays (or records) of :data:`matrix_qualifiers_dtype`, as
nvmath-python 1.0 names it."""

KINDS = {"ge": "general", "sy": "symmetric", "he": "hermitian", "tr": "triangular", "dg": "diagonal"}
"""Structure abbreviation -> its name."""


class _QualifierFactory:
    """Base of the qualifier classes: only ``create()`` builds a record."""

    abbreviation = "ge"

    def __init__(self, *args: Any, **kwargs: Any):
        raise RuntimeError(
            f"{type(self).__name__} cannot be instantiated; use {type(self).__name__}.create()"
        )

    @classmethod
    def _record(
        cls, conjugate: Any, uplo: Any = FillMode.LOWER, diag: Any = DiagType.NON_UNIT, incx: Any = 1
    ):
        if not isinstance(conjugate, (bool, np.bool_)):
            raise TypeError(f"conjugate must be True or False; got {type(conjugate).__name__}: {conjugate!r}")
        uplo = _enum("uplo", uplo, FillMode, (FillMode.LOWER, FillMode.UPPER))
        diag = _enum("diag", diag, DiagType, tuple(DiagType))
        if isinstance(incx, bool) or not isinstance(incx, numbers.Integral) or incx == 0:
            raise ValueError(f"incx must be a non-zero int; got {incx!r}")
        return np.array(
            (cls.abbreviation, bool(conjugate), uplo, diag, int(incx)), dtype=matrix_qualifiers_dtype
        )

    @classmethod
    def is_valid(cls, other: MatrixQualifier) -> np.bool_:
        """Whether every record of ``other`` (a :data:`matrix_qualifiers_dtype` array or record) is one
        this class builds: its abbreviation, a ``conjugate`` field and the class's own rules.

        Returns:
            A ``numpy.bool_``.
        """
        names = other.dtype.names or ()
        return np.bool_("conjugate" in names and bool(np.all(other["abbreviation"] == cls.abbreviation)))

    @classmethod
    def to_string(cls, other: MatrixQualifier) -> str:
        """A readable form of one qualifier record (as nvmath-python's ``to_string``), e.g.
        ``(tr, conjugate=False, uplo=UPPER, diag=UNIT, incx=1)``.

        Raises:
            ValueError: ``other`` is not a single record of :data:`matrix_qualifiers_dtype`.
        """
        rec = np.asarray(other)
        if rec.dtype.names is None or rec.size != 1:
            raise ValueError(f"to_string takes one matrix_qualifiers_dtype record; got {other!r}")
        rec = rec.reshape(())
        uplo, diag = int(rec["uplo"]), int(rec["diag"])
        uplo_name = FillMode(uplo).name if uplo in FillMode._value2member_map_ else str(uplo)
        diag_name = DiagType(diag).name if diag in DiagType._value2member_map_ else str(diag)
        return (
            f"({rec['abbreviation']}, conjugate={bool(rec['conjugate'])}, uplo={uplo_name}, "
            f"diag={diag_name}, incx={int(rec['incx'])})"
        )

    @staticmethod
    def _valid_uplo(other: MatrixQualifier) -> bool:
        return bool(np.all(np.isin(other["uplo"], (int(FillMode.LOWER), int(FillMode.UPPER)))))


def _enum(name: str, value: Any, cls: type, allowed: tuple) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or int(value) not in allowed:
        choices = ", ".join(f"{cls.__name__}.{cls(v).name}" for v in allowed)
        raise ValueError(f"{name} must be one of {choices}; got {value!r}")
    return int(value)


class GeneralMatrixQualifier(_QualifierFactory):
    """A dense matrix, optionally conjugated (``'ge'``)."""

    abbreviation = "ge"

    @classmethod
    def create(cls, conjugate: bool = False) -> np.ndarray:
        """A ``matrix_qualifiers_dtype`` record for a general matrix."""
        return cls._record(conjugate)


class _StoredTriangleQualifier(_QualifierFactory):
    """Base of the symmetric and Hermitian qualifiers: one triangle (``uplo``) is stored and read."""

    @classmethod
    def create(cls, conjugate: bool = False, uplo: FillMode = FillMode.LOWER) -> np.ndarray:
        """A record for a matrix of this kind (``uplo``: the stored triangle)."""
        return cls._record(conjugate, uplo)

    @classmethod
    def is_valid(cls, other: MatrixQualifier) -> np.bool_:
        """As the base rule, with ``uplo`` ``FillMode.LOWER`` or ``FillMode.UPPER``."""
        return np.bool_(super().is_valid(other) and cls._valid_uplo(other))


class SymmetricMatrixQualifier(_StoredTriangleQualifier):
    """A symmetric matrix of which only the ``uplo`` triangle is read (``'sy'``)."""

    abbreviation = "sy"


class HermitianMatrixQualifier(_StoredTriangleQualifier):
    """A Hermitian matrix of which only the ``uplo`` triangle is read (``'he'``)."""

    abbreviation = "he"


class TriangularMatrixQualifier(_QualifierFactory):
    """A triangular matrix (``'tr'``): only the ``uplo`` triangle is read; ``diag=UNIT`` reads no diagonal."""

    abbreviation = "tr"

    @classmethod
    def create(
        cls, conjugate: bool = False, uplo: FillMode = FillMode.LOWER, diag: DiagType = DiagType.NON_UNIT
    ) -> np.ndarray:
        """A record for a triangular matrix."""
        return cls._record(conjugate, uplo, diag)

    @classmethod
    def is_valid(cls, other: MatrixQualifier) -> np.bool_:
        """As the base rule, with a stored ``uplo`` triangle and ``diag`` ``DiagType.UNIT`` or
        ``DiagType.NON_UNIT``."""
        diag = (int(DiagType.UNIT), int(DiagType.NON_UNIT))
        return np.bool_(
            super().is_valid(other) and cls._valid_uplo(other) and bool(np.all(np.isin(other["diag"], diag)))
        )


class DiagonalMatrixQualifier(_QualifierFactory):
    """A diagonal matrix given as a 1-D vector (``'dg'``), read every ``incx`` elements."""

    abbreviation = "dg"

    @classmethod
    def create(cls, conjugate: bool = False, incx: int = 1) -> np.ndarray:
        """A record for a diagonal matrix stored as a vector (``incx < 0`` reads it backwards)."""
        return cls._record(conjugate, incx=incx)

    @classmethod
    def is_valid(cls, other: MatrixQualifier) -> np.bool_:
        """As the base rule, with ``incx`` 1 or -1 (as nvmath-python 1.0 checks)."""
        return np.bool_(super().is_valid(other) and bool(np.all(np.isin(other["incx"], (1, -1)))))


@dataclasses.dataclass(frozen=True, slots=True)
class Qualifier:
    """One operand's parsed qualifier.

    Attributes:
        kind: ``"ge"``, ``"sy"``, ``"he"``, ``"tr"`` or ``"dg"``.
        conjugate: read the operand conjugated.
        lower: the stored triangle is the lower one (``sy``, ``he``, ``tr``).
        unit: the diagonal is implicitly ones (``tr``).
        incx: the stride of the diagonal vector (``dg``).
    """

    kind: str = "ge"
    conjugate: bool = False
    lower: bool = True
    unit: bool = False
    incx: int = 1


GENERAL = Qualifier()


def _record_to_qualifier(rec: Any, name: str) -> Qualifier:
    abbr = str(rec["abbreviation"])
    if abbr not in KINDS:
        raise ValueError(f"qualifier of '{name}' has abbreviation {abbr!r}; allowed: {', '.join(KINDS)}")
    uplo, diag, incx = int(rec["uplo"]), int(rec["diag"]), int(rec["incx"])
    if abbr in ("sy", "he", "tr") and uplo not in (FillMode.LOWER, FillMode.UPPER):
        raise ValueError(
            f"qualifier of '{name}' ({KINDS[abbr]}) needs uplo LOWER (0) or UPPER (1); got {uplo}"
        )
    if abbr == "tr" and diag not in (DiagType.NON_UNIT, DiagType.UNIT):
        raise ValueError(f"qualifier of '{name}' needs diag NON_UNIT (0) or UNIT (1); got {diag}")
    if abbr == "dg" and incx == 0:
        raise ValueError(f"qualifier of '{name}' (diagonal) needs a non-zero incx; got 0")
    return Qualifier(abbr, bool(rec["conjugate"]), uplo == FillMode.LOWER, diag == DiagType.UNIT, incx)


def as_records(qualifiers: Any) -> np.ndarray:
    """``qualifiers`` as a 1-D array of :data:`matrix_qualifiers_dtype` (``TypeError`` otherwise)."""
    if isinstance(qualifiers, np.ndarray) and qualifiers.dtype == matrix_qualifiers_dtype:
        return qualifiers.reshape(-1)
    if isinstance(qualifiers, Sequence) and not isinstance(qualifiers, str):
        try:
            return np.asarray(list(qualifiers), dtype=matrix_qualifiers_dtype).reshape(-1)
        except (TypeError, ValueError):
            pass
    raise TypeError(
        "qualifiers must be a numpy array of nvmath.linalg.matrix_qualifiers_dtype (one record per operand, "
        f"built with e.g. GeneralMatrixQualifier.create()); got {type(qualifiers).__name__}: {qualifiers!r}"
    )


def parse_qualifiers(qualifiers: Any, has_c: bool) -> tuple[Qualifier, Qualifier, Qualifier]:
    """Return the qualifiers of ``(a, b, c)`` (general ones where ``qualifiers`` is ``None``).

    Raises:
        TypeError: not an array of :data:`matrix_qualifiers_dtype`.
        ValueError: the wrong length (3, or 2 without ``c``), unknown fields, a structured ``c``, or two
            structured operands.
    """
    if qualifiers is None:
        return GENERAL, GENERAL, GENERAL
    records = as_records(qualifiers)
    allowed = (2, 3) if has_c else (2,)
    if len(records) not in allowed:
        want = "3 (a, b, c) or 2 (a, b)" if has_c else "2 (a, b): there is no c"
        raise ValueError(f"qualifiers must have {want} records; got {len(records)}")
    names = ("a", "b", "c")
    parsed = [_record_to_qualifier(r, n) for r, n in zip(records, names)]
    if len(parsed) == 2:
        parsed.append(GENERAL)
    if parsed[2].kind != "ge":
        raise ValueError(
            f"c must carry a general qualifier; got {KINDS[parsed[2].kind]} ({parsed[2].kind!r})"
        )
    if parsed[2].conjugate:
        raise ValueError("c cannot be conjugated (its qualifier has conjugate=True)")
    structured = [n for n, q in zip(names, parsed) if q.kind != "ge"]
    if len(structured) > 1:
        raise ValueError(
            f"only one operand may be structured; got {', '.join(structured)} "
            f"({', '.join(KINDS[parsed[names.index(n)].kind] for n in structured)})"
        )
    return parsed[0], parsed[1], parsed[2]
