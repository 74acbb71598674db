"""Matrix inverse: :class:`Inverse` and :func:`inv` (LU with partial pivoting).

Prefer :func:`~nvmath.linalg.solve` (or :class:`~nvmath.linalg.DirectSolver`) to multiplying by an
inverse: it is cheaper and more accurate. An exactly singular matrix is reported through ``info``
("singular: the pivot U[k, k] is exactly zero"); its "inverse" holds Inf or NaN.

GPU: cuBLAS ``getrfBatched`` + ``getriBatched`` for batches of small matrices, otherwise cuSOLVER
``getrf`` per matrix and ``getrs`` against identity matrices written by a small kernel.
"""

from __future__ import annotations

from typing import Any

from nvmath._internal import devices
from nvmath._internal.state import PlannerState, requires
from nvmath.linalg._solvers import _cpu, _kernels
from nvmath.linalg._solvers._base import SingleMatrixSolver
from nvmath.linalg._solvers._cache import run_cached
from nvmath.linalg._solvers._gpu import GpuContext, prefix
from nvmath.linalg._solvers._lu import gpu_getrf, gpu_getrs, plan_lu

__all__ = ["Inverse", "inv"]


class Inverse(SingleMatrixSolver):
    """Stateful inverse of a (batch of) square matrices.

    Args:
        a: ``(*batch, n, n)`` tensor.
        options: :class:`SolverOptions` or a dict of its fields.
        execution: ``"cuda"``, ``"cpu"``, an execution object, or ``None`` (the operands' space).
        stream: the CUDA stream for planning (``None``: the package's current stream).
    """

    _NAME = "Inverse"
    _OP = "inv"

    def __init__(self, a: Any, *, options: Any = None, execution: Any = None, stream: Any = None):
        super().__init__({"a": a}, options=options, execution=execution, stream=stream)

    def _plan_gpu(self, ctx: GpuContext) -> Any:
        spec = self._specs["a"]
        choice = self._choose("inv", spec)
        g = plan_lu(ctx, self._like, spec, choice, lanes=self._lanes("inv", spec, choice))
        g.out = ctx.matrix(self._like, spec.batch_shape, spec.rows, spec.rows)
        if choice.algorithm == "batched":
            g.out_ptrs = ctx.pointer_array(g.out.ptr, g.out.stride * g.out.itemsize, spec.batch_count)
            g.info2 = ctx.info(spec.batch_count)
        return g

    def _run(self, ctx: GpuContext, g: Any) -> None:
        from nvmath.bindings import cublas

        work, out = g.work, g.out
        n, count = work.rows, work.count
        gpu_getrf(ctx, g)
        if g.choice.algorithm == "batched":
            fn = getattr(cublas, f"{prefix(work.dtype)}getri_batched")
            fn(ctx.bind_blas(), n, g.ptrs, n, int(g.piv.data_ptr), g.out_ptrs, n, g.info2.ptr, count)
            return
        _kernels.fill_identity(
            out.ptr,
            n=n,
            stride=out.stride,
            count=count,
            dtype=out.dtype,
            device_id=ctx.device_id,
            stream=ctx.stream,
        )
        gpu_getrs(ctx, g, out, 0)

    @requires(PlannerState.PLANNED, operands=True)
    def execute(self, *, stream: Any = None) -> Any:
        """Return the inverse(s) (a new tensor in the operands' package and space)."""
        spec = self._specs["a"]
        with self._lock, self._phase("execution"):
            if not self.on_gpu:
                result, info = _cpu.inv(self._scan(self._host("a", stream)))
                out = self._out(result, stream)
                self._record_info("getrf", info, spec.batch_shape)
                return out
            with devices.device_ctx(self._device_id):
                ctx, g = self._gpu_load(stream, "a")
                self._run(ctx, g)
                out = self._emit(g.out.adapter)
                self._finish_gpu()
            self._record_info("getrf", g.info, spec.batch_shape)
            return out


def inv(a: Any, *, options: Any = None, execution: Any = None, stream: Any = None) -> Any:
    """Inverse of a (batch of) square matrices (see :class:`Inverse`)."""
    return run_cached(Inverse, {"a": a}, {}, options=options, execution=execution, stream=stream)
