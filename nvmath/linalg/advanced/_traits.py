"""Problem traits of the cuBLASLt matmul: shapes, batching, layouts and the result, from plain values.

Two steps, both pure (no GPU, no tensors):

1. :func:`get_mm_traits` (constructor time): numpy.matmul semantics -- 1-D promotion, M/N/K,
   numpy broadcasting of the batch dimensions of ``a``, ``b`` and ``c`` collapsed to one strided
   batch, the memory view of each matrix, conjugation (qualifiers XOR torch's lazy-conj bit), the
   ``c`` rules (``(M, N)`` or ``(M, 1)`` broadcast over columns) and the in-place rules.
2. :func:`get_problem` (plan time): the cuBLASLt problem. Every matrix is described column-major
   (``ORDER_COL``); a row-major result is computed as the transposed product ``D^T = B^T A^T`` (so
   its memory is column-major ``D^T``), transposed operand views become ``OP_T``, conjugated ones
   ``OP_C``. Epilogs that need a column-major D fix the orientation (:mod:`._epilogs` says which,
   and asks for the transposed product for a bias along N).

Result order: ``c``'s order if given, else the epilog's, else ``a``'s, else ``b``'s, else row-major.
When nothing fixes it and the preferred orientation cannot express the problem, the other one is
used: cuBLASLt conjugates only through ``OP_C`` on a column-major matrix (``ORDER_ROW`` with
``OP_C`` is NOT_SUPPORTED on cuBLASLt 13.1), so a conjugated operand must be row-major for the
direct product and column-major for the transposed one; FP8 rows must span 16 bytes.

The layouts were checked against cuBLASLt 13.1 on an H200 (random row/column-major, padded,
batched, broadcast, in-place and ``ld = 0`` column-broadcast ``c`` cases, conjugation, epilogs).
"""

from __future__ import annotations

import dataclasses
import numbers
from typing import Any

import numpy as np

from nvmath._errors import warn_at_caller
from nvmath._internal import dtypes as _dt
from nvmath.linalg.advanced._layout import (
    BatchTraits,
    MatrixView,
    Op,
    OperandSpec,
    Order,
    check_operand_spec,
    collapse_batch,
    dense_batch_strides,
)
from nvmath.linalg.advanced._typemaps import TypeTraits

__all__ = [
    "FP8_DIM_MULTIPLE",
    "MMTraits",
    "MatmulProblem",
    "MatrixLayout",
    "check_alpha_beta",
    "conjugation_flags",
    "get_mm_traits",
    "get_problem",
    "row_order_problem",
]

FP8_DIM_MULTIPLE: int = 16
"""FP8 GEMMs: K, every leading dimension and D's (and C's) row count must span a multiple of this many bytes.

Measured on H200 with cuBLASLt 13.1 (M and N need not be multiples of 16, unlike nvmath's documented rule);
the orientation is picked to satisfy it when the result order is free.
"""


def _is_complex(dtype: str) -> bool:
    return dtype.startswith("complex")


def _scalar(name: str, value: Any, scale_dtype: str | None) -> Any:
    if isinstance(value, np.ndarray) and value.size == 1:
        value = value.reshape(()).item()
    elif isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, numbers.Number):
        raise TypeError(f"{name} must be a real or complex number; got {type(value).__name__}: {value!r}")
    if scale_dtype is not None and not _is_complex(scale_dtype) and complex(value).imag != 0:
        raise ValueError(f"{name}={value!r} is complex but the scale type is {scale_dtype}; use a real value")
    return value


def check_alpha_beta(
    alpha: Any, beta: Any, *, has_c: bool, scale_dtype: str | None = None
) -> tuple[Any, Any]:
    """Validate ``alpha``/``beta``: alpha defaults to 1; beta is required with ``c``, ignored without.

    Args:
        alpha, beta: numbers (python, numpy scalar or size-1 array) or ``None``.
        has_c: whether ``c`` is given.
        scale_dtype: the scale dtype name; a complex value with a real scale type is rejected.

    Returns:
        ``(alpha, beta)`` as python numbers (beta is 0 without ``c``).

    Raises:
        TypeError: a value that is not a number. ValueError: ``c`` without ``beta``, or a complex
        value for a real scale type.
    """
    alpha = 1 if alpha is None else _scalar("alpha", alpha, scale_dtype)
    if not has_c:
        if beta is not None:
            warn_at_caller(f"beta={beta!r} is ignored because c is not given")
        return alpha, 0
    if beta is None:
        raise ValueError(
            "beta is required when c is given (the result is alpha * a @ b + beta * c); pass e.g. beta=1"
        )
    return alpha, _scalar("beta", beta, scale_dtype)


