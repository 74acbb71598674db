"""``nvmath.torch.linear`` and ``nvmath.torch.mlp``: the functional forms the modules call.

Eager calls on CUDA tensors go straight to the autograd functions (or, without grad, to the
kernels); under ``torch.compile`` they become ``torch.ops.nvmath.*`` custom ops. Tensors on any
other device (the CPU, ``meta``) are computed by torch's own operations (``torch.nn.functional.linear``
and the activation, nothing fused), so autograd and ``torch.compile`` work there as they do for
``torch.nn.Linear``. Operands are checked with torch's rules (one dtype, one device), naming the
tensors, before anything runs.
"""

from __future__ import annotations

from typing import Any

import torch

from nvmath.torch import _kernels, _ops
from nvmath.torch._functions import LinearFn, MLPFn, apply_linear
from nvmath.torch._planners import PlannerCache, default_cache
from nvmath.torch._rules import FLOATS, check_dtypes, check_operands, check_shapes, linear_ok

__all__ = ["check_activation", "linear", "mlp"]


def check_activation(activation: Any, *, allow_none: bool = True) -> str | None:
    """Validate an activation name (``None``, ``"relu"`` or ``"gelu"``, the tanh approximation)."""
    allowed = _kernels.ACTIVATIONS if allow_none else ("relu", "gelu")
    if activation not in allowed:
        raise ValueError(f"activation must be one of {allowed}; got {activation!r}")
    return activation


_is_compiling = torch.compiler.is_compiling  # (torch.compile's tracer knows the function, by identity)

#: Device types whose tensors run the fused cuBLASLt path; tensors elsewhere run torch's operations.
FUSED_DEVICE_TYPES: frozenset[str] = frozenset({"cuda"})


def _by_torch(x: torch.Tensor) -> bool:
    """True when ``x`` is not a CUDA tensor: the layer is computed by torch's own operations."""
    return x.device.type not in FUSED_DEVICE_TYPES


def _torch_linear(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, activation: str | None
) -> torch.Tensor:
    """``activation(x @ weight.T + bias)`` by torch's operations (off the GPU: nothing fused)."""
    y = torch.nn.functional.linear(x, weight, bias)
    if activation == "relu":
        return torch.nn.functional.relu(y)
    if activation == "gelu":
        return torch.nn.functional.gelu(y, approximate="tanh")
    return y


def _grad_needed(*tensors: Any) -> bool:
    return torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in tensors)


def linear(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None, activation: str | None = None, *,
    cache: PlannerCache | None = None,
) -> torch.Tensor:  # fmt: skip
    """``activation(x @ weight.T + bias)`` with the bias and activation fused into the matmul.

    CUDA tensors run one cuBLASLt GEMM with the bias and activation in its epilog; tensors on any
    other device (the CPU) run ``torch.nn.functional.linear`` and the activation, unfused.

    Args:
        x: input, ``(*, in_features)``.
        weight: ``(out_features, in_features)``, as ``torch.nn.Linear.weight``.
        bias: ``(out_features,)`` or ``None``.
        activation: ``None``, ``"relu"`` or ``"gelu"`` (GELU's tanh approximation, i.e.
            ``torch.nn.functional.gelu(approximate="tanh")``).
        cache: the :class:`PlannerCache` to plan in (default :data:`default_cache`; under
            ``torch.compile`` the custom op always uses :data:`compiled_cache`).

    Raises:
        RuntimeError: mismatched dtypes, devices or shapes (as ``torch.nn.functional.linear``).
        TypeError: a dtype without autograd (FP8, integers) when a gradient is needed.
        CaptureError: first use of a shape inside a CUDA graph capture.
    """
    # the compiled hit (a planned problem's key checked in C, then its launch), when the path is active
    # (the pure path: one attribute read; under torch.compile, never: its custom op runs instead)
    cache = default_cache if cache is None else cache
    hits = cache.linear_hits
    compiling = _is_compiling()  # (asked once: the table and the hot paths below)
    if hits is not None and not compiling:
        y = hits(x, weight, bias, activation)
        if y is not None:
            return y
    tensor = torch.Tensor
    if (
        isinstance(x, tensor) and isinstance(weight, tensor) and (bias is None or isinstance(bias, tensor))
        and not compiling
    ):  # fmt: skip
        if not (torch.is_grad_enabled() and (x.requires_grad or weight.requires_grad
                                              or (bias is not None and bias.requires_grad))):  # fmt: skip
            # the hot path: a planned problem's key vouches for every check below (a miss returns None)
            try:
                epilog = _kernels.INFER[activation][bias is None]
            except (KeyError, TypeError):  # a bad activation: the checks below say what is wrong
                pass
            else:
                y = cache.infer(x, weight, bias, epilog)
                if y is not None:
                    return y
        elif (
            activation in _kernels.ACTIVATIONS and x.dtype in FLOATS and x.device.type in FUSED_DEVICE_TYPES
        ):  # fmt: skip
            # training on CUDA tensors: the forward checks the operands by torch's rules on a problem's
            # first call (a planned problem's key vouches for them: same dtypes, devices, shapes)
            return apply_linear(x, weight, bias, activation, cache)
    return _linear_checked(x, weight, bias, activation, cache)


