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

__all__ = [
    "DIFFERENTIABLE", "FLOATS", "Rule", "check_dtypes", "check_linear", "check_operands", "check_shapes",
    "linear_ok", "rule_for",
]  # fmt: skip


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


def check_operands(**tensors: Any) -> None:
    """torch's rules: tensors, one dtype, one device (messages name the tensors)."""
    first_name, first = next(iter(tensors.items()))
    for name, t in tensors.items():
        if t is None:
            continue
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor; got {type(t).__name__}")
        if t.dtype != first.dtype:
            raise RuntimeError(
                f"expected {name} and {first_name} to have the same dtype, but got: {t.dtype} != {first.dtype}"
            )
        if t.device != first.device:
            raise RuntimeError(
                f"expected {name} and {first_name} to be on the same device, but got: {t.device} != {first.device}"
            )


def linear_ok(x: Any, weight: Any, bias: Any) -> bool:
    """The common case in a few attribute reads: tensors of one dtype and device, matching shapes."""
    tensor = torch.Tensor
    if not isinstance(x, tensor) or not isinstance(weight, tensor):
        return False
    dtype, device, shape = weight.dtype, weight.device, weight.shape
    if x.dtype != dtype or x.device != device or len(shape) != 2 or not x.shape or x.shape[-1] != shape[1]:
        return False
    return bias is None or (
        isinstance(bias, tensor) and bias.dtype == dtype and bias.device == device and bias.shape == shape[:1]
    )


def check_shapes(
    x_shape: tuple[int, ...], weight: torch.Tensor, bias: torch.Tensor | None, name: str = "weight"
) -> None:
    """``x_shape`` (the input's shape) against ``weight`` and ``bias`` (torch's Linear rules)."""
    if weight.dim() != 2 or len(x_shape) < 1 or x_shape[-1] != weight.shape[1]:
        raise RuntimeError(
            f"input of shape {tuple(x_shape)} cannot be multiplied by {name}.T ({name} of shape "
            f"{tuple(weight.shape)}: (out_features, in_features), in_features must equal input.shape[-1])"
        )
    if bias is not None and tuple(bias.shape) != (weight.shape[0],):
        raise RuntimeError(f"bias must have shape ({weight.shape[0]},); got {tuple(bias.shape)}")



def check_linear(x: Any, weight: Any, bias: Any) -> None:
    """torch's rules for ``linear(x, weight, bias)``: raise as ``torch.nn.functional.linear`` would."""
    if not linear_ok(x, weight, bias):
        check_operands(input=x, weight=weight, bias=bias)
        check_shapes(x.shape, weight, bias)
