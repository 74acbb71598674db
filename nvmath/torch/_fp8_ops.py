"""``torch.ops.nvmath.fp8_linear`` / ``fp8_linear_backward``: the FP8 Linear layer as custom operators,
what ``torch.compile(fullgraph=True)`` traces instead of :class:`._fp8_linear.FP8LinearFn`.

* ``nvmath::fp8_linear(x, weight, bias?, state, activation) -> (y, qx, inv_x, z)``
* ``nvmath::fp8_linear_backward(grad, qx, inv_x, z, weight, state, activation, bias_dtype, needs)
  -> (dx, dw, db)``
* ``nvmath::fp8_mlp(x, w1, b1?, w2, b2?, state1, state2) -> (y, qxt, inv_x, qht, inv_h, aux)`` and
  ``nvmath::fp8_mlp_backward(...) -> (dx, dw1, db1, dw2, db2)``: the fused MLP block
  (:mod:`._fp8_mlp`), its fused epilogues included.

The layer's scaling state is not a tensor: the operators take it by a registry number (``state``,
made with the state: :func:`._fp8_linear.register_state`) and run the eager code
(:mod:`._fp8_linear`), which updates the state's buffers in place as eagerly (amax histories,
scales, ``found_inf``). To torch the operators are functional: the updates are a side effect the
graph does not see. An optimizing pass could merge two calls of one layer on the same input tensor
in one graph (one state update instead of two); call a layer once per input. An operator that
declared the buffers mutated could not have an autograd formula (torch refuses ``register_autograd``
on mutating operators), and the backward's updates happen outside the forward graph anyway.

The weight's FP8 copies (made once per weight version) stay a cache inside the operator: it runs
outside the traced graph, on every call, so the refresh is decided at run time from the weight's
version counter, as eagerly -- nothing about it is baked into the graph. ``qx`` (FP8) and ``z`` are
outputs the backward operator takes back (the fake kernel gives their shapes and dtypes).

What is not claimed: ``torch.compile(mode="reduce-overhead")`` (cudagraph trees over these
operators). Eager FP8 layers capture under ``torch.cuda.graph`` after a warm-up step (planners made,
kernels compiled; a layer's forward inside a capture always quantizes its weight, so replays see
weight updates): see docs/fp8_training.rst.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from nvmath.torch import _fp8_linear

__all__ = ["fp8_linear_compiled", "fp8_mlp_compiled"]

_state = _fp8_linear.registered_state


@torch.library.custom_op("nvmath::fp8_linear", mutates_args=())
def fp8_linear_op(
    x: Tensor, weight: Tensor, bias: Tensor | None, state: int, activation: str
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """The FP8 Linear forward: ``(y, qx, 1 / sx, z)`` (``z`` empty without an activation)."""
    st = _state(state)
    _fp8_linear.check_device(st, x.device)
    y, qx, inv_x, z = _fp8_linear.linear_forward(
        x, weight, bias, activation or None, st, _fp8_linear.fp8_gemm_cache
    )
    if z is None:
        z = x.new_empty((0,))
    elif z.untyped_storage().data_ptr() == y.untyped_storage().data_ptr():
        z = z.clone()  # (ReLU fused: the output itself; an operator's outputs must not alias)
    return y, qx, inv_x, z


@fp8_linear_op.register_fake
def _fp8_linear_fake(x, weight, bias, state, activation):
    tokens = x.numel() // x.shape[-1]
    y = x.new_empty((*x.shape[:-1], weight.shape[0]))
    qx = x.new_empty((tokens, x.shape[-1]), dtype=_state(state).dtype("input"))
    z = x.new_empty((tokens, weight.shape[0])) if activation else x.new_empty((0,))
    return y, qx, x.new_empty((), dtype=torch.float32), z


@torch.library.custom_op("nvmath::fp8_linear_backward", mutates_args=())
def fp8_linear_backward_op(
    grad: Tensor, qx: Tensor, inv_x: Tensor, z: Tensor, weight: Tensor, state: int, activation: str,
    bias_dtype: torch.dtype | None, needs: list[bool],
) -> tuple[Tensor, Tensor, Tensor]:  # fmt: skip
    """``(dx, dw, db)`` of ``nvmath::fp8_linear`` (empty tensors for gradients not needed)."""
    x_shape = (*grad.shape[:-1], weight.shape[1])
    grads = _fp8_linear.linear_backward(
        grad, qx, inv_x, z if activation else None, weight, activation or None, bias_dtype, tuple(needs),
        _state(state), _fp8_linear.fp8_gemm_cache, x_shape,
    )  # fmt: skip
    # (a fresh empty tensor per gradient not needed: a custom op's outputs may not alias each other)
    return tuple(t if t is not None else grad.new_empty((0,)) for t in grads)  # type: ignore[return-value]


@fp8_linear_backward_op.register_fake
def _fp8_linear_backward_fake(grad, qx, inv_x, z, weight, state, activation, bias_dtype, needs):
    e = lambda: grad.new_empty((0,))  # noqa: E731 (one per output: outputs may not alias)
    return (
        grad.new_empty((*grad.shape[:-1], weight.shape[1])) if needs[0] else e(),
        weight.new_empty(weight.shape) if needs[1] else e(),
        grad.new_empty((weight.shape[0],), dtype=bias_dtype) if needs[2] and bias_dtype is not None else e(),
    )


def _setup(ctx: Any, inputs: tuple, output: tuple) -> None:
    _x, weight, bias, state, activation = inputs
    _, qx, inv_x, z = output
    ctx.save_for_backward(qx, inv_x, z, weight)
    ctx.state, ctx.activation = state, activation
    ctx.bias_dtype = None if bias is None else bias.dtype


def _grad(ctx: Any, gy: Tensor, _gq: Tensor, _gi: Tensor, _gz: Tensor) -> tuple:
    qx, inv_x, z, weight = ctx.saved_tensors
    needs = [bool(n) for n in ctx.needs_input_grad[:3]]
    dx, dw, db = torch.ops.nvmath.fp8_linear_backward(
        gy, qx, inv_x, z, weight, ctx.state, ctx.activation, ctx.bias_dtype, needs
    )
    has_bias = ctx.bias_dtype is not None
    return (dx if needs[0] else None, dw if needs[1] else None, db if needs[2] and has_bias else None,
            None, None)  # fmt: skip


fp8_linear_op.register_autograd(_grad, setup_context=_setup)


def fp8_linear_compiled(
    x: Tensor, weight: Tensor, bias: Tensor | None, activation: str | None, state: Any
) -> Tensor:
    """``activation(x @ weight.T + bias)`` in FP8 through ``torch.ops.nvmath.fp8_linear``."""
    return torch.ops.nvmath.fp8_linear(x, weight, bias, state.op_number, activation or "")[0]


# ---------------------------------------------------------------- the fused MLP block
@torch.library.custom_op("nvmath::fp8_mlp", mutates_args=())
def fp8_mlp_op(
    x: Tensor, w1: Tensor, b1: Tensor | None, w2: Tensor, b2: Tensor | None, state1: int, state2: int
) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor, Tensor]:
    """The fused FP8 MLP block's forward: ``(y, qx.T, 1 / sx, qh.T, 1 / sh, aux)`` (:mod:`._fp8_mlp`)."""
    from nvmath.torch import _fp8_epilogs, _fp8_mlp

    _fp8_linear.check_device(_state(state1), x.device)
    _fp8_linear.check_device(_state(state2), x.device)
    return _fp8_mlp.mlp_forward(
        x, w1, b1, w2, b2, _state(state1), _state(state2), _fp8_linear.fp8_gemm_cache,
        _fp8_epilogs.fp8_epilog_gemms, aux_dtype=_fp8_mlp.saved_aux_dtype(x.dtype, _state(state2)),
    )  # fmt: skip


