"""Singular value decomposition: :class:`SVD`, :func:`svd`, :func:`svdvals`.

For ``a`` of shape ``(*batch, m, n)`` and ``k = min(m, n)``, ``svd(a)`` returns ``(U, S, Vh)`` with
``a = U diag(S) Vh``, ``S`` real and descending, ``(*batch, k)``; ``full_matrices=True`` (default, as
numpy and torch) gives ``U`` ``(*batch, m, m)`` and ``Vh`` ``(*batch, n, n)``, ``False`` gives
``(*batch, m, k)`` and ``(*batch, k, n)``. ``svdvals(a)`` returns ``S`` only. Singular vectors are
unique only up to a unit phase per pair: compare ``U diag(S) Vh`` with ``a``, not ``U`` itself.

GPU: one-sided Jacobi -- ``gesvdjBatched`` for batches of matrices up to 32 x 32, ``gesvdj`` per
matrix otherwise -- or, with ``options.algorithm="gesvda"``, the approximate
``gesvdaStridedBatched`` for tall matrices (``m >= n``, reduced factors; its accuracy degrades with
the condition number). A matrix on which Jacobi does not converge is reported through ``info``.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np

from nvmath._internal import devices
from nvmath._internal.state import PlannerState, requires
from nvmath.linalg._solvers import _cpu
from nvmath.linalg._solvers._base import SingleMatrixSolver, batch_view
from nvmath.linalg._solvers._cache import run_cached
from nvmath.linalg._solvers._common import check_flag, real_dtype
from nvmath.linalg._solvers._gpu import GpuContext, dn_function

__all__ = ["SVD", "svd", "svdvals"]

_NOVECTOR, _VECTOR = 0, 1  # cusolverEigMode_t


class SVD(SingleMatrixSolver):
    """Stateful singular value decomposition of a (batch of) matrices.

    Args:
        a: ``(*batch, m, n)`` tensor.
        full_matrices: full (``True``) or reduced (``False``) ``U`` and ``Vh``.
        compute_uv: compute ``U`` and ``Vh`` (``False``: singular values only).
        options: :class:`SolverOptions` or a dict of its fields (``algorithm="gesvda"`` is accepted).
        execution: ``"cuda"``, ``"cpu"``, an execution object, or ``None`` (the operands' space).
        stream: the CUDA stream for planning (``None``: the package's current stream).
    """

    _NAME = "SVD"
    _OP = "svd"
    _SQUARE = False

    def __init__(
        self,
        a: Any,
        *,
        full_matrices: bool = True,
        compute_uv: bool = True,
        options: Any = None,
        execution: Any = None,
        stream: Any = None,
    ):
        self.full_matrices = check_flag("full_matrices", full_matrices)
        self.compute_uv = check_flag("compute_uv", compute_uv)
        super().__init__({"a": a}, options=options, execution=execution, stream=stream)
        if self.options.algorithm == "gesvda" and self.full_matrices and self.compute_uv:
            raise ValueError("algorithm='gesvda' computes reduced factors only: pass full_matrices=False")

    def _plan_gpu(self, ctx: GpuContext) -> Any:
        spec = self._specs["a"]
        m, n, count = spec.rows, spec.cols, spec.batch_count
        k = min(m, n)
        g = SimpleNamespace(choice=self._choose("svd", spec))
        alg = g.choice.algorithm
        g.jobz = _VECTOR if self.compute_uv else _NOVECTOR
        g.econ = 0 if (alg == "batched" or self.full_matrices) else 1
        ucols = k if (g.econ or alg == "gesvda") else m
        vcols = k if (g.econ or alg == "gesvda") else n
        g.work = ctx.matrix(self._like, spec.batch_shape, m, n)
        g.s = ctx.vector(self._like, (*spec.batch_shape, k), real_dtype(spec.dtype))
        g.u = ctx.matrix(self._like, spec.batch_shape, m, ucols)
        g.v = ctx.matrix(self._like, spec.batch_shape, n, vcols)
        g.info = ctx.info(count)
        g.resid = np.zeros(count, dtype=np.float64)
        args = (g.work.ptr, m, int(g.s.data_ptr), g.u.ptr, m, g.v.ptr, n)
        if alg == "gesvda":
            fn = dn_function(spec.dtype, "gesvda_strided_batched_buffer_size")
            lwork = fn(ctx.dn, g.jobz, k, m, n, g.work.ptr, m, g.work.stride, int(g.s.data_ptr), k, g.u.ptr, m,
                       g.u.stride, g.v.ptr, n, g.v.stride, count)  # fmt: skip
        else:
            from nvmath.bindings import cusolverDn

            params = cusolverDn.create_gesvdj_info()
            ctx.defer(lambda: cusolverDn.destroy_gesvdj_info(params))
            g.params = params
            if alg == "batched":
                lwork = dn_function(spec.dtype, "gesvdj_batched_buffer_size")(
                    ctx.dn, g.jobz, m, n, *args, params, count
                )
            else:
                lwork = dn_function(spec.dtype, "gesvdj_buffer_size")(
                    ctx.dn, g.jobz, g.econ, m, n, *args, params
                )
        g.lwork = lwork
        g.dws = ctx.alloc(lwork * g.work.itemsize)
        return g

    def _run(self, ctx: GpuContext, g: SimpleNamespace) -> None:
        """Queue the SVD of the plan's kernel family on ``g.work`` (``U``, ``S``, ``V`` into ``g``)."""
        work, u, v = g.work, g.u, g.v
        m, n, count = work.rows, work.cols, work.count
        k, s, sz = min(m, n), int(g.s.data_ptr), g.s.itemsize
        alg = g.choice.algorithm
        if alg == "gesvda":
            fn = dn_function(work.dtype, "gesvda_strided_batched")
            fn(ctx.dn, g.jobz, k, m, n, work.ptr, m, work.stride, s, k, u.ptr, m, u.stride, v.ptr, n, v.stride,
               g.dws, g.lwork, g.info.ptr, g.resid.ctypes.data, count)  # fmt: skip
        elif alg == "batched":
            fn = dn_function(work.dtype, "gesvdj_batched")
            fn(ctx.dn, g.jobz, m, n, work.ptr, m, s, u.ptr, m, v.ptr, n, g.dws, g.lwork, g.info.ptr, g.params,
               count)  # fmt: skip
        else:
            fn = dn_function(work.dtype, "gesvdj")
            for i in range(count):
                fn(ctx.dn, g.jobz, g.econ, m, n, work.at(i), m, s + i * k * sz, u.at(i), m, v.at(i), n, g.dws,
                   g.lwork, g.info.at(i), g.params)  # fmt: skip

    def _vh(self, ctx: GpuContext, g: SimpleNamespace, rows: int) -> Any:
        """``Vh`` = the conjugate transpose of the first ``rows`` columns of ``V``, as a new tensor."""
        spec = self._specs["a"]
        vh = self._emit_device(batch_view(g.v, spec.batch_shape, spec.cols, rows, transpose=True))
        if spec.dtype.startswith("complex"):
            from nvmath.bindings import cublas

            real = real_dtype(spec.dtype)
            scal = cublas.sscal_64 if real == "float32" else cublas.dscal_64
            minus_one = np.array([-1.0], dtype=real)
            half = vh.itemsize // 2
            scal(ctx.bind_blas(), int(np.prod(vh.shape)), minus_one.ctypes.data, int(vh.data_ptr) + half, 2)
        return self._give(vh)

    @requires(PlannerState.PLANNED, operands=True)
    def execute(self, *, stream: Any = None) -> Any:
        """Return ``(U, S, Vh)``, or ``S`` alone when ``compute_uv=False`` (new tensors)."""
        spec = self._specs["a"]
        with self._lock, self._phase("execution"):
            if not self.on_gpu:
                u, s, vh, info = _cpu.svd(self._scan(self._host("a", stream)), self.full_matrices, self.compute_uv)
                out = self._out(s, stream)
                if self.compute_uv:
                    out = (self._out(u, stream), out, self._out(vh, stream))
                self._record_info("svd", info, spec.batch_shape)
                return out
            m, n = spec.rows, spec.cols
            k = min(m, n)
            with devices.device_ctx(self._device_id):
                ctx, g = self._gpu_load(stream, "a")
                g.info.zero()
                self._run(ctx, g)
                out = self._emit(g.s)
                if self.compute_uv:
                    ucols, vrows = (m, n) if self.full_matrices else (k, k)
                    u = self._emit(batch_view(g.u, spec.batch_shape, m, ucols))
                    out = (u, out, self._vh(ctx, g, vrows))
                self._finish_gpu()
            self._record_info("svd", g.info, spec.batch_shape)
            return out


def svd(
    a: Any, *, full_matrices: bool = True, options: Any = None, execution: Any = None, stream: Any = None
) -> Any:
    """Singular value decomposition ``(U, S, Vh)`` (see :class:`SVD`)."""
    return run_cached(
        SVD,
        {"a": a},
        {"full_matrices": full_matrices, "compute_uv": True},
        options=options,
        execution=execution,
        stream=stream,
    )


def svdvals(a: Any, *, options: Any = None, execution: Any = None, stream: Any = None) -> Any:
    """Singular values, descending (see :class:`SVD`)."""
    return run_cached(
        SVD,
        {"a": a},
        {"full_matrices": False, "compute_uv": False},
        options=options,
        execution=execution,
        stream=stream,
    )
