"""Pure traits of the dense solvers: operand checks, batch shapes, layouts and ``info`` decoding.

Nothing here touches a GPU. Every check runs before any work starts and raises ``TypeError`` (a
value of the wrong kind) or ``ValueError`` (a value of the right kind that is not allowed), naming
the operand and the value.

Conventions shared by every planner:

* A matrix operand has shape ``(*batch, rows, cols)``; the leading axes form an implicit batch.
* A right-hand side ``b`` of a system with ``n`` rows is ``(n,)`` (one vector, only for an
  unbatched ``a``), ``(n, nrhs)`` or ``(*batch, n, nrhs)`` with exactly ``a``'s batch shape
  (as in numpy >= 2.0, a 2-D ``b`` is always a matrix; no broadcasting).
* dtypes: float32, float64, complex64, complex128; every operand of a call has the same dtype.
* Internal buffers are batches of column-major matrices (see :func:`colmajor_strides`).
* NaN and Inf are not scanned for (that costs a pass over the data and, on the GPU, a sync).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from nvmath._errors import LinAlgError
from nvmath._internal.tensors import TensorAdapter, check_consistent, wrap

__all__ = [
    "NONFINITE_INFO",
    "SUPPORTED_DTYPES",
    "MatrixSpec",
    "RhsSpec",
    "as_matrix_rhs",
    "batch_index",
    "check_flag",
    "check_reset",
    "check_same_space",
    "check_uplo",
    "colmajor_strides",
    "describe_info",
    "info_error",
    "matrix_spec",
    "real_dtype",
    "rhs_spec",
    "wrap_operands",
]

NONFINITE_INFO = -(2**31)
"""The ``info`` value (in :attr:`nvmath.LinAlgError.info`) of a matrix whose input held NaN or Inf.

Defined here, the lowest of the solver modules, so that :func:`describe_info` can name it without
importing ``_nonfinite`` (which needs ``_gpu``, which needs this module); ``_nonfinite`` re-exports it."""

SUPPORTED_DTYPES: tuple[str, ...] = ("float32", "float64", "complex64", "complex128")
"""The element types every dense solver accepts."""

_REAL = {"float32": "float32", "float64": "float64", "complex64": "float32", "complex128": "float64"}


def real_dtype(dtype: str) -> str:
    """The real counterpart of a supported dtype (eigenvalues, singular values)."""
    return _REAL[dtype]


@dataclass(frozen=True)
class MatrixSpec:
    """A (batch of) matrix operand(s): shape ``(*batch, rows, cols)`` and dtype.

    Attributes:
        name: the operand's name in messages.
        batch_shape: the leading (batch) axes.
        rows: the number of rows of each matrix.
        cols: the number of columns of each matrix.
        dtype: the canonical dtype name.
    """

    name: str
    batch_shape: tuple[int, ...]
    rows: int
    cols: int
    dtype: str

    @property
    def shape(self) -> tuple[int, ...]:
        """The full shape ``(*batch, rows, cols)``."""
        return (*self.batch_shape, self.rows, self.cols)

    @property
    def batch_count(self) -> int:
        """The number of matrices (1 when unbatched)."""
        return math.prod(self.batch_shape)


@dataclass(frozen=True)
class RhsSpec:
    """A right-hand side: ``(n,)`` (``vector``), ``(n, nrhs)`` or ``(*batch, n, nrhs)``.

    Attributes:
        name: the operand's name in messages.
        batch_shape: the batch axes (those of ``a``).
        rows: ``n``.
        nrhs: the number of right-hand sides (1 for a vector).
        vector: whether ``b`` is one vector of shape ``(n,)``.
        dtype: the canonical dtype name.
    """

    name: str
    batch_shape: tuple[int, ...]
    rows: int
    nrhs: int
    vector: bool
    dtype: str

    @property
    def shape(self) -> tuple[int, ...]:
        """The operand's shape."""
        return (self.rows,) if self.vector else (*self.batch_shape, self.rows, self.nrhs)

    @property
    def batch_count(self) -> int:
        """The number of systems."""
        return math.prod(self.batch_shape)


def wrap_operands(operands: dict[str, Any]) -> dict[str, TensorAdapter]:
    """Wrap named tensors and check that they share one package and one device.

    Raises:
        TypeError: an operand is not a supported tensor, or the packages differ.
        ValueError: the operands are on different devices.
    """
    wrapped = {name: wrap(obj, f"operand '{name}'") for name, obj in operands.items()}
    check_consistent(wrapped)
    return wrapped