def conjugation_flags(
    qualifiers: Any, a: OperandSpec, b: OperandSpec, c: OperandSpec | None = None
) -> tuple[bool, bool]:
    """Return whether A and B are conjugated: ``qualifiers["is_conjugate"]`` XOR the lazy-conj bit.

    Conjugation of a real operand is a no-op (``False``).

    Raises:
        TypeError: ``qualifiers`` is not a numpy array with an ``is_conjugate`` field.
        ValueError: wrong length (3, or 2 without ``c``), or ``c`` conjugated.
    """
    flags = [False, False, False]
    if qualifiers is not None:
        names = getattr(getattr(qualifiers, "dtype", None), "names", None) or ()
        if not isinstance(qualifiers, np.ndarray) or "is_conjugate" not in names:
            raise TypeError(
                "qualifiers must be a numpy array of dtype matrix_qualifiers_dtype (one entry per a, b, c); "
                f"got {type(qualifiers).__name__}: {qualifiers!r}"
            )
        allowed = (3,) if c is not None else (2, 3)
        if qualifiers.ndim != 1 or len(qualifiers) not in allowed:
            raise ValueError(
                f"qualifiers must have length {' or '.join(map(str, allowed))}; got shape {qualifiers.shape}"
            )
        flags[: len(qualifiers)] = [bool(x) for x in qualifiers["is_conjugate"]]
    specs = (a, b, c)
    conj = [
        s is not None and _is_complex(s.dtype) and (f != bool(s.is_conjugate)) for f, s in zip(flags, specs)
    ]
    if conj[2]:
        raise ValueError(
            "conjugating c is not supported (cuBLASLt applies no operation to C); conjugate it first"
        )
    return conj[0], conj[1]


@dataclasses.dataclass(frozen=True)
class MMTraits:
    """Constructor-time traits of ``alpha * a @ b + beta * c`` (user orientation, before cuBLASLt).

    Attributes:
        m, n, k: the matrix extents (after 1-D promotion).
        batch: the collapsed batch (operand names ``"a"``, ``"b"`` and ``"c"``).
        a_view, b_view, c_view: each matrix's memory view; ``c_view`` has ``col_stride == 0`` when
            ``c`` broadcasts over columns.
        a_dtype, b_dtype, c_dtype: operand dtypes (``c_dtype`` is ``None`` without ``c``).
        conj_a, conj_b: whether A / B enter the product conjugated.
        a_promoted, b_promoted: 1-D operands (their M / N axis is dropped from the result).
        c_broadcast: ``c`` broadcasts over columns or batch (not allowed in place).
        inplace: the result is written into ``c``.
        c_shape, c_strides: ``c``'s own shape and strides (the result's when in place).
    """

    m: int
    n: int
    k: int
    batch: BatchTraits
    a_view: MatrixView
    b_view: MatrixView
    c_view: MatrixView | None
    a_dtype: str
    b_dtype: str
    c_dtype: str | None
    conj_a: bool
    conj_b: bool
    a_promoted: bool
    b_promoted: bool
    c_broadcast: bool
    inplace: bool
    c_shape: tuple[int, ...] | None
    c_strides: tuple[int, ...] | None


def _promote(a: OperandSpec, b: OperandSpec) -> tuple[OperandSpec, OperandSpec]:
    """numpy.matmul promotion: 1-D ``a`` becomes (1, K), 1-D ``b`` becomes (K, 1)."""
    if len(a.shape) == 1:
        a = OperandSpec(
            (1, a.shape[0]), (max(1, a.shape[0] * a.strides[0]), a.strides[0]), a.dtype, a.is_conjugate
        )
    if len(b.shape) == 1:
        b = OperandSpec(
            (b.shape[0], 1), (b.strides[0], max(1, b.shape[0] * b.strides[0])), b.dtype, b.is_conjugate
        )
    return a, b


