"""Which matmul calls are differentiable, and how: one table, checked when the graph is built.

A forward epilog maps to its activation and whether it adds a bias. Epilogs that are themselves
backward passes (DRELU, DGELU, their BGRAD forms, BGRADA, BGRADB) have no derivative here; FP8
operands, quantization scales and conjugation qualifiers are not differentiated either. Asking for
a gradient through one of those raises when the call is made, naming the fix.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import torch

from nvmath.linalg.advanced import MatmulEpilog as E

__all__ = ["DIFFERENTIABLE", "FLOATS", "Rule", "check_dtypes", "rule_for"]


class Rule(NamedTuple):
    """How to differentiate one forward epilog."""

    act: str | None
    bias: bool
    run_as: E
    """The epilog actually run when a gradient is needed (GELU keeps its pre-activation as aux)."""
    aux_out: str | None
    """The aux output the caller asked for (returned to them, not differentiable), or ``None``."""


DIFFERENTIABLE: dict[E, Rule] = {
    E.DEFAULT: Rule(None, False, E.DEFAULT, None),
    E.BIAS: Rule(None, True, E.BIAS, None),
    E.RELU: Rule("relu", False, E.RELU, None),
    E.RELU_BIAS: Rule("relu", True, E.RELU_BIAS, None),
    E.RELU_AUX: Rule("relu", False, E.RELU_AUX, "relu_aux"),
    E.RELU_AUX_BIAS: Rule("relu", True, E.RELU_AUX_BIAS, "relu_aux"),
    E.GELU: Rule("gelu", False, E.GELU_AUX, None),
    E.GELU_BIAS: Rule("gelu", True, E.GELU_AUX_BIAS, None),
    E.GELU_AUX: Rule("gelu", False, E.GELU_AUX, "gelu_aux"),
    E.GELU_AUX_BIAS: Rule("gelu", True, E.GELU_AUX_BIAS, "gelu_aux"),
}
"""Forward epilog -> its rule (ReLU's derivative is read from the output, GELU's from the aux)."""

FLOATS = (torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.complex64, torch.complex128)
"""The dtypes nvmath.torch differentiates."""
_FLOATS = FLOATS


def rule_for(epilog: Any) -> Rule:
    """The :class:`Rule` of ``epilog`` (``None`` = DEFAULT), or a ``ValueError`` saying why there is none."""
    if epilog is None:
        return DIFFERENTIABLE[E.DEFAULT]
    try:
        return DIFFERENTIABLE[E(int(epilog))]
    except (ValueError, KeyError, TypeError):
        pass
    allowed = ", ".join(e.name for e in DIFFERENTIABLE)
    name = getattr(epilog, "name", repr(epilog))
    raise ValueError(
        f"epilog {name} has no derivative in nvmath.torch (it is a backward-pass epilog or unknown), but an "
        f"operand requires grad; differentiable epilogs: {allowed}. Detach the operands or run under "
        "torch.no_grad() to use it."
    )


def check_dtypes(**tensors: Any) -> None:
    """Raise ``TypeError`` unless every given tensor has a differentiable floating dtype."""
    for name, t in tensors.items():
        if t is not None and t.dtype not in _FLOATS:
            raise TypeError(
                f"{name} has dtype {t.dtype}, which nvmath.torch does not differentiate (FP8 and integer "
                f"matmuls have no autograd); differentiable dtypes: {', '.join(str(d) for d in _FLOATS)}. "
                "Detach it or run under torch.no_grad()."
            )


def check_unsupported(qualifiers: Any, quantization_scales: Any, extra: dict | None = None) -> None:
    """Raise ``ValueError`` for arguments that have no derivative (qualifiers, FP8 scales, ...)."""
    if qualifiers is not None:
        raise ValueError(
            "qualifiers (conjugation / structure) are not differentiated by nvmath.torch; pass conjugated "
            "torch views (tensor.conj()) instead of qualifiers, or detach the operands"
        )
    if quantization_scales is not None:
        raise ValueError(
            "quantization_scales (FP8 matmuls) are not differentiated by nvmath.torch; detach the operands "
            "or run under torch.no_grad()"
        )
    for name, value in (extra or {}).items():
        if value is not None:
            raise ValueError(f"{name} is not supported when an operand requires grad; got {value!r}")
