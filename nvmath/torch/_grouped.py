"""``nvmath.torch.GroupedLinear``: one Linear layer per group (expert), its tokens grouped by group.

``y[rows of group g] = x[rows of group g] @ weight[g].T + bias[g]``, the rows of group ``g`` being the
``counts[g]`` rows after those of groups ``0..g-1`` -- ``torch._grouped_mm(x, weight.transpose(-2, -1),
offs=counts.cumsum(0))`` plus the bias, where the two overlap.

Each product runs as one call of :func:`nvmath.linalg.matmul` on the sequence of the groups' problems
(an explicit batch): on the GPU one grouped GEMM launch (``cublasGemmGroupedBatchedEx`` for bfloat16
/ float16, ``cublas[SD]gemmGroupedBatched`` for float32 / float64), on the CPU its CPU execution
(float32, float64; other CPU dtypes run as a loop of torch matmuls). The results are written in place
(``MatmulOptions(inplace=True)``) into slices of the output, so nothing is concatenated:

* forward: ``y`` starts as each row's bias (``beta = 1``), then the grouped GEMM adds ``x_g @ w_g.T``;
* dgrad: ``dx_g = dy_g @ w_g`` into slices of ``dx``, one grouped launch;
* wgrad: ``dw[g] = dy_g.T @ x_g`` into ``dw``, one grouped launch; ``db[g] = dy_g.sum(0)`` (one
  segmented reduction, ``index_add``).

Groups with no token are left out of the launches (their ``dw`` and ``db`` are zero). The counts are
read to the host (one synchronisation for a GPU tensor, as ``torch.split`` by a tensor needs): the
sizes of a grouped launch are host integers.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch.autograd.function import once_differentiable

__all__ = ["GroupedLinear", "check_counts", "grouped_linear"]

_INPLACE = {"inplace": True}
_SEQUENCE_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
_CPU_SEQUENCE_DTYPES = (torch.float32, torch.float64)


def check_counts(counts: Any, num_groups: int, tokens: int) -> list[int]:
    """The per-group token counts as host ints, checked: ``num_groups`` non-negative ints summing to ``tokens``.

    Args:
        counts: a 1-D integer tensor (any device) or a sequence of ints.

    Raises:
        TypeError: not integers (a float or bool tensor, a float in the list, ...).
        ValueError: wrong length, a negative count, or a sum other than ``tokens``.
    """
    if isinstance(counts, torch.Tensor):
        if counts.dtype.is_floating_point or counts.dtype.is_complex or counts.dtype == torch.bool:
            raise TypeError(
                f"counts must be an integer tensor (e.g. torch.int64 or torch.int32); got {counts.dtype}"
            )
        if counts.dim() != 1:
            raise ValueError(f"counts must be 1-D (one count per group); got shape {tuple(counts.shape)}")
        values = [int(c) for c in counts.tolist()]
    elif isinstance(counts, list | tuple):
        if not all(isinstance(c, int) and not isinstance(c, bool) for c in counts):
            raise TypeError(f"counts must hold ints; got {[type(c).__name__ for c in counts]}")
        values = list(counts)
    else:
        raise TypeError(
            f"counts must be an integer tensor or a sequence of ints; got {type(counts).__name__}"
        )
    if len(values) != num_groups:
        raise ValueError(f"counts must have one entry per group ({num_groups}); got {len(values)}")
    if any(c < 0 for c in values):
        raise ValueError(f"counts must be >= 0; got {values}")
    if sum(values) != tokens:
        raise ValueError(
            f"counts sum to {sum(values)} but the input has {tokens} tokens (rows); each token belongs to "
            "exactly one group"
        )
    return values


def _bounds(counts: list[int]) -> list[tuple[int, int, int]]:
    """``(group, start, stop)`` of the groups with tokens."""
    out, start = [], 0
    for g, c in enumerate(counts):
        if c:
            out.append((g, start, start + c))
        start += c
    return out


def _grouped_mm(a: list, b: list, c: list, beta: float) -> None:
    """``c[i] = a[i] @ b[i] + beta * c[i]`` for every i: one ``nvmath.linalg.matmul`` sequence call (one
    grouped launch on the GPU), or a torch loop for CPU dtypes the CPU execution does not take."""
    if not a:
        return
    if a[0].is_cuda or a[0].dtype in _CPU_SEQUENCE_DTYPES:
        from nvmath.linalg import matmul

        if not beta and not a[0].is_cuda:
            # the CPU execution of an in-place sequence reads c even with beta = 0 (0 * NaN garbage of
            # an uninitialised c is NaN); cuBLAS does not read c then
            for z in c:
                z.zero_()
        matmul(a, b, c, beta=beta, options=_INPLACE)
        return
    for x, y, z in zip(a, b, c):
        if beta:
            z.add_(x @ y)
        else:
            torch.matmul(x, y, out=z)


class GroupedLinearFn(torch.autograd.Function):
    """``y_g = x_g @ w[g].T + b[g]`` per group, grouped forward, dgrad and wgrad."""

    @staticmethod
    def forward(ctx: Any, x: Any, w: Any, b: Any, counts: list[int]) -> Any:
        bounds = _bounds(counts)
        n = w.shape[1]
        if b is None:
            y = x.new_empty((x.shape[0], n))  # (a group without tokens has no rows)
        else:
            y = torch.repeat_interleave(
                b, torch.tensor(counts, device=b.device), dim=0, output_size=x.shape[0]
            )
            y = y.to(x.dtype).contiguous()
        _grouped_mm([x[s:e] for _, s, e in bounds], [w[g].T for g, _, _ in bounds], [y[s:e] for _, s, e in bounds],
                    1.0 if b is not None else 0.0)  # fmt: skip
        ctx.save_for_backward(x, w)
        ctx.counts, ctx.bounds, ctx.has_bias = counts, bounds, b is not None
        return y

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, g: Any) -> Any:
        x, w = ctx.saved_tensors
        bounds = ctx.bounds
        g = g.contiguous()
        dx = dw = db = None
        full = len(bounds) == len(ctx.counts)
        if ctx.needs_input_grad[0]:
            dx = x.new_empty(x.shape)
            _grouped_mm([g[s:e] for _, s, e in bounds], [w[k] for k, _, _ in bounds],
                        [dx[s:e] for _, s, e in bounds], 0.0)  # fmt: skip
        if ctx.needs_input_grad[1]:
            dw = w.new_empty(w.shape) if full else w.new_zeros(w.shape)
            _grouped_mm([g[s:e].T for _, s, e in bounds], [x[s:e] for _, s, e in bounds],
                        [dw[k] for k, _, _ in bounds], 0.0)  # fmt: skip
        if ctx.has_bias and ctx.needs_input_grad[2]:
            ids = torch.repeat_interleave(
                torch.arange(len(ctx.counts), device=g.device), torch.tensor(ctx.counts, device=g.device),
                output_size=g.shape[0],
            )  # fmt: skip
            db = torch.zeros((len(ctx.counts), g.shape[1]), dtype=torch.float32, device=g.device)
            db = db.index_add_(0, ids, g.float()).to(w.dtype)
        return dx, dw, db, None


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
    for name, t in (("input", x), ("weight", weight), ("bias", bias)):
        if t is not None and not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor; got {type(t).__name__}")
        if t is not None and (t.dtype != weight.dtype or t.device != weight.device):
            raise RuntimeError(
                f"{name} must have weight's dtype and device ({weight.dtype}, {weight.device}); got {t.dtype}, {t.device}"
            )
    if weight.dtype not in _SEQUENCE_DTYPES:
        raise TypeError(
            f"GroupedLinear computes in {', '.join(map(str, _SEQUENCE_DTYPES))}; got {weight.dtype}"
        )
    if weight.dim() != 3 or x.dim() != 2 or x.shape[1] != weight.shape[2]:
        raise RuntimeError(
            f"input of shape {tuple(x.shape)} (tokens, in_features) does not fit weight of shape "
            f"{tuple(weight.shape)} (num_groups, out_features, in_features)"
        )
    if bias is not None and tuple(bias.shape) != tuple(weight.shape[:2]):
        raise RuntimeError(f"bias must have shape {tuple(weight.shape[:2])}; got {tuple(bias.shape)}")
    values = check_counts(counts, weight.shape[0], x.shape[0])
    return GroupedLinearFn.apply(x.contiguous(), weight, bias, values)


class GroupedLinear(torch.nn.Module):
    """``num_groups`` Linear layers (experts) applied to their own tokens: ``forward(x, counts)``.

    Args:
        num_groups: the number of groups (experts), >= 1.
        in_features, out_features: as ``torch.nn.Linear``.
        bias: learn a bias per group.
        device, dtype: of the parameters.

    Parameters: ``weight`` (num_groups, out_features, in_features), ``bias`` (num_groups, out_features),
    each group initialised as ``torch.nn.Linear`` initialises its parameters.
    """

    def __init__(
        self, num_groups: int, in_features: int, out_features: int, bias: bool = True, device: Any = None,
        dtype: Any = None,
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

    def reset_parameters(self) -> None:
        """Each group as ``torch.nn.Linear``: Kaiming-uniform weight, uniform bias in +-1/sqrt(in_features)."""
        for g in range(self.num_groups):
            torch.nn.init.kaiming_uniform_(self.weight[g], a=math.sqrt(5))
        if self.bias is not None:
            bound = 1 / math.sqrt(self.in_features) if self.in_features > 0 else 0
            torch.nn.init.uniform_(self.bias, -bound, bound)

    def forward(self, x: torch.Tensor, counts: Any) -> torch.Tensor:
        """``(tokens, out_features)`` from ``x`` (tokens, in_features) grouped by group and ``counts``."""
        return grouped_linear(x, self.weight, self.bias, counts)

    def extra_repr(self) -> str:
        return (
            f"num_groups={self.num_groups}, in_features={self.in_features}, out_features={self.out_features}, "
            f"bias={self.bias is not None}"
        )
