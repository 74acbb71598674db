"""Symmetric / Hermitian eigensolver: :class:`Eigh`, :func:`eigh`, :func:`eigvalsh`.

``eigh(a, lower=True)`` reads the lower (``lower=False``: upper) triangle of each Hermitian ``a`` and
returns ``(w, v)``: real eigenvalues in ascending order, ``(*batch, n)``, and the orthonormal
eigenvectors as the columns of ``v``, ``(*batch, n, n)``, with ``a v = v diag(w)``. ``eigvalsh``
returns ``w`` only. A matrix on which the eigensolver does not converge is reported through ``info``
(``check()`` / ``options.check``).

GPU (see :mod:`~nvmath.linalg._solvers._dispatch`): Jacobi ``syevjBatched`` / ``heevjBatched`` for
batches of matrices up to 32 x 32, ``XsyevBatched`` for larger batched matrices, the 64-bit divide
and conquer ``Xsyevd`` per matrix otherwise. If the loaded cuSOLVER lacks ``XsyevBatched`` (or
refuses the size), ``"auto"`` falls back to the loop and logs why.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from nvmath._errors import CudaLibraryError, FunctionNotFoundError
from nvmath._internal import devices
from nvmath._internal.state import PlannerState, requires
from nvmath.linalg._solvers import _cpu
from nvmath.linalg._solvers._base import SingleMatrixSolver
from nvmath.linalg._solvers._cache import run_cached
from nvmath.linalg._solvers._common import check_flag, real_dtype
from nvmath.linalg._solvers._dispatch import Choice
from nvmath.linalg._solvers._gpu import GpuContext, data_type, dn_function, workspace_args

__all__ = ["Eigh", "eigh", "eigvalsh"]

_LOWER, _UPPER = 0, 1  # cublasFillMode_t
_NOVECTOR, _VECTOR = 0, 1  # cusolverEigMode_t


def _jacobi(dtype: str, name: str) -> Any:
    return dn_function(dtype, f"syevj_batched{name}", f"heevj_batched{name}")


class Eigh(SingleMatrixSolver):
    """Stateful eigen-decomposition of a (batch of) Hermitian matrices.

    Args:
        a: ``(*batch, n, n)`` tensor.
        lower: read the lower triangle (``False``: the upper one).
        vectors: compute the eigenvectors too (``eigh``); ``False`` gives eigenvalues only.
        options: :class:`SolverOptions` or a dict of its fields.
        execution: ``"cuda"``, ``"cpu"``, an execution object, or ``None`` (the operands' space).
        stream: the CUDA stream for planning (``None``: the package's current stream).
    """

    _NAME = "Eigh"
    _OP = "eigh"

    def __init__(
        self,
        a: Any,
        *,
        lower: bool = True,
        vectors: bool = True,
        options: Any = None,
        execution: Any = None,
        stream: Any = None,
    ):
        self.lower = check_flag("lower", lower)
        self.vectors = check_flag("vectors", vectors)
        super().__init__({"a": a}, options=options, execution=execution, stream=stream)

    def _plan_gpu(self, ctx: GpuContext) -> Any:
        spec = self._specs["a"]
        n, count = spec.rows, spec.batch_count
        g = SimpleNamespace(choice=self._choose("eigh", spec))
        g.work = ctx.matrix(self._like, spec.batch_shape, n, n)
        g.w = ctx.vector(self._like, (*spec.batch_shape, n), real_dtype(spec.dtype))
        g.info = ctx.info(count)
        g.uplo = _LOWER if self.lower else _UPPER
        g.jobz = _VECTOR if self.vectors else _NOVECTOR
        g.kernel = g.choice.kernel
        if g.kernel == "XsyevBatched":
            try:
                self._size_xsyev(ctx, g, spec.dtype)
            except (FunctionNotFoundError, CudaLibraryError) as exc:
                self._fall_back(ctx, g, exc)
            return g
        if g.kernel == "syevjBatched":
            from nvmath.bindings import cusolverDn

            params = cusolverDn.create_syevj_info()
            ctx.defer(lambda: cusolverDn.destroy_syevj_info(params))
            g.params = params
            lwork = _jacobi(spec.dtype, "_buffer_size")(
                ctx.dn, g.jobz, g.uplo, n, g.work.ptr, n, int(g.w.data_ptr), params, count
            )
            g.dsize, g.hsize = lwork * g.work.itemsize, 0
            g.dws, g.hws = ctx.alloc(g.dsize), ctx.host(0)
        else:
            self._size_xsyevd(ctx, g)
        return g

    def _fall_back(self, ctx: GpuContext, g: SimpleNamespace, exc: Exception) -> None:
        """Switch a plan from ``XsyevBatched`` to looped ``Xsyevd`` (``algorithm="auto"`` only)."""
        if self.options.algorithm == "batched":
            raise exc
        g.choice = Choice("looped", "Xsyevd", f"XsyevBatched refused this problem: {exc}")
        g.kernel = "Xsyevd"
        self._log.debug("eigh: falling back to looped Xsyevd (%s)", exc)
        self._size_xsyevd(ctx, g)

    def _size_xsyevd(self, ctx: GpuContext, g: SimpleNamespace) -> None:
        from nvmath.bindings import cusolverDn

        n, dtype = g.work.rows, g.work.dtype
        dt, dtw = data_type(dtype), data_type(real_dtype(dtype))
        g.dsize, g.hsize = cusolverDn.xsyevd_buffer_size(
            ctx.dn, ctx.params, g.jobz, g.uplo, n, dt, g.work.ptr, n, dtw, int(g.w.data_ptr), dt
        )
        g.dws, g.hws = ctx.alloc(g.dsize), ctx.host(g.hsize)

    def _size_xsyev(self, ctx: GpuContext, g: SimpleNamespace, dtype: str) -> None:
        from nvmath.bindings import cusolverDn

        n, count = g.work.rows, g.work.count
        dt, dtw = data_type(dtype), data_type(real_dtype(dtype))
        g.dsize, g.hsize = cusolverDn.xsyev_batched_buffer_size(
            ctx.dn, ctx.params, g.jobz, g.uplo, n, dt, g.work.ptr, n, dtw, int(g.w.data_ptr), dt, count
        )
        g.dws, g.hws = ctx.alloc(g.dsize), ctx.host(g.hsize)

    def _run(self, ctx: GpuContext, g: SimpleNamespace) -> None:
        """Queue the eigensolver of the plan's kernel family on ``g.work``."""
        if g.kernel == "syevjBatched":
            work = g.work
            n = work.rows
            fn = _jacobi(work.dtype, "")
            fn(ctx.dn, g.jobz, g.uplo, n, work.ptr, n, int(g.w.data_ptr), g.dws, g.dsize // work.itemsize,
               g.info.ptr, g.params, work.count)  # fmt: skip
        elif g.kernel == "XsyevBatched":
            try:
                self._xsyev(ctx, g, batched=True)
            except CudaLibraryError as exc:  # refused at launch: the input was not touched
                self._fall_back(ctx, g, exc)
                self._run(ctx, g)
        else:
            self._xsyev(ctx, g, batched=False)

    def _xsyev(self, ctx: GpuContext, g: SimpleNamespace, *, batched: bool) -> None:
        """``XsyevBatched`` over the whole batch, or ``Xsyevd`` per matrix."""
        from nvmath.bindings import cusolverDn

        work = g.work
        n, count, w = work.rows, work.count, int(g.w.data_ptr)
        dt, dtw = data_type(work.dtype), data_type(real_dtype(work.dtype))
        ws = workspace_args(g)
        if batched:
            cusolverDn.xsyev_batched(ctx.dn, ctx.params, g.jobz, g.uplo, n, dt, work.ptr, n, dtw, w, dt, *ws,
                                     g.info.ptr, count)  # fmt: skip
            return
        wsize = n * g.w.itemsize
        for i in range(count):
            cusolverDn.xsyevd(ctx.dn, ctx.params, g.jobz, g.uplo, n, dt, work.at(i), n, dtw, w + i * wsize, dt, *ws,
                              g.info.at(i))  # fmt: skip

    @requires(PlannerState.PLANNED, operands=True)
    def execute(self, *, stream: Any = None) -> Any:
        """Return ``(w, v)`` (``w`` alone when ``vectors=False``): new tensors in the operands' space."""
        spec = self._specs["a"]
        with self._lock, self._phase("execution"):
            if not self.on_gpu:
                w, v, info = _cpu.eigh(self._scan(self._host("a", stream)), self.lower, self.vectors)
                result = (
                    (self._out(w, stream), self._out(v, stream)) if self.vectors else self._out(w, stream)
                )
                self._record_info("eig", info, spec.batch_shape)
                return result
            with devices.device_ctx(self._device_id):
                ctx, g = self._gpu_load(stream, "a")
                g.info.zero()
                self._run(ctx, g)
                w = self._emit(g.w)
                result = (w, self._emit(g.work.adapter)) if self.vectors else w
                self._finish_gpu()
            self._record_info("eig", g.info, spec.batch_shape)
            return result


def eigh(
    a: Any, *, lower: bool = True, options: Any = None, execution: Any = None, stream: Any = None
) -> Any:
    """Eigenvalues (ascending) and eigenvectors (columns) of Hermitian matrices: ``(w, v)`` (see :class:`Eigh`)."""
    return run_cached(
        Eigh, {"a": a}, {"lower": lower, "vectors": True}, options=options, execution=execution, stream=stream
    )


def eigvalsh(
    a: Any, *, lower: bool = True, options: Any = None, execution: Any = None, stream: Any = None
) -> Any:
    """Eigenvalues (ascending) of Hermitian matrices (see :class:`Eigh`)."""
    return run_cached(
        Eigh,
        {"a": a},
        {"lower": lower, "vectors": False},
        options=options,
        execution=execution,
        stream=stream,
    )
