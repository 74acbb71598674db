"""``torch.ops.nvmath.grouped_linear*``: what ``torch.compile`` sees of :func:`~nvmath.torch.grouped_linear`.

The per-group products (:mod:`._grouped_runs`) read the tensors' addresses, which a trace does not
have; so under ``torch.compile`` a GPU ``GroupedLinear`` is two custom operators with fake kernels
(shapes only) and a registered autograd formula:

* ``nvmath::grouped_linear(x, weight, bias?, counts) -> y``
* ``nvmath::grouped_linear_backward(grad, x, weight, counts, has_bias, needs) -> (dx, dw, db)``

Gradients not needed come back as empty tensors (an operator returns tensors, never ``None``). CPU
tensors are traced as they run eagerly (a loop of torch matmuls).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from nvmath.torch._grouped_kernels import grouped_backward, grouped_forward

__all__ = ["grouped_linear_backward_op", "grouped_linear_op"]


@torch.library.custom_op("nvmath::grouped_linear", mutates_args=())
def grouped_linear_op(x: Tensor, weight: Tensor, bias: Tensor | None, counts: list[int]) -> Tensor:
    """``x[group g's rows] @ weight[g].T + bias[g]`` (checked operands, ``x`` contiguous)."""
    return grouped_forward(x, weight, bias, list(counts))


@grouped_linear_op.register_fake
def _grouped_linear_fake(x: Tensor, weight: Tensor, bias: Tensor | None, counts: list[int]) -> Tensor:
    return x.new_empty((x.shape[0], weight.shape[1]))


@torch.library.custom_op("nvmath::grouped_linear_backward", mutates_args=())
def grouped_linear_backward_op(
    grad: Tensor, x: Tensor, weight: Tensor, counts: list[int], has_bias: bool, needs: list[bool]
) -> tuple[Tensor, Tensor, Tensor]:
    """``(dx, dw, db)`` of ``nvmath::grouped_linear`` (empty tensors for gradients not needed)."""
    grads = grouped_backward(grad, x, weight, list(counts), has_bias, tuple(needs))
    return tuple(g if g is not None else x.new_empty((0,)) for g in grads)  # type: ignore[return-value]


@grouped_linear_backward_op.register_fake
def _grouped_linear_backward_fake(grad, x, weight, counts, has_bias, needs):
    e = x.new_empty((0,))
    return (
        x.new_empty(x.shape) if needs[0] else e,
        x.new_empty(weight.shape) if needs[1] else e,
        x.new_empty(weight.shape[:2]) if needs[2] and has_bias else e,
    )


def _setup(ctx: Any, inputs: tuple, output: Tensor) -> None:
    x, weight, bias, counts = inputs
    ctx.save_for_backward(x, weight)
    ctx.counts, ctx.has_bias = counts, bias is not None


def _grad(ctx: Any, gy: Tensor) -> tuple:
    x, weight = ctx.saved_tensors
    needs = [bool(n) for n in ctx.needs_input_grad[:3]]
    dx, dw, db = torch.ops.nvmath.grouped_linear_backward(gy, x, weight, ctx.counts, ctx.has_bias, needs)
    return (
        dx if needs[0] else None,
        dw if needs[1] else None,
        db if needs[2] and ctx.has_bias else None,
        None,
    )


grouped_linear_op.register_autograd(_grad, setup_context=_setup)
