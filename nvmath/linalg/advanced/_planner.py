"""The cuBLASLt matmul planner: :class:`Matmul`.

The class only sequences the layers below it: the constructor wraps the operands and computes the
pure traits (every misuse is reported here, before any GPU work), then moves host operands to the
GPU; :meth:`Matmul.plan` builds a :class:`~._plan.Plan` (descriptors, layouts, preference,
algorithms); :meth:`Matmul.execute` allocates the result (and aux outputs) and makes one
``cublasLtMatmul`` call with precomputed arguments on the caller's stream. The operand methods
(``reset_operands``, ``release_operands``) come from the mixin :class:`~._reset.OperandResets`. States go
CREATED -> PLANNED -> FREED through one :class:`~nvmath._internal.state.Lifecycle`.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from typing import Any

from nvmath._errors import InvalidMatmulState
from nvmath._internal import fastpath, streams
from nvmath._internal.dtypes import to_numpy_dtype
from nvmath._internal.logging import debug, get_logger, log_phase
from nvmath._internal.memory import SharedWorkspaces, Workspace
from nvmath._internal.options import check_or_create_options, freeze_options
from nvmath._internal.state import FreedOnExit, Lifecycle, PlannerState, requires
from nvmath._internal.streams import StreamHandle
from nvmath._internal.tensors import wrap, wrap_operands
from nvmath._internal.torch_bridge import route
from nvmath.linalg.advanced import _handles
from nvmath.linalg.advanced._algorithm import Algorithm
from nvmath.linalg.advanced._aux import AuxOutputs
from nvmath.linalg.advanced._choice import AlgorithmChoice
from nvmath.linalg.advanced._execute_hit import ExecuteHits
from nvmath.linalg.advanced._launch import BoundWorkspace, MatmulLaunch
from nvmath.linalg.advanced._operands import ScaleSlot, host_scalars, wrap_scales
from nvmath.linalg.advanced._options import (
    LOGGER_NAME,
    MatmulOptions,
    MatmulPlanPreferences,
    MatmulQuantizationScales,
)
from nvmath.linalg.advanced._plan import Plan, build_plan, row_order_possible
from nvmath.linalg.advanced._reset import OperandResets
from nvmath.linalg.advanced._results import ResultMaker, deliver_outputs, empty_sibling
from nvmath.linalg.advanced._spec import Spec, place, specify
from nvmath.linalg.advanced._staging import stage
from nvmath.linalg.advanced._traits import check_alpha_beta
from nvmath.linalg.advanced._view import MatmulView, view_of

__all__ = ["Matmul"]

_DEFAULTS = tuple(
    freeze_options(o) for o in (MatmulOptions(), MatmulPlanPreferences(), MatmulQuantizationScales())
)
"""Default option objects (frozen), shared to skip their validation on every construction."""
_PLANNED = PlannerState.PLANNED.value
_FREED = PlannerState.FREED.value
_LOG = get_logger(LOGGER_NAME)
"""The planners' logger unless ``options.logger`` gives another."""


