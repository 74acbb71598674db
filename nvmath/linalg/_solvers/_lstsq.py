"""Linear least squares: :class:`Lstsq` and :func:`lstsq` (``min ||a x - b||_2``).

``a`` is ``(*batch, m, n)``, ``b`` is ``(m,)``, ``(m, nrhs)`` or ``(*batch, m, nrhs)``; the solution
``x`` has ``b``'s layout with ``n`` rows. The result is a :class:`LstsqResult`
``(solution, residuals, rank, singular_values)``:

* CPU (LAPACK ``gelsd``, numpy's driver): the minimum-norm solution for any ``m``, ``n`` and rank
  (``rcond`` sets the cut-off for small singular values); ``residuals`` are the squared 2-norms of
  ``b - a x`` per right-hand side when ``m > n`` (shape ``(*batch, nrhs)``, ``(1,)`` for a vector
  ``b``), else empty; ``rank`` and ``singular_values`` per matrix.
* GPU (cuBLAS ``gelsBatched``, QR based, like torch's ``gels`` driver): ``m >= n`` and full rank
  only; ``residuals``, ``rank`` and ``singular_values`` are ``None``. A zero diagonal element of
  ``R`` (rank deficiency) is reported through ``info``.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, NamedTuple

import numpy as np

from nvmath._errors import NotSupportedError
from nvmath._internal import devices
from nvmath._internal.state import PlannerState, requires
from nvmath._internal.tensors import TensorAdapter, dense_strides
from nvmath.linalg._solvers import _cpu
from nvmath.linalg._solvers._base import SolverBase, batch_view, device_view
from nvmath.linalg._solvers._cache import run_cached
from nvmath.linalg._solvers._common import matrix_spec, rhs_spec
from nvmath.linalg._solvers._dispatch import Choice
from nvmath.linalg._solvers._gpu import GpuContext, prefix

__all__ = ["Lstsq", "LstsqResult", "lstsq"]


class LstsqResult(NamedTuple):
    """The result of :func:`lstsq` (``None`` fields are not computed by the GPU driver)."""

    solution: Any
    residuals: Any
    rank: Any
    singular_values: Any


class Lstsq(SolverBase):
    """Stateful linear least-squares solver (see the module documentation).

    Args:
        a: ``(*batch, m, n)`` tensor.
        b: ``(m,)``, ``(m, nrhs)`` or ``(*batch, m, nrhs)``.
        rcond: singular values below ``rcond * max(S)`` count as zero (CPU only; ``None``: machine
            precision).
        options, execution, stream: as for the other planners.

    Raises:
        NotSupportedError: GPU execution with ``m < n`` (use ``execution="cpu"``).
    """

    _NAME = "Lstsq"
    _OP = "lstsq"

    def __init__(
        self,
        a: Any,
        b: Any,
        *,
        rcond: float | None = None,
        options: Any = None,
        execution: Any = None,
        stream: Any = None,
    ):
        if rcond is not None and (isinstance(rcond, bool) or not isinstance(rcond, (int, float))):
            raise TypeError(f"rcond must be a float or None; got {type(rcond).__name__}: {rcond!r}")
        self.rcond = rcond
        super().__init__({"a": a, "b": b}, options=options, execution=execution, stream=stream)
        a_spec = self._specs["a"]
        if self.on_gpu and a_spec.rows < a_spec.cols:
            raise NotSupportedError(
                f"lstsq on the GPU (cuBLAS gelsBatched) needs rows >= cols; a is {a_spec.rows}x{a_spec.cols}: "
                "use execution='cpu' for underdetermined systems"
            )

    def _check_operand(self, name: str, adapter: TensorAdapter) -> Any:
        if name == "a":
            return matrix_spec(adapter, name, square=False, what="lstsq")
        return rhs_spec(adapter, self._specs["a"], name)

    def _plan_gpu(self, ctx: GpuContext) -> Any:
        a, b = self._specs["a"], self._specs["b"]
        count = a.batch_count
        g = SimpleNamespace(choice=Choice("batched", "cublas gelsBatched", "the only GPU driver"))
        g.work = ctx.matrix(self._like, a.batch_shape, a.rows, a.cols)
        g.c = ctx.matrix(self._like, b.batch_shape, b.rows, b.nrhs, shape=b.shape)
        isz = g.work.itemsize
        g.ptrs = ctx.pointer_array(g.work.ptr, g.work.stride * isz, count)
        g.cptrs = ctx.pointer_array(g.c.ptr, g.c.stride * isz, count)
        g.info = ctx.info(count)
        g.host_info = np.zeros(1, dtype=np.int32)
        return g

    def _run_gpu(self, stream: Any) -> LstsqResult:
        from nvmath.bindings import cublas

        a, b = self._specs["a"], self._specs["b"]
        m, n = a.rows, a.cols
        with devices.device_ctx(self._device_id):
            ctx, g = self._gpu_load(stream, "a")
            self._load(g.c.adapter, "b")
            g.info.zero()
            fn = getattr(cublas, f"{prefix(a.dtype)}gels_batched")
            fn(
                ctx.bind_blas(),
                0,
                m,
                n,
                b.nrhs,
                g.ptrs,
                m,
                g.cptrs,
                m,
                g.host_info.ctypes.data,
                g.info.ptr,
                a.batch_count,
            )
            if b.vector:
                view = device_view(g.c.adapter, (n,), dense_strides((n,)))
            else:
                view = batch_view(g.c, b.batch_shape, n, b.nrhs)
            x = self._emit(view)
            self._finish_gpu()
        self._record_info("lstsq", g.info, a.batch_shape)
        return LstsqResult(x, None, None, None)

    @requires(PlannerState.PLANNED, operands=True)
    def execute(self, *, stream: Any = None) -> LstsqResult:
        """Return the :class:`LstsqResult` (new tensors)."""
        with self._lock, self._phase("execution"):
            if self.on_gpu:
                return self._run_gpu(stream)
            a_spec, b_spec = self._specs["a"], self._specs["b"]
            a, b = self._scan(self._host("a", stream)), self._host("b", stream)
            b2 = b.reshape(b.shape + (1,)) if b_spec.vector else b
            x, resid, rank, sv, info = _cpu.lstsq(a, b2, self.rcond)
            if b_spec.vector:
                x = x.reshape((a_spec.cols,))
            self._record_info("svd", info, a_spec.batch_shape)
            return LstsqResult(
                self._out(x, stream), self._out(resid, stream), self._out(rank, stream), self._out(sv, stream)
            )

    @requires(PlannerState.CREATED, PlannerState.PLANNED)
    def reset_operands(self, *, a: Any = None, b: Any = None, stream: Any = None) -> None:
        """Supply new ``a`` and/or ``b`` (same shapes, dtype, package and device)."""
        self._reset({"a": a, "b": b}, stream, checked=True)

    @requires(PlannerState.CREATED, PlannerState.PLANNED)
    def reset_operands_unchecked(self, *, a: Any = None, b: Any = None, stream: Any = None) -> None:
        """Like :meth:`reset_operands` without the checks."""
        self._reset({"a": a, "b": b}, stream, checked=False)


def lstsq(
    a: Any,
    b: Any,
    *,
    rcond: float | None = None,
    options: Any = None,
    execution: Any = None,
    stream: Any = None,
) -> LstsqResult:
    """Least-squares solution of ``a x = b`` (see :class:`Lstsq`)."""
    return run_cached(
        Lstsq, {"a": a, "b": b}, {"rcond": rcond}, options=options, execution=execution, stream=stream
    )
