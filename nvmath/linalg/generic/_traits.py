"""Pure traits of one generic matmul problem: shapes, batch, structure and the BLAS-side layout.

Everything here is computed from operand metadata (shape, strides in elements, dtype, conjugation)
and parsed qualifiers, without touching a GPU, so it is tested on its own.

**Row-major results on a column-major BLAS.** BLAS reads a matrix in column-major order, so a
row-major ``D = op(A) @ op(B)`` is computed as ``D^T = B^T A^T``: the *transposed formulation*
(``order="row"``). With ``order="col"`` the product is computed as written and ``D`` is column-major.
In the BLAS problem ``D_cm = op(X1) op(X2)`` the first operand ``X1`` is ``b`` (row) or ``a`` (col).
A memory layout that BLAS reads transposed gives the operand with op ``T``, and conjugation without
a copy is then op ``C``; a layout read as is cannot be conjugated in place (BLAS has no "conjugate
only" op), so the order is chosen to make every conjugated operand a transposed one, and an operand
that fits neither order is listed in :attr:`Traits.copies` (the planner materialises it once and
recomputes the traits).

**Structured operands** (one of ``a`` / ``b``) map to symm, hemm, trmm or dgmm: the other operand
and the result must be in the order's own layout (these routines take no transpose for them); the
stored triangle is flipped when the structured operand's memory is read transposed.
"""

from __future__ import annotations

import dataclasses
import math
from typing import NamedTuple

from nvmath.bindings.cublas import FillMode, Operation, SideMode
from nvmath.linalg.generic._qualifiers import GENERAL, KINDS, Qualifier

__all__ = [
    "CPU_DTYPES",
    "GPU_DTYPES",
    "KIND_OF",
    "Layout",
    "OperandInfo",
    "Traits",
    "broadcast_batch",
    "problem_traits",
]

CPU_DTYPES = ("float32", "float64", "complex64", "complex128")
"""dtypes on the CPU (and those of nvmath-python 1.0)."""
GPU_DTYPES = CPU_DTYPES + ("float16", "bfloat16")
"""dtypes on the GPU (float16 / bfloat16 accumulate in float32)."""
KIND_OF = {"ge": "gemm", "sy": "symm", "he": "hemm", "tr": "trmm", "dg": "dgmm"}
"""Qualifier abbreviation -> the BLAS routine family."""


class OperandInfo(NamedTuple):
    """What the traits need of one operand."""

    shape: tuple[int, ...]
    strides: tuple[int, ...]
    dtype: str
    conj: bool = False
    """The operand is read conjugated (the qualifier XOR torch's lazy conjugation bit)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Layout:
    """One operand in the BLAS problem.

    Attributes:
        op: the :class:`~nvmath.bindings.cublas.Operation` applied to its memory (N, T or C).
        ld: the leading dimension (elements).
        batch_strides: strides over the problem's batch shape (0 where broadcast).
        row_major: its memory is row-major (last axis contiguous).
    """

    op: int
    ld: int
    batch_strides: tuple[int, ...]
    row_major: bool


@dataclasses.dataclass(frozen=True, slots=True)
class Traits:
    """The traits of one problem (see the module docstring).

    Attributes:
        kind: ``gemm``, ``symm``, ``hemm``, ``trmm`` or ``dgmm``.
        dtype: the common dtype.
        m, n, k: ``(M, K) @ (K, N)`` after promoting 1-D general operands.
        batch: the broadcast batch shape.
        result_shape: the shape returned to the caller (1-D promotions squeezed out).
        result_strides: dense strides of the result for ``order`` (matching ``result_shape``).
        order: ``"row"`` (row-major result, transposed formulation) or ``"col"``.
        cm: ``(m, n, k)`` of the BLAS problem.
        x1: the user operand read first by BLAS (``"b"`` for row order, ``"a"`` for col).
        layouts: :class:`Layout` of ``a``, ``b`` and ``c`` (when given).
        structured: the structured operand (``"a"`` / ``"b"``) or ``None``.
        side, uplo, diag: BLAS enums of the structured operand (``side``: LEFT when it is ``x1``).
        incx: the stride of a diagonal vector (elements; qualifier ``incx`` times the tensor stride).
        copies: operands to materialise first, ``(name, conjugate)``; empty when the traits are final.
    """

    kind: str
    dtype: str
    m: int
    n: int
    k: int
    batch: tuple[int, ...]
    result_shape: tuple[int, ...]
    result_strides: tuple[int, ...]
    order: str
    cm: tuple[int, int, int]
    x1: str
    layouts: dict[str, Layout]
    structured: str | None = None
    side: int = SideMode.LEFT
    uplo: int = FillMode.LOWER
    diag: int = 0
    incx: int = 1
    copies: tuple[tuple[str, bool], ...] = ()

    @property
    def batch_count(self) -> int:
        """The number of matrices in the batch."""
        return math.prod(self.batch)


def broadcast_batch(shapes: list[tuple[int, ...]]) -> tuple[int, ...]:
    """numpy.matmul's broadcast of batch shapes; ``ValueError`` naming the shapes when impossible."""
    ndim = max((len(s) for s in shapes), default=0)
    out = []
    for i in range(ndim):
        sizes = {s[len(s) - ndim + i] for s in shapes if len(s) - ndim + i >= 0} - {1}
        if len(sizes) > 1:
            raise ValueError(f"batch dimensions {' and '.join(map(str, shapes))} do not broadcast")
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)


