"""The base of every dense-solver planner: operands, execution space, lifecycle, results, ``info``.

A planner subclass supplies the pure parts (:meth:`SolverBase._check_operand`: one operand's spec)
and the two back ends (``_plan_gpu`` / GPU execution, and a CPU execution on numpy arrays); this
base sequences them through the shared :class:`~nvmath._internal.state.Lifecycle`::

    __init__  options -> wrap operands -> specs (pure, every check) -> execution space
    plan()    GPU: a GpuContext (handles, working buffers, workspaces, pointer arrays); CPU: nothing
    execute   copy operands into the working buffers, run the library, copy results out
    reset_operands / reset_operands_unchecked / release_operands / free / context manager

A method that fails leaves the object as it was (``plan`` builds into a new context and commits it
last). Results come back in the operands' package, on the operands' device; host operands always
block. ``info`` stays where it was computed; :meth:`SolverBase.check` reads it (a host sync on the
GPU) and raises :class:`nvmath.LinAlgError` naming the failing matrices.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np

from nvmath._errors import InvalidPlannerState, InvalidSolverState
from nvmath._internal import devices, streams
from nvmath._internal.execution import ExecutionCPU, ExecutionCUDA, resolve_execution
from nvmath._internal.logging import get_logger, log_phase
from nvmath._internal.options import check_or_create_options
from nvmath._internal.state import FreedOnExit, Lifecycle, PlannerState, requires
from nvmath._internal.tensors import TensorAdapter, is_dense, wrap
from nvmath._internal.tensors.copy import copy_into
from nvmath.linalg._solvers import _cpu
from nvmath.linalg._solvers._common import (
    RhsSpec,
    as_matrix_rhs,
    check_reset,
    check_same_space,
    colmajor_strides,
    info_error,
    matrix_spec,
    rhs_spec,
    wrap_operands,
)
from nvmath.linalg._solvers._dispatch import Choice, choose, choose_lanes
from nvmath.linalg._solvers._gpu import GpuContext, InfoArray, WorkMatrix
from nvmath.linalg._solvers._nonfinite import NonFiniteGuard, block_layout
from nvmath.linalg._solvers._options import LOGGER_NAME, SolverOptions

__all__ = ["SingleMatrixSolver", "SolverBase", "batch_view", "device_view"]


def batch_view(
    work: WorkMatrix, batch_shape: tuple[int, ...], rows: int, cols: int, *, transpose: bool = False
) -> TensorAdapter:
    """The leading ``rows x cols`` block of every matrix of a working buffer, as one strided view.

    With ``transpose`` the view is of the transposed blocks: shape ``(*batch, cols, rows)``.
    """
    strides: list[int] = []
    step = work.stride
    for n in reversed(batch_shape):
        strides.insert(0, step)
        step *= n
    inner = (work.ld, 1) if transpose else (1, work.ld)
    shape = (*batch_shape, cols, rows) if transpose else (*batch_shape, rows, cols)
    return device_view(work.adapter, shape, (*strides, *inner))


def device_view(
    adapter: TensorAdapter, shape: tuple[int, ...], strides: tuple[int, ...], offset: int = 0
) -> TensorAdapter:
    """A view (no copy) of part of a device tensor, usable as a copy source; keeps ``adapter`` alive."""
    from nvmath._internal.tensors.device_array import DeviceArray

    ptr = adapter.data_ptr + offset * adapter.itemsize
    return DeviceArray(ptr, tuple(shape), tuple(strides), adapter.dtype, adapter.device_id, adapter)


class SolverBase(FreedOnExit):
    """Shared machinery of the dense-solver planners (see the module docstring)."""

    _NAME: ClassVar[str] = "Solver"
    _ERROR: ClassVar[type[InvalidPlannerState]] = InvalidSolverState
    _OPTIONS: ClassVar[type] = SolverOptions
    _OP: ClassVar[str] = "solver"

    def __init__(self, operands: dict[str, Any], *, options: Any, execution: Any, stream: Any):
        self.options = check_or_create_options(self._OPTIONS, options, f"{self._NAME} options")
        self._log = get_logger(LOGGER_NAME, self.options.logger)
        with log_phase(self._log, f"{self._NAME}: specification"):
            wrapped = wrap_operands(operands)
            self._specs: dict[str, Any] = {}
            for name, adapter in wrapped.items():
                self._specs[name] = self._check_operand(name, adapter)
            first = next(iter(wrapped.values()))
            gpu = None if first.device == "cpu" else first.device_id
            self.execution: ExecutionCUDA | ExecutionCPU = resolve_execution(execution, gpu)
        self._package, self._operand_device = first.package, first.device_id
        self._operands: dict[str, TensorAdapter] = wrapped
        streams.check_stream(stream)  # one rule everywhere: refused even where it would be unused (CPU)
        self._init_stream = stream
        self._ctx: GpuContext | None = None
        self._gpu: Any = None
        self._last_info: tuple[str, str, Any, tuple[int, ...]] | None = None
        self._nonfinite = NonFiniteGuard()  # which input matrices held NaN/Inf (see _nonfinite)
        self._lock = threading.RLock()
        self._lifecycle = Lifecycle(self._NAME, self._ERROR)
        self._log.debug("%s: operands %s; execution %s", self._NAME, self._specs, self.execution)

    # ------------------------------------------------------------------ subclass hooks
    def _check_operand(self, name: str, adapter: TensorAdapter) -> Any:
        """Check one operand (given the specs known so far) and return its spec."""
        raise NotImplementedError

    def _plan_gpu(self, ctx: GpuContext) -> Any:
        """Allocate the GPU resources of the plan; return the plan state (``self._gpu``)."""
        raise NotImplementedError

    # ------------------------------------------------------------------ properties
    @property
    def on_gpu(self) -> bool:
        """Whether the object executes on a CUDA device."""
        return isinstance(self.execution, ExecutionCUDA)

    @property
    def _device_id(self) -> int:
        return self.execution.device_id  # type: ignore[union-attr]

    @property
    def _host_operands(self) -> bool:
        return self._operand_device == "cpu"

    @property
    def _like(self) -> TensorAdapter:
        """An operand adapter used to create tensors of the operands' package."""
        return next(iter(self._operands.values()))

    def _operand(self, name: str) -> TensorAdapter:
        adapter = self._operands.get(name)
        if adapter is None:
            raise self._ERROR(
                f"{self._NAME}: operand '{name}' was released: call reset_operands({name}=...) first"
            )
        return adapter

    # ------------------------------------------------------------------ streams
    def _stream(self, stream: Any) -> streams.StreamHandle:
        """The GPU stream of a call (``None``: the operands' package's current stream)."""
        return streams.get_stream(stream, device_id=self._device_id, package=self._package)

    def _operand_stream(self, stream: Any) -> streams.StreamHandle | None:
        """The stream for copying GPU operands to the host (CPU execution), else ``None``."""
        if self._host_operands:
            if stream is not None:
                streams.check_stream(stream)
            return None
        return streams.get_stream(stream, device_id=self._operand_device, package=self._package)

    def _choose(self, op: str, spec: Any) -> Choice:
        """The kernel family of ``op`` for the matrix ``spec`` under ``options.algorithm`` (logged)."""
        return choose(
            op,
            rows=spec.rows,
            cols=spec.cols,
            batch=spec.batch_count,
            algorithm=self.options.algorithm,
            logger=self._log,
        )

    def _lanes(self, op: str, spec: Any, choice: Choice | None = None) -> int:
        """The streams of the plan's loops of per-matrix calls under ``options.streams`` (logged).

        ``1`` without a log when ``choice`` is a batched kernel (the plan has no loop).
        """
        if choice is not None and choice.algorithm == "batched":
            return 1
        return choose_lanes(
            op,
            rows=spec.rows,
            cols=spec.cols,
            batch=spec.batch_count,
            streams=self.options.streams,
            user_handle=self.options.handle is not None,
            logger=self._log,
        )

    # ------------------------------------------------------------------ lifecycle
    def _invalidate(self) -> None:
        """Forget results kept from earlier executions (a new plan has new buffers)."""

    def _plan(self, stream: Any) -> None:
        with log_phase(self._log, f"{self._NAME}: planning"):
            if not self.on_gpu:
                _cpu.lapack("getrf", np.dtype("float64"))  # fail early without scipy
                self._invalidate()
                self._lifecycle.mark_planned()
                return
            handle = self._stream(self._init_stream if stream is None else stream)
            opts = self.options
            ctx = GpuContext(self._device_id, self._package, handle, opts.allocator, opts.handle)
            try:
                with devices.device_ctx(self._device_id):
                    ctx.use_stream(handle)
                    state = self._plan_gpu(ctx)
                    work = getattr(state, "work", None)
                    self._nonfinite.allocate(ctx, work.count if work is not None else 1)
                    if handle.mortal:  # planning queued work there; see _finish_gpu
                        streams.mark_done(handle)
            except BaseException:
                ctx.close()
                raise
            old, self._ctx, self._gpu = self._ctx, ctx, state
            self._invalidate()
            if old is not None:  # the guard's flags were re-allocated in ctx above
                self._last_info = None  # the old status lives in old's memory
                old.close()
        self._lifecycle.mark_planned()

    def _reset(self, new: dict[str, Any], stream: Any, *, checked: bool) -> None:
        """Replace the operands given in ``new`` (``None`` entries are kept); commit only if all pass."""
        wrapped = {k: wrap(v, f"operand '{k}'") for k, v in new.items() if v is not None}
        if self._lifecycle.operands_released and not wrapped:
            raise ValueError(f"{self._NAME}.reset_operands(): the operands were released; give new operands")
        specs = dict(self._specs)
        if checked:
            space = _Space(self._package, self._operand_device)
            for name, adapter in wrapped.items():
                check_same_space(space, adapter, name)  # type: ignore[arg-type]
                spec = self._check_operand(name, adapter)
                check_reset(self._specs[name], spec)
                specs[name] = spec
        self._operands.update(wrapped)
        self._specs = specs
        self._lifecycle.mark_operands_reset()

    def _release(self) -> None:
        self._operands = {}
        self._lifecycle.mark_operands_released()

    def _forget_device_status(self) -> None:
        """Drop the last execution's status and non-finite flags: they live in the context being closed
        (reading them afterwards would read freed memory)."""
        self._last_info = None
        self._nonfinite.release()

    def _free(self) -> None:
        ctx, self._ctx, self._gpu = self._ctx, None, None
        self._forget_device_status()
        if ctx is not None:
            ctx.close()
        self._operands = {}
        self._lifecycle.mark_freed()

    @requires(PlannerState.CREATED, PlannerState.PLANNED, operands=True)
    def plan(self, stream: Any = None) -> None:
        """Plan the computation (GPU: handles, working buffers, workspaces, pointer arrays)."""
        self._plan(stream)

    @requires(PlannerState.CREATED, PlannerState.PLANNED, PlannerState.FREED)
    def release_operands(self) -> None:
        """Drop the references to the operands (the plan is kept); ``reset_operands`` supplies new ones."""
        self._release()

    def free(self) -> None:
        """Release every resource (waits for the object's stream); idempotent."""
        with self._lock:
            self._free()

    # ------------------------------------------------------------------ the stateless path's entry
    @property
    def is_planned(self) -> bool:
        """Whether :meth:`plan` ran and :meth:`free` did not."""
        return self._lifecycle.bits & PlannerState.PLANNED.value != 0

    def run_cached(self, operands: dict[str, Any], method: str, stream: Any) -> Any:
        """One stateless call on this cached plan: supply ``operands`` (unless the plan still holds the
        ones it was built with), call ``method(stream=stream)``, release the operands."""
        if self._lifecycle.operands_released:
            self.reset_operands_unchecked(**operands, stream=stream)
        try:
            fn: Callable[..., Any] = getattr(self, method)
            return fn(stream=stream)
        finally:
            self.release_operands()

    # ------------------------------------------------------------------ execution helpers
    def _phase(self, name: str) -> Any:
        """A context logging the phase ``name`` and its host time at INFO (free when disabled)."""
        return log_phase(self._log, f"{self._NAME}: {name}")

    def _gpu_call(self, stream: Any) -> GpuContext:
        """Bind the plan's context to this call's stream (the device must be current)."""
        ctx = self._ctx
        assert ctx is not None
        ctx.use_stream(self._stream(stream))
        return ctx

    def _load(self, dst: TensorAdapter, name: str) -> None:
        """Queue the copy of operand ``name`` into a working buffer."""
        assert self._ctx is not None
        copy_into(dst, self._operand(name), self._ctx.stream)

    def _emit_device(self, view: TensorAdapter) -> TensorAdapter:
        """Copy a working-buffer view into a new device tensor of the operands' package (not handed out)."""
        ctx = self._ctx
        assert ctx is not None
        shape, nb = tuple(view.shape), len(self._batch_shape)
        strides = tuple(view.strides)
        if not (is_dense(shape, strides) and block_layout(shape, strides, nb)):
            strides = colmajor_strides(shape)
            if not block_layout(shape, strides, nb):
                strides = tuple(math.prod(shape[i + 1 :]) for i in range(len(shape)))  # C order
        result = self._like.empty(
            shape, view.dtype, strides=strides, device_id=ctx.device_id, stream=ctx.stream
        )
        copy_into(result, view, ctx.stream)
        self._nonfinite.poison_device(ctx, result)
        return result

    @property
    def _batch_shape(self) -> tuple[int, ...]:
        spec = next(iter(self._specs.values()))
        return tuple(getattr(spec, "batch_shape", ()))

    def _emit(self, view: TensorAdapter) -> Any:
        """Copy a device result (a working-buffer view) out to a new tensor in the caller's space."""
        ctx = self._ctx
        assert ctx is not None
        if self._host_operands:
            host = view.to("cpu", ctx.stream)
            return _cpu.to_caller(self._nonfinite.poison_host(np.asarray(host.tensor)), self._like)
        return self._emit_device(view).unwrap(ctx.stream)

    def _gpu_load(self, stream: Any, name: str) -> tuple[GpuContext, Any]:
        """Bind the plan to this call's stream and queue the copy of operand ``name`` into ``g.work``.

        Returns ``(ctx, g)``: the plan's context and state (the device must be current).
        """
        ctx = self._gpu_call(stream)
        g = self._gpu
        self._load(g.work.adapter, name)
        if name == "a":  # the matrix operand: the non-finite policy (see _nonfinite)
            self._nonfinite.scan_device(ctx, g.work)
        return ctx, g

    def _fresh(self, src: TensorAdapter, spec: RhsSpec) -> WorkMatrix:
        """A new column-major device tensor holding a copy of the right-hand side ``src`` (of ``spec``)."""
        ctx = self._ctx
        assert ctx is not None
        shape = tuple(src.shape)
        x = src.empty(
            shape, src.dtype, strides=colmajor_strides(shape), device_id=ctx.device_id, stream=ctx.stream
        )
        copy_into(x, src, ctx.stream)
        return WorkMatrix(x, spec.rows, spec.nrhs, spec.batch_count)

    def _give(self, adapter: TensorAdapter, like: TensorAdapter | None = None) -> Any:
        """Hand a new device tensor to the caller (copied to the host for host operands).

        ``like`` is an operand of the caller's package (default: the first operand).
        """
        ctx = self._ctx
        assert ctx is not None
        if self._host_operands:
            host = self._nonfinite.poison_host(np.asarray(adapter.to("cpu", ctx.stream).tensor))
            return _cpu.to_caller(host, self._like if like is None else like)
        self._nonfinite.poison_device(ctx, adapter)
        return adapter.unwrap(ctx.stream)

    def _finish_gpu(self) -> None:
        """Block when ``blocking=True`` or the operands are in host memory (nvmath-python semantics).

        On a stream that may be destroyed later (see :func:`nvmath._internal.streams.mark_done`), first
        record the event the next stream switch waits on instead of touching this stream again.
        """
        assert self._ctx is not None
        stream = self._ctx.stream
        if stream.mortal:
            streams.mark_done(stream)
        if self.options.blocking is True or self._host_operands:
            self._ctx.synchronize()

    def _host(self, name: str, stream: Any) -> np.ndarray:
        """Operand ``name`` as a numpy array (CPU execution)."""
        return _cpu.host_array(self._operand(name), self._operand_stream(stream))

    def _scan(self, a: np.ndarray) -> np.ndarray:
        """The matrix operand ``a`` for LAPACK: identity stand-ins where it holds NaN/Inf (see _nonfinite)."""
        return self._nonfinite.scan_host(a)

    def _out(self, result: np.ndarray | None, stream: Any) -> Any:
        """A CPU result in the caller's package and memory space."""
        if result is None:
            return None
        return _cpu.to_caller(self._nonfinite.poison_host(result), self._like, self._operand_stream(stream))

    # ------------------------------------------------------------------ info
    def _record_info(
        self, kind: str, info: np.ndarray | InfoArray | None, batch_shape: tuple[int, ...]
    ) -> None:
        """Keep the status of the last execution (``None``: the routine has none; only non-finite
        input can fail it) and raise now where ``options.check`` says so."""
        self._last_info = (self._OP, kind, info, batch_shape)
        if self._checks_now(kind):
            self.check()
        elif kind == "getrf" and self._OP == "lu_factor" and self._checks_now("nonfinite"):
            self.check(nonfinite_only=True)  # a singular LU is valid; NaN/Inf input is not

    def _checks_now(self, kind: str) -> bool:
        """``options.check``: ``"auto"`` checks where reading ``info`` adds no synchronization (CPU
        execution, host operands, ``blocking=True``) -- except an LU factorization, which is valid for
        a singular matrix (as in LAPACK and scipy) and is checked only with ``check=True``."""
        check = self.options.check
        if check == "auto":
            if kind == "getrf" and self._OP == "lu_factor":
                return False
            return not self.on_gpu or self._host_operands or self.options.blocking is True
        return bool(check)

    def check(self, *, nonfinite_only: bool = False) -> None:
        """Raise :class:`nvmath.LinAlgError` if the last factorization or execution failed for any matrix.

        On the GPU this reads the device ``info`` array (a host synchronization). Returns ``None``
        when every matrix succeeded or nothing was computed yet -- under the current plan: ``free()``
        and a new plan on the GPU release the memory the status lived in, so they clear it.
        """
        record = self._last_info
        if record is None:
            return
        op, kind, info, batch_shape = record
        if info is None or nonfinite_only:
            values = np.zeros(max(1, int(np.prod(batch_shape))), dtype=np.int32)
        else:
            values = info.read() if isinstance(info, InfoArray) else np.asarray(info)
        values = self._nonfinite.merge(values)
        error = info_error(op, kind, values, batch_shape)
        if error is not None:
            raise error

    def __repr__(self) -> str:
        specs = ", ".join(f"{k}={getattr(v, 'shape', '?')}" for k, v in self._specs.items())
        return f"{self._NAME}({specs}, execution={self.execution!r}, state={self._lifecycle.state.name})"


