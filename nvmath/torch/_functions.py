"""Eager autograd: ``torch.autograd.Function`` subclasses that call nvmath directly (no dispatcher).

Under ``torch.compile`` the same computations run as the custom ops of :mod:`._ops` instead; both
share the compute of :mod:`._kernels` and :mod:`._grads`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch
from torch.autograd.function import once_differentiable

from nvmath.torch import _kernels
from nvmath.torch._grads import matmul_backward, preactivation_of
from nvmath.torch._planners import PlannerCache

__all__ = ["LinearFn", "MLPFn", "MatmulFn", "PlainProductFn", "apply_linear", "first_order"]


def first_order(backward: Callable) -> Callable:
    """``once_differentiable``, minus its ``no_grad`` block when grad mode is already off.

    A plain ``.backward()`` (no ``create_graph``) runs the backward with grad mode off, where
    ``once_differentiable`` would only enter and leave ``torch.no_grad()`` around the call (a context
    object and two grad-mode switches per step). With grad mode on (``create_graph=True``) the call
    goes through ``once_differentiable`` unchanged, so a second derivative is still refused.
    """
    guarded = once_differentiable(backward)

    @functools.wraps(backward)
    def wrapper(ctx: Any, *args: Any) -> Any:
        if torch.is_grad_enabled():
            return guarded(ctx, *args)
        return backward(ctx, *args)

    return wrapper


class LinearFn(torch.autograd.Function):
    """``act(x @ w.T + b)``: fused forward, BGRADB-fused weight/bias gradient."""

    @staticmethod
    def forward(ctx: Any, x: Any, w: Any, b: Any, act: str | None, cache: PlannerCache) -> Any:
        y, aux = _kernels.linear_train(cache, x, w, b, act)  # (no empty aux tensor made for nothing)
        ctx.save_for_backward(x, w, y if act == "relu" else None, aux)
        ctx.fixed = (cache, act, b is not None)  # (one attribute set and read, not three)
        return y

    @staticmethod
    def backward(ctx: Any, g: Any) -> Any:
        # first_order's rule without its extra call: grad mode is on only under create_graph=True, where
        # once_differentiable runs this again with grad mode off (and refuses a second derivative)
        if torch.is_grad_enabled():
            return _linear_backward_once(ctx, g)
        x, w, y, aux = ctx.saved_tensors
        cache, act, has_bias = ctx.fixed
        dx, dw, db = _kernels.linear_backward(cache, g, x, w, y, aux, act, has_bias, ctx.needs_input_grad)
        return dx, dw, db, None, None


_linear_backward_once = once_differentiable(LinearFn.backward)


def _always() -> bool:
    return True


# torch's C pieces of Function.apply (a torch without them: every call takes LinearFn.apply)
_unwrap_if_dead = getattr(getattr(torch._C, "_functorch", None), "unwrap_if_dead", None)
_transforms_active = getattr(torch._C, "_are_functorch_transforms_active", None)
if _unwrap_if_dead is None or _transforms_active is None:
    _transforms_active = _always
_apply_linear_fn = super(torch.autograd.Function, LinearFn).apply  # torch's C apply, bound to LinearFn


def apply_linear(x: Any, w: Any, b: Any, act: str | None, cache: PlannerCache) -> Any:
    """``LinearFn.apply(x, w, b, act, cache)`` without the Python layer of ``Function.apply``.

    Outside functorch transforms, ``Function.apply`` of a function without ``setup_context`` unwraps
    the tensors left over from a finished transform and calls torch's C ``apply``: done here for the
    three tensors directly (no generator over every argument, no signature probe), so a training
    step's forward makes one call of ours before the C one. Inside a transform it is
    ``LinearFn.apply`` (which raises there, as for any function without ``setup_context``).
    """
    if _transforms_active():
        return LinearFn.apply(x, w, b, act, cache)
    b = None if b is None else _unwrap_if_dead(b)
    return _apply_linear_fn(_unwrap_if_dead(x), _unwrap_if_dead(w), b, act, cache)


class MLPFn(torch.autograd.Function):
    """``fc2(act(fc1(x)))`` with the activation's backward fused into fc2's input-gradient GEMM."""

    @staticmethod
    def forward(ctx: Any, x: Any, w1: Any, b1: Any, w2: Any, b2: Any, act: str, cache: PlannerCache) -> Any:
        y, h, aux = _kernels.mlp_forward(cache, x, w1, b1, w2, b2, act, True)
        ctx.save_for_backward(x, w1, w2, h, aux)
        ctx.act, ctx.has_b1, ctx.has_b2, ctx.cache = act, b1 is not None, b2 is not None, cache
        return y

    @staticmethod
    @first_order
    def backward(ctx: Any, g: Any) -> Any:
        x, w1, w2, h, aux = ctx.saved_tensors
        grads = _kernels.mlp_backward(
            ctx.cache, g, x, w1, w2, h, aux, ctx.act, ctx.has_b1, ctx.has_b2, tuple(ctx.needs_input_grad[:5])
        )
        return (*grads, None, None)


class MatmulFn(torch.autograd.Function):
    """A differentiable call of nvmath's advanced or generic matmul (or a planner's ``execute``).

    ``run()`` computes the forward with grad mode off (so nvmath's own torch hook stays out of the
    way) and returns what the API returns; ``mm`` multiplies in the backward.
    """

    @staticmethod
    def forward(
        ctx: Any, a: Any, b: Any, c: Any, bias: Any, run: Callable[[], Any], mm: Callable, act: str | None,
        alpha: Any, beta: Any, aux_name: str | None,
    ) -> Any:  # fmt: skip
        out = run()
        result, extras = out if isinstance(out, tuple) else (out, None)
        z = None
        if act == "gelu":
            z = preactivation_of(extras["gelu_aux"], a, b, bias, result.shape)
        ctx.save_for_backward(a, b, c, bias, result if act == "relu" else None, z)
        ctx.mm, ctx.act, ctx.alpha, ctx.beta = mm, act, alpha, beta
        if aux_name is None:
            return result, None
        given = extras[aux_name]
        ctx.mark_non_differentiable(given)
        return result, given

    @staticmethod
    @first_order
    def backward(ctx: Any, g: Any, _g_aux: Any = None) -> Any:
        a, b, c, bias, result, z = ctx.saved_tensors
        grads = matmul_backward(
            ctx.mm, g, a, b, c, bias, result, z, ctx.act, ctx.alpha, ctx.beta, tuple(ctx.needs_input_grad[:4])
        )
        return (*grads, None, None, None, None, None, None)


class PlainProductFn(torch.autograd.Function):
    """``product(a, b)`` of two tensors, nothing else: the generic matmul's common call with grad.

    :class:`MatmulFn` takes ten arguments (``c``, a bias, scalars, closures) that torch's ``apply``
    inspects one by one on every call; a call of two operands and no options needs none of them, so
    this function takes the two tensors and the product function (``mm``: the stateless matmul, the
    same in the forward and the backward), and its context holds nothing more.
    """

    @staticmethod
    def forward(ctx: Any, a: Any, b: Any, mm: Callable) -> Any:
        ctx.save_for_backward(a, b)
        ctx.mm = mm
        return mm(a, b)

    @staticmethod
    @first_order
    def backward(ctx: Any, g: Any) -> Any:
        a, b = ctx.saved_tensors
        needs = ctx.needs_input_grad
        da, db, _, _ = matmul_backward(ctx.mm, g, a, b, None, None, None, None, None, 1.0, None,
                                       (needs[0], needs[1], False, False))  # fmt: skip
        return da, db, None
