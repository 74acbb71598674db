"""LU factorization with partial pivoting (:class:`LU`, :func:`lu_factor`) and solves with the factors
(:meth:`LU.solve`, :class:`LUSolve`, :func:`lu_solve`), plus the GPU LU engine shared with
:class:`~nvmath.linalg.DirectSolver` and :func:`~nvmath.linalg.inv`.

``lu_factor(a)`` returns ``(lu, piv)``: ``P a = L U`` with the unit lower ``L`` below the diagonal of
``lu`` and ``U`` on and above it, and ``piv`` the LAPACK pivots -- ``int32``, **1-based**: row ``i``
was interchanged with row ``piv[i] - 1`` (the convention of LAPACK, cuSOLVER and
``torch.linalg.lu_factor``; scipy's ``lu_factor`` is 0-based). An exactly singular matrix is reported
through ``info``: "singular: the pivot U[k, k] is exactly zero"; its solves contain Inf or NaN.

GPU: cuBLAS ``getrfBatched`` / ``getrsBatched`` (one call, pointer arrays built at plan) for batches
of small matrices, cuSOLVER ``getrf`` / ``getrs`` per matrix otherwise (the 64-bit ``Xgetrf`` /
``Xgetrs`` with ``int64`` pivots for the DirectSolver), fanned out over several streams
(:mod:`~nvmath.linalg._solvers._fanout`).
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np

from nvmath._internal import devices
from nvmath._internal.state import PlannerState, requires
from nvmath._internal.tensors import TensorAdapter
from nvmath._internal.tensors.copy import copy_into
from nvmath.linalg._solvers import _cpu, _kernels
from nvmath.linalg._solvers._base import SingleMatrixSolver, SolverBase
from nvmath.linalg._solvers._cache import run_cached
from nvmath.linalg._solvers._common import as_matrix_rhs, matrix_spec, rhs_spec
from nvmath.linalg._solvers._dispatch import Choice
from nvmath.linalg._solvers._fanout import FanOut, Lane
from nvmath.linalg._solvers._gpu import GpuContext, WorkMatrix, data_type, prefix

__all__ = ["LU", "TRANS", "LUSolve", "check_pivots_host", "gpu_getrf", "gpu_getrs", "lu_factor", "lu_solve", "plan_lu"]

TRANS: dict[str, int] = {"N": 0, "T": 1, "C": 2}
"""``trans`` values: solve ``a x = b`` ("N"), ``a^T x = b`` ("T") or ``a^H x = b`` ("C")."""


def check_trans(trans: Any) -> int:
    """Map ``trans`` ("N", "T", "C", any case) to the cuBLAS / LAPACK code."""
    if isinstance(trans, str) and trans.upper() in TRANS:
        return TRANS[trans.upper()]
    raise ValueError(f"trans must be 'N', 'T' or 'C'; got {trans!r}")


# ------------------------------------------------------------------------------------ GPU engine
def plan_lu(
    ctx: GpuContext, like: TensorAdapter, spec: Any, choice: Choice, *, x64: bool = False, lanes: int = 1
) -> SimpleNamespace:
    """Buffers of a batched LU: factors, pivots, info, pointer array and workspaces.

    Args:
        x64: use the 64-bit ``Xgetrf``/``Xgetrs`` (``int64`` pivots) on the looped path.
        lanes: streams of the looped path (:class:`~nvmath.linalg._solvers._fanout.FanOut`).
    """
    from nvmath.bindings import cusolverDn

    n, count = spec.rows, spec.batch_count
    g = SimpleNamespace(choice=choice, x64=x64 and choice.algorithm != "batched")
    g.work = ctx.matrix(like, spec.batch_shape, n, n)
    g.piv_size = 8 if g.x64 else 4
    g.piv = ctx.vector(like, (*spec.batch_shape, n), "int64" if g.x64 else "int32")
    g.info = ctx.info(count)
    g.host_info = np.zeros(1, dtype=np.int32)
    batched = choice.algorithm == "batched"
    g.ptrs = ctx.pointer_array(g.work.ptr, g.work.stride * g.work.itemsize, count) if batched else 0
    dsize = hsize = 0
    if not batched:
        if g.x64:
            dt = data_type(spec.dtype)
            dsize, hsize = cusolverDn.xgetrf_buffer_size(ctx.dn, ctx.params, n, n, dt, g.work.ptr, n, dt)
        else:
            fn = getattr(cusolverDn, f"{prefix(spec.dtype)}getrf_buffer_size")
            dsize = fn(ctx.dn, n, n, g.work.ptr, n) * g.work.itemsize
    g.fan = FanOut(ctx, 1 if batched else lanes, dsize=dsize, hsize=hsize)
    return g


def _piv_at(g: SimpleNamespace, i: int) -> int:
    return int(g.piv.data_ptr) + i * g.work.rows * g.piv_size


def gpu_getrf(ctx: GpuContext, g: SimpleNamespace) -> None:
    """Factor ``g.work`` in place; pivots in ``g.piv``, info in ``g.info``."""
    from nvmath.bindings import cublas, cusolverDn

    work, info = g.work, g.info
    n, count, p = work.rows, work.count, prefix(work.dtype)
    info.zero()
    if g.choice.algorithm == "batched":
        getattr(cublas, f"{p}getrf_batched")(
            ctx.bind_blas(), n, g.ptrs, n, int(g.piv.data_ptr), info.ptr, count
        )
        return
    if g.x64:
        dt = data_type(work.dtype)

        def job(lane: Lane, i: int) -> None:
            a, piv = work.at(i), _piv_at(g, i)
            cusolverDn.xgetrf(lane.dn, lane.params, n, n, dt, a, n, piv, dt, *lane.workspace, info.at(i))

    else:
        fn = getattr(cusolverDn, f"{p}getrf")

        def job(lane: Lane, i: int) -> None:
            fn(lane.dn, n, n, work.at(i), n, lane.dws, _piv_at(g, i), info.at(i))

    g.fan.run(ctx, count, job)


def gpu_getrs(ctx: GpuContext, g: SimpleNamespace, x: WorkMatrix, trans: int, xptrs: int = 0) -> None:
    """Solve in place into ``x`` with the factors of :func:`gpu_getrf`.

    Args:
        xptrs: a pointer array over ``x`` (batched path); ``0`` builds a temporary one.
    """
    from nvmath.bindings import cublas, cusolverDn

    work = g.work
    n, count, nrhs, p = work.rows, work.count, x.cols, prefix(work.dtype)
    if g.choice.algorithm == "batched":
        temp = None if xptrs else ctx.temp_pointer_array(x.ptr, x.stride * x.itemsize, count)
        try:
            fn = getattr(cublas, f"{p}getrs_batched")
            fn(
                ctx.bind_blas(),
                trans,
                n,
                nrhs,
                g.ptrs,
                n,
                int(g.piv.data_ptr),
                xptrs or temp.ptr,
                n,
                g.host_info.ctypes.data,
                count,
            )
        finally:
            if temp is not None:
                ctx.free_temp(temp)
        return
    if g.x64:
        dt = data_type(work.dtype)

        def job(lane: Lane, i: int) -> None:
            a, piv, b = work.at(i), _piv_at(g, i), x.at(i)
            cusolverDn.xgetrs(lane.dn, lane.params, trans, n, nrhs, dt, a, n, piv, dt, b, n, lane.scratch)

    else:
        fn = getattr(cusolverDn, f"{p}getrs")

        def job(lane: Lane, i: int) -> None:
            fn(lane.dn, trans, n, nrhs, work.at(i), n, _piv_at(g, i), x.at(i), n, lane.scratch)

    g.fan.run(ctx, count, job)


# ------------------------------------------------------------------------------------ planners
class LU(SingleMatrixSolver):
    """Stateful LU factorization with partial pivoting of a (batch of) square matrices.

    Args:
        a: ``(*batch, n, n)`` tensor.
        options: :class:`SolverOptions` or a dict of its fields.
        execution: ``"cuda"``, ``"cpu"``, an execution object, or ``None`` (the operands' space).
        stream: the CUDA stream for planning (``None``: the package's current stream).
    """

    _NAME = "LU"
    _OP = "lu_factor"

    def __init__(self, a: Any, *, options: Any = None, execution: Any = None, stream: Any = None):
        self._factors: Any = None
        super().__init__({"a": a}, options=options, execution=execution, stream=stream)

    def _invalidate(self) -> None:
        self._factors = None

    def _plan_gpu(self, ctx: GpuContext) -> Any:
        spec = self._specs["a"]
        choice = self._choose("lu", spec)
        return plan_lu(ctx, self._like, spec, choice, lanes=self._lanes("lu", spec, choice))

    @requires(PlannerState.PLANNED, operands=True)
    def execute(self, *, stream: Any = None) -> tuple[Any, Any]:
        """Factor ``a``; return ``(lu, piv)`` (new tensors; ``piv`` int32, 1-based)."""
        spec = self._specs["a"]
        with self._lock, self._phase("execution"):
            if not self.on_gpu:
                lu, piv, info = _cpu.lu_factor(self._scan(self._host("a", stream)))
                self._factors = (lu, piv)
                self._record_info("getrf", info, spec.batch_shape)
                return self._out(lu, stream), self._out(piv, stream)
            with devices.device_ctx(self._device_id):
                ctx, g = self._gpu_load(stream, "a")
                gpu_getrf(ctx, g)
                self._factors = True
                result = (self._emit(g.work.adapter), self._emit(g.piv))
                self._finish_gpu()
            self._record_info("getrf", g.info, spec.batch_shape)
            return result

    @requires(PlannerState.PLANNED)
    def solve(self, b: Any, *, trans: str = "N", stream: Any = None) -> Any:
        """Solve ``op(a) x = b`` with the factors of the last :meth:`execute` (``trans`` N, T or C)."""
        if self._factors is None:
            raise self._ERROR("LU.solve() called before execute(): call execute() first")
        code = check_trans(trans)
        return self._solve_rhs(
            b,
            stream,
            lambda host: _cpu.lu_solve(*self._factors, host, code),
            lambda ctx, x: gpu_getrs(ctx, self._gpu, x, code),
        )


class LUSolve(SolverBase):
    """Stateful solve of ``op(A) x = b`` from the output ``(lu, piv)`` of :func:`lu_factor`.

    Args:
        lu: ``(*batch, n, n)`` factors.
        piv: ``(*batch, n)`` int32 1-based pivots.
        b: ``(n,)``, ``(n, nrhs)`` or ``(*batch, n, nrhs)``.
        trans: "N" (``A x = b``), "T" (``A^T x = b``) or "C" (``A^H x = b``).
        options, execution, stream: as for :class:`LU`.
    """

    _NAME = "LUSolve"
    _OP = "lu_solve"

    def __init__(
        self,
        lu: Any,
        piv: Any,
        b: Any,
        *,
        trans: str = "N",
        options: Any = None,
        execution: Any = None,
        stream: Any = None,
    ):
        self.trans = check_trans(trans)
        super().__init__({"lu": lu, "piv": piv, "b": b}, options=options, execution=execution, stream=stream)

    def _check_operand(self, name: str, adapter: TensorAdapter) -> Any:
        if name == "lu":
            return matrix_spec(adapter, name, square=True, what="lu_solve")
        lu = self._specs["lu"]
        if name == "b":
            return rhs_spec(adapter, lu, name)
        expected = (*lu.batch_shape, lu.rows)
        if tuple(adapter.shape) != expected or adapter.dtype != "int32":
            raise ValueError(
                f"operand 'piv' must be int32 of shape {expected} (from lu_factor); "
                f"got {adapter.dtype} of shape {tuple(adapter.shape)}"
            )
        return SimpleNamespace(name=name, shape=expected, dtype="int32")

    def _plan_gpu(self, ctx: GpuContext) -> Any:
        spec = self._specs["lu"]
        choice = self._choose("lu", spec)
        return plan_lu(ctx, self._like, spec, choice, lanes=self._lanes("lu", spec, choice))

    @requires(PlannerState.PLANNED, operands=True)
    def execute(self, *, stream: Any = None) -> Any:
        """Return ``x`` (a new tensor shaped like ``b``)."""
        bspec = self._specs["b"]
        with self._lock, self._phase("execution"):
            if not self.on_gpu:
                lu, piv = self._host("lu", stream), self._host("piv", stream)
                check_pivots_host(piv, self._specs["lu"].rows)
                b = as_matrix_rhs(self._host("b", stream))
                return self._out(_cpu.lu_solve(lu, piv, b, self.trans).reshape(bspec.shape), stream)
            if self._host_operands:  # free to check on the host, before any GPU work
                check_pivots_host(self._host("piv", stream), self._specs["lu"].rows)
            with devices.device_ctx(self._device_id):
                ctx, g = self._gpu_load(stream, "lu")
                copy_into(g.piv, self._operand("piv"), ctx.stream)
                x = self._fresh(self._operand("b"), bspec)
                if not self._host_operands:  # on the device, no sync: bad pivots -> info, NaN solution
                    g.info.zero()
                    _kernels.check_pivots(
                        int(g.piv.data_ptr), g.info.ptr, x.ptr, piv_size=g.piv_size, n=x.rows, nrhs=x.cols,
                        ld=x.ld, stride=x.stride, count=x.count, dtype=x.dtype, device_id=ctx.device_id,
                        stream=ctx.stream,
                    )  # fmt: skip
                    self._record_info("piv", g.info, self._specs["lu"].batch_shape)
                gpu_getrs(ctx, g, x, self.trans)
                result = self._give(x.adapter)
                self._finish_gpu()
            return result

    @requires(PlannerState.CREATED, PlannerState.PLANNED)
    def reset_operands(self, *, lu: Any = None, piv: Any = None, b: Any = None, stream: Any = None) -> None:
        """Supply new operands (same shapes, dtypes, package and device)."""
        self._reset({"lu": lu, "piv": piv, "b": b}, stream, checked=True)

    @requires(PlannerState.CREATED, PlannerState.PLANNED)
    def reset_operands_unchecked(
        self, *, lu: Any = None, piv: Any = None, b: Any = None, stream: Any = None
    ) -> None:
        """Like :meth:`reset_operands` without the checks."""
        self._reset({"lu": lu, "piv": piv, "b": b}, stream, checked=False)


def check_pivots_host(piv: Any, n: int) -> None:
    """Raise ``ValueError`` unless every pivot is in ``1..n`` (LAPACK's 1-based convention).

    A pivot outside that range makes LAPACK and cuSOLVER read or write outside the matrix.
    """
    piv = np.asarray(piv)
    if piv.size == 0:
        return
    bad = (piv < 1) | (piv > n)
    if bad.any():
        where = tuple(int(i) for i in np.argwhere(bad)[0])
        raise ValueError(
            f"operand 'piv' must hold 1-based pivots in 1..{n} (from lu_factor); piv{list(where)} = "
            f"{int(piv[where])} ({int(bad.sum())} out of range)"
        )


def lu_factor(a: Any, *, options: Any = None, execution: Any = None, stream: Any = None) -> tuple[Any, Any]:
    """LU factorization with partial pivoting; returns ``(lu, piv)`` (see :class:`LU`)."""
    return run_cached(LU, {"a": a}, {}, options=options, execution=execution, stream=stream)


def lu_solve(
    lu: Any,
    piv: Any,
    b: Any,
    *,
    trans: str = "N",
    options: Any = None,
    execution: Any = None,
    stream: Any = None,
) -> Any:
    """Solve ``op(A) x = b`` from :func:`lu_factor`'s ``(lu, piv)`` (see :class:`LUSolve`)."""
    return run_cached(
        LUSolve,
        {"lu": lu, "piv": piv, "b": b},
        {"trans": trans},
        options=options,
        execution=execution,
        stream=stream,
    )
