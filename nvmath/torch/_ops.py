"""The ``torch.ops.nvmath.*`` custom operators: what ``torch.compile`` sees instead of nvmath's Python.

Each operator has a fake kernel (shapes, dtypes and strides without running anything) and a registered
autograd formula whose backward is again made of these operators, so a model calling nvmath traces
into one graph (``fullgraph=True``) and its backward graph too. The eager path does not go through
here (see :mod:`._functions`): the dispatcher costs microseconds per call.

Operators (``activation`` is ``""``, ``"relu"`` or ``"gelu"``; ``keep``: save what the backward needs):

* ``nvmath::linear(x, weight, bias?, activation, keep) -> (y, aux)``
* ``nvmath::linear_backward(grad, x, weight, y, aux, activation, has_bias, needs) -> (dx, dw, db)``
* ``nvmath::mlp(x, w1, b1?, w2, b2?, activation, keep) -> (y, hidden, aux)``
* ``nvmath::mlp_backward(grad, x, w1, w2, hidden, aux, activation, has_b1, has_b2, needs) -> 5 grads``
* ``nvmath::matmul(a, b, c?, bias?, epilog, alpha, beta) -> (result, z)`` (the advanced matmul; ``z``:
  the pre-activation with a GELU_AUX epilog, else empty)
* ``nvmath::generic_matmul(a, b, c?, alpha, beta) -> result`` (``nvmath.linalg.matmul``)

Gradients not needed come back as empty tensors (an operator returns tensors, never ``None``).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from nvmath.torch import _kernels
from nvmath.torch._grads import matmul_backward, preactivation_of
from nvmath.torch._planners import compiled_cache
from nvmath.torch._rules import rule_for

__all__ = ["generic_matmul_op", "linear", "linear_op", "matmul_op", "mlp", "mlp_op"]


def _round_up(x: Any, q: int) -> Any:
    return -(-x // q) * q


def _act(activation: str) -> str | None:
    return activation or None


def _gelu_aux_like(x: Tensor, n: Any, m: Any, *, trimmed: bool = False) -> Tensor:
    rows = _round_up(n, 8)
    return torch.empty_strided((n if trimmed else rows, m), (1, rows), dtype=x.dtype, device=x.device)


def _tokens(x: Tensor) -> Any:
    return x.numel() // x.shape[-1] if x.shape[-1] else 0


# ---------------------------------------------------------------- linear
@torch.library.custom_op("nvmath::linear", mutates_args=())
def linear_op(
    x: Tensor, weight: Tensor, bias: Tensor | None, activation: str, keep: bool
) -> tuple[Tensor, Tensor]:
    """``act(x @ weight.T + bias)`` and the GELU pre-activation when ``keep`` (else an empty tensor)."""
    y, aux = _kernels.linear_forward(compiled_cache, x, weight, bias, _act(activation), keep)
    return y, aux


@linear_op.register_fake
def _linear_fake(
    x: Tensor, weight: Tensor, bias: Tensor | None, activation: str, keep: bool
) -> tuple[Tensor, Tensor]:
    y = x.new_empty((*x.shape[:-1], weight.shape[0]))
    if activation == "gelu" and keep:
        return y, _gelu_aux_like(x, weight.shape[0], _tokens(x), trimmed=True)
    return y, x.new_empty((0,))


@torch.library.custom_op("nvmath::linear_backward", mutates_args=())
def linear_backward_op(
    grad: Tensor, x: Tensor, weight: Tensor, y: Tensor, aux: Tensor, activation: str, has_bias: bool,
    needs: list[bool],
) -> tuple[Tensor, Tensor, Tensor]:  # fmt: skip
    """``(dx, dw, db)`` of ``nvmath::linear`` (empty tensors for gradients not needed)."""
    grads = _kernels.linear_backward(
        compiled_cache, grad, x, weight, y, aux, _act(activation), has_bias, tuple(needs)
    )
    return tuple(g if g is not None else x.new_empty((0,)) for g in grads)  # type: ignore[return-value]


@linear_backward_op.register_fake
def _linear_backward_fake(grad, x, weight, y, aux, activation, has_bias, needs):
    e = x.new_empty((0,))
    return (
        x.new_empty(x.shape) if needs[0] else e,
        x.new_empty(weight.shape) if needs[1] else e,
        x.new_empty((weight.shape[0],)) if needs[2] and has_bias else e,
    )


def _linear_setup(ctx: Any, inputs: tuple, output: tuple) -> None:
    x, weight, bias, activation, _ = inputs
    ctx.save_for_backward(x, weight, output[0], output[1])
    ctx.activation, ctx.has_bias = activation, bias is not None


def _linear_grad(ctx: Any, gy: Tensor, _gaux: Tensor) -> tuple:
    x, weight, y, aux = ctx.saved_tensors
    needs = [bool(n) for n in ctx.needs_input_grad[:3]]
    dx, dw, db = torch.ops.nvmath.linear_backward(gy, x, weight, y, aux, ctx.activation, ctx.has_bias, needs)
    return (
        dx if needs[0] else None,
        dw if needs[1] else None,
        db if needs[2] and ctx.has_bias else None,
        None,
        None,
    )


linear_op.register_autograd(_linear_grad, setup_context=_linear_setup)


def linear(x: Tensor, weight: Tensor, bias: Tensor | None, activation: str | None, keep: bool) -> Tensor:
    """``act(x @ weight.T + bias)`` through ``torch.ops.nvmath.linear``."""
    return torch.ops.nvmath.linear(x, weight, bias, activation or "", keep)[0]


# ---------------------------------------------------------------- mlp
@torch.library.custom_op("nvmath::mlp", mutates_args=())
def mlp_op(
    x: Tensor, w1: Tensor, b1: Tensor | None, w2: Tensor, b2: Tensor | None, activation: str, keep: bool
) -> tuple[Tensor, Tensor, Tensor]:
    """``fc2(act(fc1(x)))``, the hidden activation and fc1's aux (empty unless ``keep``)."""
    return _kernels.mlp_forward(compiled_cache, x, w1, b1, w2, b2, activation, keep)


