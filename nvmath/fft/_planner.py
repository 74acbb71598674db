"""The stateful :class:`FFT` planner: specification, planning, execution, operand swaps.

The constructor wraps the operand and computes the pure traits (:mod:`nvmath.fft._traits`), so every
misuse is reported before any GPU work. :meth:`FFT.plan` creates the cuFFT plans
(:mod:`nvmath.fft._cufft_plan`); :meth:`FFT.execute` only moves data and launches: the stream is
normalized (a cached lookup), the result allocated in the operand's package, the operand copied into
the staging buffer when the traits ask for one (C2R, host operands, ``layout_fallback="copy"``), and
the plans launched. CPU execution goes through ``scipy.fft`` (:mod:`nvmath.fft._cpu`).
"""

from __future__ import annotations

from typing import Any

from nvmath._errors import InvalidFFTState
from nvmath._internal import dtypes, streams
from nvmath._internal.execution import ExecutionCPU, resolve_execution
from nvmath._internal.logging import debug, get_logger, log_phase
from nvmath._internal.options import check_or_create_options
from nvmath._internal.state import FreedOnExit, Lifecycle, PlannerState, requires
from nvmath._internal.tensors import wrap
from nvmath._internal.tensors.base import TensorAdapter
from nvmath._internal.tensors.copy import copy_into
from nvmath._internal.tensors.numpy_adapter import NumpyAdapter
from nvmath.fft import _cpu
from nvmath.fft._attributes import FFTAttributes
from nvmath.fft._callbacks import DeviceCallable, as_device_callable
from nvmath.fft._options import LOGGER_NAME, FFTDirection, FFTOptions, normalize_direction
from nvmath.fft._planner_support import (
    device_package,
    fast_torch,
    host_array,
    make_key,
    operand_traits,
    same_plan_traits,
    resolved,
    torch_allocator,
    torch_hit,
    torch_result_maker,
)
from nvmath.fft._traits import CPU_DTYPES, FFTTraits, make_traits

__all__ = ["FFT"]

_CREATED, _PLANNED = PlannerState.CREATED, PlannerState.PLANNED
_PLANNED_BIT = PlannerState.PLANNED.value
_FAST_DIRECTIONS: dict[Any, FFTDirection] = {
    FFTDirection.FORWARD: FFTDirection.FORWARD,
    FFTDirection.INVERSE: FFTDirection.INVERSE,
    "forward": FFTDirection.FORWARD,
    "inverse": FFTDirection.INVERSE,
    "FORWARD": FFTDirection.FORWARD,
    "INVERSE": FFTDirection.INVERSE,
}
_FAST_TYPES = frozenset({FFTDirection, int, str})
_ALLOWED = {
    "C2C": (FFTDirection.FORWARD, FFTDirection.INVERSE),
    "R2C": (FFTDirection.FORWARD,),
    "C2R": (FFTDirection.INVERSE,),
}