def _view(name: str, spec: OperandSpec, *, allow_zero_ld: bool = False) -> MatrixView:
    rows, cols = spec.shape[-2:]
    view = MatrixView(rows, cols, spec.strides[-2], spec.strides[-1])
    if view.col_ld(allow_zero_ld=allow_zero_ld) is None and view.t.col_ld() is None:
        raise ValueError(
            f"operand {name!r}: unsupported matrix layout (shape {spec.shape[-2:]}, strides {spec.strides[-2:]}); "
            "one of the last two dimensions needs unit stride and the other a stride >= the extent of the first "
            "(padding is fine, overlap and broadcast are not); make it contiguous (e.g. .contiguous())"
        )
    return view


def _c_view(c: OperandSpec, m: int, n: int) -> MatrixView:
    if len(c.shape) < 2:
        raise ValueError(f"c must be (M,), (M, N) or (M, 1) = ({m},), ({m}, {n}) or ({m}, 1); got {c.shape}")
    if c.shape[-2] != m or c.shape[-1] not in (n, 1):
        raise ValueError(
            f"c must have shape (..., {m}, {n}) or (..., {m}, 1) (broadcast over columns); got {c.shape}"
        )
    if c.shape[-1] == 1 and n > 1:
        c = OperandSpec(c.shape[:-1] + (n,), c.strides[:-1] + (0,), c.dtype)
    return _view("c", c, allow_zero_ld=True)


def _check_inplace(c: OperandSpec | None, c_view: MatrixView | None, batch: BatchTraits) -> None:
    if c is None or c_view is None:
        raise ValueError("inplace=True needs c (the result is written into c)")
    if c_view.col_stride == 0 and c_view.cols > 1:
        raise ValueError(f"inplace=True needs c of the full result shape; c of shape {c.shape} is broadcast")
    if tuple(c.shape[:-2]) != batch.shape:
        raise ValueError(
            f"inplace=True needs c with the result's batch shape {batch.shape}; got c of shape {c.shape}"
        )
    span = (c_view.rows - 1) * c_view.row_stride + (c_view.cols - 1) * c_view.col_stride + 1
    stride = batch.stride("c")
    if batch.count > 1 and stride < span:
        raise ValueError(
            f"inplace=True needs non-overlapping matrices in c; its batch stride {stride} is smaller than the "
            f"matrix span {span} (shape {c.shape}, strides {c.strides})"
        )


def get_mm_traits(
    a: OperandSpec,
    b: OperandSpec,
    c: OperandSpec | None = None,
    *,
    qualifiers: Any = None,
    inplace: bool = False,
) -> MMTraits:
    """Compute the constructor-time traits of ``a @ b (+ c)`` with numpy.matmul semantics.

    Raises:
        ValueError: empty extents, negative strides, mismatched K, a bad ``c`` shape, batch shapes
            that do not broadcast or cannot be collapsed to one strided batch, an unsupported matrix
            layout, conjugated ``c``, or an in-place rule violated. Every message names the operand.
        TypeError: an operand or ``qualifiers`` of the wrong kind.
    """
    a, b = check_operand_spec("a", a), check_operand_spec("b", b)
    c = check_operand_spec("c", c) if c is not None else None
    conj_a, conj_b = conjugation_flags(qualifiers, a, b, c)
    a2, b2 = _promote(a, b)
    m, k = a2.shape[-2:]
    kb, n = b2.shape[-2:]
    if k != kb:
        raise ValueError(
            f"a and b do not contract: a has K={k} (shape {a.shape}), b has K={kb} (shape {b.shape})"
        )
    a_view, b_view = _view("a", a2), _view("b", b2)
    if c is not None and len(c.shape) == 1:  # a length-M vector: one value per row, broadcast over N
        if c.shape[0] != m:
            raise ValueError(
                f"a 1-D c must have length M = {m} (broadcast over the N columns); got {c.shape}"
            )
        c = OperandSpec((m, 1), (c.strides[0], max(1, m * c.strides[0])), c.dtype, c.is_conjugate)
    c_view = _c_view(c, m, n) if c is not None else None
    batch_ops = [("a", a2.shape[:-2], a2.strides[:-2]), ("b", b2.shape[:-2], b2.strides[:-2])]
    if c is not None:
        batch_ops.append(("c", c.shape[:-2], c.strides[:-2]))
    batch = collapse_batch(batch_ops)
    if inplace:
        _check_inplace(c, c_view, batch)
    c_broadcast = c is not None and (
        (c_view.col_stride == 0 and n > 1) or (batch.count > 1 and batch.stride("c") == 0)  # type: ignore[union-attr]
    )
    return MMTraits(
        m=m, n=n, k=k, batch=batch, a_view=a_view, b_view=b_view, c_view=c_view,
        a_dtype=a.dtype, b_dtype=b.dtype, c_dtype=c.dtype if c is not None else None,
        conj_a=conj_a, conj_b=conj_b, a_promoted=len(a.shape) == 1, b_promoted=len(b.shape) == 1,
        c_broadcast=c_broadcast, inplace=inplace,
        c_shape=c.shape if c is not None else None, c_strides=c.strides if c is not None else None,
    )  # fmt: skip