@mlp_op.register_fake
def _mlp_fake(x, w1, b1, w2, b2, activation, keep):
    y = x.new_empty((*x.shape[:-1], w2.shape[0]))
    if not keep:
        return y, x.new_empty((0,)), x.new_empty((0,))
    n, m = w1.shape[0], _tokens(x)
    h = x.new_empty((m, n))
    if activation == "gelu":
        return y, h, _gelu_aux_like(x, n, m)
    return y, h, x.new_empty((0,))  # ReLU's backward reads the hidden activation, no aux


@torch.library.custom_op("nvmath::mlp_backward", mutates_args=())
def mlp_backward_op(
    grad: Tensor, x: Tensor, w1: Tensor, w2: Tensor, hidden: Tensor, aux: Tensor, activation: str, has_b1: bool,
    has_b2: bool, needs: list[bool],
) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:  # fmt: skip
    """The five gradients of ``nvmath::mlp`` (empty tensors for those not needed)."""
    grads = _kernels.mlp_backward(
        compiled_cache, grad, x, w1, w2, hidden, aux, activation, has_b1, has_b2, tuple(needs)
    )
    return tuple(g if g is not None else x.new_empty((0,)) for g in grads)  # type: ignore[return-value]


@mlp_backward_op.register_fake
def _mlp_backward_fake(grad, x, w1, w2, hidden, aux, activation, has_b1, has_b2, needs):
    e = x.new_empty((0,))
    return (
        x.new_empty(x.shape) if needs[0] else e,
        x.new_empty(w1.shape) if needs[1] else e,
        x.new_empty((w1.shape[0],)) if needs[2] and has_b1 else e,
        x.new_empty(w2.shape) if needs[3] else e,
        x.new_empty((w2.shape[0],)) if needs[4] and has_b2 else e,
    )


def _mlp_setup(ctx: Any, inputs: tuple, output: tuple) -> None:
    x, w1, b1, w2, b2, activation, _ = inputs
    ctx.save_for_backward(x, w1, w2, output[1], output[2])
    ctx.activation, ctx.has_b1, ctx.has_b2 = activation, b1 is not None, b2 is not None


def _mlp_grad(ctx: Any, gy: Tensor, _gh: Tensor, _gaux: Tensor) -> tuple:
    x, w1, w2, h, aux = ctx.saved_tensors
    needs = [bool(n) for n in ctx.needs_input_grad[:5]]
    grads = torch.ops.nvmath.mlp_backward(
        gy, x, w1, w2, h, aux, ctx.activation, ctx.has_b1, ctx.has_b2, needs
    )
    has = (True, True, ctx.has_b1, True, ctx.has_b2)
    return (*(g if n and h_ else None for g, n, h_ in zip(grads, needs, has)), None, None)


mlp_op.register_autograd(_mlp_grad, setup_context=_mlp_setup)


def mlp(
    x: Tensor, w1: Tensor, b1: Tensor | None, w2: Tensor, b2: Tensor | None, activation: str, keep: bool
) -> Tensor:
    """``fc2(act(fc1(x)))`` through ``torch.ops.nvmath.mlp``."""
    return torch.ops.nvmath.mlp(x, w1, b1, w2, b2, activation, keep)[0]