@fp8_mlp_op.register_fake
def _fp8_mlp_fake(x, w1, b1, w2, b2, state1, state2):
    from nvmath.torch import _fp8_mlp

    tokens, hidden = x.numel() // x.shape[-1], w1.shape[0]
    f32 = x.new_empty((), dtype=torch.float32)
    return (
        x.new_empty((*x.shape[:-1], w2.shape[0])),
        x.new_empty((x.shape[-1], tokens), dtype=_state(state1).dtype("input")),  # (qx.T)
        f32,
        x.new_empty((hidden, tokens), dtype=_state(state2).dtype("input")),  # (qh.T)
        f32.clone(),
        x.new_empty((tokens, hidden), dtype=_fp8_mlp.saved_aux_dtype(x.dtype, _state(state2))).mT,
    )


@torch.library.custom_op("nvmath::fp8_mlp_backward", mutates_args=())
def fp8_mlp_backward_op(
    grad: Tensor, qxt: Tensor, inv_x: Tensor, qht: Tensor, inv_h: Tensor, aux: Tensor, w1: Tensor, w2: Tensor,
    state1: int, state2: int, b1_dtype: torch.dtype | None, b2_dtype: torch.dtype | None, needs: list[bool],
) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:  # fmt: skip
    """``(dx, dw1, db1, dw2, db2)`` of ``nvmath::fp8_mlp`` (empty tensors for gradients not needed)."""
    from nvmath.torch import _fp8_epilogs, _fp8_mlp

    x_shape = (*grad.shape[:-1], w1.shape[1])
    grads = _fp8_mlp.mlp_backward(
        grad, qxt, inv_x, qht, inv_h, aux, w1, w2, (b1_dtype, b2_dtype), tuple(needs), _state(state1),
        _state(state2), _fp8_linear.fp8_gemm_cache, _fp8_epilogs.fp8_epilog_gemms, x_shape,
    )  # fmt: skip
    # (a fresh empty tensor per gradient not needed: a custom op's outputs may not alias each other)
    return tuple(t if t is not None else grad.new_empty((0,)) for t in grads)  # type: ignore[return-value]


