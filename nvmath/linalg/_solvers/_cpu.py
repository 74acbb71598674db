"""CPU execution of the dense solvers: LAPACK through scipy (numpy for the batched fast paths).

Every kernel takes numpy arrays of shape ``(*batch, rows, cols)`` in the operands' dtype and returns
new arrays (the inputs are never written) plus one LAPACK ``info`` per matrix (``int32``, batch
shape). Routines that report per-matrix failures through ``info`` (``potrf``, ``getrf``) are called
per matrix; the eigensolver, SVD, QR and inverse use numpy's batched loops and fall back to LAPACK
per matrix only when numpy reports a failure, to get the ``info`` values.

Pivots follow LAPACK and cuSOLVER: ``int32``, **1-based** (row ``i`` was swapped with row
``piv[i] - 1``), like ``torch.linalg.lu_factor``.

:func:`host_array` and :func:`to_caller` move operands and results between the caller's package and
numpy (torch CPU tensors are shared with numpy without a copy).
"""

from __future__ import annotations

import logging
import math
import sys
from collections.abc import Callable
from typing import Any

import numpy as np

from nvmath._errors import NotSupportedError
from nvmath._internal.tensors import TensorAdapter, wrap
from nvmath._internal.tensors.copy import copy_into
from nvmath._internal.tensors.host import element_strides, host_view
from nvmath._internal.tensors.numpy_adapter import NumpyAdapter

__all__ = [
    "cho_solve",
    "cholesky",
    "eigh",
    "host_array",
    "inv",
    "lapack",
    "lstsq",
    "lu_factor",
    "lu_solve",
    "qr",
    "svd",
    "to_caller",
]

logger = logging.getLogger(__name__)


# ------------------------------------------------------------------------------------ package moves
def host_array(adapter: TensorAdapter, stream: Any = None) -> np.ndarray:
    """A numpy array holding the operand's values (a view when it is already in host memory).

    torch's lazy conjugation is resolved; GPU operands are copied to the host (blocking).
    """
    if adapter.is_conjugate:
        adapter = wrap(adapter.tensor.resolve_conj())
    if adapter.device != "cpu":
        adapter = adapter.to("cpu", stream)
    if adapter.package == "numpy":
        return np.asarray(adapter.tensor)
    if adapter.package == "torch":
        return adapter.tensor.detach().numpy()
    return host_view(adapter)


def to_caller(result: np.ndarray, like: TensorAdapter, stream: Any = None) -> Any:
    """Return ``result`` as a tensor of ``like``'s package, on ``like``'s device."""
    if like.package == "numpy":
        return result
    if like.package == "torch" and like.device == "cpu":
        return sys.modules["torch"].from_numpy(np.ascontiguousarray(result))
    src = NumpyAdapter(np.ascontiguousarray(result))
    isz = src.itemsize
    dst = like.empty(
        tuple(result.shape),
        src.dtype,
        strides=element_strides(src.tensor.strides, isz),
        device_id=like.device_id,
        stream=stream,
    )
    copy_into(dst, src, stream)
    return dst.tensor


# ------------------------------------------------------------------------------------ LAPACK access
def lapack(name: str, dtype: np.dtype) -> Callable[..., Any]:
    """The scipy LAPACK wrapper ``<prefix><name>`` for ``dtype`` (e.g. ``dpotrf``)."""
    from nvmath._internal.optional import import_scipy

    _lapack = import_scipy("linalg.lapack", "CPU execution of the dense solvers", NotSupportedError)
    prefix = {"float32": "s", "float64": "d", "complex64": "c", "complex128": "z"}[np.dtype(dtype).name]
    return getattr(_lapack, prefix + name)


def _matrices(a: np.ndarray) -> tuple[np.ndarray, tuple[int, ...]]:
    """View ``a`` (``(*batch, r, c)``) as ``(count, r, c)``; return it and the batch shape."""
    batch = a.shape[:-2]
    return a.reshape((math.prod(batch),) + a.shape[-2:]), batch


def _per_matrix(fn: Callable[[int], int], count: int, batch: tuple[int, ...]) -> np.ndarray:
    info = np.zeros(count, dtype=np.int32)
    for i in range(count):
        info[i] = fn(i)
    return info.reshape(batch)


