"""The one cheap question a planner asks before running: does this call belong to :mod:`nvmath.torch`?

A call belongs there when a torch operand requires grad (with grad mode on) or when ``torch.compile``
is tracing it; :mod:`nvmath.torch` then builds the autograd graph or emits its custom op. The check
never imports torch: without torch loaded it is one dict lookup.
"""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["execute_wants_torch", "route", "wants_torch"]


def wants_torch(*objs: Any) -> bool:
    """Whether a torch tensor among ``objs`` (tensors, ``None`` or a dict of tensors) needs nvmath.torch."""
    torch = sys.modules.get("torch")
    if torch is None:
        return False
    tensor = torch.Tensor
    found = False
    for obj in objs:
        if isinstance(obj, dict):
            if wants_torch(*obj.values()):
                return True
        elif isinstance(obj, (list, tuple)):  # explicit batches of the generic matmul
            if wants_torch(*obj):
                return True
        elif isinstance(obj, tensor):
            found = True
            if obj.requires_grad and torch.is_grad_enabled():
                return True
    return found and torch.compiler.is_compiling()


def route(api: str, *args: Any, **kwargs: Any) -> Any:
    """Run ``api`` (``"advanced.matmul"``, ``"advanced.execute"``, ``"generic.matmul"``) in nvmath.torch."""
    from nvmath.torch import _dispatch

    return _dispatch.ROUTES[api](*args, **kwargs)


def execute_wants_torch(planner: Any) -> bool:
    """Whether a planner's operands (torch tensors) require grad with grad mode on (for ``execute``)."""
    torch = sys.modules.get("torch")
    if torch is None or not torch.is_grad_enabled():
        return False
    tensor = torch.Tensor
    slots = list(planner._slots.values())
    if planner._plan is not None:
        slots += planner._plan.epilog_slots.values()
    for slot in slots:
        t = getattr(slot.user, "tensor", None)
        if isinstance(t, tensor) and t.requires_grad:
            return True
    return False