@fp8_mlp_backward_op.register_fake
def _fp8_mlp_backward_fake(
    grad, qxt, inv_x, qht, inv_h, aux, w1, w2, state1, state2, b1_dtype, b2_dtype, needs
):
    e = lambda: grad.new_empty((0,))  # noqa: E731 (one per output: outputs may not alias)
    return (
        grad.new_empty((*grad.shape[:-1], w1.shape[1])) if needs[0] else e(),
        w1.new_empty(w1.shape) if needs[1] else e(),
        grad.new_empty((w1.shape[0],), dtype=b1_dtype) if needs[2] and b1_dtype is not None else e(),
        w2.new_empty(w2.shape) if needs[3] else e(),
        grad.new_empty((w2.shape[0],), dtype=b2_dtype) if needs[4] and b2_dtype is not None else e(),
    )


def _mlp_setup(ctx: Any, inputs: tuple, output: tuple) -> None:
    _x, w1, b1, w2, b2, state1, state2 = inputs
    ctx.save_for_backward(*output[1:], w1, w2)
    ctx.states = (state1, state2)
    ctx.b_dtypes = (None if b1 is None else b1.dtype, None if b2 is None else b2.dtype)


def _mlp_grad(ctx: Any, gy: Tensor, *_unused: Tensor) -> tuple:
    needs = [bool(n) for n in ctx.needs_input_grad[:5]]
    grads = torch.ops.nvmath.fp8_mlp_backward(gy, *ctx.saved_tensors, *ctx.states, *ctx.b_dtypes, needs)
    has = (True, True, ctx.b_dtypes[0] is not None, True, ctx.b_dtypes[1] is not None)
    return (*(t if n and h else None for t, n, h in zip(grads, needs, has)), None, None)


fp8_mlp_op.register_autograd(_mlp_grad, setup_context=_mlp_setup)


def fp8_mlp_compiled(
    x: Tensor, w1: Tensor, b1: Tensor | None, w2: Tensor, b2: Tensor | None, s1: Any, s2: Any
) -> Tensor:
    """The fused FP8 MLP block through ``torch.ops.nvmath.fp8_mlp``."""
    return torch.ops.nvmath.fp8_mlp(x, w1, b1, w2, b2, s1.op_number, s2.op_number)[0]