@dataclasses.dataclass(frozen=True)
class MatrixLayout:
    """One ``cublasLtMatrixLayout_t``: rows, cols, ld, order, data type, batch count and offset.

    ``order`` is ``Order.COL`` except in :func:`row_order_problem` and for an operand an epilog needs
    read the other way (BGRADA, BGRADB); ``ld`` is 0 for
    a ``c`` broadcast over columns (accepted by cuBLASLt 13.1 for C).
    """

    rows: int
    cols: int
    ld: int
    order: Order
    dtype: str
    batch_count: int
    batch_offset: int


@dataclasses.dataclass(frozen=True)
class MatmulProblem:
    """Plan-time traits: the cuBLASLt problem ``D = alpha * op(A) op(B) + beta * C``.

    ``staged`` is ``(operand, "col" | "row")`` when cuBLASLt reads a planner-owned dense copy of that
    user operand in that memory order instead of the operand itself (see :func:`get_problem`), else
    ``None``.

    Attributes:
        transposed: the problem is the transposed product (cuBLASLt's A is the user's ``b``).
        m, n, k: cuBLASLt's extents (``n, m`` swapped from the user's when transposed).
        transa, transb: the operations on cuBLASLt's A and B.
        a, b, c, d: the four matrix layouts. Without a user ``c``, ``c`` equals ``d`` (pass D's
            pointer with beta = 0).
        a_operand, b_operand: which user operand (``"a"``/``"b"``) feeds cuBLASLt's A / B (their
            pointers and quantization scales).
        has_c: a user ``c`` is given.
        batch: the collapsed batch.
        result_shape, result_strides: the user-visible result (1-D promoted axes dropped).
        result_order: the result's matrix order in user orientation.
        inplace: the result is ``c``.
    """

    transposed: bool
    m: int
    n: int
    k: int
    transa: Op
    transb: Op
    a: MatrixLayout
    b: MatrixLayout
    c: MatrixLayout
    d: MatrixLayout
    a_operand: str
    b_operand: str
    has_c: bool
    batch: BatchTraits
    result_shape: tuple[int, ...]
    result_strides: tuple[int, ...]
    result_order: Order
    inplace: bool
    staged: tuple[str, str] | None = None


def _orientations(mm: MMTraits, forces_col: bool, transpose_problem: bool) -> list[bool]:
    """Return the orientations to try (``True``: the transposed product), preferred first."""
    if transpose_problem and not forces_col:
        raise ValueError("transpose_problem needs an epilog that fixes the order of D (forces_col=True)")
    if forces_col:
        if mm.c_view is not None:
            cv = mm.c_view.t if transpose_problem else mm.c_view
            if cv.col_ld(allow_zero_ld=True) is None:
                need = (
                    "row-major (unit stride along N)"
                    if transpose_problem
                    else "column-major (unit stride along M)"
                )
                raise ValueError(
                    f"this epilog needs c {need}; got c of shape {mm.c_shape} with strides {mm.c_strides}"
                )
        return [transpose_problem]
    c_hint = mm.c_view.hint(allow_zero_ld=True) if mm.c_view is not None else None
    if c_hint is not None:
        return [c_hint == Order.ROW]
    preferred = next((h == Order.ROW for h in (mm.a_view.hint(), mm.b_view.hint()) if h is not None), True)
    return [preferred, not preferred]