# ---------------------------------------------------------------- the advanced matmul
def _matmul_kernel(
    a: Tensor, b: Tensor, c: Tensor | None, bias: Tensor | None, epilog: int, alpha: float, beta: float
) -> Any:
    return compiled_cache.run_general(
        a, b, c, alpha=alpha, beta=beta if c is not None else None, epilog=epilog,
        epilog_inputs={"bias": bias} if bias is not None else None,
    )  # fmt: skip


@torch.library.custom_op("nvmath::matmul", mutates_args=())
def matmul_op(
    a: Tensor, b: Tensor, c: Tensor | None, bias: Tensor | None, epilog: int, alpha: float, beta: float
) -> tuple[Tensor, Tensor]:
    """``epilog(alpha * a @ b + beta * c)`` (bias as the epilog's input) and the GELU aux (else empty)."""
    out = _matmul_kernel(a, b, c, bias, epilog, alpha, beta)
    result, extras = out if isinstance(out, tuple) else (out, {})
    aux = extras.get("gelu_aux")
    if aux is None:
        return result.contiguous(), a.new_empty((0,))
    return result.contiguous(), preactivation_of(aux, a, b, bias, result.shape).contiguous()


def _result_shape(a: Tensor, b: Tensor) -> tuple:
    m = () if a.dim() == 1 else (a.shape[-2],)
    n = () if b.dim() == 1 else (b.shape[-1],)
    batch = torch.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    return (*batch, *m, *n)


@matmul_op.register_fake
def _matmul_fake(a, b, c, bias, epilog, alpha, beta):
    out = a.new_empty(_result_shape(a, b))
    if epilog not in (160, 164):  # GELU_AUX, GELU_AUX_BIAS
        return out, a.new_empty((0,))
    return out, a.new_empty(out.shape)


def _op_mm(x: Tensor, y: Tensor) -> Tensor:
    return torch.ops.nvmath.matmul(x, y, None, None, 1, 1.0, 0.0)[0]


def _matmul_setup(ctx: Any, inputs: tuple, output: tuple) -> None:
    a, b, c, bias, epilog, alpha, beta = inputs
    ctx.save_for_backward(a, b, c, bias, output[0], output[1])
    ctx.act, ctx.alpha, ctx.beta = rule_for(epilog).act, alpha, beta


def _matmul_grad(ctx: Any, g: Tensor, _gaux: Tensor) -> tuple:
    a, b, c, bias, result, aux = ctx.saved_tensors
    needs = tuple(bool(n) for n in ctx.needs_input_grad[:4])
    grads = matmul_backward(_op_mm, g, a, b, c, bias, result, aux, ctx.act, ctx.alpha, ctx.beta, needs)
    return (*grads, None, None, None)


matmul_op.register_autograd(_matmul_grad, setup_context=_matmul_setup)


# ---------------------------------------------------------------- the generic matmul
@torch.library.custom_op("nvmath::generic_matmul", mutates_args=())
def generic_matmul_op(a: Tensor, b: Tensor, c: Tensor | None, alpha: float, beta: float) -> Tensor:
    """``alpha * a @ b + beta * c`` with ``nvmath.linalg.matmul`` (cuBLAS, or the CPU for CPU tensors)."""
    from nvmath.linalg import matmul as generic

    out = generic(a, b, c, alpha=alpha, beta=beta if c is not None else None)
    return out.contiguous()


@generic_matmul_op.register_fake
def _generic_matmul_fake(a, b, c, alpha, beta):
    return a.new_empty(_result_shape(a, b))


def _generic_op_mm(x: Tensor, y: Tensor) -> Tensor:
    return torch.ops.nvmath.generic_matmul(x, y, None, 1.0, 0.0)


def _generic_setup(ctx: Any, inputs: tuple, output: Tensor) -> None:
    a, b, c, alpha, beta = inputs
    ctx.save_for_backward(a, b, c)
    ctx.alpha, ctx.beta = alpha, beta


def _generic_grad(ctx: Any, g: Tensor) -> tuple:
    a, b, c = ctx.saved_tensors
    needs = (*(bool(n) for n in ctx.needs_input_grad[:3]), False)
    grads = matmul_backward(_generic_op_mm, g, a, b, c, None, None, None, None, ctx.alpha, ctx.beta, needs)
    return (*grads[:3], None, None)


generic_matmul_op.register_autograd(_generic_grad, setup_context=_generic_setup)
