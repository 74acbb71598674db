"""``Matmul.reset_operands()``: validate replacement operands, scalars, scales and epilog inputs, then swap.

The checks are cheap (shape, strides, dtype, conjugation, package, device and pointer alignment
against what the plan was built for); GPU tensors are swapped by pointer, host tensors copied into
the device copies, and descriptor pointers (bias, aux, scales) re-pointed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

import numpy as np

from nvmath._internal.options import check_or_create_options
from nvmath._internal.state import _RELEASED, Lifecycle  # _RELEASED: the operands-released bit
from nvmath._internal.streams import StreamHandle
from nvmath._internal.tensors import wrap
from nvmath.linalg.advanced._operands import check_same_place, wrap_epilog_inputs
from nvmath.linalg.advanced._options import MatmulQuantizationScales
from nvmath.linalg.advanced._traits import check_alpha_beta

__all__ = ["Resettable", "repoint", "reset"]


class Resettable(Protocol):
    """What :func:`reset` reads of a :class:`~._planner.Matmul`; it writes none of these members itself
    (the planner's own methods, and the slots' and lifecycle's, change them)."""

    _spec: Any  # the planner's _spec.Spec
    _slots: dict[str, Any]  # operand name -> _operands.Slot
    _scales: dict[str, Any]  # scale name -> _operands.ScaleSlot
    _plan: Any  # the installed _plan.Plan, or None before plan()
    _lifecycle: Lifecycle
    _alpha: np.ndarray  # the host scalars cuBLASLt reads (length-1 views)
    _beta: np.ndarray

    def _get_stream(self, stream: Any) -> StreamHandle: ...

    def _commit_scalars(self, alpha: Any, beta: Any) -> None: ...


def reset(
    mm: Resettable, ops: dict, alpha: Any, beta: Any, scales: Any, epilog_inputs: Any, stream: Any, *,
    checked: bool,
) -> None:
    """Validate every replacement first, then commit them all (a failing call changes nothing).

    Args:
        mm: the :class:`~._planner.Matmul`.
        ops: ``{"a": ..., "b": ..., "c": ...}`` (``None``: keep).
        alpha, beta, scales, epilog_inputs: new values (``None``: keep).
        stream: orders copies of host tensors and scale uploads.
        checked: check layouts and alignments (``reset_operands``) or trust the caller (``_unchecked``).
    """
    spec = mm._spec
    if (
        alpha is None and beta is None and scales is None and epilog_inputs is None and not spec.host
        and not mm._lifecycle.bits & _RELEASED and _swap_gpu_operands(mm, spec, ops, checked)
    ):  # fmt: skip
        return
    given = {n: v for n, v in ops.items() if v is not None}
    if not given and alpha is None and beta is None and scales is None and epilog_inputs is None:
        raise ValueError(
            "reset_operands() needs at least one of a, b, c, alpha, beta, quantization_scales, epilog_inputs"
        )
    if "c" in given and not mm._spec.has_c:
        raise ValueError("c was not given when this Matmul was created; create a new Matmul to add c")
    if mm._lifecycle.operands_released:
        _require_all(mm, given, scales, epilog_inputs)
    wrapped = {n: wrap(v, f"operand {n!r}") for n, v in given.items()}
    for n, w in wrapped.items():
        check_same_place(f"operand {n!r}", w, spec.package, spec.user_device)
        if checked:
            mm._slots[n].check(w)
    scalars = _new_scalars(mm, alpha, beta) if alpha is not None or beta is not None else None
    scale_values = _check_scales(mm, scales)
    ep_tensors, ep_scales = _check_epilog_inputs(mm, epilog_inputs, checked)
    copies = spec.host or scale_values or ep_tensors or ep_scales
    handle = mm._get_stream(stream) if copies else None  # GPU pointer swaps need no stream
    for n, w in wrapped.items():  # commit: nothing below raises for validated input
        mm._slots[n].replace(w, handle)
    if scalars is not None:
        mm._commit_scalars(*scalars)
    for n, value in scale_values.items():
        mm._scales[n].replace(value, spec.package, spec.user_device, handle)
        repoint(mm, "scale:" + n, mm._scales[n].ptr)
    _replace_epilog_inputs(mm, ep_tensors, ep_scales, handle)
    mm._lifecycle.mark_operands_reset()


_NAMES = {n: f"operand {n!r}" for n in "abc"}


def _swap_gpu_operands(mm: Resettable, spec: Any, ops: Mapping[str, Any], checked: bool) -> bool:
    """The common reset: GPU operands only, swapped by pointer after the same checks as :func:`reset`.

    Returns ``False`` (nothing done) when no operand is given, leaving the error to :func:`reset`.
    """
    if ops.get("c") is not None and not spec.has_c:
        raise ValueError("c was not given when this Matmul was created; create a new Matmul to add c")
    slots = mm._slots
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


def _require_all(mm: Resettable, given: Mapping[str, Any], scales: Any, epilog_inputs: Any) -> None:
    needed = [n for n in mm._slots if n not in given]
    named = set() if scales is None else check_or_create_options(
        MatmulQuantizationScales, scales, "quantization_scales"
    ).given()
    needed += [f"quantization_scales.{n}" for n, s in mm._scales.items() if s.released and n not in named]
    if mm._plan is not None and (mm._plan.epilog_slots or mm._plan.epilog_scales) and epilog_inputs is None:
        needed.append("epilog_inputs")
    elif mm._plan is not None and epilog_inputs is not None:
        scales_in = mm._plan.epilog_scales.items()
        needed += [f"epilog_inputs[{n!r}]" for n, s in scales_in if s.released and n not in epilog_inputs]
    if needed:
        raise ValueError(
            f"after release_operands(), reset_operands() needs every operand; missing: {', '.join(needed)}"
        )


def _new_scalars(mm: Resettable, alpha: Any, beta: Any) -> tuple[Any, Any]:
    alpha = mm._alpha[0].item() if alpha is None else alpha
    if not mm._spec.has_c:
        return check_alpha_beta(alpha, beta, has_c=False, scale_dtype=mm._spec.types.scale_dtype)
    beta = mm._beta[0].item() if beta is None else beta
    return check_alpha_beta(alpha, beta, has_c=True, scale_dtype=mm._spec.types.scale_dtype)


def _check_scales(mm: Resettable, scales: Any) -> dict[str, Any]:
    if scales is None:
        return {}
    obj = check_or_create_options(MatmulQuantizationScales, scales, "quantization_scales")
    extra = obj.given() - set(mm._scales)
    if extra:
        raise ValueError(
            f"quantization scales {sorted(extra)} were not planned; planned: {sorted(mm._scales)}"
        )
    spec = mm._spec
    return {n: mm._scales[n].check(getattr(obj, n), spec.package, spec.user_device) for n in obj.given()}


def _check_epilog_inputs(mm: Resettable, epilog_inputs: Any, checked: bool) -> tuple[dict, dict]:
    if epilog_inputs is None:
        return {}, {}
    if mm._plan is None:
        raise ValueError("epilog_inputs can only be reset after plan() (they are given to plan())")
    spec, plan = mm._spec, mm._plan
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


def _replace_epilog_inputs(
    mm: Resettable, tensors: Mapping[str, Any], scales: Mapping[str, Any], handle: StreamHandle
) -> None:
    plan, spec = mm._plan, mm._spec
    if plan is None:
        return
    for n, t in tensors.items():
        plan.epilog_slots[n].replace(t, handle)
        repoint(mm, n, plan.epilog_slots[n].ptr)
    for n, value in scales.items():
        plan.epilog_scales[n].replace(value, spec.package, spec.user_device, handle)
        repoint(mm, n, plan.epilog_scales[n].ptr)


def repoint(mm: Resettable, source: str, ptr: int) -> None:
    """Point the descriptor attributes fed by ``source`` (an epilog input or ``"scale:<n>"``) at ``ptr``."""
    if mm._plan is not None:
        for attr in mm._plan.input_pointers.get(source, ()):
            attr.set(ptr)
