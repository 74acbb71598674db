"""``Matmul``'s operand methods: :class:`OperandResets` (``reset_operands``, its unchecked twin and
``release_operands``).

The checks are cheap (shape, strides, dtype, conjugation, package, device and pointer alignment
against what the plan was built for); GPU tensors are swapped by pointer, host tensors copied into
the device copies, and descriptor pointers (bias, aux, scales) re-pointed. Every replacement is
validated before any is committed, so a failing call changes nothing.

A replacement of another layout is refused (``reset_operands``): the installed launch was built for
the planned layouts, and only a new ``Matmul`` (or ``plan()`` on one) builds another; a launch is never
re-pointed at a layout it was not planned for.

:class:`OperandResets` is a mixin of :class:`~._planner.Matmul` (the one class it serves): its methods
work on the planner's own state, whose members the planner's constructor and ``plan()`` set.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from nvmath._internal.options import check_or_create_options
from nvmath._internal.state import _RELEASED, Lifecycle, PlannerState, requires  # _RELEASED: its bit
from nvmath._internal.streams import StreamHandle
from nvmath._internal.tensors import wrap
from nvmath.linalg.advanced._operands import check_same_place, wrap_epilog_inputs
from nvmath.linalg.advanced._options import MatmulQuantizationScales
from nvmath.linalg.advanced._traits import check_alpha_beta

if TYPE_CHECKING:
    from nvmath.linalg.advanced._operands import ScaleSlot, Slot
    from nvmath.linalg.advanced._plan import Plan
    from nvmath.linalg.advanced._spec import Spec

__all__ = ["OperandResets"]

_NAMES = {n: f"operand {n!r}" for n in "abc"}


class OperandResets:
    """The operand methods of :class:`~._planner.Matmul` (a mixin; see the module notes)."""

    __slots__ = ()

    # the planner's state these methods use (set by Matmul.__init__ and Matmul.plan)
    _spec: Spec
    _slots: dict[str, Slot]
    _scales: dict[str, ScaleSlot]
    _plan: Plan | None
    _lifecycle: Lifecycle
    _alpha: np.ndarray  # the host scalars cuBLASLt reads (length-1 views)
    _beta: np.ndarray

    if TYPE_CHECKING:  # the planner's own methods

        def _get_stream(self, stream: Any) -> StreamHandle: ...

        def _commit_scalars(self, alpha: Any, beta: Any) -> None: ...

    # ------------------------------------------------------------------ public methods
    @requires(PlannerState.CREATED, PlannerState.PLANNED)
    def reset_operands(
        self, *, a: Any = None, b: Any = None, c: Any = None, alpha: Any = None, beta: Any = None,
        quantization_scales: Any = None, epilog_inputs: Mapping[str, Any] | None = None, stream: Any = None,
    ) -> None:  # fmt: skip
        """Replace operands (same shapes, strides, dtypes, package, device, alignment) without re-planning.

        GPU tensors are swapped by pointer; host tensors are copied into the device copies. After
        :meth:`release_operands` every operand (and scale and epilog input) must be given.

        Raises:
            ValueError, TypeError: a replacement that does not match the planned one (nothing is
                replaced then).
        """
        self._reset({"a": a, "b": b, "c": c}, alpha, beta, quantization_scales, epilog_inputs, stream,
                    checked=True)  # fmt: skip

    @requires(PlannerState.CREATED, PlannerState.PLANNED)
    def reset_operands_unchecked(
        self, *, a: Any = None, b: Any = None, c: Any = None, alpha: Any = None, beta: Any = None,
        quantization_scales: Any = None, epilog_inputs: Mapping[str, Any] | None = None, stream: Any = None,
    ) -> None:  # fmt: skip
        """Like :meth:`reset_operands` without the layout and alignment checks (the caller guarantees them)."""
        self._reset({"a": a, "b": b, "c": c}, alpha, beta, quantization_scales, epilog_inputs, stream,
                    checked=False)  # fmt: skip

    @requires(PlannerState.CREATED, PlannerState.PLANNED)
    def release_operands(self) -> None:
        """Drop every reference to the operands (and the device copies of host operands).

        ``execute()`` then needs :meth:`reset_operands` with every operand first.
        """
        for slot in self._slots.values():
            slot.release()
        for scale in self._scales.values():  # FP8 scale tensors too (numbers are the object's own)
            scale.release()
        if self._plan is not None:
            for slot in self._plan.epilog_slots.values():
                slot.release()
            for scale in self._plan.epilog_scales.values():
                scale.release()
        self._lifecycle.mark_operands_released()

    # ------------------------------------------------------------------ the sequence
    def _reset(
        self, ops: dict, alpha: Any, beta: Any, scales: Any, epilog_inputs: Any, stream: Any, *,
        checked: bool,
    ) -> None:  # fmt: skip
        """Validate every replacement first, then commit them all (a failing call changes nothing).

        Args:
            ops: ``{"a": ..., "b": ..., "c": ...}`` (``None``: keep).
            alpha, beta, scales, epilog_inputs: new values (``None``: keep).
            stream: orders copies of host tensors and scale uploads.
            checked: check layouts and alignments (``reset_operands``) or trust the caller (``_unchecked``).
        """
        spec = self._spec
        if (
            alpha is None and beta is None and scales is None and epilog_inputs is None and not spec.host
            and not self._lifecycle.bits & _RELEASED and self._swap_gpu_operands(ops, checked)
        ):  # fmt: skip
            return
        given = {n: v for n, v in ops.items() if v is not None}
        if not given and alpha is None and beta is None and scales is None and epilog_inputs is None:
            raise ValueError(
                "reset_operands() needs at least one of a, b, c, alpha, beta, quantization_scales, epilog_inputs"
            )
        if "c" in given and not spec.has_c:
            raise ValueError("c was not given when this Matmul was created; create a new Matmul to add c")
        if self._lifecycle.operands_released:
            self._require_all(given, scales, epilog_inputs)
        wrapped = {n: wrap(v, f"operand {n!r}") for n, v in given.items()}
        for n, w in wrapped.items():
            check_same_place(f"operand {n!r}", w, spec.package, spec.user_device)
            if checked:
                self._slots[n].check(w)
        scalars = self._new_scalars(alpha, beta) if alpha is not None or beta is not None else None
        scale_values = self._check_scales(scales)
        ep_tensors, ep_scales = self._check_epilog_inputs(epilog_inputs, checked)
        copies = spec.host or scale_values or ep_tensors or ep_scales
        handle = self._get_stream(stream) if copies else None  # GPU pointer swaps need no stream
        for n, w in wrapped.items():  # commit: nothing below raises for validated input
            self._slots[n].replace(w, handle)
        if scalars is not None:
            self._commit_scalars(*scalars)
        for n, value in scale_values.items():
            self._scales[n].replace(value, spec.package, spec.user_device, handle)
            self._repoint("scale:" + n, self._scales[n].ptr)
        self._replace_epilog_inputs(ep_tensors, ep_scales, handle)
        self._lifecycle.mark_operands_reset()

    def _swap_gpu_operands(self, ops: Mapping[str, Any], checked: bool) -> bool:
        """The common reset: GPU operands only, swapped by pointer after the same checks as :meth:`_reset`.

        Returns ``False`` (nothing done) when no operand is given, leaving the error to :meth:`_reset`.
        """
        spec = self._spec
        if ops.get("c") is not None and not spec.has_c:
            raise ValueError("c was not given when this Matmul was created; create a new Matmul to add c")
        slots = self._slots
        package, device = spec.package, spec.user_device
        staged = []
        for n, v in ops.items():
            if v is None:
                continue
            name = _NAMES[n]
            w = wrap(v, name)
            check_same_place(name, w, package, device)
            slot = slots[n]
            if checked:
                slot.check(w)
            staged.append((slot, w))
        if not staged:
            return False
        for slot, w in staged:  # commit: the checks passed for every operand
            slot.device = slot.user = w
            slot.ptr = w.data_ptr
        return True

    # ------------------------------------------------------------------ checks (nothing changes)
    def _require_all(self, given: Mapping[str, Any], scales: Any, epilog_inputs: Any) -> None:
        needed = [n for n in self._slots if n not in given]
        named = set() if scales is None else check_or_create_options(
            MatmulQuantizationScales, scales, "quantization_scales"
        ).given()
        needed += [f"quantization_scales.{n}" for n, s in self._scales.items() if s.released and n not in named]
        plan = self._plan
        if plan is not None and (plan.epilog_slots or plan.epilog_scales) and epilog_inputs is None:
            needed.append("epilog_inputs")
        elif plan is not None and epilog_inputs is not None:
            scales_in = plan.epilog_scales.items()
            needed += [f"epilog_inputs[{n!r}]" for n, s in scales_in if s.released and n not in epilog_inputs]
        if needed:
            raise ValueError(
                f"after release_operands(), reset_operands() needs every operand; missing: {', '.join(needed)}"
            )

    def _new_scalars(self, alpha: Any, beta: Any) -> tuple[Any, Any]:
        spec = self._spec
        alpha = self._alpha[0].item() if alpha is None else alpha
        if not spec.has_c:
            return check_alpha_beta(alpha, beta, has_c=False, scale_dtype=spec.types.scale_dtype)
        beta = self._beta[0].item() if beta is None else beta
        return check_alpha_beta(alpha, beta, has_c=True, scale_dtype=spec.types.scale_dtype)

    def _check_scales(self, scales: Any) -> dict[str, Any]:
        if scales is None:
            return {}
        obj = check_or_create_options(MatmulQuantizationScales, scales, "quantization_scales")
        extra = obj.given() - set(self._scales)
        if extra:
            raise ValueError(
                f"quantization scales {sorted(extra)} were not planned; planned: {sorted(self._scales)}"
            )
        spec = self._spec
        return {n: self._scales[n].check(getattr(obj, n), spec.package, spec.user_device) for n in obj.given()}

    def _check_epilog_inputs(self, epilog_inputs: Any, checked: bool) -> tuple[dict, dict]:
        if epilog_inputs is None:
            return {}, {}
        spec, plan = self._spec, self._plan
        if plan is None:
            raise ValueError("epilog_inputs can only be reset after plan() (they are given to plan())")
        tensors, scales = wrap_epilog_inputs(
            epilog_inputs, spec.package, spec.user_device, tuple(plan.epilog_scales)
        )
        unknown = (set(tensors) - set(plan.epilog_slots)) | (set(scales) - set(plan.epilog_scales))
        if unknown:
            planned = sorted(plan.epilog_slots) + sorted(plan.epilog_scales)
            raise ValueError(f"epilog inputs {sorted(unknown)} were not planned; planned: {planned}")
        if checked:
            for n, t in tensors.items():
                plan.epilog_slots[n].check(t)
        return tensors, scales

    # ------------------------------------------------------------------ commits
    def _replace_epilog_inputs(
        self, tensors: Mapping[str, Any], scales: Mapping[str, Any], handle: StreamHandle | None
    ) -> None:
        plan, spec = self._plan, self._spec
        if plan is None:
            return
        for n, t in tensors.items():
            plan.epilog_slots[n].replace(t, handle)
            self._repoint(n, plan.epilog_slots[n].ptr)
        for n, value in scales.items():
            plan.epilog_scales[n].replace(value, spec.package, spec.user_device, handle)
            self._repoint(n, plan.epilog_scales[n].ptr)

    def _repoint(self, source: str, ptr: int) -> None:
        """Point the descriptor attributes fed by ``source`` (an epilog input or ``"scale:<n>"``) at ``ptr``."""
        if self._plan is not None:
            for attr in self._plan.input_pointers.get(source, ()):
                attr.set(ptr)
