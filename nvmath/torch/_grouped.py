"""``nvmath.torch.GroupedLinear``: one Linear layer per group (expert), its tokens grouped by group.

``y[rows of group g] = x[rows of group g] @ weight[g].T + bias[g]``, the rows of group ``g`` being the
``counts[g]`` rows after those of groups ``0..g-1`` -- ``torch._grouped_mm(x, weight.transpose(-2, -1),
offs=counts.cumsum(0))`` plus the bias, where the two overlap.

The products run in :mod:`._grouped_kernels` (per-group cuBLASLt GEMMs into slices of one output, or
one grouped launch per product); under ``torch.compile`` a GPU layer is the custom operators of
:mod:`._grouped_ops`. The counts are read to the host (one synchronisation for a GPU tensor, as
``torch.split`` by a tensor needs): the sizes of the GEMMs are host integers.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch.autograd.function import once_differentiable

from nvmath.torch import _grouped_ops
from nvmath.torch._grouped_checks import check_counts, check_operands
from nvmath.torch._grouped_kernels import grouped_backward, grouped_forward, per_group

__all__ = ["GroupedLinear", "check_counts", "check_operands", "grouped_linear"]

class GroupedLinearFn(torch.autograd.Function):
    """``y_g = x_g @ w[g].T + b[g]`` per group: forward, dgrad and wgrad (see the module notes)."""

    @staticmethod
    def forward(ctx: Any, x: Any, w: Any, b: Any, counts: list[int]) -> Any:
        ctx.save_for_backward(x, w)
        ctx.counts, ctx.has_bias = counts, b is not None
        return grouped_forward(x, w, b, counts)

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, g: Any) -> Any:
        x, w = ctx.saved_tensors
        needs = tuple(ctx.needs_input_grad[:3])
        return (*grouped_backward(g, x, w, ctx.counts, ctx.has_bias, needs), None)


def grouped_linear(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, counts: Any
) -> torch.Tensor:
    """``x[group g's rows] @ weight[g].T + bias[g]`` for every group (see the module docstring).

    Args:
        x: ``(tokens, in_features)``, the tokens grouped by group (group 0's first).
        weight: ``(num_groups, out_features, in_features)``.
        bias: ``(num_groups, out_features)`` or ``None``.
        counts: tokens per group: a 1-D integer tensor or a sequence of ints, summing to ``tokens``.

    Raises:
        TypeError, ValueError: bad counts, shapes, dtypes or devices (before any launch).
    """
    values = check_operands(x, weight, bias, counts)
    if torch.compiler.is_compiling() and per_group(x):  # (the custom op: no addresses in a trace)
        return _grouped_ops.grouped_linear_op(x.contiguous(), weight, bias, values)
    if torch.compiler.is_compiling() and not x.is_cuda:
        return _traced_loop(x, weight, bias, values)
    return GroupedLinearFn.apply(x.contiguous(), weight, bias, values)


def _traced_loop(x: Any, w: Any, b: Any, counts: list[int]) -> Any:
    """What ``torch.compile`` traces for CPU tensors: a loop of ``F.linear`` over the groups and one
    ``cat``, differentiated by autograd itself (no writes into views of a preallocated result, which
    torch 2.11's tracing of the autograd Function lost: zero gradients)."""
    outs, start = [], 0
    for g, c in enumerate(counts):
        outs.append(torch.nn.functional.linear(x[start : start + c], w[g], None if b is None else b[g]))
        start += c
    return torch.cat(outs)


class GroupedLinear(torch.nn.Module):
    """``num_groups`` Linear layers (experts) applied to their own tokens: ``forward(x, counts)``.

    Args:
        num_groups: the number of groups (experts), >= 1.
        in_features, out_features: as ``torch.nn.Linear``.
        bias: learn a bias per group.
        device, dtype: of the parameters.
        fp8: an :mod:`nvmath.torch.fp8` recipe: every group computes as an FP8 Linear layer (forward
            and backward) with its own scales, all groups' scaling state in ``fp8_state`` (in
            ``state_dict``); see :mod:`._grouped_fp8`. Only this argument makes the layer FP8
            (:func:`nvmath.torch.fp8_autocast` leaves a ``GroupedLinear`` in its own dtype).

    Parameters: ``weight`` (num_groups, out_features, in_features), ``bias`` (num_groups, out_features),
    each group initialised as ``torch.nn.Linear`` initialises its parameters.
    """

    def __init__(
        self, num_groups: int, in_features: int, out_features: int, bias: bool = True, device: Any = None,
        dtype: Any = None, *, fp8: Any = None,
    ):  # fmt: skip
        super().__init__()
        if isinstance(num_groups, bool) or not isinstance(num_groups, int) or num_groups < 1:
            raise ValueError(f"num_groups must be an int >= 1; got {num_groups!r}")
        self.num_groups, self.in_features, self.out_features = num_groups, in_features, out_features
        kw = {"device": device, "dtype": dtype}
        self.weight = torch.nn.Parameter(torch.empty((num_groups, out_features, in_features), **kw))
        if bias:
            self.bias = torch.nn.Parameter(torch.empty((num_groups, out_features), **kw))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()
        from nvmath.torch import _grouped_fp8

        _grouped_fp8.setup(self, fp8, device)

    def reset_parameters(self) -> None:
        """Each group as ``torch.nn.Linear``: Kaiming-uniform weight, uniform bias in +-1/sqrt(in_features)."""
        for g in range(self.num_groups):
            torch.nn.init.kaiming_uniform_(self.weight[g], a=math.sqrt(5))
        if self.bias is not None:
            bound = 1 / math.sqrt(self.in_features) if self.in_features > 0 else 0
            torch.nn.init.uniform_(self.bias, -bound, bound)

    def forward(self, x: torch.Tensor, counts: Any) -> torch.Tensor:
        """``(tokens, out_features)`` from ``x`` (tokens, in_features) grouped by group and ``counts``."""
        if self.fp8 is not None:  # FP8 (explicit only: not under fp8_autocast): its own module
            from nvmath.torch import _grouped_fp8

            return _grouped_fp8.grouped_fp8_forward(self, x, counts)
        return grouped_linear(x, self.weight, self.bias, counts)

    def extra_repr(self) -> str:
        return (
            f"num_groups={self.num_groups}, in_features={self.in_features}, out_features={self.out_features}, "
            f"bias={self.bias is not None}" + (f", fp8={self.fp8!r}" if self.fp8 is not None else "")
        )
