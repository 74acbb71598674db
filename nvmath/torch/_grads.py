"""The backward of ``epilog(alpha * a @ b + beta * c + bias)`` for the functional and planner APIs.

Shared by the eager autograd functions and the custom op's registered autograd: the products run
through ``mm(x, y)`` (nvmath's advanced or generic matmul in eager mode, the ``nvmath::matmul``
custom op under ``torch.compile``); broadcasting (batch dimensions, ``numpy.matmul``'s 1-D
promotion, a bias or ``c`` broadcast along a dimension) is undone by summing, as torch does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch


__all__ = ["bias_along_n", "matmul_backward", "preactivation", "preactivation_of"]


def bias_along_n(bias: torch.Tensor, m: int, n: int) -> bool:
    """Whether ``bias`` runs along N (the columns of the result), by the advanced matmul's shape rule."""
    if bias.dim() == 1:
        return bias.shape[0] != m
    return tuple(bias.shape[-2:]) != (m, 1)


def preactivation(aux: torch.Tensor, m: int, n: int, along_n: bool) -> torch.Tensor:
    """The pre-activation ``z`` (``(*batch, m, n)``) in a ``gelu_aux`` output of the advanced matmul."""
    return aux[..., :n, :].mT if along_n else aux[..., :m, :]


def preactivation_of(
    aux: torch.Tensor, a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor | None, shape: Any
) -> torch.Tensor:
    """The pre-activation in the ``gelu_aux`` of ``matmul(a, b, epilog=GELU_AUX[_BIAS], bias)``, shaped ``shape``."""
    m = 1 if a.dim() == 1 else a.shape[-2]
    n = 1 if b.dim() == 1 else b.shape[-1]
    return preactivation(aux, m, n, bias is not None and bias_along_n(bias, m, n)).reshape(shape)


def _promote(
    a: torch.Tensor, b: torch.Tensor, g: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``numpy.matmul``'s 1-D promotion applied to the operands and the incoming gradient."""
    if a.dim() == 1:
        a, g = a.unsqueeze(0), g.unsqueeze(-2)
    if b.dim() == 1:
        b, g = b.unsqueeze(-1), g.unsqueeze(-1)
    return a, b, g


def _scaled(x: torch.Tensor, s: complex) -> torch.Tensor:
    if s == 1:
        return x
    return x * (s.conjugate() if isinstance(s, complex) else s)


def matmul_backward(
    mm: Callable[[torch.Tensor, torch.Tensor], torch.Tensor], g: torch.Tensor, a: torch.Tensor, b: torch.Tensor,
    c: torch.Tensor | None, bias: torch.Tensor | None, result: torch.Tensor | None, z: torch.Tensor | None,
    act: str | None, alpha: Any, beta: Any, needs: tuple[bool, bool, bool, bool],
) -> tuple[torch.Tensor | None, ...]:  # fmt: skip
    """``(da, db, dc, dbias)`` from ``g`` = dL/d(result); ``None`` where ``needs`` says not needed.

    ``result`` is needed for ReLU, ``z`` (the pre-activation, shaped like the result) for GELU.
    """
    a2, b2, g2 = _promote(a, b, g)
    m, n = a2.shape[-2], b2.shape[-1]
    if act == "relu":
        _, _, r2 = _promote(a, b, result)
        g2 = torch.ops.aten.threshold_backward(g2, r2, 0)
    elif act == "gelu":
        _, _, z2 = _promote(a, b, z)
        g2 = torch.ops.aten.gelu_backward(g2, z2, approximate="tanh")
    g2 = g2.contiguous()  # an incoming gradient may be expanded (stride 0), which cuBLASLt cannot read
    alpha = 1.0 if alpha is None else alpha
    da = db = dc = dbias = None
    if needs[0]:
        da = _scaled(mm(g2, b2.mH), alpha).sum_to_size(a2.shape).reshape(a.shape)
    if needs[1]:
        db = _scaled(mm(a2.mH, g2), alpha).sum_to_size(b2.shape).reshape(b.shape)
    if needs[2] and c is not None:
        dc = _scaled(g2, beta).sum_to_size(c.shape if c.dim() > 1 else (m, 1))
        dc = dc.reshape(c.shape)
    if needs[3] and bias is not None:
        if bias.dim() == 1:
            shape = (1, n) if bias_along_n(bias, m, n) else (m, 1)
            dbias = g2.sum_to_size(shape).reshape(bias.shape)
        else:
            dbias = g2.sum_to_size(bias.shape)
    return da, db, dc, dbias
