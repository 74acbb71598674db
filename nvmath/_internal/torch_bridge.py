"""The one cheap question a planner asks before running: does this call belong to :mod:`nvmath.torch`?

A call belongs there when a torch operand requires grad (with grad mode on) or when ``torch.compile``
is tracing it; :mod:`nvmath.torch` then builds the autograd graph or emits its custom op. The check
never imports torch: without torch loaded it is one dict lookup.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["execute_wants_torch", "register", "route", "wants_torch"]

_PLUGIN = "nvmath.torch"
"""The module that registers the routes (imported on the first routed call)."""

_modules = sys.modules


def wants_torch(a: Any, b: Any, c: Any = None, inputs: Any = None) -> bool:
    """Whether a call on ``a``, ``b``, ``c`` and ``inputs`` (``None``, a dict of tensors, or sequences of
    operands) needs nvmath.torch: a torch tensor requires grad with grad mode on, or torch.compile traces.

    The common cases cost a few attribute reads (numpy operands: two ``isinstance`` checks).
    """
    torch = _modules.get("torch")
    if torch is None:
        return False
    tensor = torch.Tensor
    a_is, b_is = isinstance(a, tensor), isinstance(b, tensor)
    if a_is or b_is:
        if (a_is and a.requires_grad) or (b_is and b.requires_grad):
            return torch.is_grad_enabled() or torch.compiler.is_compiling()
        if c is None and inputs is None:
            return torch.compiler.is_compiling()
    elif c is None and inputs is None and not isinstance(a, (list, tuple)):
        return False
    return _any_torch(torch, (a, b, c, inputs))


def _any_torch(torch: Any, objs: Any) -> bool:
    """:func:`wants_torch` for the general case (``c``, epilog inputs, explicit batches)."""
    found = grad = False
    stack = list(objs)
    while stack:
        obj = stack.pop()
        if isinstance(obj, torch.Tensor):
            found = True
            grad = grad or obj.requires_grad
        elif isinstance(obj, dict):
            stack.extend(obj.values())
        elif isinstance(obj, (list, tuple)):
            stack.extend(obj)
    if not found:
        return False
    return (grad and torch.is_grad_enabled()) or torch.compiler.is_compiling()


_ROUTES: dict[str, Callable[..., Any]] = {}
"""API name -> the nvmath.torch function that runs it; filled by :func:`register` when nvmath.torch loads."""


def register(routes: Mapping[str, Callable[..., Any]]) -> None:
    """Install nvmath.torch's entry points (called once, by ``nvmath.torch`` as it is imported).

    The bridge names no module of nvmath.torch: the planners depend on this small registry, nvmath.torch
    depends on the planners and fills it, so imports run one way.
    """
    _ROUTES.update(routes)


def route(api: str, *args: Any, **kwargs: Any) -> Any:
    """Run ``api`` (``"advanced.matmul"``, ``"advanced.execute"``, ``"generic.matmul"``) in nvmath.torch.

    The first routed call loads the ``nvmath.torch`` plugin by name (it registers its routes on import).
    """
    fn = _ROUTES.get(api)
    if fn is None:
        importlib.import_module(_PLUGIN)
        fn = _ROUTES[api]
    return fn(*args, **kwargs)


def execute_wants_torch(slots: tuple[Any, ...]) -> bool:
    """Whether a planner's tensors require grad with grad mode on (for ``execute``).

    Args:
        slots: the planner's operand and epilog-input slots; each ``slot.user`` is the adapter of the
            caller's tensor (``.tensor``), or ``None`` once released.
    """
    torch = _modules.get("torch")
    if torch is None or not torch.is_grad_enabled():
        return False
    tensor = torch.Tensor
    for slot in slots:
        t = getattr(slot.user, "tensor", None)
        if isinstance(t, tensor) and t.requires_grad:
            return True
    return False