def _operand_layout(
    name: str, view: MatrixView, conj: bool, prefer: Op, required: Op | None = None
) -> tuple[int, int, int, Op, Order]:
    """Describe ``op(L) == view``: ``(rows, cols, ld, op, order)`` of L (column-major unless an epilog
    requires an op the column-major description cannot give: then L is ``ORDER_ROW`` with that op,
    the same memory read the other way, so the caller never reorders its operand).

    A conjugated operand needs ``OP_C``, i.e. a view that is column-major once transposed
    (cuBLASLt does not support ``ORDER_ROW`` with ``OP_C``).
    """
    n_ld, t_ld = view.col_ld(), view.t.col_ld()
    if not conj and required == Op.N and n_ld is None and t_ld is not None:
        return view.rows, view.cols, t_ld, Op.N, Order.ROW
    if not conj and required == Op.T and t_ld is None and n_ld is not None:
        return view.cols, view.rows, n_ld, Op.T, Order.ROW
    return (*_col_layout(name, view, conj, prefer, n_ld, t_ld), Order.COL)


def _col_layout(
    name: str, view: MatrixView, conj: bool, prefer: Op, n_ld: int | None, t_ld: int | None
) -> tuple[int, int, int, Op]:
    if conj:
        if t_ld is None:
            raise ValueError(
                f"operand {name!r} is conjugated (qualifiers or the lazy-conjugation bit) but its layout (strides "
                f"{view.row_stride, view.col_stride} for a {view.rows}x{view.cols} matrix) cannot use cuBLASLt's OP_C "
                "with this result order; resolve the conjugation first (e.g. torch's .resolve_conj()) or pass it "
                "in the other memory order"
            )
        return view.cols, view.rows, t_ld, Op.C
    if n_ld is not None and (t_ld is None or prefer == Op.N):
        return view.rows, view.cols, n_ld, Op.N
    return view.cols, view.rows, t_ld, Op.T  # type: ignore[return-value]


def _result(mm: MMTraits, transposed: bool) -> tuple[tuple[int, ...], tuple[int, ...]]:
    if mm.inplace:
        return mm.c_shape, mm.c_strides  # type: ignore[return-value]
    m, n = mm.m, mm.n
    mat = (n, 1) if transposed else (1, m)
    shape = mm.batch.shape + (m, n)
    strides = dense_batch_strides(mm.batch, m * n) + mat
    drop = {len(shape) - 2} if mm.a_promoted else set()
    if mm.b_promoted:
        drop.add(len(shape) - 1)
    keep = [i for i in range(len(shape)) if i not in drop]
    return tuple(shape[i] for i in keep), tuple(strides[i] for i in keep)


def _check_required_ops(p: MatmulProblem, required: tuple[Op | None, Op | None]) -> None:
    for name, op, want in ((p.a_operand, p.transa, required[0]), (p.b_operand, p.transb, required[1])):
        if want is not None and op != want:
            axis = ("M" if name == "a" else "K") if want == Op.N else ("K" if name == "a" else "N")
            raise ValueError(
                f"this epilog needs operand {name!r} with unit stride along {axis} (cuBLASLt op {want.name}); "
                f"got op {op.name}: pass it in the other memory order (e.g. .contiguous() of its transpose, "
                "transposed back)"
            )


