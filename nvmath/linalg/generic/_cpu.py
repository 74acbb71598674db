"""CPU execution of the generic matmul: the BLAS that numpy and scipy ship.

==========  ==========================================================================================
``gemm``    ``numpy.matmul`` (its BLAS, batched and broadcast as numpy does); ``alpha`` / ``beta * c``
            applied in place on the product
``symm``    ``scipy.linalg.blas.?symm`` per matrix (only the stored triangle is read)
``hemm``    ``scipy.linalg.blas.?hemm`` per matrix
``dgmm``    a broadcast multiply by the diagonal vector
``trmm``    not available on the CPU (as in nvmath-python): :class:`NotImplementedError`; run it with
            ``execution="cuda"``
==========  ==========================================================================================

``beta == 0`` never reads ``c``, as in BLAS (NaN or Inf in ``c`` do not reach the result), also in
place and in explicit batches.

Operands are numpy arrays here (torch CPU tensors are shared without a copy, their lazy conjugation
resolved). ``ExecutionCPU.num_threads`` limits the BLAS threads through ``threadpoolctl`` when it is
installed (``pip install nvmath-kit[cpu]``); without it the BLAS default is used and a debug line
says so. A conjugated general operand is conjugated into a temporary (numpy has no conjugating
matmul).
"""

from __future__ import annotations

import contextlib
import itertools
import logging
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from nvmath.linalg.generic._qualifiers import Qualifier
from nvmath.linalg.generic._traits import Traits

__all__ = ["CPU_KERNELS", "blas_threads", "run_cpu"]

logger = logging.getLogger(__name__)


@contextlib.contextmanager
def blas_threads(num_threads: int | None) -> Iterator[None]:
    """Limit the BLAS thread pools to ``num_threads`` inside the block (``None``: no change)."""
    if num_threads is None:
        yield
        return
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        logger.debug(
            "threadpoolctl is not installed: ExecutionCPU.num_threads=%d is not applied", num_threads
        )
        yield
        return
    with threadpool_limits(limits=num_threads, user_api="blas"):
        yield


def _finish(product: np.ndarray, alpha: Any, beta: Any, c: np.ndarray | None, out: np.ndarray) -> np.ndarray:
    """``out[...] = alpha * product + beta * c`` with as few passes as possible.

    ``beta == 0`` does not read ``c`` (BLAS semantics: NaN or Inf in ``c`` do not reach the result).
    """
    if c is not None and beta == 0:
        c = None
    if product is not out:
        if c is not None and c is out:  # in place: out holds c
            out *= beta
            out += product if alpha == 1 else alpha * product
            return out
        np.copyto(out, product)
    if alpha != 1:
        out *= alpha
    if c is not None:
        out += beta * c if beta != 1 else c
    return out


def _gemm(t: Traits, a, b, q: tuple[Qualifier, Qualifier], alpha, beta, c, out) -> np.ndarray:
    a = np.conj(a) if q[0].conjugate else a
    b = np.conj(b) if q[1].conjugate else b
    if c is None or c is not out:
        np.matmul(a, b, out=out)
        return _finish(out, alpha, beta, c, out)
    return _finish(np.matmul(a, b), alpha, beta, c, out)


def _fview(x: np.ndarray, row_major: bool) -> np.ndarray:
    """The column-major (BLAS) reading of ``x``'s memory."""
    return x.T if row_major else x


def _pairs(t: Traits, s: np.ndarray, x: np.ndarray, out: np.ndarray) -> Iterator[tuple[Any, Any, Any]]:
    """(structured, dense, out) matrices over the broadcast batch."""
    ns, nx = s.ndim - 2, x.ndim - 2
    for index in itertools.product(*(range(d) for d in t.batch)):
        si = tuple(0 if s.shape[i] == 1 else index[len(index) - ns + i] for i in range(ns))
        xi = tuple(0 if x.shape[i] == 1 else index[len(index) - nx + i] for i in range(nx))
        yield s[si], x[xi], out[index]


def _symm(t: Traits, a, b, q, alpha, beta, c, out) -> np.ndarray:
    from nvmath._internal.optional import import_scipy

    blas = import_scipy("linalg.blas", f"a {t.kind} product (symmetric / Hermitian qualifier) on the CPU")

    s, x = (a, b) if t.structured == "a" else (b, a)
    prefix = {"float32": "s", "float64": "d", "complex64": "c", "complex128": "z"}[t.dtype]
    fn = getattr(blas, prefix + ("hemm" if t.kind == "hemm" else "symm"))
    ls = t.layouts[t.structured]
    row = t.order == "row"
    if c is not None and beta == 0:  # BLAS semantics: c is not read
        c = None
    if c is not None and c is not out:
        np.copyto(out, c)
    if out.size == 0:  # BLAS wrappers refuse empty matrices; there is nothing to compute
        return out
    b_ = beta if c is not None else 0
    for s2, x2, o2 in _pairs(t, s, x, out):
        o = _fview(o2, row)
        res = fn(
            alpha,
            _fview(s2, ls.row_major),
            _fview(x2, row),
            b_,
            o,
            side=int(t.side),
            lower=int(t.uplo == 0),
            overwrite_c=1,
        )
        if res is not o:
            o[...] = res
    return out


def _diagonal(x: np.ndarray, incx: int) -> np.ndarray:
    """The diagonal read from vector ``x`` with stride ``incx`` (BLAS convention when negative)."""
    n = (x.shape[0] - 1) // abs(incx) + 1 if x.shape[0] else 0
    v = x[: (n - 1) * abs(incx) + 1 : abs(incx)] if n else x[:0]
    return v[::-1] if incx < 0 else v


def _dgmm(t: Traits, a, b, q, alpha, beta, c, out) -> np.ndarray:
    qs = q[0] if t.structured == "a" else q[1]
    v = _diagonal(a if t.structured == "a" else b, qs.incx)
    v = np.conj(v) if qs.conjugate else v
    dense = b if t.structured == "a" else a
    dense = np.conj(dense) if (q[1] if t.structured == "a" else q[0]).conjugate else dense
    if t.structured == "a" and dense.ndim > 1:
        product = np.multiply(v[:, None], dense)
    else:
        product = np.multiply(dense, v)
    return _finish(product, alpha, beta, c, out)


def _trmm(t: Traits, *args: Any) -> np.ndarray:
    raise NotImplementedError(
        "a triangular qualifier (trmm) is not available on the CPU, as in nvmath-python; "
        "run it on the GPU with execution='cuda' (host operands are copied there and back)"
    )


CPU_KERNELS: dict[str, Callable[..., np.ndarray]] = {
    "gemm": _gemm,
    "symm": _symm,
    "hemm": _symm,
    "dgmm": _dgmm,
    "trmm": _trmm,
}
"""Routine family -> CPU kernel."""


def run_cpu(
    t: Traits,
    a: np.ndarray,
    b: np.ndarray,
    q: tuple[Qualifier, Qualifier],
    alpha: Any,
    beta: Any,
    c: np.ndarray | None,
    out: np.ndarray,
    num_threads: int | None,
) -> np.ndarray:
    """Compute into ``out`` (``out`` may be ``c`` itself: in place) and return it."""
    with blas_threads(num_threads):
        return CPU_KERNELS[t.kind](t, a, b, q, alpha, beta, c, out)