# ------------------------------------------------------------------------------------ kernels
def cholesky(a: np.ndarray, lower: bool) -> tuple[np.ndarray, np.ndarray]:
    """Cholesky factors (the other triangle zeroed) and ``info`` (``k > 0``: minor ``k`` not positive)."""
    mats, batch = _matrices(a)
    potrf = lapack("potrf", a.dtype)
    out = np.empty_like(mats)

    def one(i: int) -> int:
        c, info = potrf(mats[i], lower=int(lower), clean=1)
        out[i] = np.tril(c) if lower else np.triu(c)
        return info

    info = _per_matrix(one, mats.shape[0], batch)
    return out.reshape(a.shape), info


def cho_solve(c: np.ndarray, b: np.ndarray, lower: bool) -> np.ndarray:
    """Solve ``A x = b`` given the Cholesky factor ``c`` of ``A``; ``b`` is ``(*batch, n, nrhs)``."""
    mats, _ = _matrices(c)
    rhs = b.reshape((mats.shape[0],) + b.shape[-2:])
    potrs = lapack("potrs", c.dtype)
    out = np.empty_like(rhs)
    for i in range(mats.shape[0]):
        out[i], _ = potrs(mats[i], rhs[i], lower=int(lower))
    return out.reshape(b.shape)


def lu_factor(a: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """LU factors (``P A = L U``, unit ``L`` below, ``U`` on and above the diagonal), 1-based pivots, info."""
    mats, batch = _matrices(a)
    getrf = lapack("getrf", a.dtype)
    n = min(a.shape[-2:])
    lu = np.empty_like(mats)
    piv = np.empty((mats.shape[0], n), dtype=np.int32)

    def one(i: int) -> int:
        lu[i], p, info = getrf(mats[i])
        piv[i] = p + 1
        return info

    info = _per_matrix(one, mats.shape[0], batch)
    return lu.reshape(a.shape), piv.reshape(batch + (n,)), info


def lu_solve(lu: np.ndarray, piv: np.ndarray, b: np.ndarray, trans: int = 0) -> np.ndarray:
    """Solve ``op(A) x = b`` from :func:`lu_factor`'s output; ``trans`` 0 (N), 1 (T) or 2 (C)."""
    mats, _ = _matrices(lu)
    count = mats.shape[0]
    pivots = piv.reshape(count, -1).astype(np.int32) - 1
    rhs = b.reshape((count,) + b.shape[-2:])
    getrs = lapack("getrs", lu.dtype)
    out = np.empty_like(rhs)
    for i in range(count):
        out[i], _ = getrs(mats[i], pivots[i], rhs[i], trans=trans)
    return out.reshape(b.shape)


def inv(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Inverses and ``info`` (``k > 0``: singular, zero pivot ``k``)."""
    try:
        with np.errstate(all="ignore"):
            return np.linalg.inv(a), np.zeros(a.shape[:-2], dtype=np.int32)
    except np.linalg.LinAlgError:
        pass
    lu, piv, info = lu_factor(a)
    mats, _ = _matrices(lu)
    pivots = piv.reshape(mats.shape[0], -1) - 1
    getri = lapack("getri", a.dtype)
    out = np.full_like(mats, np.nan)
    flat_info = info.reshape(-1)
    for i in range(mats.shape[0]):
        if flat_info[i] == 0:
            out[i], _ = getri(mats[i], pivots[i])
    return out.reshape(a.shape), info


def eigh(a: np.ndarray, lower: bool, vectors: bool) -> tuple[np.ndarray, np.ndarray | None, np.ndarray]:
    """Eigenvalues (ascending), eigenvectors (columns, or ``None``) and info of Hermitian matrices."""
    uplo = "L" if lower else "U"
    try:
        if vectors:
            w, v = np.linalg.eigh(a, UPLO=uplo)
        else:
            w, v = np.linalg.eigvalsh(a, UPLO=uplo), None
        return w, v, np.zeros(a.shape[:-2], dtype=np.int32)
    except np.linalg.LinAlgError:
        logger.debug("numpy eigh reported a failure: calling LAPACK per matrix for info")
    mats, batch = _matrices(a)
    name = "heevd" if np.iscomplexobj(a) else "syevd"
    fn = lapack(name, a.dtype)
    n = a.shape[-1]
    w = np.full((mats.shape[0], n), np.nan, dtype=np.finfo(a.dtype).dtype)
    v = np.full_like(mats, np.nan) if vectors else None

    def one(i: int) -> int:
        wi, vi, info = fn(mats[i], compute_v=int(vectors), lower=int(lower))
        w[i] = wi
        if vectors:
            v[i] = vi
        return info

    info = _per_matrix(one, mats.shape[0], batch)
    return w.reshape(batch + (n,)), None if v is None else v.reshape(a.shape), info


def svd(
    a: np.ndarray, full_matrices: bool, compute_uv: bool
) -> tuple[np.ndarray | None, np.ndarray, np.ndarray | None, np.ndarray]:
    """``(U, S, Vh, info)``; ``U``/``Vh`` are ``None`` when ``compute_uv`` is False."""
    try:
        if compute_uv:
            u, s, vh = np.linalg.svd(a, full_matrices=full_matrices)
            return u, s, vh, np.zeros(a.shape[:-2], dtype=np.int32)
        return None, np.linalg.svd(a, compute_uv=False), None, np.zeros(a.shape[:-2], dtype=np.int32)
    except np.linalg.LinAlgError:
        logger.debug("numpy svd reported a failure: calling LAPACK per matrix for info")
    mats, batch = _matrices(a)
    gesvd = lapack("gesvd", a.dtype)
    m, n = a.shape[-2:]
    k = min(m, n)
    ucols, vrows = (m, n) if full_matrices else (k, k)
    s = np.full((mats.shape[0], k), np.nan, dtype=np.finfo(a.dtype).dtype)
    u = np.full((mats.shape[0], m, ucols), np.nan, dtype=a.dtype) if compute_uv else None
    vh = np.full((mats.shape[0], vrows, n), np.nan, dtype=a.dtype) if compute_uv else None

    def one(i: int) -> int:
        ui, si, vi, info = gesvd(mats[i], compute_uv=int(compute_uv), full_matrices=int(full_matrices))
        s[i] = si
        if compute_uv:
            u[i], vh[i] = ui, vi
        return info

    info = _per_matrix(one, mats.shape[0], batch)
    u = None if u is None else u.reshape(batch + u.shape[1:])
    vh = None if vh is None else vh.reshape(batch + vh.shape[1:])
    return u, s.reshape(batch + (k,)), vh, info


def qr(a: np.ndarray, mode: str) -> tuple[np.ndarray | None, np.ndarray]:
    """``(Q, R)`` for ``mode`` ``"reduced"`` / ``"complete"``, ``(None, R)`` for ``"r"``."""
    if mode == "r":
        return None, np.linalg.qr(a, mode="r")
    q, r = np.linalg.qr(a, mode=mode)
    return q, r


def lstsq(
    a: np.ndarray, b: np.ndarray, rcond: float | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Minimum-norm least squares per matrix (LAPACK ``gelsd``).

    Returns:
        ``(x, residuals, rank, singular_values, info)``; ``b`` and ``x`` are ``(*batch, rows, nrhs)``;
        ``residuals`` is ``(*batch, nrhs)`` (squared 2-norms of ``b - a x``) when ``rows > cols``,
        else an empty array.
    """
    from nvmath._internal.optional import import_scipy

    sla = import_scipy("linalg", "CPU execution of lstsq", NotSupportedError)

    mats, batch = _matrices(a)
    rhs = b.reshape((mats.shape[0],) + b.shape[-2:])
    count, (m, n), nrhs = mats.shape[0], a.shape[-2:], b.shape[-1]
    x = np.full((count, n, nrhs), np.nan, dtype=a.dtype)
    rank = np.zeros(count, dtype=np.int64)
    sv = np.full((count, min(m, n)), np.nan, dtype=np.finfo(a.dtype).dtype)

    def one(i: int) -> int:
        try:
            x[i], _, rank[i], sv[i] = sla.lstsq(mats[i], rhs[i], cond=rcond, lapack_driver="gelsd")
        except np.linalg.LinAlgError:
            return 1
        return 0

    info = _per_matrix(one, count, batch)
    if m > n:
        resid = rhs - mats @ x
        residuals = np.sum(np.abs(resid) ** 2, axis=-2).astype(sv.dtype).reshape(batch + (nrhs,))
    else:
        residuals = np.zeros(0, dtype=sv.dtype)
    return (
        x.reshape(batch + (n, nrhs)),
        residuals,
        rank.reshape(batch),
        sv.reshape(batch + (min(m, n),)),
        info,
    )