def _batch_strides(
    shape: tuple[int, ...], strides: tuple[int, ...], batch: tuple[int, ...]
) -> tuple[int, ...]:
    pad = len(batch) - len(shape)
    return tuple(0 if (i < pad or shape[i - pad] == 1) else strides[i - pad] for i in range(len(batch)))


def _layouts(rows: int, cols: int, s0: int, s1: int) -> dict[str, int]:
    """The BLAS-readable layouts of a ``rows x cols`` matrix: ``{"row": ld, "col": ld}`` (maybe empty)."""
    if rows == 0 or cols == 0:  # nothing is read: any layout will do
        return {"row": max(cols, 1), "col": max(rows, 1)}
    found = {}
    if s1 == 1 or cols == 1:
        ld = s0 if rows > 1 else max(cols, 1)
        if ld >= max(cols, 1):
            found["row"] = ld
    if s0 == 1 or rows == 1:
        ld = s1 if cols > 1 else max(rows, 1)
        if ld >= max(rows, 1):
            found["col"] = ld
    return found


def _op(order: str, layout: str, conj: bool) -> int | None:
    """The op reading a matrix in ``layout`` for ``order``, or ``None`` when it cannot be conjugated."""
    transposed = layout != order  # BLAS reads a row-major matrix as its transpose
    if transposed:
        return Operation.C if conj else Operation.T
    return None if conj else Operation.N


def _check_2d(name: str, info: OperandInfo, q: Qualifier) -> None:
    if any(s < 0 for s in info.strides):
        raise ValueError(f"operand '{name}' has negative strides {tuple(info.strides)}; strides must be >= 0")
    if q.kind == "dg":
        if len(info.shape) != 1:
            raise ValueError(
                f"operand '{name}' carries a diagonal qualifier, so it must be a 1-D vector of the diagonal; "
                f"got shape {tuple(info.shape)}"
            )
    elif len(info.shape) < 1:
        raise ValueError(f"operand '{name}' must have at least 1 dimension; got shape {tuple(info.shape)}")
    elif len(info.shape) == 1 and q.kind != "ge":
        raise ValueError(
            f"operand '{name}' is {KINDS[q.kind]}, so it must be a matrix; got shape {info.shape}"
        )


def _as_matrix(name: str, info: OperandInfo, q: Qualifier) -> tuple[tuple[int, ...], tuple[int, ...], int]:
    """(shape, strides, squeezed result axis or 0) with 1-D general operands promoted as numpy does."""
    shape, strides = tuple(info.shape), tuple(info.strides)
    if len(shape) != 1:
        return shape, strides, 0
    if q.kind == "dg":
        n = _diag_len(shape[0], q.incx)
        return (n, n), (0, strides[0] if shape[0] > 1 else 1), 0
    if name == "a":
        return (1, shape[0]), (shape[0] * strides[0], strides[0]), -2
    return (shape[0], 1), (strides[0], shape[0] * strides[0]), -1


def _diag_len(length: int, incx: int) -> int:
    return (length - 1) // abs(incx) + 1 if length else 0