def _check_fp8(p: MatmulProblem) -> None:
    """FP8 rules measured on H200 / cuBLASLt 13.1: TN ops, K % 16, 16-byte rows and leading dims."""
    bad_ops = [
        n for n, op, want in ((p.a_operand, p.transa, Op.T), (p.b_operand, p.transb, Op.N)) if op != want
    ]
    if bad_ops:
        raise ValueError(
            "FP8 matmul needs both operands contiguous along K (cuBLASLt's 'TN' layout): a of shape (..., M, K) "
            "with unit stride along K (row-major) and b of shape (..., K, N) with unit stride along K (column-major, "
            f"e.g. w.T of a row-major w); operand(s) {', '.join(map(repr, sorted(bad_ops)))} are not"
        )
    q = FP8_DIM_MULTIPLE
    d_rows = "N" if p.transposed else "M"
    checks = [("K", p.k, 1), (f"ld of {p.a_operand}", p.a.ld, 1), (f"ld of {p.b_operand}", p.b.ld, 1)]
    for what, lay in (("D", p.d), ("C", p.c)):
        size = _dt.itemsize(lay.dtype)
        checks += [(f"{d_rows} ({what} rows, {lay.dtype})", lay.rows, size), (f"ld of {what}", lay.ld, size)]
    bad = {name: v for name, v, size in checks if (v * size) % q and not (name.startswith("ld") and v == 0)}
    if bad:
        raise ValueError(
            f"FP8 matmul needs K, and the row count and leading dimension of every matrix, to span a multiple of "
            f"{q} bytes; got {bad}"
        )


def _staged_view(view: MatrixView, required: Op | None) -> MatrixView | None:
    """The view of a dense copy of ``view`` whose column-major description gives ``required``
    (``None``: ``view`` itself gives it, or no op is required)."""
    if required == Op.N and view.col_ld() is None:
        return MatrixView(view.rows, view.cols, 1, view.rows)
    if required == Op.T and view.t.col_ld() is None:
        return MatrixView(view.rows, view.cols, view.cols, 1)
    return None


def _build_problem(
    mm: MMTraits,
    types: TypeTraits,
    tr: bool,
    required: tuple[Op | None, Op | None],
    staged_operand: str | None,
) -> MatmulProblem:
    bs = mm.batch
    (av, ca, an), (bv, cb, bn) = (mm.a_view, mm.conj_a, "a"), (mm.b_view, mm.conj_b, "b")
    if tr:
        (av, ca, an), (bv, cb, bn) = (bv.t, cb, bn), (av.t, ca, an)
    strides = {"a": bs.stride("a"), "b": bs.stride("b")}
    staged = None
    for i, name in ((0, an), (1, bn)):
        view = (av, bv)[i]
        copy = _staged_view(view, required[i]) if name == staged_operand else None
        if copy is not None:
            col = (copy.row_stride == 1) != tr  # the copy's memory order in the user's operand
            staged = (name, "col" if col else "row")
            strides[name] = 0 if strides[name] == 0 else view.rows * view.cols
            av, bv = (copy, bv) if i == 0 else (av, copy)
    m, n = (mm.n, mm.m) if tr else (mm.m, mm.n)
    dt = {"a": types.a_dtype, "b": types.b_dtype}
    prefer_a = Op.T if required[0] is None else required[0]  # Op.N is falsy: no `or` here
    prefer_b = Op.N if required[1] is None else required[1]
    ar, ac, ald, transa, a_order = _operand_layout(an, av, ca, prefer_a, required[0])
    br, bc, bld, transb, b_order = _operand_layout(bn, bv, cb, prefer_b, required[1])
    a = MatrixLayout(ar, ac, ald, a_order, dt[an], bs.count, strides[an])
    b = MatrixLayout(br, bc, bld, b_order, dt[bn], bs.count, strides[bn])
    d = MatrixLayout(m, n, m, Order.COL, types.d_dtype, bs.count, m * n)
    c = dataclasses.replace(d, dtype=types.c_dtype)
    if mm.c_view is not None:
        c_ld = (mm.c_view.t if tr else mm.c_view).col_ld(allow_zero_ld=not mm.inplace)
        if c_ld is None:  # pragma: no cover - _orientations guarantees a fit
            raise AssertionError("c does not fit the chosen orientation")
        c = MatrixLayout(m, n, c_ld, Order.COL, types.c_dtype, bs.count, bs.stride("c"))
        if mm.inplace:
            d = dataclasses.replace(c, dtype=types.d_dtype)
    shape, strides = _result(mm, tr)
    problem = MatmulProblem(
        transposed=tr, m=m, n=n, k=mm.k, transa=transa, transb=transb, a=a, b=b, c=c, d=d,
        a_operand=an, b_operand=bn, has_c=mm.c_view is not None, batch=bs,
        result_shape=shape, result_strides=strides, result_order=Order.ROW if tr else Order.COL,
        inplace=mm.inplace, staged=staged,
    )  # fmt: skip
    _check_required_ops(problem, required)
    if types.narrow_inputs:
        _check_fp8(problem)
    return problem