def _linear_checked(
    x: Any, weight: Any, bias: Any, activation: str | None, cache: PlannerCache
) -> torch.Tensor:  # fmt: skip
    """:func:`linear` past its hot paths: every argument checked, then torch's layer (other devices),
    the custom op (under torch.compile), the autograd function or the inference launch."""
    check_activation(activation)
    if _is_compiling():
        if _by_torch(x):
            return _torch_linear(x, weight, bias, activation)
        return _ops.linear(x, weight, bias, activation, _grad_needed(x, weight, bias))
    if not linear_ok(x, weight, bias):
        check_operands(input=x, weight=weight, bias=bias)
        check_shapes(x.shape, weight, bias)
    if _by_torch(x):
        return _torch_linear(x, weight, bias, activation)
    if _grad_needed(x, weight, bias):
        check_dtypes(input=x)
        return LinearFn.apply(x, weight, bias, activation, cache)
    return _kernels.linear_infer(cache, x, weight, bias, activation)


def mlp(
    x: torch.Tensor, w1: torch.Tensor, b1: torch.Tensor | None, w2: torch.Tensor, b2: torch.Tensor | None,
    activation: str = "gelu", *, cache: PlannerCache | None = None,
) -> torch.Tensor:  # fmt: skip
    """``fc2(activation(fc1(x)))`` with fc1's bias and activation fused forward and backward.

    On CUDA tensors; tensors on any other device (the CPU) run torch's own operations, unfused.

    With GELU, the backward computes fc2's input gradient with ``DGELU`` (fc1's saved pre-activation),
    which yields fc1's pre-activation gradient in the GEMM kernel; with ReLU, torch's
    ``threshold_backward`` on the saved hidden activation follows a plain GEMM. Both bias gradients
    come from ``BGRADB`` on the weight-gradient GEMMs.

    Args:
        x: ``(*, in_features)``; w1 ``(hidden, in_features)``, b1 ``(hidden,)``; w2 ``(out, hidden)``,
            b2 ``(out,)``.
        activation: ``"relu"`` or ``"gelu"`` (tanh approximation).
        cache: as for :func:`linear`.
    """
    check_activation(activation, allow_none=False)
    if torch.compiler.is_compiling():
        if _by_torch(x):
            return _torch_linear(_torch_linear(x, w1, b1, activation), w2, b2, None)
        return _ops.mlp(x, w1, b1, w2, b2, activation, _grad_needed(x, w1, b1, w2, b2))
    check_operands(input=x, w1=w1, b1=b1, w2=w2, b2=b2)
    check_shapes(x.shape, w1, b1, "w1")
    check_shapes((0, w1.shape[0]), w2, b2, "w2")  # (fc2's input: hidden features; no tensor made)
    if _by_torch(x):
        return _torch_linear(_torch_linear(x, w1, b1, activation), w2, b2, None)
    cache = default_cache if cache is None else cache
    if _grad_needed(x, w1, b1, w2, b2):
        check_dtypes(input=x)
        return MLPFn.apply(x, w1, b1, w2, b2, activation, cache)
    return _kernels.mlp_forward(cache, x, w1, b1, w2, b2, activation, False)[0]