def problem_traits(
    a: OperandInfo,
    b: OperandInfo,
    c: OperandInfo | None = None,
    qualifiers: tuple[Qualifier, Qualifier, Qualifier] = (GENERAL, GENERAL, GENERAL),
    *,
    inplace: bool = False,
    dtypes: tuple[str, ...] = GPU_DTYPES,
) -> Traits:
    """Compute the :class:`Traits` of ``alpha * op(a) @ op(b) + beta * c``.

    Raises:
        ValueError: dtypes differ or are not supported, shapes do not match (K, batch, ``c``), negative
            strides, a qualifier the operand cannot carry.
    """
    qa, qb, _ = qualifiers
    _check_dtypes(a, b, c, dtypes)
    _check_2d("a", a, qa)
    _check_2d("b", b, qb)
    shape_a, strides_a, sq_a = _as_matrix("a", a, qa)
    shape_b, strides_b, sq_b = _as_matrix("b", b, qb)
    m, k = shape_a[-2:]
    k2, n = shape_b[-2:]
    if k != k2:
        raise ValueError(
            f"the inner dimensions do not match: a is {tuple(a.shape)} and b is {tuple(b.shape)} "
            f"(K {k} != {k2})"
        )
    for name, q, shape in (("a", qa, shape_a), ("b", qb, shape_b)):
        if q.kind in ("sy", "he", "tr") and shape[-1] != shape[-2]:
            raise ValueError(f"operand '{name}' is {KINDS[q.kind]}, so it must be square; got shape {shape}")
    batch = broadcast_batch([shape_a[:-2], shape_b[:-2]])
    full = (*batch, m, n)
    drop = {len(full) - 2} if sq_a else set()
    drop |= {len(full) - 1} if sq_b else set()
    result_shape = tuple(d for i, d in enumerate(full) if i not in drop)
    if c is not None:
        _check_c(c, result_shape, inplace)
    structured = "a" if qa.kind != "ge" else ("b" if qb.kind != "ge" else None)
    kind = KIND_OF[(qa if structured == "a" else qb).kind] if structured else "gemm"
    if kind == "hemm" and not a.dtype.startswith("complex"):
        kind = "symm"  # a real Hermitian matrix is symmetric
    mats = {"a": (shape_a, strides_a, a.conj, qa), "b": (shape_b, strides_b, b.conj, qb)}
    d_strides = None
    if inplace:
        if c is None:
            raise ValueError("inplace=True needs c (the result is written into it)")
        d_strides = _full_strides(tuple(c.strides), sq_a, sq_b)
    return _orient(kind, structured, mats, batch, (m, n, k), result_shape, (sq_a, sq_b), d_strides, a.dtype)


def _check_dtypes(a: OperandInfo, b: OperandInfo, c: OperandInfo | None, dtypes: tuple[str, ...]) -> None:
    """One dtype for all operands, and one of ``dtypes``."""
    named = {"a": a, "b": b} if c is None else {"a": a, "b": b, "c": c}
    for name, info in named.items():
        if info.dtype != a.dtype:
            raise ValueError(
                f"operand '{name}' has dtype {info.dtype} but 'a' has {a.dtype}: the dtypes must match"
            )
    if a.dtype not in dtypes:
        raise ValueError(f"dtype {a.dtype} is not supported here; supported: {', '.join(dtypes)}")


def _check_c(c: OperandInfo, result_shape: tuple[int, ...], inplace: bool = False) -> None:
    """``c`` has the result's shape, or its matrix shape with batch dimensions that broadcast to the
    result's (numpy rules; not in place: the result is written into ``c`` then), and no negative
    strides."""
    if any(s < 0 for s in c.strides):
        raise ValueError(f"operand 'c' has negative strides {tuple(c.strides)}; strides must be >= 0")
    shape = tuple(c.shape)
    if shape == result_shape:
        return
    batch = result_shape[:-2]
    fits = (
        not inplace
        and len(result_shape) >= 2
        and 2 <= len(shape) <= len(result_shape)
        and shape[-2:] == result_shape[-2:]
        and all(x in (1, y) for x, y in zip(shape[-3::-1], batch[::-1]))
    )
    if not fits:
        rule = "c must have the result's shape" if inplace else (
            "c must have the result's shape, or its matrix shape with batch dimensions that broadcast to it"
        )
        raise ValueError(f"{rule}: the result is {result_shape}; got c of shape {shape}")


def _full_strides(strides: tuple[int, ...], sq_a: int, sq_b: int) -> tuple[int, ...]:
    """Strides of a result-shaped tensor with the squeezed axes put back (stride 0)."""
    out = list(strides)
    if sq_a:
        out.insert(len(out) - (0 if sq_b else 1), 0)
    if sq_b:
        out.append(0)
    return tuple(out)


