"""``torch.ops.nvmath.grouped_fp8_linear*``: the FP8 :class:`~nvmath.torch.GroupedLinear` as custom
operators, what ``torch.compile(fullgraph=True)`` traces instead of :class:`._grouped_fp8.GroupedFP8Fn`.

* ``nvmath::grouped_fp8_linear(x, weight, bias?, counts, state) -> (y, qxt, inv_x)``
* ``nvmath::grouped_fp8_linear_backward(grad, qxt, inv_x, weight, counts, state, bias_dtype, needs)
  -> (dx, dw, db)``

``counts`` is a ``list[int]`` (a counts tensor is turned into a list before the operator, as the bf16
``nvmath::grouped_linear`` takes it): the graph is specialised on the counts (a new set of counts
re-traces, as for any Python constant). ``qxt`` (the input's transposed FP8 copies of every group, flat)
and ``inv_x`` (the (G,) dequantization scales) are outputs the backward operator takes back; the
weight's FP8 copies are the scaling state's cache (made once per weight version), which the backward
operator reads again from the state.

The scaling state (:class:`~._grouped_fp8_state.GroupedScalingState`) is passed by its registry number
(``state.op_number``, :func:`._fp8_linear.register_state`, shared with the FP8 Linear operators) and
updated in place by the eager code, a side effect the graph does not see -- as for
``nvmath::fp8_linear`` and for the same reason: torch refuses ``register_autograd`` on an operator that
declares mutated arguments (checked with torch 2.13: "Cannot register autograd formula for
non-functional operator"). So the operators are functional to torch; call a layer once per input
within one graph (an optimizing pass could merge two identical calls, one state update instead of two).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from nvmath.torch._fp8_linear import check_device, registered_state

__all__ = ["grouped_fp8_backward_op", "grouped_fp8_compiled", "grouped_fp8_op"]


def _gemms() -> tuple:
    from nvmath.torch._fp8_epilogs import fp8_epilog_gemms
    from nvmath.torch._fp8_linear import fp8_gemm_cache
    from nvmath.torch._grouped_fp8_gemms import grouped_fp8_gemms

    return fp8_gemm_cache, fp8_epilog_gemms, grouped_fp8_gemms


@torch.library.custom_op("nvmath::grouped_fp8_linear", mutates_args=())
def grouped_fp8_op(
    x: Tensor, weight: Tensor, bias: Tensor | None, counts: list[int], state: int
) -> tuple[Tensor, Tensor, Tensor]:
    """The FP8 grouped forward: ``(y, qx.T of every group (flat), 1 / sx (G,))`` (checked operands)."""
    from nvmath.torch._grouped_fp8_kernels import grouped_forward

    st = registered_state(state)
    check_device(st, x.device)  # (the recipe for this device's compute capability, once per device)
    y, saved = grouped_forward(x, weight, bias, list(counts), st, *_gemms())
    qxt, inv_x = saved[0], saved[2]
    return y, qxt, inv_x


@grouped_fp8_op.register_fake
def _grouped_fp8_fake(x, weight, bias, counts, state):
    dtype = registered_state(state).dtype("input")
    return (
        x.new_empty((x.shape[0], weight.shape[1])),
        x.new_empty((x.numel(),), dtype=dtype),
        x.new_empty((weight.shape[0],), dtype=torch.float32),
    )


@torch.library.custom_op("nvmath::grouped_fp8_linear_backward", mutates_args=())
def grouped_fp8_backward_op(
    grad: Tensor, qxt: Tensor, inv_x: Tensor, weight: Tensor, counts: list[int], state: int,
    bias_dtype: torch.dtype | None, needs: list[bool],
) -> tuple[Tensor, Tensor, Tensor]:  # fmt: skip
    """``(dx, dw, db)`` of ``nvmath::grouped_fp8_linear`` (empty tensors for gradients not needed)."""
    from nvmath.torch._grouped_fp8_kernels import grouped_backward, weight_fp8

    st = registered_state(state)
    (_qw, qwt, inv_w), _, _ = weight_fp8(st, weight)  # (the forward's copies: same weight version)
    saved = (qxt, weight.shape[2], inv_x, qwt, inv_w, None)
    gemm, _, lean = _gemms()
    w_meta = (weight.dtype, tuple(weight.shape))
    grads = grouped_backward(grad, saved, w_meta, bias_dtype, list(counts), tuple(needs), st, gemm, lean)
    # (a fresh empty per gradient not needed: an operator's outputs must not alias one another)
    return tuple(t if t is not None else grad.new_empty((0,)) for t in grads)  # type: ignore[return-value]


@grouped_fp8_backward_op.register_fake
def _grouped_fp8_backward_fake(grad, qxt, inv_x, weight, counts, state, bias_dtype, needs):
    return (
        grad.new_empty((grad.shape[0], weight.shape[2])) if needs[0] else grad.new_empty((0,)),
        weight.new_empty(weight.shape) if needs[1] else grad.new_empty((0,)),
        grad.new_empty(weight.shape[:2], dtype=bias_dtype) if needs[2] and bias_dtype is not None
        else grad.new_empty((0,)),
    )  # fmt: skip


def _setup(ctx: Any, inputs: tuple, output: tuple) -> None:
    _x, weight, bias, counts, state = inputs
    _, qxt, inv_x = output
    ctx.save_for_backward(qxt, inv_x, weight)
    ctx.counts, ctx.state = counts, state
    ctx.bias_dtype = None if bias is None else bias.dtype


def _grad(ctx: Any, gy: Tensor, _gq: Tensor, _gi: Tensor) -> tuple:
    qxt, inv_x, weight = ctx.saved_tensors
    needs = [bool(n) for n in ctx.needs_input_grad[:3]]
    dx, dw, db = torch.ops.nvmath.grouped_fp8_linear_backward(
        gy, qxt, inv_x, weight, ctx.counts, ctx.state, ctx.bias_dtype, needs
    )
    has_bias = ctx.bias_dtype is not None
    return (dx if needs[0] else None, dw if needs[1] else None, db if needs[2] and has_bias else None,
            None, None)  # fmt: skip


grouped_fp8_op.register_autograd(_grad, setup_context=_setup)


def grouped_fp8_compiled(
    x: Tensor, weight: Tensor, bias: Tensor | None, counts: list[int], state: Any
) -> Tensor:
    """``x[group g's rows] @ weight[g].T + bias[g]`` in FP8 (``torch.ops.nvmath.grouped_fp8_linear``)."""
    return torch.ops.nvmath.grouped_fp8_linear(x, weight, bias, counts, state.op_number)[0]
