"""QR factorization: :class:`QR` and :func:`qr` (modes ``"reduced"``, ``"complete"``, ``"r"``).

For ``a`` of shape ``(*batch, m, n)`` and ``k = min(m, n)``:

* ``"reduced"`` (default): ``Q`` is ``(*batch, m, k)`` with orthonormal columns, ``R`` is
  ``(*batch, k, n)`` upper triangular, ``a = Q R``;
* ``"complete"``: ``Q`` is ``(*batch, m, m)`` unitary, ``R`` is ``(*batch, m, n)``;
* ``"r"``: ``R`` only (``(*batch, k, n)``), without forming ``Q``.

GPU: Householder QR by cuBLAS ``geqrfBatched`` (one call, for batches of small tall matrices) or the
64-bit cuSOLVER ``Xgeqrf`` per matrix; ``Q`` is formed by ``orgqr`` / ``ungqr`` per matrix, or, after
``geqrfBatched`` of matrices of at most ``LIMITS["orgqr_kernel"]`` rows, by one launch of nvmath's
batched kernel (:func:`~nvmath.linalg._solvers._kernels.orgqr_small`). The per-matrix loops are
fanned out over several streams (:mod:`~nvmath.linalg._solvers._fanout`). QR has no failure mode
(``check()`` never raises).
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np

from nvmath._internal import devices
from nvmath._internal.logging import debug
from nvmath._internal.state import PlannerState, requires
from nvmath._internal.tensors.copy import copy_into
from nvmath.linalg._solvers import _cpu, _kernels
from nvmath.linalg._solvers._base import SingleMatrixSolver, batch_view
from nvmath.linalg._solvers._cache import run_cached
from nvmath.linalg._solvers._common import colmajor_strides
from nvmath.linalg._solvers._dispatch import LIMITS
from nvmath.linalg._solvers._fanout import FanOut, Lane
from nvmath.linalg._solvers._gpu import GpuContext, data_type, dn_function, prefix

__all__ = ["QR", "QR_MODES", "qr"]

QR_MODES: tuple[str, ...] = ("reduced", "complete", "r")
"""The accepted ``mode`` values."""


def _orgqr(dtype: str, name: str) -> Any:
    return dn_function(dtype, f"orgqr{name}", f"ungqr{name}")


class QR(SingleMatrixSolver):
    """Stateful QR factorization of a (batch of) matrices.

    Args:
        a: ``(*batch, m, n)`` tensor.
        mode: ``"reduced"``, ``"complete"`` or ``"r"`` (see the module documentation).
        options: :class:`SolverOptions` or a dict of its fields.
        execution: ``"cuda"``, ``"cpu"``, an execution object, or ``None`` (the operands' space).
        stream: the CUDA stream for planning (``None``: the package's current stream).
    """

    _NAME = "QR"
    _OP = "qr"
    _SQUARE = False

    def __init__(
        self, a: Any, *, mode: str = "reduced", options: Any = None, execution: Any = None, stream: Any = None
    ):
        if not isinstance(mode, str) or mode not in QR_MODES:
            raise ValueError(f"mode must be one of {', '.join(map(repr, QR_MODES))}; got {mode!r}")
        self.mode = mode
        super().__init__({"a": a}, options=options, execution=execution, stream=stream)

    def _plan_gpu(self, ctx: GpuContext) -> Any:
        from nvmath.bindings import cusolverDn

        spec = self._specs["a"]
        m, n, count = spec.rows, spec.cols, spec.batch_count
        k = min(m, n)
        g = SimpleNamespace(choice=self._choose("qr", spec))
        g.work = ctx.matrix(self._like, spec.batch_shape, m, m if (self.mode == "complete" and m > n) else n)
        g.tau = ctx.vector(self._like, (*spec.batch_shape, k), spec.dtype)
        g.info = ctx.info(count)
        g.host_info = np.zeros(1, dtype=np.int32)
        isz = g.work.itemsize
        dsize = hsize = g.lwork = 0
        if g.choice.algorithm == "batched":
            g.ptrs = ctx.pointer_array(g.work.ptr, g.work.stride * isz, count)
            g.tau_ptrs = ctx.pointer_array(int(g.tau.data_ptr), k * isz, count)
        else:
            dt = data_type(spec.dtype)
            dsize, hsize = cusolverDn.xgeqrf_buffer_size(
                ctx.dn, ctx.params, m, n, dt, g.work.ptr, m, dt, int(g.tau.data_ptr), dt
            )
        g.qcols = m if self.mode == "complete" else k
        # Q of a batched geqrf of small matrices: one kernel launch instead of one orgqr per matrix
        g.q_kernel = self.mode != "r" and g.choice.algorithm == "batched" and m <= LIMITS["orgqr_kernel"]
        if g.q_kernel:
            debug(self._log, "qr %dx%d, batch %d: Q by the batched orgqr kernel", m, n, count)
        elif self.mode != "r":
            g.lwork = _orgqr(spec.dtype, "_buffer_size")(
                ctx.dn, m, g.qcols, k, g.work.ptr, m, int(g.tau.data_ptr)
            )
        looped = g.choice.algorithm != "batched" or (self.mode != "r" and not g.q_kernel)
        lanes = self._lanes("qr", spec) if looped else 1
        # Xgeqrf and orgqr run one after the other on a lane: they share its workspace slice
        g.fan = FanOut(ctx, lanes, dsize=max(dsize, g.lwork * isz), hsize=hsize, log=self._log)
        return g

    def _geqrf(self, ctx: GpuContext, g: SimpleNamespace, m: int, n: int) -> None:
        from nvmath.bindings import cublas, cusolverDn

        work, count, k = g.work, g.work.count, min(m, n)
        if g.choice.algorithm == "batched":
            fn = getattr(cublas, f"{prefix(work.dtype)}geqrf_batched")
            fn(ctx.bind_blas(), m, n, g.ptrs, m, g.tau_ptrs, g.host_info.ctypes.data, count)
            return
        dt = data_type(work.dtype)
        tau, info = int(g.tau.data_ptr), g.info

        def job(lane: Lane, i: int) -> None:
            tau_i = tau + i * k * work.itemsize
            cusolverDn.xgeqrf(
                lane.dn, lane.params, m, n, dt, work.at(i), m, dt, tau_i, dt, *lane.workspace, info.at(i)
            )

        g.fan.run(ctx, count, job)

    def _form_q(self, ctx: GpuContext, g: SimpleNamespace, m: int, k: int) -> None:
        """Overwrite ``g.work`` with ``Q`` (``m x g.qcols``) from the reflectors of :meth:`_geqrf`."""
        if g.q_kernel:
            work = g.work
            _kernels.orgqr_small(
                work.ptr,
                int(g.tau.data_ptr),
                m=m,
                qcols=g.qcols,
                k=k,
                ld=work.ld,
                stride=work.stride,
                count=work.count,
                dtype=work.dtype,
                device_id=ctx.device_id,
                stream=ctx.stream,
            )
            return
        fn = _orgqr(g.work.dtype, "")
        work, info, lwork, qcols = g.work, g.info, g.lwork, g.qcols
        tau, isz = int(g.tau.data_ptr), g.work.itemsize

        def job(lane: Lane, i: int) -> None:
            fn(lane.dn, m, qcols, k, work.at(i), m, tau + i * k * isz, lane.dws, lwork, info.at(i))

        g.fan.run(ctx, work.count, job)

    def _r_factor(self, ctx: GpuContext, g: SimpleNamespace, rows: int, n: int) -> Any:
        """Copy the upper triangle block out of the working buffer into a new tensor; zero below."""
        spec = self._specs["a"]
        view = batch_view(g.work, spec.batch_shape, rows, n)
        shape = (*spec.batch_shape, rows, n)
        r = self._like.empty(
            shape, spec.dtype, strides=colmajor_strides(shape), device_id=ctx.device_id, stream=ctx.stream
        )
        copy_into(r, view, ctx.stream)
        _kernels.zero_triangle(
            int(r.data_ptr),
            rows=rows,
            cols=n,
            ld=rows,
            stride=rows * n,
            count=spec.batch_count,
            itemsize=r.itemsize,
            zero_lower=True,
            device_id=ctx.device_id,
            stream=ctx.stream,
        )
        return self._give(r)

    def _run_gpu(self, stream: Any) -> Any:
        spec = self._specs["a"]
        m, n = spec.rows, spec.cols
        k = min(m, n)
        with devices.device_ctx(self._device_id):
            ctx = self._gpu_call(stream)
            g = self._gpu
            target = g.work.adapter if g.work.cols == n else batch_view(g.work, spec.batch_shape, m, n)
            self._load(target, "a")
            self._nonfinite.scan_device(ctx, g.work, cols=n, batch=spec.batch_shape)
            g.info.zero()
            self._geqrf(ctx, g, m, n)
            r = self._r_factor(ctx, g, m if self.mode == "complete" else k, n)
            if self.mode == "r":
                self._finish_gpu()
                self._record_info("qr", None, spec.batch_shape)
                return r
            self._form_q(ctx, g, m, k)
            q = self._emit(batch_view(g.work, spec.batch_shape, m, g.qcols))
            self._finish_gpu()
        self._record_info("qr", None, spec.batch_shape)
        return q, r

    @requires(PlannerState.PLANNED, operands=True)
    def execute(self, *, stream: Any = None) -> Any:
        """Factor ``a``; return ``(Q, R)``, or ``R`` for mode ``"r"`` (new tensors)."""
        with self._lock, self._phase("execution"):
            if self.on_gpu:
                return self._run_gpu(stream)
            q, r = _cpu.qr(self._scan(self._host("a", stream)), self.mode)
            out = self._out(r, stream) if self.mode == "r" else (self._out(q, stream), self._out(r, stream))
            self._record_info("qr", None, self._specs["a"].batch_shape)
            return out


def qr(
    a: Any, *, mode: str = "reduced", options: Any = None, execution: Any = None, stream: Any = None
) -> Any:
    """QR factorization (see :class:`QR`): ``(Q, R)``, or ``R`` alone for ``mode="r"``."""
    return run_cached(QR, {"a": a}, {"mode": mode}, options=options, execution=execution, stream=stream)