def _choice(
    kind: str, is_structured: bool, order: str, avail: dict[str, int], conj: bool
) -> tuple[int, str] | None:
    """``(op, layout)`` reading one operand in ``order``, or ``None`` when it must be copied first."""
    if kind == "gemm" or (kind == "trmm" and is_structured):
        for layout in avail:
            op = _op(order, layout, conj)
            if op is not None:
                return op, layout
        return None
    if kind == "dgmm" and is_structured:
        return None if conj else (Operation.N, "row")
    if kind == "hemm" and is_structured:
        for layout in avail:  # a Hermitian matrix read transposed is its conjugate
            if (layout != order) == conj:
                return Operation.N, layout
        return None
    # symmetric (conjugation needs a copy) and the dense operand of symm/hemm/trmm/dgmm (no op at all)
    if conj:
        return None
    if is_structured:
        return (Operation.N, next(iter(avail))) if avail else None
    return (Operation.N, order) if order in avail else None


def _choose_order(kind, structured, mats, avail, orders) -> tuple[str, dict, tuple]:
    """The order needing the fewest copies: ``(order, {name: (op, layout) or None}, copies)``."""
    best = None
    for order in orders:
        picks = {
            name: _choice(kind, name == structured, order, avail[name], info[2])
            for name, info in mats.items()
        }
        copies = tuple((name, mats[name][2]) for name, pick in picks.items() if pick is None)
        if best is None or len(copies) < len(best[2]):
            best = (order, picks, copies)
    return best


def _result_layout(batch, m, n, order, squeezed, d_strides, d_avail) -> tuple[Layout, tuple[int, ...]]:
    """The result's :class:`Layout` and strides: ``c``'s own in place, else dense in ``order``."""
    if d_strides is not None:
        layout = Layout(
            Operation.N, d_avail[order], _batch_strides(batch, d_strides[:-2], batch), order == "row"
        )
        return layout, tuple(s for i, s in enumerate(d_strides) if not _squeezed(i, len(d_strides), squeezed))
    full = _dense(batch, m, n, order)
    layout = Layout(Operation.N, max(n if order == "row" else m, 1), full[:-2], order == "row")
    return layout, tuple(s for i, s in enumerate(full) if not _squeezed(i, len(full), squeezed))


def _orient(kind, structured, mats, batch, mnk, result_shape, squeezed, d_strides, dtype) -> Traits:
    """Choose the order and each operand's op / ld; list the operands that must be copied first."""
    m, n, k = mnk
    avail = {
        name: _layouts(shape[-2], shape[-1], strides[-2], strides[-1]) if q.kind != "dg" else {"row": 1}
        for name, (shape, strides, _, q) in mats.items()
    }
    orders: tuple[str, ...] = ("row", "col")
    d_avail = None
    if d_strides is not None:
        d_avail = _layouts(m, n, d_strides[-2], d_strides[-1])
        orders = tuple(o for o in orders if o in d_avail)
        if not orders:
            raise ValueError(
                "with inplace=True, c must be row-major or column-major in its last two dimensions; "
                f"got strides {d_strides}"
            )
    order, picks, copies = _choose_order(kind, structured, mats, avail, orders)
    layouts = {}
    for name, (shape, strides, _, q) in mats.items():
        op, layout = picks[name] or (Operation.N, order)
        batch_strides = _batch_strides(shape[:-2], strides[:-2], batch)
        layouts[name] = Layout(op, avail[name].get(layout, 1), batch_strides, layout == "row")
    layouts["d"], result_strides = _result_layout(batch, m, n, order, squeezed, d_strides, d_avail)
    x1 = "b" if order == "row" else "a"
    cm = (n, m, k) if order == "row" else (m, n, k)
    extra: dict = {}
    if structured is not None:
        shape, strides, _, q = mats[structured]
        lower = q.lower != (layouts[structured].row_major and kind != "dgmm")
        extra = {
            "structured": structured,
            "side": SideMode.LEFT if structured == x1 else SideMode.RIGHT,
            "uplo": FillMode.LOWER if lower else FillMode.UPPER,
            "diag": int(q.unit),
            "incx": q.incx * strides[-1] if kind == "dgmm" else 1,
        }
    head = (kind, dtype, m, n, k, batch, result_shape, result_strides, order, cm, x1, layouts)
    return Traits(*head, copies=copies, **extra)


def _squeezed(i: int, ndim: int, squeezed: tuple[int, int]) -> bool:
    return bool((squeezed[0] and i == ndim - 2) or (squeezed[1] and i == ndim - 1))


def _dense(batch: tuple[int, ...], m: int, n: int, order: str) -> tuple[int, ...]:
    """Dense strides of a ``(*batch, m, n)`` result in ``order`` (batch in C order)."""
    mat = (n, 1) if order == "row" else (1, m)
    step = max(m * n, 1)
    strides = []
    for d in reversed(batch):
        strides.append(step)
        step *= max(d, 1)
    return tuple(reversed(strides)) + mat