class SingleMatrixSolver(SolverBase):
    """A planner of one matrix operand ``a``: ``plan``, ``reset_operands(a=)``, ``algorithm``.

    ``a`` is checked by :func:`matrix_spec` (square unless ``_SQUARE`` is false; ``_OP`` names the
    operation in messages).
    """

    _SQUARE: ClassVar[bool] = True

    def _check_operand(self, name: str, adapter: TensorAdapter) -> Any:
        return matrix_spec(adapter, name, square=self._SQUARE, what=self._OP)

    @property
    def algorithm(self) -> str | None:
        """The kernel family chosen at ``plan()`` on the GPU (``None`` before, or on the CPU)."""
        return None if self._gpu is None else self._gpu.choice.algorithm

    @requires(PlannerState.CREATED, PlannerState.PLANNED)
    def reset_operands(self, *, a: Any = None, stream: Any = None) -> None:
        """Supply a new ``a`` (same shape, dtype, package and device as planned)."""
        self._reset({"a": a}, stream, checked=True)

    @requires(PlannerState.CREATED, PlannerState.PLANNED)
    def reset_operands_unchecked(self, *, a: Any = None, stream: Any = None) -> None:
        """Like :meth:`reset_operands` without the checks (the caller guarantees a match)."""
        self._reset({"a": a}, stream, checked=False)

    def _solve_rhs(
        self,
        b: Any,
        stream: Any,
        cpu_solve: Callable[[np.ndarray], np.ndarray],
        gpu_solve: Callable[[GpuContext, WorkMatrix], None],
    ) -> Any:
        """Solve for a new right-hand side ``b`` of ``a`` with kept factors; ``x`` is shaped like ``b``.

        ``cpu_solve(b)`` returns the solution for a host ``b`` given as a matrix; ``gpu_solve(ctx, x)``
        solves in place into ``x``, a new column-major device copy of ``b``.
        """
        badapter = wrap(b, "operand 'b'")
        bspec = rhs_spec(badapter, self._specs["a"])
        with self._lock, self._phase("solution"):
            if not self.on_gpu:
                host = as_matrix_rhs(_cpu.host_array(badapter, self._operand_stream(stream)))
                x = self._nonfinite.poison_host(cpu_solve(host)).reshape(bspec.shape)
                return _cpu.to_caller(x, badapter, self._operand_stream(stream))
            with devices.device_ctx(self._device_id):
                ctx = self._gpu_call(stream)
                work = self._fresh(badapter, bspec)
                gpu_solve(ctx, work)
                result = self._give(work.adapter, badapter)
                self._finish_gpu()
            return result


class _Space:
    """The package and device the object was planned for (for :func:`check_same_space`)."""

    __slots__ = ("device_id", "package")

    def __init__(self, package: str, device_id: Any):
        self.package, self.device_id = package, device_id