class FFT(FFTAttributes, FreedOnExit):
    """A planned N-D FFT of one operand layout, executed as often as needed.

    Args:
        operand: the input tensor (numpy, cupy, torch, or a DLPack / CUDA-array-interface array).
            Complex for C2C / C2R, real for R2C.
        axes: the axes to transform (any number, any order; ``None``: all). For R2C / C2R the last
            one is the halved axis.
        options: :class:`FFTOptions` or a dict of its fields.
        execution: :class:`ExecutionCUDA`, :class:`ExecutionCPU`, ``'cuda'`` / ``'cpu'``, a dict with a
            ``'name'`` key, or ``None`` (the operand's memory space: host operands run on the CPU).
        stream: the CUDA stream for GPU work (see :mod:`nvmath._internal.streams`); ``None``: the
            operand package's current stream.

    Raises:
        TypeError, ValueError: misuse, before any GPU work (the message names the value).
        UnsupportedLayoutError: cuFFT cannot describe the operand's layout (see
            ``FFTOptions.layout_fallback``).

    Not thread-safe: use one object per thread (the stateless functions are thread-safe).
    """

    def __init__(
        self,
        operand: Any,
        /,
        *,
        axes: Any = None,
        options: Any = None,
        execution: Any = None,
        stream: Any = None,
    ):
        options = check_or_create_options(FFTOptions, options, "FFT options")
        logger = get_logger(LOGGER_NAME, options.logger)
        with log_phase(logger, "FFT specification"):
            adapter = resolved(wrap(operand, "operand"), options.inplace)
            execution = resolve_execution(execution, adapter.device_id)
            traits = operand_traits(adapter, axes, options, execution)
            debug(logger, "FFT traits: %s", traits)
        self._options, self._logger, self._traits, self._execution = options, logger, traits, execution
        self._operand: TensorAdapter | None = adapter
        self._package = adapter.package
        self._device_package = device_package(adapter)
        self._operand_device = adapter.device_id
        self._cpu = isinstance(execution, ExecutionCPU)
        self._device_id = adapter.device_id if self._cpu else execution.device_id
        self._workers = (execution.num_threads or _cpu.default_threads()) if self._cpu else 0
        self._blocking = options.blocking is True or traits.cross_space
        self._allowed = _ALLOWED[traits.fft_type]
        self._direction = self._allowed[0]
        self._plan: Any = None
        self._hit: Any = None  # hit_entry(), once planned
        self._staging: TensorAdapter | None = None
        self._fast_alloc = torch_allocator(traits, self._device_id) if fast_torch(adapter, traits) else None
        # GPU execution without staging: execute() only needs the operand's address (see _run_direct)
        self._direct = not self._cpu and traits.staging_strides is None and not traits.cross_space
        # a C2R without staging (overwrite_operand=True): cuFFT overwrites the operand, once
        self._consumes = self._direct and traits.fft_type == "C2R"
        self._consumed = False
        self._inplace = traits.inplace
        self._direction_int = int(self._direction)
        # the caller's stream, resolved by one memoising resolver (wherever a GPU is involved: GPU
        # execution, or device operands staged through the host for CPU execution)
        on_host = self._device_id == "cpu"
        self._streams = None if on_host else streams.CallerStream(self._device_id, self._device_package)
        self._stream = self._stream_handle(stream) if self._device_id != "cpu" else streams.check_stream(stream)
        self._lifecycle = Lifecycle(
            "FFT", InvalidFFTState, reset_method="reset_operand", release_method="release_operand"
        )

    # ------------------------------------------------------------------ helpers
    def _stream_handle(self, stream: Any) -> Any:
        return streams.get_stream(stream, device_id=self._device_id, package=self._device_package)

    def _stream_of(self, stream: Any) -> Any:
        """The handle of ``stream`` (memoised: see :class:`~nvmath._internal.streams.CallerStream`)."""
        return self._streams.resolve(stream)[0]  # type: ignore[union-attr]

    def _check_direction(self, direction: Any) -> FFTDirection:
        d = _FAST_DIRECTIONS.get(direction) if type(direction) in _FAST_TYPES else None
        if d is None:
            d = normalize_direction(direction)
        if d not in self._allowed:
            raise ValueError(
                f"a {self._traits.fft_type} transform runs only {self._allowed[0].name}; got direction {direction!r}"
            )
        return d

    @property
    def traits(self) -> FFTTraits:
        """The transform's :class:`~nvmath.fft._traits.FFTTraits` (read-only)."""
        return self._traits

    # ------------------------------------------------------------------ keys
    def get_key(self, *, prolog: Any = None, epilog: Any = None) -> tuple:
        """A hashable key identifying this plan (with the given callbacks), as :meth:`create_key` makes."""
        return make_key(self._traits, self._execution, prolog, epilog)

    @staticmethod
    def create_key(
        operand: Any,
        *,
        axes: Any = None,
        options: Any = None,
        execution: Any = None,
        prolog: Any = None,
        epilog: Any = None,
    ) -> tuple:
        """The key :meth:`get_key` would return for an ``FFT`` of ``operand`` (no GPU work).

        Objects with equal keys can swap operands with :meth:`reset_operand`; use the key (plus the
        stream, if you use several) for a cache of ``FFT`` objects.
        """
        options = check_or_create_options(FFTOptions, options, "FFT options")
        adapter = wrap(operand, "operand")
        execution = resolve_execution(execution, adapter.device_id)
        traits = operand_traits(adapter, axes, options, execution)
        return make_key(traits, execution, prolog, epilog)

    @staticmethod
    def create_key_from_metadata(
        shape: Any,
        dtype: Any,
        memory_space: str,
        *,
        strides: Any = None,
        axes: Any = None,
        options: Any = None,
        execution: Any = None,
        prolog: Any = None,
        epilog: Any = None,
    ) -> tuple:
        """The key for an operand described by its metadata (no tensor needed).

        Args:
            shape: the operand's shape.
            dtype: a dtype name (``"complex64"``) or numpy dtype.
            memory_space: ``"cpu"`` or ``"cuda"``: where the operand lives.
            strides: strides in elements (``None``: C order).
            axes, options, execution, prolog, epilog: as for :meth:`create_key` (a ``"cuda"``
                operand runs on ``execution.device_id``, default 0).
        """
        from nvmath._internal.tensors.base import dense_strides

        if memory_space not in ("cpu", "cuda"):
            raise ValueError(f"memory_space must be 'cpu' or 'cuda'; got {memory_space!r}")
        options = check_or_create_options(FFTOptions, options, "FFT options")
        shape = tuple(int(n) for n in shape)
        strides = dense_strides(shape) if strides is None else tuple(int(s) for s in strides)
        name = dtype if isinstance(dtype, str) else dtypes.numpy_dtype_name(dtype)
        dtypes.check_dtype_name(name)
        device = "cpu" if memory_space == "cpu" else getattr(execution, "device_id", 0)
        execution = resolve_execution(execution, device)
        traits = make_traits(
            shape, strides, name, axes=axes, options=options, execution=execution.name,
            package="torch", operand_space=memory_space,
        )  # fmt: skip
        return make_key(traits, execution, prolog, epilog)

    # ------------------------------------------------------------------ planning
    def _check_callbacks(self, prolog: DeviceCallable | None, epilog: DeviceCallable | None) -> None:
        if prolog is None and epilog is None:
            return
        t = self._traits
        if self._cpu:
            raise ValueError("prolog / epilog callbacks run on the GPU only; this FFT uses CPU execution")
        half = [d for d in (t.operand_dtype, t.result_dtype) if d not in CPU_DTYPES]
        if half:
            raise ValueError(
                f"callbacks support float32/64 and complex64/128 elements; this transform uses {half[0]}"
            )
        if len(t.steps) != 1 or t.launches != 1:
            raise ValueError(
                f"callbacks need a transform cuFFT runs in one launch; this one takes {t.launches} launches in "
                f"{len(t.steps)} plan(s) (more than 3 axes, or batch axes that do not collapse into one stride): "
                "transform fewer axes, or make the operand contiguous"
            )

    @requires(_CREATED, _PLANNED)
    def plan(
        self, *, prolog: Any = None, epilog: Any = None, stream: Any = None, direction: Any = None
    ) -> None:
        """Create the cuFFT plans (a no-op when already planned, and for CPU execution).

        Args:
            prolog: a :class:`DeviceCallable` (or dict) run on each element cuFFT loads.
            epilog: a :class:`DeviceCallable` (or dict) run on each element cuFFT stores.
            stream: accepted for compatibility (planning is synchronous and enqueues nothing).
            direction: the default direction of :meth:`execute`.

        Raises:
            ValueError: callbacks with CPU execution, half precision, or a multi-launch transform;
                a direction the transform type does not allow.
            RuntimeError: the loaded cuFFT cannot use the callbacks (the message names its version
                and path).
        """
        if self._lifecycle.state is _PLANNED:
            self._logger.info("FFT.plan(): already planned; nothing to do")
            return
        prolog, epilog = as_device_callable(prolog, "prolog"), as_device_callable(epilog, "epilog")
        default = self._check_direction(direction) if direction is not None else self._direction
        self._check_callbacks(prolog, epilog)
        if stream is not None and not self._cpu:
            self._stream_handle(stream)
        elif stream is not None:
            streams.check_stream(stream)  # unused on the CPU, refused as on the GPU
        plan = None
        if not self._cpu:
            from nvmath.fft._cufft_plan import CufftPlan

            with log_phase(self._logger, "FFT planning"):
                plan = CufftPlan(
                    self._traits, device_id=self._device_id, package=self._device_package,
                    allocator=self._options.allocator, prolog=prolog, epilog=epilog,
                )  # fmt: skip
        self._plan, self._direction = plan, default
        self._direction_int = int(default)
        self._hit = self._make_hit()
        self._lifecycle.mark_planned()

    # ------------------------------------------------------------------ execution
    @requires(_PLANNED, operands=True)
    def execute(self, direction: Any = None, stream: Any = None, release_workspace: bool = False) -> Any:
        """Run the transform and return the result (a new tensor, or the operand when in place).

        Args:
            direction: :class:`FFTDirection`, -1 / 1 or ``'forward'`` / ``'inverse'``; default: the
                one given to :meth:`plan`, else FORWARD (C2C, R2C) / INVERSE (C2R).
            stream: the CUDA stream; ``None``: the operand package's current stream.
            release_workspace: free the cuFFT workspace after this execution (stream-ordered).

        Returns:
            The result, in the operand's package and memory space. Unnormalized in both directions.
        """
        if self._direct:
            if self._consumes:
                self._consume()
            op = self._operand
            if stream is None and not release_workspace:  # (see hit_entry)
                d = None if direction is None else self._check_direction(direction)
                return self._hit(op, op.data_ptr, None, d, None)
            d = self._direction_int if direction is None else int(self._check_direction(direction))
            return self._run_direct(op.data_ptr, op, None, d, stream, release_workspace)
        d = self._direction if direction is None else self._check_direction(direction)
        if self._cpu:
            if stream is not None:
                streams.check_stream(stream)  # unused on the CPU, refused as on the GPU
            return self._execute_cpu(d, stream)
        return self._execute_cuda(d, stream, release_workspace)

    def _consume(self) -> None:
        """Allow one execution per operand when cuFFT overwrites it (``overwrite_operand``)."""
        if self._consumed:
            raise InvalidFFTState(
                "FFT.execute(): the previous C2R execution overwrote the operand (overwrite_operand=True); "
                "call reset_operand() with fresh data first"
            )
        self._consumed = True

    def _run_direct(
        self, ptr: int, source: Any, tensor: Any, direction: int, stream: Any, release_workspace: bool
    ) -> Any:
        """Execute a plan without staging on the operand at ``ptr`` (the hot path).

        ``source`` is the operand's adapter or the user's object (wrapped only if a result must be
        allocated through its package's adapter); ``tensor`` is what an in-place call returns when
        ``source`` is not an adapter (else ``source.unwrap()``). A torch result is made by torch (no
        context needed) and the plan launched with the stream's context switched only if needed
        (:meth:`CufftPlan.launch`); anything else runs inside the stream's context.
        """
        s, current = self._streams.resolve(stream)  # type: ignore[union-attr]
        plan = self._plan
        fast = self._fast_alloc
        out = fast(s, current) if fast is not None else None
        result = None
        if out is not None and not release_workspace:
            plan.launch(ptr, out.data_ptr(), direction, s)
            tensor = out
        else:
            with streams.stream_ctx(s):
                if self._inplace:
                    plan.run(ptr, ptr, 0, direction, s)
                    if isinstance(source, TensorAdapter):
                        result = source
                elif out is None:
                    t = self._traits
                    result = wrap(source, "operand").empty(
                        t.result_shape, t.result_dtype, strides=t.result_strides, device_id=self._device_id,
                        stream=s,
                    )  # fmt: skip
                    plan.run(ptr, result.data_ptr, 0, direction, s)
                else:
                    plan.run(ptr, out.data_ptr(), 0, direction, s)
                    tensor = out
                if release_workspace:
                    plan.release_workspace()
        if self._blocking:
            streams.synchronize(s)
        return tensor if result is None else result.unwrap(s)

    @property
    def workspace_bytes(self) -> int:
        """The bytes of the cuFFT workspace the plan holds once it ran (0 before ``plan()``, on the CPU)."""
        plan = self._plan
        return 0 if plan is None else plan.workspace_size

    @property
    def is_planned(self) -> bool:
        """Whether :meth:`plan` ran and :meth:`free` did not."""
        return self._lifecycle.bits & _PLANNED_BIT != 0

    def hit_entry(self) -> Any:
        """The callable of :meth:`run_cached` for the stateless hit path (the cache's last call) and for
        :meth:`execute` on the default stream (any direction): the one made when the object was planned
        (or its operand layout changed), made now if not planned yet.

        For a plan that runs directly with results made by torch (a torch GPU operand, no staging, not
        in place, not blocking) it is one function: torch's current stream compared with the resolver's
        memo, the result, the launch (``direction``: ``None`` or an allowed :class:`FFTDirection`
        member); any other call (an explicit stream, another direction object, no address) goes to
        :meth:`run_cached`. On the compiled path it is ``run`` of the C ``FFTHit`` of ``nvmath._fastcall``
        (see :func:`~nvmath.fft._cufft_plan.compiled_hit`): once the plan runs steadily on torch's current
        stream, the whole call is one C call, with the Python function as its fallback.
        The caller holds the cache entry's lock and checked it is live.
        """
        hit = self._hit
        return hit if hit is not None else self._make_hit()

    def _make_hit(self) -> Any:
        """A new :meth:`hit_entry` callable for the current traits, attached to the plan (see there)."""
        cs, plan = self._streams, self._plan
        applies = self._direct and self._fast_alloc is not None and not self._blocking
        if not applies or cs is None or not cs.torch or cs.current is None:  # (None: no raw stream reader)
            if plan is not None:
                plan.attach_hit(None)  # (detaches a previous layout's)
            return self.run_cached
        result = torch_result_maker(self._traits, self._device_id)
        default = self._direction
        directions = ((default, int(default)), *((d, int(d)) for d in self._allowed if d is not default))
        hit = torch_hit(self._plan, self.run_cached, cs, directions, result)
        if plan is None:
            return hit
        from nvmath.fft._cufft_plan import compiled_hit

        twin = compiled_hit(cs.current, self._device_id, result, directions, hit)
        plan.attach_hit(twin)
        return hit if twin is None else twin.run  # (its bound method: a call cProfile sees)

    def run_cached(self, operand: Any, ptr: int | None, tensor: Any, direction: Any, stream: Any) -> Any:
        """One stateless call on this (cached, planned) object; the operand is not kept.

        With ``ptr`` (the operand's address, read without wrapping it; ``tensor``: what an in-place
        call returns) a plan without staging runs directly; otherwise the operand is wrapped, swapped
        in, executed and released. The caller holds the cache entry's lock.
        """
        if ptr is not None and self._direct:
            if direction is None or direction is self._direction:
                d = self._direction_int
            else:
                d = int(self._check_direction(direction))
            return self._run_direct(ptr, operand, tensor, d, stream, False)
        self.reset_operand_unchecked(operand, stream=stream)
        try:
            return self.execute(direction, stream)
        finally:
            self.release_operand()

    def _execute_cuda(self, direction: int, stream: Any, release_workspace: bool) -> Any:
        t, op = self._traits, self._operand
        s, current = self._streams.resolve(stream)  # type: ignore[union-attr]
        with streams.stream_ctx(s):
            staging = self._stage(op, s) if t.staging_strides is not None else None
            result, tensor, result_ptr = self._new_result(op, staging, s, current)
            self._plan.run(
                op.data_ptr, result_ptr, 0 if staging is None else staging.data_ptr, int(direction), s
            )
            if release_workspace:
                self._plan.release_workspace()
        if t.cross_space:
            return self._to_host(result, s)
        if self._blocking:
            streams.synchronize(s)
        return tensor if result is None else result.unwrap(s)

    def _stage(self, op: TensorAdapter, s: Any) -> TensorAdapter:
        """Copy the operand into the staging buffer (allocated on first use) on stream ``s``."""
        staging = self._staging
        if staging is None:
            t = self._traits
            staging = self._staging = op.empty(
                t.operand_shape,
                t.operand_dtype,
                strides=t.staging_strides,
                device_id=self._device_id,
                stream=s,
            )
        copy_into(staging, op, s)
        return staging

    def _new_result(self, op: TensorAdapter, staging: Any, s: Any, current: bool) -> tuple[Any, Any, int]:
        """``(adapter or None, tensor or None, device pointer)`` of the buffer cuFFT writes (``current``:
        ``s`` is torch's current stream, as the resolver found)."""
        t = self._traits
        if t.inplace:
            target = staging if t.cross_space else op
            return target, None, target.data_ptr
        fast = self._fast_alloc
        if fast is not None:
            tensor = fast(s, current)
            if tensor is not None:
                return None, tensor, tensor.data_ptr()
        result = op.empty(
            t.result_shape, t.result_dtype, strides=t.result_strides, device_id=self._device_id, stream=s
        )
        return result, None, result.data_ptr

    def _to_host(self, result: TensorAdapter, s: Any) -> Any:
        """Copy a device result back to the host operand's package (blocking)."""
        op = self._operand
        if self._traits.inplace:
            copy_into(op, result, s)
            return op.tensor
        host = result.to("cpu", s)
        free = getattr(result, "free", None)
        if callable(free):
            free()
        return host.tensor

    def _execute_cpu(self, direction: int, stream: Any) -> Any:
        t, op = self._traits, self._operand
        s = None if op.device == "cpu" else self._stream_of(stream)
        host = op if s is None else op.to("cpu", s)
        x = host_array(host)
        with log_phase(self._logger, "FFT execution (CPU)"):
            y = _cpu.execute_on_host(x, t, direction, self._workers)
        if s is None:
            if t.inplace:
                x[...] = y
                return op.tensor
            if self._package == "torch":
                import torch

                return torch.from_numpy(y)
            return y
        target = (
            op if t.inplace else op.empty(t.result_shape, t.result_dtype, strides=t.result_strides, stream=s)
        )
        copy_into(target, NumpyAdapter(y), s)
        streams.synchronize(s)
        return target.tensor

    # ------------------------------------------------------------------ operands
    @requires(_CREATED, _PLANNED)
    def reset_operand(self, operand: Any = None, *, stream: Any = None) -> None:
        """Replace the operand with one of the same package, device and dtype that the planned cuFFT
        plan runs: the same shape and strides, or another arrangement with equal :meth:`create_key`
        (rearranged batch dimensions, transposed batch strides).

        ``operand=None`` releases the operand (as :meth:`release_operand`).

        Raises:
            TypeError: another package.
            ValueError: another device or dtype, or a layout that needs another plan (the message shows both).
        """
        if operand is None:
            self.release_operand()
            return
        new = resolved(wrap(operand, "operand"), self._traits.inplace)
        t = self._traits
        if new.package != self._package:
            raise TypeError(
                f"reset_operand: the new operand is a {new.package} tensor; the FFT was planned for {self._package}"
            )
        checks = (("device", new.device_id, self._operand_device), ("dtype", new.dtype, t.operand_dtype))
        for what, got, planned in checks:
            if got != planned:
                raise ValueError(
                    f"reset_operand: the new operand's {what} is {got!r}; the FFT was planned for {planned!r}"
                )
        if stream is not None and self._stream is not None:
            self._stream_handle(stream)
        self._swap_in(new)

    def _swap_in(self, new: TensorAdapter) -> None:
        """Make ``new`` the operand; another shape or batch arrangement than the planned traits
        describe re-derives them (the same cuFFT plan runs it) or is refused.

        Raises:
            ValueError: the new layout needs another cuFFT plan (nothing changes).
        """
        t = self._traits
        if (tuple(new.shape), tuple(new.strides)) != (t.operand_shape, t.operand_strides):
            traits = same_plan_traits(new, t, self._options, self._execution)
            self._traits, self._staging = traits, None
            self._fast_alloc = torch_allocator(traits, self._device_id) if fast_torch(new, traits) else None
            if self._hit is not None:  # (its result allocator is the old layout's: made anew)
                self._hit = self._make_hit()
        self._operand, self._consumed = new, False
        self._lifecycle.mark_operands_reset()

    @requires(_CREATED, _PLANNED)
    def reset_operand_unchecked(self, operand: Any, *, stream: Any = None) -> None:
        """Replace the operand skipping the package, device and dtype checks (they must match the
        planned ones). Another shape or batch arrangement with the same :meth:`create_key` is
        re-derived as :meth:`reset_operand` does (two tuple comparisons when it is unchanged); a layout
        that needs another plan raises ``ValueError`` -- never a result computed with the wrong layout.
        """
        self._swap_in(resolved(wrap(operand, "operand"), self._traits.inplace))

    @requires(_CREATED, _PLANNED)
    def release_operand(self) -> None:
        """Drop the reference to the operand; :meth:`reset_operand` supplies a new one."""
        self._operand = None
        self._lifecycle.mark_operands_released()

    # ------------------------------------------------------------------ teardown
    def free(self) -> None:
        """Release the cuFFT plans, workspace and internal buffers; idempotent."""
        plan, self._plan = self._plan, None
        staging, self._staging = self._staging, None
        if plan is not None:
            plan.close()
        free = getattr(staging, "free", None)
        if callable(free):
            free()
        self._operand = None
        self._lifecycle.mark_freed()

    def __repr__(self) -> str:
        t = self._traits
        return (
            f"FFT({t.fft_type}, {t.operand_dtype}{list(t.operand_shape)} -> {t.result_dtype}{list(t.result_shape)}, "
            f"axes={t.axes}, execution={self._execution}, state={self._lifecycle.state.name})"
        )
