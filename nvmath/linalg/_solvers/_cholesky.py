"""Cholesky factorization (:class:`Cholesky`, :func:`cholesky`) and solves with the factor
(:meth:`Cholesky.solve`, :class:`CholeskySolve`, :func:`cholesky_solve`).

``lower=True`` reads the lower triangle of each Hermitian positive-definite ``a`` and returns ``L``
with ``a = L L^H``; ``lower=False`` reads the upper triangle and returns ``U`` with ``a = U^H U``.
The other triangle of the result is zero. A matrix that is not positive definite (or holds NaN) is
reported through ``info`` (``check()`` / ``options.check``): "not positive definite: the leading
minor of order k is not positive"; its factor is then incomplete.

GPU: cusolverDn ``potrfBatched`` (one call for the batch, pointer array built at plan) or the 64-bit
``Xpotrf`` per matrix (see :mod:`~nvmath.linalg._solvers._dispatch`); solves use ``potrsBatched``
(one right-hand side) or ``Xpotrs``. Per-matrix loops are fanned out over several streams
(:mod:`~nvmath.linalg._solvers._fanout`).
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from nvmath._internal import devices
from nvmath._internal.state import PlannerState, requires
from nvmath._internal.tensors import TensorAdapter
from nvmath.linalg._solvers import _cpu, _kernels
from nvmath.linalg._solvers._base import SingleMatrixSolver, SolverBase
from nvmath.linalg._solvers._cache import run_cached
from nvmath.linalg._solvers._common import as_matrix_rhs, check_flag, matrix_spec, rhs_spec
from nvmath.linalg._solvers._dispatch import Choice
from nvmath.linalg._solvers._fanout import FanOut, Lane
from nvmath.linalg._solvers._gpu import GpuContext, WorkMatrix, data_type, dn_function

__all__ = ["Cholesky", "CholeskySolve", "cholesky", "cholesky_solve"]

_LOWER, _UPPER = 0, 1  # cublasFillMode_t


def _plan_factor(
    ctx: GpuContext,
    like: TensorAdapter,
    spec: Any,
    lower: bool,
    choice: Choice,
    *,
    factorize: bool,
    lanes: int = 1,
) -> SimpleNamespace:
    """Working buffer, pointer array / workspaces and info for a batch of Cholesky factors.

    ``lanes`` streams run the loops of ``Xpotrf`` / ``Xpotrs`` (the latter also under a batched
    factorization, for several right-hand sides).
    """
    from nvmath.bindings import cusolverDn

    n, count = spec.rows, spec.batch_count
    g = SimpleNamespace(choice=choice)
    g.work = ctx.matrix(like, spec.batch_shape, n, n)
    g.info = ctx.info(count)
    g.scratch = ctx.alloc(4)
    g.uplo = _LOWER if lower else _UPPER
    batched = count > 1 or g.choice.algorithm == "batched"
    g.ptrs = ctx.pointer_array(g.work.ptr, g.work.stride * g.work.itemsize, count) if batched else 0
    dsize = hsize = 0
    if factorize and g.choice.algorithm == "looped":
        dt = data_type(spec.dtype)
        dsize, hsize = cusolverDn.xpotrf_buffer_size(ctx.dn, ctx.params, g.uplo, n, dt, g.work.ptr, n, dt)
    g.fan = FanOut(ctx, lanes, dsize=dsize, hsize=hsize)
    return g


def _gpu_potrf(ctx: GpuContext, g: SimpleNamespace, lower: bool) -> None:
    """Factor ``g.work`` in place (info in ``g.info``), then zero the other triangle."""
    from nvmath.bindings import cusolverDn

    work = g.work
    n, count = work.rows, work.count
    g.info.zero()
    if g.choice.algorithm == "batched":
        fn = dn_function(work.dtype, "potrf_batched")
        fn(ctx.dn, g.uplo, n, g.ptrs, n, g.info.ptr, count)
    else:
        dt = data_type(work.dtype)
        uplo, info = g.uplo, g.info

        def job(lane: Lane, i: int) -> None:
            cusolverDn.xpotrf(
                lane.dn, lane.params, uplo, n, dt, work.at(i), n, dt, *lane.workspace, info.at(i)
            )

        g.fan.run(ctx, count, job)
    _kernels.zero_triangle(
        work.ptr,
        rows=n,
        cols=n,
        ld=n,
        stride=work.stride,
        count=count,
        itemsize=work.itemsize,
        zero_lower=not lower,
        device_id=ctx.device_id,
        stream=ctx.stream,
    )


def _gpu_potrs(ctx: GpuContext, g: SimpleNamespace, x: WorkMatrix) -> None:
    """Solve in place into ``x`` with the factors in ``g.work``."""
    from nvmath.bindings import cusolverDn

    work = g.work
    n, count, nrhs = work.rows, work.count, x.cols
    if g.choice.algorithm == "batched" and nrhs == 1 and count > 1:
        xptrs = ctx.temp_pointer_array(x.ptr, x.stride * x.itemsize, count)
        try:
            fn = dn_function(work.dtype, "potrs_batched")
            fn(ctx.dn, g.uplo, n, 1, g.ptrs, n, xptrs.ptr, n, g.scratch, count)
        finally:
            ctx.free_temp(xptrs)
        return
    dt, uplo = data_type(work.dtype), g.uplo

    def job(lane: Lane, i: int) -> None:
        cusolverDn.xpotrs(
            lane.dn, lane.params, uplo, n, nrhs, dt, work.at(i), n, dt, x.at(i), n, lane.scratch
        )

    g.fan.run(ctx, count, job)


class Cholesky(SingleMatrixSolver):
    """Stateful Cholesky factorization of a (batch of) Hermitian positive-definite matrices.

    Args:
        a: ``(*batch, n, n)`` tensor (numpy, cupy, torch, or any DLPack producer).
        lower: read the lower triangle and return ``L`` (``a = L L^H``); ``False``: the upper
            triangle and ``U`` (``a = U^H U``).
        options: :class:`SolverOptions` or a dict of its fields.
        execution: ``"cuda"``, ``"cpu"``, :class:`ExecutionCUDA`, :class:`ExecutionCPU`, or ``None``
            (the operands' memory space).
        stream: the CUDA stream for planning (``None``: the package's current stream).

    Example:
        >>> with Cholesky(a) as chol:                       # doctest: +SKIP
        ...     chol.plan()
        ...     L = chol.execute()
        ...     x = chol.solve(b)
    """

    _NAME = "Cholesky"
    _OP = "cholesky"

    def __init__(
        self, a: Any, *, lower: bool = True, options: Any = None, execution: Any = None, stream: Any = None
    ):
        self.lower = check_flag("lower", lower)
        self._factor: Any = None
        super().__init__({"a": a}, options=options, execution=execution, stream=stream)

    def _invalidate(self) -> None:
        self._factor = None

    def _plan_gpu(self, ctx: GpuContext) -> Any:
        spec = self._specs["a"]
        choice = self._choose("cholesky", spec)
        lanes = self._lanes("cholesky", spec)
        return _plan_factor(ctx, self._like, spec, self.lower, choice, factorize=True, lanes=lanes)

    @requires(PlannerState.PLANNED, operands=True)
    def execute(self, *, stream: Any = None) -> Any:
        """Factor ``a``; return the factor (a new tensor in the operands' package and space)."""
        spec = self._specs["a"]
        with self._lock, self._phase("execution"):
            if not self.on_gpu:
                factor, info = _cpu.cholesky(self._scan(self._host("a", stream)), self.lower)
                self._factor = factor
                self._record_info("potrf", info, spec.batch_shape)
                return self._out(factor, stream)
            with devices.device_ctx(self._device_id):
                ctx, g = self._gpu_load(stream, "a")
                _gpu_potrf(ctx, g, self.lower)
                self._factor = True
                result = self._emit(g.work.adapter)
                self._finish_gpu()
            self._record_info("potrf", g.info, spec.batch_shape)
            return result

    @requires(PlannerState.PLANNED)
    def solve(self, b: Any, *, stream: Any = None) -> Any:
        """Solve ``a x = b`` with the factor of the last :meth:`execute`; return ``x`` (shape of ``b``)."""
        if self._factor is None:
            raise self._ERROR("Cholesky.solve() called before execute(): call execute() first")
        return self._solve_rhs(
            b,
            stream,
            lambda host: _cpu.cho_solve(self._factor, host, self.lower),
            lambda ctx, x: _gpu_potrs(ctx, self._gpu, x),
        )


class CholeskySolve(SolverBase):
    """Stateful solve of ``A x = b`` given the Cholesky factor ``c`` of ``A`` (from :func:`cholesky`).

    Args:
        c: ``(*batch, n, n)`` factor; only the triangle named by ``lower`` is read.
        b: ``(n,)``, ``(n, nrhs)`` or ``(*batch, n, nrhs)``.
        lower: whether ``c`` is lower (``A = c c^H``) or upper (``A = c^H c``) triangular.
        options, execution, stream: as for :class:`Cholesky`.
    """

    _NAME = "CholeskySolve"
    _OP = "cholesky_solve"

    def __init__(
        self,
        c: Any,
        b: Any,
        *,
        lower: bool = True,
        options: Any = None,
        execution: Any = None,
        stream: Any = None,
    ):
        self.lower = check_flag("lower", lower)
        super().__init__({"c": c, "b": b}, options=options, execution=execution, stream=stream)

    def _check_operand(self, name: str, adapter: TensorAdapter) -> Any:
        if name == "c":
            return matrix_spec(adapter, name, square=True, what="cholesky_solve")
        return rhs_spec(adapter, self._specs["c"], name)

    def _plan_gpu(self, ctx: GpuContext) -> Any:
        spec = self._specs["c"]
        choice = self._choose("cho_solve", spec)
        one_call = choice.algorithm == "batched" and self._specs["b"].nrhs == 1  # potrsBatched
        lanes = 1 if one_call else self._lanes("cho_solve", spec)
        return _plan_factor(ctx, self._like, spec, self.lower, choice, factorize=False, lanes=lanes)

    @requires(PlannerState.PLANNED, operands=True)
    def execute(self, *, stream: Any = None) -> Any:
        """Return ``x`` with ``A x = b`` (a new tensor shaped like ``b``)."""
        bspec = self._specs["b"]
        with self._lock, self._phase("execution"):
            if not self.on_gpu:
                c, b = self._host("c", stream), as_matrix_rhs(self._host("b", stream))
                return self._out(_cpu.cho_solve(c, b, self.lower).reshape(bspec.shape), stream)
            with devices.device_ctx(self._device_id):
                ctx, g = self._gpu_load(stream, "c")
                x = self._fresh(self._operand("b"), bspec)
                _gpu_potrs(ctx, g, x)
                result = self._give(x.adapter)
                self._finish_gpu()
            return result

    @requires(PlannerState.CREATED, PlannerState.PLANNED)
    def reset_operands(self, *, c: Any = None, b: Any = None, stream: Any = None) -> None:
        """Supply new operands (same shapes, dtype, package and device)."""
        self._reset({"c": c, "b": b}, stream, checked=True)

    @requires(PlannerState.CREATED, PlannerState.PLANNED)
    def reset_operands_unchecked(self, *, c: Any = None, b: Any = None, stream: Any = None) -> None:
        """Like :meth:`reset_operands` without the checks."""
        self._reset({"c": c, "b": b}, stream, checked=False)


def cholesky(
    a: Any, *, lower: bool = True, options: Any = None, execution: Any = None, stream: Any = None
) -> Any:
    """Cholesky factor of a (batch of) Hermitian positive-definite matrices (see :class:`Cholesky`).

    Returns:
        ``L`` (``lower=True``) or ``U``, with the other triangle zero, in the operands' package.
    """
    return run_cached(
        Cholesky, {"a": a}, {"lower": lower}, options=options, execution=execution, stream=stream
    )


def cholesky_solve(
    c: Any, b: Any, *, lower: bool = True, options: Any = None, execution: Any = None, stream: Any = None
) -> Any:
    """Solve ``A x = b`` given the Cholesky factor ``c`` of ``A`` (see :class:`CholeskySolve`)."""
    return run_cached(
        CholeskySolve, {"c": c, "b": b}, {"lower": lower}, options=options, execution=execution, stream=stream
    )