def get_problem(
    mm: MMTraits,
    types: TypeTraits,
    *,
    forces_col: bool = False,
    transpose_problem: bool = False,
    required_ops: tuple[Op | None, Op | None] = (None, None),
    staged_operand: str | None = None,
) -> MatmulProblem:
    """Compute the cuBLASLt problem (layouts, ops, orientation, result) from the traits.

    The orientation follows the result-order rule; when it is free (no ``c``, no epilog order) and the
    preferred one cannot express a conjugated operand or an FP8 rule, the other one is used.

    Args:
        mm: the constructor-time traits.
        types: the resolved dtypes (:func:`._typemaps.resolve_types`).
        forces_col: the epilog needs a column-major D (cuBLASLt orientation).
        transpose_problem: compute ``D^T = B^T A^T`` (an epilog vector along N); needs ``forces_col``.
        required_ops: ops the epilog needs on cuBLASLt's A and B (``None``: any); see
            ``EpilogTraits.required_ops``.
        staged_operand: the user operand (``"a"``/``"b"``) that cuBLASLt cannot read as ``ORDER_ROW``
            with this epilog: when its memory order does not give its required op, the problem reads a
            dense copy in the order that does (``MatmulProblem.staged``; the planner makes the copy).
            ``**epilog_traits.problem_options`` passes all four.

    Raises:
        ValueError: ``c``'s layout conflicts with the epilog's order, a conjugated operand cannot use
            OP_C, an operand's order conflicts with the epilog's required op, or an FP8 rule fails.
    """
    errors: list[ValueError] = []
    for tr in _orientations(mm, forces_col, transpose_problem):
        try:
            return _build_problem(mm, types, tr, required_ops, staged_operand)
        except ValueError as exc:
            errors.append(exc)
    raise errors[0]


def row_order_problem(mm: MMTraits, types: TypeTraits) -> MatmulProblem | None:
    """The same product with ``ORDER_ROW`` layouts, or ``None`` where it does not apply.

    ``D = A @ B`` with every matrix row-major as the user holds it (no swap, ops ``N``): the problem
    nvmath-python hands cuBLASLt. Its heuristic may answer with other (sometimes faster) kernels than
    for the column-major transposed problem the planner uses by default, so autotuning can try both.
    Applies to row-major ``a``, ``b`` and result, without conjugation, FP8, a broadcast ``c`` or
    ``inplace``; the caller also requires that the plan has no epilog.
    """
    if types.narrow_inputs or mm.conj_a or mm.conj_b or mm.inplace or mm.c_broadcast:
        return None
    a_ld, b_ld = mm.a_view.t.col_ld(), mm.b_view.t.col_ld()  # row-major: unit stride along the row
    c_ld = mm.c_view.t.col_ld() if mm.c_view is not None else mm.n
    if a_ld is None or b_ld is None or c_ld is None:
        return None
    bs, m, n, k = mm.batch, mm.m, mm.n, mm.k
    a = MatrixLayout(m, k, a_ld, Order.ROW, types.a_dtype, bs.count, bs.stride("a"))
    b = MatrixLayout(k, n, b_ld, Order.ROW, types.b_dtype, bs.count, bs.stride("b"))
    d = MatrixLayout(m, n, n, Order.ROW, types.d_dtype, bs.count, m * n)
    c = dataclasses.replace(d, dtype=types.c_dtype)
    if mm.c_view is not None:
        c = MatrixLayout(m, n, c_ld, Order.ROW, types.c_dtype, bs.count, bs.stride("c"))
    shape, strides = _result(mm, True)  # the result is row-major, as in the transposed problem
    return MatmulProblem(
        transposed=False, m=m, n=n, k=k, transa=Op.N, transb=Op.N, a=a, b=b, c=c, d=d,
        a_operand="a", b_operand="b", has_c=mm.c_view is not None, batch=bs,
        result_shape=shape, result_strides=strides, result_order=Order.ROW, inplace=False,
    )  # fmt: skip