def _check_dtype(name: str, dtype: str) -> None:
    if dtype not in SUPPORTED_DTYPES:
        raise ValueError(
            f"operand '{name}' has dtype {dtype}, which the dense solvers do not support; "
            f"use one of {', '.join(SUPPORTED_DTYPES)}"
        )


def matrix_spec(adapter: TensorAdapter, name: str, *, square: bool, what: str = "") -> MatrixSpec:
    """Check a matrix operand and return its :class:`MatrixSpec`.

    Args:
        adapter: the wrapped operand.
        name: its name in messages.
        square: whether each matrix must be square.
        what: the operation, for messages (e.g. ``"cholesky"``).

    Raises:
        ValueError: fewer than 2 dimensions, an empty extent, a non-square matrix where a square one
            is needed, or an unsupported dtype.
    """
    shape = tuple(int(n) for n in adapter.shape)
    for_what = f" for {what}" if what else ""
    if len(shape) < 2:
        raise ValueError(
            f"operand '{name}' must have at least 2 dimensions (*batch, rows, cols){for_what}; got shape {shape}"
        )
    if any(n == 0 for n in shape):
        raise ValueError(
            f"operand '{name}' has shape {shape}: empty matrices and empty batches are not supported"
        )
    rows, cols = shape[-2:]
    if square and rows != cols:
        raise ValueError(
            f"operand '{name}' must be square{for_what}; got {rows}x{cols} matrices (shape {shape})"
        )
    _check_dtype(name, adapter.dtype)
    return MatrixSpec(name, shape[:-2], rows, cols, adapter.dtype)


def rhs_spec(adapter: TensorAdapter, a: MatrixSpec, name: str = "b") -> RhsSpec:
    """Check a right-hand side against the matrix spec ``a`` and return its :class:`RhsSpec`.

    Raises:
        ValueError: wrong number of dimensions, rows not matching ``a``, batch shape not matching
            ``a``'s, an empty extent, or a dtype different from ``a``'s.
    """
    shape = tuple(int(n) for n in adapter.shape)
    n = a.rows
    if len(shape) == 0:
        raise ValueError(f"operand '{name}' must be a vector (n,) or a matrix (..., n, nrhs); got a scalar")
    if any(k == 0 for k in shape):
        raise ValueError(f"operand '{name}' has shape {shape}: empty right-hand sides are not supported")
    if adapter.dtype != a.dtype:
        _check_dtype(name, adapter.dtype)
        raise ValueError(
            f"operand '{name}' has dtype {adapter.dtype} but '{a.name}' has dtype {a.dtype}: they must match"
        )
    if len(shape) == 1:
        if a.batch_shape:
            raise ValueError(
                f"operand '{name}' of shape {shape} is one vector but '{a.name}' is a batch {a.shape}; "
                f"give '{name}' the shape {(*a.batch_shape, n, 1)}"
            )
        if shape[0] != n:
            raise ValueError(f"operand '{name}' has {shape[0]} rows but '{a.name}' has {n}: they must match")
        return RhsSpec(name, (), n, 1, True, adapter.dtype)
    if shape[-2] != n:
        raise ValueError(
            f"operand '{name}' of shape {shape} has {shape[-2]} rows but '{a.name}' has {n}; "
            f"expected ({', '.join(map(str, (*a.batch_shape, n)))}, nrhs)"
        )
    if shape[:-2] != a.batch_shape:
        raise ValueError(
            f"operand '{name}' has batch shape {shape[:-2]} but '{a.name}' has batch shape {a.batch_shape}: "
            "they must be equal (no broadcasting)"
        )
    return RhsSpec(name, a.batch_shape, n, shape[-1], False, adapter.dtype)


def as_matrix_rhs(b: np.ndarray) -> np.ndarray:
    """A host right-hand side as a matrix: one vector ``(n,)`` becomes ``(n, 1)``."""
    return b.reshape(b.shape + (1,)) if b.ndim == 1 else b


def check_reset(old: MatrixSpec | RhsSpec, new: MatrixSpec | RhsSpec) -> None:
    """Raise ``ValueError`` unless a new operand matches the one the object was planned for."""
    if old.shape != new.shape or old.dtype != new.dtype:
        raise ValueError(
            f"the new operand '{new.name}' has shape {new.shape} and dtype {new.dtype}, but the object was "
            f"planned for shape {old.shape} and dtype {old.dtype}; create a new object for other operands"
        )


