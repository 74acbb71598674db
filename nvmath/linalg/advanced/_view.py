"""A read-only snapshot of what a :class:`~._planner.Matmul` computes: :class:`MatmulView`.

Code that drives a planner from outside (the :mod:`nvmath.torch` autograd glue) reads the planned
epilog, the scalars and the caller's tensors here instead of the planner's private fields.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

__all__ = ["MatmulView", "view_of"]


@dataclass(frozen=True)
class MatmulView:
    """What a :class:`~nvmath.linalg.advanced.Matmul` computes at the moment it is taken.

    Attributes:
        epilog: the planned :class:`~nvmath.linalg.advanced.MatmulEpilog` (``DEFAULT`` without one),
            or ``None`` before ``plan()``.
        alpha: the scalar ``alpha`` (a Python number).
        beta: the scalar ``beta``, or ``None`` when the planner has no ``c``.
        operands: ``"a"``, ``"b"`` (and ``"c"`` when given) -> the caller's tensor, or ``None`` after
            ``release_operands()``.
        epilog_inputs: epilog input name -> the caller's tensor (or ``None`` once released); empty
            before ``plan()`` or without epilog inputs.
        quantization_scales: the names of the quantization scales given (empty without FP8 scales).
    """

    epilog: Any
    alpha: Any
    beta: Any
    operands: Mapping[str, Any]
    epilog_inputs: Mapping[str, Any]
    quantization_scales: tuple[str, ...]


def _tensors(slots: Mapping[str, Any]) -> Mapping[str, Any]:
    return MappingProxyType({n: s.user.tensor if s.user is not None else None for n, s in slots.items()})


def view_of(
    slots: Mapping[str, Any], plan: Any, alpha: Any, beta: Any, has_c: bool, scales: Mapping[str, Any]
) -> MatmulView:
    """The :class:`MatmulView` of a planner's operand slots, installed plan (or ``None``), scalar
    buffers (length-1 arrays) and quantization-scale slots."""
    return MatmulView(
        epilog=plan.epilog.epilog if plan is not None else None,
        alpha=alpha[0].item(),
        beta=beta[0].item() if has_c else None,
        operands=_tensors(slots),
        epilog_inputs=_tensors(plan.epilog_slots) if plan is not None else MappingProxyType({}),
        quantization_scales=tuple(scales),
    )