class Matmul(OperandResets, AlgorithmChoice, FreedOnExit):
    """A stateful ``epilog(alpha * a @ b + beta * c)`` on cuBLASLt: plan once, execute many times.

    Args:
        a, b: the operands (numpy, cupy, torch or any DLPack/CUDA-array-interface tensors; 1-D
            operands are promoted as ``numpy.matmul`` does; batch dimensions broadcast).
        c: optional addend of shape ``(..., M, N)`` or ``(..., M, 1)`` (broadcast over columns).
        alpha, beta: scalars; ``beta`` is required with ``c``.
        qualifiers: a numpy array of ``matrix_qualifiers_dtype`` (conjugation of ``a`` / ``b``).
        quantization_scales: FP8 scales (:class:`MatmulQuantizationScales` or a dict); tensor-wide,
            outer-vector or block scales by shape (see :class:`MatmulQuantizationScales`).
        options: :class:`MatmulOptions` or a dict of its fields.
        stream: the stream for copies of host operands (see ``nvmath`` stream rules).
        _workspaces: internal (the stateless ``matmul``'s cache): take the workspace from this pool,
            shared with other cached plans, unless ``options.allocator`` is given.

    Raises:
        TypeError, ValueError: a bad operand, shape, layout, dtype, scale or option (before any GPU work).
    """

    def __init__(
        self, a: Any, b: Any, /, c: Any = None, *, alpha: Any = None, beta: Any = None, qualifiers: Any = None,
        quantization_scales: Any = None, options: Any = None, stream: Any = None,
        _workspaces: SharedWorkspaces | None = None,
    ):  # fmt: skip
        options = (
            _DEFAULTS[0] if options is None else check_or_create_options(MatmulOptions, options, "options")
        )
        log = _LOG if options.logger is None else get_logger(LOGGER_NAME, options.logger)
        with log_phase(log, "Matmul: specification"):
            ops = wrap_operands(a=a, b=b, c=c)
            scales = (
                _DEFAULTS[2]
                if quantization_scales is None
                else check_or_create_options(
                    MatmulQuantizationScales, quantization_scales, "quantization_scales"
                )
            )
            first = ops["a"]
            values = (
                {}
                if quantization_scales is None
                else wrap_scales(
                    {n: getattr(scales, n) for n in scales.given()}, first.package, first.device_id
                )
            )
            mm, types, scaling, key, specs = specify(ops, qualifiers, values, options)
            alpha, beta = check_alpha_beta(alpha, beta, has_c=c is not None, scale_dtype=types.scale_dtype)
            spec, slots, handle = place(ops, mm, types, scaling, key, qualifiers, options, stream, specs)
            self._scales = {
                n: ScaleSlot(
                    f"quantization scale {n!r}", values[n], spec.package, spec.user_device, spec.device_id,
                    handle, scaling.layout(n),
                )
                for n in sorted(values)
            }  # fmt: skip
        self._spec, self._options, self._log, self._slots, self._stream = spec, options, log, slots, handle
        # host results are made like an empty sibling of a, never a itself (release_operands)
        first = ops["a"]
        self._host_template = first.empty((0,), first.dtype, device_id="cpu") if spec.host else None
        self._scalar_buf, self._scalars = host_scalars(alpha, beta, to_numpy_dtype(types.scale_dtype))
        self._alpha, self._beta = self._scalar_buf[0:1], self._scalar_buf[1:2]
        self._init_runtime(spec, slots["a"].device.package, _workspaces)
        t = types
        debug(log, "Matmul: %s @ %s -> %s on device %d", t.a_dtype, t.b_dtype, t.d_dtype, spec.device_id)
        if not scaling.tensor_wide:
            copied = [n for n, s in self._scales.items() if s.copied]
            modes = scaling.describe()
            debug(log, "Matmul: FP8 scale modes %s; copied into cuBLASLt's layout: %s", modes, copied)

    def _init_runtime(self, spec: Spec, package: str, shared: SharedWorkspaces | None) -> None:
        """The state execute() uses: workspace, plan slots, stream memo, lifecycle."""
        self._owns_workspace = shared is None or spec.options.allocator is not None
        if self._owns_workspace:
            self._workspace = Workspace(
                device_id=spec.device_id, package=package, allocator=spec.options.allocator,
                name="matmul workspace",
            )  # fmt: skip
        else:
            self._workspace = shared.get(spec.device_id, package)  # type: ignore[union-attr]
        self._ws = BoundWorkspace(self._workspace)
        self._plan: Plan | None = None
        self._launcher: MatmulLaunch | None = None  # the installed plan's (see _commit)
        self._retired: MatmulLaunch | None = None  # a formulation autotuning replaced (see _commit)
        self._plan_prefs: MatmulPlanPreferences | None = None
        self._result: ResultMaker | None = None
        self._aux: AuxOutputs | None = None
        self._device_id = spec.device_id
        self._inplace = spec.mm.inplace
        self._c_slot = self._slots.get("c") if spec.has_c else None
        self._tensor_slots = tuple(self._slots.values())  # + the plan's epilog inputs (_commit)
        self._staged = None  # a dense copy of an operand the epilog cannot read as it is (_staging)
        self._fast_deliver = not spec.host and spec.options.blocking is not True
        self._alpha_is_one = False
        self._pointer_ok = False
        self._streams = streams.CallerStream(spec.device_id, spec.package)
        # torch tensors may require grad (then nvmath.torch runs the call); other packages' never do
        torch, user = sys.modules.get("torch"), self._slots["a"].user
        is_torch = torch is not None and isinstance(user.tensor, torch.Tensor)  # type: ignore[union-attr]
        self._grad_mode = torch.is_grad_enabled if is_torch else None  # type: ignore[union-attr]
        self._direct: tuple | None = None  # execute()'s simple cases (see _commit)
        self._inplace_direct = False
        # execute()'s compiled common call (see _execute_hit): its maker on the compiled path, its run
        self._hits = ExecuteHits() if fastpath.available() else None
        self._hit_run: Any = None
        self._lifecycle = Lifecycle("Matmul", InvalidMatmulState)

    # ------------------------------------------------------------------ properties
    @property
    def algorithms(self) -> tuple[Algorithm, ...]:
        """The planned (or autotuned) algorithms, best first; empty before ``plan()``."""
        return tuple(self._plan.algorithms) if self._plan is not None else ()

    @property
    def is_planned(self) -> bool:
        """Whether :meth:`plan` ran and :meth:`free` did not."""
        return self._lifecycle.bits & _PLANNED != 0

    @property
    def view(self) -> MatmulView:
        """A read-only snapshot of the planned epilog, the scalars and the caller's tensors."""
        return view_of(self._slots, self._plan, self._alpha, self._beta, self._spec.has_c, self._scales)

    @property
    def launcher(self) -> MatmulLaunch | None:
        """The installed plan's :class:`~._launch.MatmulLaunch` (``None`` before ``plan()`` and after
        ``free()``); a new one after each re-plan."""
        return self._launcher

    @property
    def caller_stream(self) -> streams.CallerStream:
        """The resolver of this planner's ``stream=`` arguments (memoises the current stream)."""
        return self._streams

    @property
    def address_ok(self) -> bool:
        """Whether the installed plan can run on bare addresses: GPU operands, not blocking, no ``c``,
        no staged copy or broadcast aux, no quantization or epilog scales (see :mod:`._direct`)."""
        return not self._scales and self.address_ok_with_scales

    @property
    def address_ok_with_scales(self) -> bool:
        """:attr:`address_ok`, quantization scales allowed (left as planned: see :mod:`._direct`)."""
        plan = self._plan
        return (
            plan is not None and self._fast_deliver and not self._spec.has_c and self._staged is None
            and not plan.epilog_scales and plan.broadcast is None
        )  # fmt: skip

    @property
    def result_maker(self) -> ResultMaker | None:
        """The maker of the installed plan's results (their shape, strides and dtype); ``None`` before
        ``plan()``."""
        return self._result

    @property
    def workspace_lock(self) -> Any:
        """The lock of the workspace this plan shares with other cached plans (``None``: its own)."""
        return None if self._owns_workspace else self._workspace.lock

    def _get_stream(self, stream: Any) -> StreamHandle:
        """The :class:`StreamHandle` of a caller's ``stream`` (see
        :class:`~nvmath._internal.streams.CallerStream`)."""
        return self._streams.resolve(stream)[0]

    def _handle(self) -> int:
        return self._options.handle or _handles.get_handle(self._spec.device_id)

    # ------------------------------------------------------------------ planning
    @requires(PlannerState.CREATED, PlannerState.PLANNED, operands=True)
    def plan(
        self, *, preferences: Any = None, algorithms: Sequence[Algorithm] | None = None, epilog: Any = None,
        epilog_inputs: Mapping[str, Any] | None = None, stream: Any = None,
    ) -> tuple[Algorithm, ...]:  # fmt: skip
        """Choose algorithms for the problem (and an epilog); may be called again to re-plan.

        Args:
            preferences: :class:`MatmulPlanPreferences` or a dict (heuristic limit, masks, epilog aux type).
            algorithms: algorithms to use instead of querying the heuristic (e.g. saved ones).
            epilog: a :class:`MatmulEpilog`.
            epilog_inputs: ``{"bias": ..., "relu_aux": ..., "gelu_aux": ...}`` as the epilog needs.
            stream: the stream for copies of host epilog inputs.

        Returns:
            The candidate algorithms, best first.
        """
        prefs = (
            _DEFAULTS[1]
            if preferences is None
            else check_or_create_options(MatmulPlanPreferences, preferences, "plan preferences")
        )
        handle = self._streams.resolve(stream)[0]
        args = (self._spec, self._slots, self._scales, prefs, algorithms, epilog, epilog_inputs, handle)
        with log_phase(self._log, "Matmul: planning"):
            try:
                plan = build_plan(*args, self._handle(), self._log)
            except ValueError as exc:
                # algorithms saved from an autotuning won by the ORDER_ROW formulation fit that one
                if algorithms is None or not row_order_possible(self._spec, epilog, epilog_inputs):
                    raise
                plan = self._plan_row_or_raise(args, exc)
        self._commit(plan)
        self._plan_prefs = prefs if algorithms is None else None  # autotune may try another formulation
        self._lifecycle.mark_planned()
        self._log.info("Matmul: planned %d algorithm(s); first: %r", len(plan.algorithms), plan.algorithms[0])
        return tuple(plan.algorithms)

    def _plan_row_or_raise(self, args: tuple, error: ValueError) -> Plan:
        """The ORDER_ROW plan for given algorithms; raises ``error`` (the default formulation's) if they
        do not fit that one either."""
        try:
            return build_plan(*args, self._handle(), self._log, row_order=True)
        except ValueError:
            raise error from None

    def _commit(self, plan: Plan, *, retire: bool = False) -> None:
        """Install a new plan and precompute the execute() arguments. The previous plan is closed, or
        with ``retire`` kept runnable for ``execute(algorithm=...)`` with its algorithms. The output makers
        (and an FP8 aux's kernels, compiled here) come first: if they fail, ``plan`` is closed and the
        planner is as it was."""
        first = self._slots["a"]  # outputs follow a's package and device; the makers keep an empty
        template = first.device  # sibling, never the caller's tensor (release_operands drops them all)
        if not first.host:
            template = empty_sibling(template)
        p, ep = plan.problem, plan.epilog
        try:
            result = ResultMaker(template, p.result_shape, p.result_strides, self._spec.types.d_dtype)
            aux = (
                AuxOutputs(plan.aux, template, ep.aux_quantization, plan.epilog_scales, self._device_id)
                if plan.aux
                else None
            )
        except BaseException:
            plan.close()
            raise
        self._result, self._aux = result, aux
        self._drop_hit()
        simple = self._fast_deliver and aux is None  # GPU operands, non-blocking, no aux outputs
        self._direct = result.direct if simple and not self._inplace else None  # execute() allocates D
        self._inplace_direct = simple and self._inplace
        old, self._plan = self._plan, plan
        if self._retired is not None:
            self._retired.close()
            self._retired.plan.close()
            self._retired = None
        if self._launcher is not None:
            self._launcher.close()  # (a launch of the old plan never runs the new one's layouts)
            self._launcher = None
        if old is not None:
            if retire:
                self._retired = MatmulLaunch(
                    old, self._scalars, self._ws, self._device_id, self._spec.package,
                    lt_handle=self._spec.options.handle,
                    done_always=streams.done_after_every_call(False, self._spec.package),
                    keep=self._scalar_buf,
                )  # fmt: skip
            else:
                old.close()
        self._tensor_slots = (*self._slots.values(), *plan.epilog_slots.values())  # for execute_wants_torch
        self._staged = staged = stage(p.staged, self._slots, self._staged, self._stream)
        done_always = streams.done_after_every_call(  # an FP8 aux step reads our buffers too
            staged is not None or plan.epilog.aux_quantization is not None or plan.broadcast is not None,
            self._spec.package,
        )
        self._launcher = MatmulLaunch(
            plan, self._scalars, self._ws, self._device_id, self._spec.package,
            lt_handle=self._spec.options.handle, staged=staged, aux=self._aux, done_always=done_always,
            keep=self._scalar_buf,
        )  # fmt: skip
        # stateless calls may pass bare addresses: GPU operands, out of place, no epilog inputs or scales
        self._pointer_ok = (
            not self._spec.host and not self._inplace and not plan.epilog_slots and not plan.epilog_scales
            and not self._scales and staged is None
        )  # fmt: skip

    def _make_hit(self, handle: StreamHandle, direct: tuple, grad: Any) -> None:
        """After an allocating execute() on the Python path: the compiled hit of its launch, algorithm and
        stream (see :mod:`._execute_hit`; made anew only when one of them changed)."""
        slots, c = self._slots, self._c_slot
        ops = (slots["a"], slots["b"]) if c is None else (slots["a"], slots["b"], c)
        self._hit_run = self._hits.refresh(  # type: ignore[union-attr]
            self._launcher, handle, direct, ops, self._tensor_slots, grad
        )

    def _drop_hit(self) -> None:
        """Forget execute()'s compiled hit (a new plan, free())."""
        self._hit_run = None
        if self._hits is not None:
            self._hits.drop()

    def _select(self, algorithm: Algorithm) -> None:
        self._launcher.select(algorithm)  # type: ignore[union-attr]

    # ------------------------------------------------------------------ execution
    @requires(PlannerState.PLANNED, operands=True)
    def execute(
        self, *, algorithm: Algorithm | None = None, release_workspace: bool = False, stream: Any = None
    ) -> Any:
        """Compute the product; return the result (or ``(result, aux_dict)`` with aux outputs).

        Args:
            algorithm: one of :attr:`algorithms` (default: the first).
            release_workspace: free the workspace after the call (stream-ordered).
            stream: the stream to run on (default: the operands' package's current stream).
        """
        hit = self._hit_run
        if hit is not None and algorithm is None and stream is None and not release_workspace:
            out = hit()  # the common call in one C call (see _execute_hit); None: the path below
            if out is not None:
                return out
        grad = self._grad_mode
        if grad is not None and grad():  # execute_wants_torch, inlined (hot): torch operands only here
            for slot in self._tensor_slots:
                user = slot.user
                if user is not None and user.tensor.requires_grad:  # nvmath.torch builds the graph
                    return route("advanced.execute", self, algorithm=algorithm,
                                 release_workspace=release_workspace, stream=stream)  # fmt: skip
        res = self._streams
        handle, raw = res.last, res.current
        if stream is None and raw is not None and handle is not None and handle.ptr == raw(self._device_id):
            current = res.torch  # the memoised current stream: CallerStream.resolve, inlined (hot)
        else:
            handle, current = res.resolve(stream)
        if algorithm is None:  # _launch (and ResultMaker.new) inlined where they are simple (hot)
            direct, slots, c = self._direct, self._slots, self._c_slot
            if direct is not None and current and not release_workspace:  # a torch result, current stream
                empty, shape, strides, dtype, device = direct
                out = empty(shape, strides, dtype=dtype, device=device)
                pc = c.ptr if c is not None else 0  # (no aux outputs: run returns None)
                self._launcher.run(handle, slots["a"].ptr, slots["b"].ptr, pc, out.data_ptr())  # type: ignore
                if stream is None and self._hits is not None:
                    self._make_hit(handle, direct, grad)
                return out
            if self._inplace_direct and not release_workspace:
                self._launcher.run(handle, slots["a"].ptr, slots["b"].ptr, c.ptr, c.ptr)  # type: ignore
                return c.device.unwrap(handle)  # type: ignore[union-attr]
            return self._launch(handle, None, release_workspace, current)
        retired = self._retired
        if retired is not None and any(a is algorithm for a in retired.plan.algorithms):
            return self._launch_retired(retired, algorithm, handle, release_workspace, current)
        return self._launch(handle, self._algorithm_args(algorithm), release_workspace, current)

    def _algorithm_args(self, algorithm: Algorithm) -> tuple[int, int]:
        for candidate in self.algorithms:
            if candidate is algorithm:
                return algorithm.algo_ptr, algorithm.workspace_size
        raise ValueError(f"{algorithm!r} is not one of this Matmul's algorithms (see .algorithms)")

    def _launch_retired(
        self, launch: MatmulLaunch, algorithm: Algorithm, handle: StreamHandle, release_workspace: bool,
        current: bool,
    ) -> Any:  # fmt: skip
        """Run an algorithm of the formulation autotuning replaced (kept for algorithms the caller
        held from before; such plans have no epilog, aux outputs or in-place result)."""
        out, d_ptr, is_adapter = self._result.new(handle, current)  # type: ignore[union-attr]
        slots = self._slots
        c = slots["c"].ptr if self._spec.has_c else 0
        algo = (algorithm.algo_ptr, max(launch.plan.workspace_size, algorithm.workspace_size))
        launch.run(handle, slots["a"].ptr, slots["b"].ptr, c, d_ptr, algo)
        if release_workspace:
            self._workspace.release()
        return deliver_outputs(self._spec, self._host_template, self._slots, out, is_adapter, None, handle)

    def _launch(
        self, handle: StreamHandle, algo: tuple[int, int] | None, release_workspace: bool,
        current: bool = False,
    ) -> Any:  # fmt: skip
        """Allocate the result and run the launch (``algo``: another algorithm than the selected one;
        ``current``: ``handle`` is torch's current stream, already checked)."""
        c = self._c_slot
        if self._inplace:
            out, d_ptr, is_adapter = c.device, c.ptr, True  # type: ignore[union-attr]
        else:
            out, d_ptr, is_adapter = self._result.new(handle, current)  # type: ignore[union-attr]
        slots = self._slots
        pc = c.ptr if c is not None else 0
        aux = self._launcher.run(  # type: ignore[union-attr]
            handle, slots["a"].ptr, slots["b"].ptr, pc, d_ptr, algo
        )
        if release_workspace:
            self._workspace.release()
        if self._fast_deliver and aux is None:  # GPU operands, non-blocking, no aux outputs
            return out.unwrap(handle) if is_adapter else out
        return deliver_outputs(self._spec, self._host_template, self._slots, out, is_adapter, aux, handle)

    # ------------------------------------------------------------------ the stateless path's entry
    def run_cached(
        self, a: Any, b: Any, c: Any, ptrs: tuple | None, alpha: Any, beta: Any, stream: Any,
        extras: Any = None,
    ) -> Any:  # fmt: skip
        """One call of the stateless ``matmul`` on this cached plan, with the call's own operands.

        The caller holds the cache entry's lock, and the cache key vouches that the operands have the
        planned package, device, shapes, strides, dtypes and alignment. ``ptrs``: the operands'
        addresses read with the key (GPU operands of a plan without copies or epilog inputs then
        run by address, without adapters); ``extras``: ``(quantization_scales, epilog_inputs)`` or
        ``None``. No operand is kept after the call.
        """
        res = self._streams
        handle, raw = res.last, res.current
        if stream is None and raw is not None and handle is not None and handle.ptr == raw(self._device_id):
            current = res.torch  # the memoised current stream: CallerStream.resolve, inlined (hot)
        else:
            handle, current = res.resolve(stream)
        if alpha is not None or beta is not None or c is not None or not self._alpha_is_one:
            self._set_scalars(alpha, beta)  # (else alpha is 1 already and there is no beta)
        slots = self._slots
        if ptrs is not None and self._pointer_ok:
            slots["a"].ptr, slots["b"].ptr = ptrs[0], ptrs[1]
            if c is not None:
                slots["c"].ptr = ptrs[2]
            direct = self._direct
            if direct is None or not current:
                return self._launch(handle, None, False, current)
            empty, shape, strides, dtype, device = direct  # as in execute (hot)
            out = empty(shape, strides, dtype=dtype, device=device)
            self._launcher.run(handle, ptrs[0], ptrs[1], ptrs[2] or 0, out.data_ptr())  # type: ignore
            return out
        slots["a"].replace(wrap(a, "operand 'a'"), handle)
        slots["b"].replace(wrap(b, "operand 'b'"), handle)
        if c is not None:
            slots["c"].replace(wrap(c, "operand 'c'"), handle)
        if extras is not None:
            scales, epilog_inputs = extras
            self._reset({}, None, None, scales, epilog_inputs, handle, checked=False)
        try:
            return self._launch(handle, None, False, current)
        finally:
            self._forget()

    def _set_scalars(self, alpha: Any, beta: Any) -> None:
        if alpha is None and beta is None and not self._spec.has_c:
            if not self._alpha_is_one:
                self._alpha[0] = 1
                self._alpha_is_one = True
        else:
            has_c, scale_dtype = self._spec.has_c, self._spec.types.scale_dtype
            self._commit_scalars(*check_alpha_beta(alpha, beta, has_c=has_c, scale_dtype=scale_dtype))

    def _commit_scalars(self, alpha: Any, beta: Any) -> None:
        """Store checked host scalars: the one writer of ``_alpha`` / ``_beta`` (:meth:`_reset` calls it too)."""
        self._alpha[0], self._beta[0] = alpha, beta
        self._alpha_is_one = False

    def _forget(self) -> None:
        """Drop the caller's tensors after a stateless call (device copies of host tensors stay)."""
        for slot in self._slots.values():
            slot.user = None
            if not slot.host:
                slot.device = None
        if self._plan is not None and self._plan.epilog_slots:
            for slot in self._plan.epilog_slots.values():
                slot.user = None
                if not slot.host:
                    slot.device = None

    # ------------------------------------------------------------------ lifetime
    def free(self) -> None:
        """Release the workspace, the cuBLASLt objects and the operands; idempotent."""
        if self._lifecycle.bits & _FREED:
            return
        if self._owns_workspace:
            self._workspace.release()
        for launch in (self._launcher, self._retired):
            if launch is not None:
                launch.close()  # a launch held elsewhere (an AddressRun's) refuses from now on
        for plan in (self._plan, self._retired.plan if self._retired is not None else None):
            if plan is not None:
                plan.close()
        self._plan = self._retired = self._launcher = self._staged = self._direct = None
        self._inplace_direct = False
        self._drop_hit()
        for slot in self._slots.values():
            slot.release()
        self._lifecycle.mark_freed()

    def __repr__(self) -> str:
        t = self._spec.types
        return (
            f"Matmul({t.a_dtype} @ {t.b_dtype} -> {t.d_dtype}, m={self._spec.mm.m}, n={self._spec.mm.n}, "
            f"k={self._spec.mm.k}, batch={self._spec.mm.batch.shape}, state={self._lifecycle.state.name})"
        )