def check_same_space(old: TensorAdapter, new: TensorAdapter, name: str) -> None:
    """Raise unless ``new`` is of ``old``'s package (``TypeError``) and device (``ValueError``)."""
    if new.package != old.package:
        raise TypeError(
            f"the new operand '{name}' is a {new.package} tensor but the object was planned for {old.package} tensors"
        )
    if new.device_id != old.device_id:
        raise ValueError(
            f"the new operand '{name}' is on device {new.device_id!r} but the object was planned for "
            f"device {old.device_id!r}"
        )


def check_flag(name: str, value: Any) -> bool:
    """Return ``value`` if it is a bool; raise ``TypeError`` naming it otherwise."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be True or False; got {type(value).__name__}: {value!r}")
    return bool(value)


def check_uplo(value: Any) -> bool:
    """Map ``uplo`` ('L' / 'U', any case) to ``lower`` (a bool); raise for anything else."""
    if isinstance(value, str) and value.upper() in ("L", "U"):
        return value.upper() == "L"
    raise ValueError(f"uplo must be 'L' or 'U'; got {value!r}")


def colmajor_strides(shape: Sequence[int]) -> tuple[int, ...]:
    """Strides (elements) of a C-ordered batch of column-major matrices of shape ``(*batch, r, c)``.

    A 1-D shape ``(n,)`` gets ``(1,)``.
    """
    shape = tuple(shape)
    if len(shape) < 2:
        return (1,) * len(shape)
    rows, cols = shape[-2:]
    strides = [rows * cols] * (len(shape) - 2) + [1, rows]
    step = rows * cols
    for axis in range(len(shape) - 3, -1, -1):
        strides[axis] = step
        step *= shape[axis]
    return tuple(strides)


def batch_index(flat: int, batch_shape: tuple[int, ...]) -> tuple[int, ...]:
    """The multi-index of the ``flat``-th matrix of a C-ordered batch."""
    if not batch_shape:
        return ()
    return tuple(int(i) for i in np.unravel_index(flat, batch_shape))


# ------------------------------------------------------------------------------------ info decoding
_INFO_MEANING = {
    "potrf": lambda k: f"not positive definite: the leading minor of order {k} is not positive",
    "getrf": lambda k: f"singular: the pivot U[{k - 1}, {k - 1}] is exactly zero",
    "eig": lambda k: f"the eigensolver did not converge (info={k})",
    "svd": lambda k: f"the SVD did not converge (info={k})",
    "lstsq": lambda k: f"rank deficient: the diagonal element R[{k - 1}, {k - 1}] is exactly zero",
}


def describe_info(kind: str, value: int) -> str:
    """What a non-zero ``info`` value of a LAPACK-style routine of ``kind`` means."""
    if value == NONFINITE_INFO:
        return "the input holds NaN or Inf (its results were set to NaN)"
    if kind == "piv":  # written by the device pivot check before lu_solve: -(1 + first bad position)
        return f"pivot piv[{-1 - int(value)}] is outside 1..n (the solution was set to NaN)"
    if value < 0:
        return (
            f"argument {-value} of the library call had an illegal value (info={value}); please report this"
        )
    return _INFO_MEANING[kind](int(value))


def info_error(
    op: str, kind: str, info: np.ndarray, batch_shape: tuple[int, ...], *, limit: int = 8
) -> LinAlgError | None:
    """Build the error for the failing matrices of a batch, or return ``None`` when all succeeded.

    Args:
        op: the operation, e.g. ``"cholesky"``.
        kind: the routine family deciding the meaning of ``info``: ``"potrf"``, ``"getrf"``,
            ``"eig"``, ``"svd"`` or ``"lstsq"``.
        info: one int per matrix (C order of the batch).
        batch_shape: the batch shape (``()`` for one matrix).
        limit: at most this many failures are described in the message (all are in ``.indices``).
    """
    info = np.asarray(info).reshape(-1)
    failed = np.flatnonzero(info)
    if failed.size == 0:
        return None
    indices = [batch_index(int(i), batch_shape) for i in failed]
    values = [int(info[i]) for i in failed]
    total = max(1, math.prod(batch_shape))
    parts = []
    for idx, value in list(zip(indices, values))[:limit]:
        where = f"matrix {idx[0] if len(idx) == 1 else idx}" if batch_shape else "the matrix"
        parts.append(f"{where}: {describe_info(kind, value)}")
    more = f"; and {len(values) - limit} more" if len(values) > limit else ""
    msg = f"{op} failed for {len(values)} of {total} matrices: " + "; ".join(parts) + more
    if not batch_shape:
        msg = f"{op} failed: " + parts[0].split(": ", 1)[1]
    return LinAlgError(msg, indices=indices, info=values)
