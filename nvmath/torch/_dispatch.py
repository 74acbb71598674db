"""Where nvmath's public calls land when :mod:`nvmath._internal.torch_bridge` routes them here.

A call is routed when a torch operand requires grad (the result must carry an autograd graph) or
when ``torch.compile`` traces it (the call must become a custom op). Everything that has no
derivative is refused here, when the call is made, never later in the backward.
"""

from __future__ import annotations

from typing import Any

import torch

from nvmath._internal import torch_bridge
from nvmath.torch._functions import MatmulFn, PlainProductFn
from nvmath.torch._rules import FLOATS, check_dtypes, check_unsupported, rule_for

__all__ = ["ROUTES"]

_TENSORS = frozenset((torch.Tensor, torch.nn.Parameter))
_FLOATS = frozenset(FLOATS)
_PRODUCT: Any = None
"""The generic matmul's two-operand stateless entry, imported on the first call (no import per call)."""


def _product() -> Any:
    global _PRODUCT
    from nvmath.linalg.generic._stateless import product

    _PRODUCT = product
    return product


def _epilog_bias(epilog_inputs: Any) -> Any:
    inputs = dict(epilog_inputs or {})
    bias = inputs.pop("bias", None)
    if inputs:
        raise ValueError(
            f"epilog_inputs {sorted(inputs)} are not differentiated by nvmath.torch (only 'bias' is); "
            "detach the operands or run under torch.no_grad()"
        )
    return bias


def _number(value: Any, name: str, default: float) -> Any:
    if value is None:
        return default
    if isinstance(value, torch.Tensor):
        raise TypeError(f"{name} must be a Python number when operands require grad; got a tensor")
    return value


def advanced_matmul(
    a: Any, b: Any, /, c: Any = None, *, alpha: Any = None, beta: Any = None, epilog: Any = None,
    epilog_inputs: Any = None, qualifiers: Any = None, quantization_scales: Any = None, options: Any = None,
    preferences: Any = None, algorithm: Any = None, stream: Any = None,
) -> Any:  # fmt: skip
    """``nvmath.linalg.advanced.matmul`` with autograd (eager) or as ``nvmath::matmul`` (compiled)."""
    rule = rule_for(epilog)
    check_unsupported(qualifiers, quantization_scales)
    bias = _epilog_bias(epilog_inputs)
    check_dtypes(a=a, b=b, c=c, bias=bias)
    if rule.bias != (bias is not None):
        raise ValueError(
            f"epilog {getattr(epilog, 'name', epilog)} {'needs' if rule.bias else 'takes no'} a bias"
        )
    alpha_, beta_ = _number(alpha, "alpha", 1.0), _number(beta, "beta", 0.0)
    if torch.compiler.is_compiling():
        check_unsupported(None, None, {"options": options, "preferences": preferences, "algorithm": algorithm,
                                       "stream": stream})  # fmt: skip
        result, aux = torch.ops.nvmath.matmul(a, b, c, bias, int(rule.run_as), float(alpha_), float(beta_))
        return result if rule.aux_out is None else (result, {rule.aux_out: aux})
    from nvmath.linalg.advanced import matmul as lt_matmul

    def run() -> Any:
        return lt_matmul(
            a, b, c, alpha=alpha, beta=beta, epilog=rule.run_as, epilog_inputs=epilog_inputs, options=options,
            preferences=preferences, algorithm=algorithm, stream=stream,
        )  # fmt: skip

    def mm(x: Any, y: Any) -> Any:
        return lt_matmul(x, y, options=options, stream=stream)

    result, aux = MatmulFn.apply(a, b, c, bias, run, mm, rule.act, alpha_, beta_, rule.aux_out)
    return result if rule.aux_out is None else (result, {rule.aux_out: aux})


def planner_execute(
    planner: Any, *, algorithm: Any = None, release_workspace: bool = False, stream: Any = None
) -> Any:
    """``Matmul.execute()`` with autograd when the planner's torch operands require grad."""
    view = planner.view
    rule = rule_for(view.epilog)
    if rule.act == "gelu" and rule.aux_out is None:
        raise ValueError(
            f"a Matmul planned with {view.epilog.name} keeps no pre-activation, which the GELU backward "
            "needs; plan GELU_AUX / GELU_AUX_BIAS instead (same result, plus the aux output), or detach the operands"
        )
    if view.quantization_scales:
        check_unsupported(None, "given")
    tensors = dict(view.operands)
    bias = view.epilog_inputs.get("bias")
    check_dtypes(bias=bias, **tensors)
    alpha = view.alpha
    beta = view.beta if "c" in tensors else 0.0
    from nvmath.linalg.advanced import matmul as lt_matmul

    def run() -> Any:
        return planner.execute(algorithm=algorithm, release_workspace=release_workspace, stream=stream)

    def mm(x: Any, y: Any) -> Any:
        return lt_matmul(x, y, stream=stream)

    result, aux = MatmulFn.apply(
        tensors["a"], tensors["b"], tensors.get("c"), bias, run, mm, rule.act, alpha, beta, rule.aux_out
    )
    return result if rule.aux_out is None else (result, {rule.aux_out: aux})


def generic_matmul(
    a: Any, b: Any, /, c: Any = None, *, alpha: Any = None, beta: Any = None, qualifiers: Any = None,
    options: Any = None, execution: Any = None, stream: Any = None,
) -> Any:  # fmt: skip
    """``nvmath.linalg.matmul`` (the generic matmul) with autograd."""
    if (
        c is None and alpha is None and beta is None and qualifiers is None and options is None
        and execution is None and stream is None and type(a) in _TENSORS and type(b) in _TENSORS
        and a.dtype in _FLOATS and b.dtype in _FLOATS and not torch.compiler.is_compiling()
    ):  # fmt: skip
        # the common call (two operands, nothing else): the two-argument autograd function
        return PlainProductFn.apply(a, b, _PRODUCT or _product())
    if not isinstance(a, torch.Tensor) or not isinstance(b, torch.Tensor):
        raise TypeError(
            "explicit batches (sequences of operands) of nvmath.linalg.matmul are not differentiated by "
            "nvmath.torch; stack them into one batched tensor, or detach the operands"
        )
    check_unsupported(qualifiers, None)
    check_dtypes(a=a, b=b, c=c)
    alpha_, beta_ = _number(alpha, "alpha", 1.0), _number(beta, "beta", 1.0)
    if torch.compiler.is_compiling():
        check_unsupported(None, None, {"options": options, "execution": execution, "stream": stream})
        if isinstance(alpha_, complex) or isinstance(beta_, complex):
            raise TypeError(
                "complex alpha / beta are not traced by torch.compile; multiply the result instead"
            )
        return torch.ops.nvmath.generic_matmul(a, b, c, float(alpha_), float(beta_))
    from nvmath.linalg import matmul as generic

    def run() -> Any:
        return generic(a, b, c, alpha=alpha, beta=beta, options=options, execution=execution, stream=stream)

    def mm(x: Any, y: Any) -> Any:
        return generic(x, y, options=options, execution=execution, stream=stream)

    return MatmulFn.apply(a, b, c, None, run, mm, None, alpha_, beta_, None)[0]


ROUTES = {
    "advanced.matmul": advanced_matmul,
    "advanced.execute": planner_execute,
    "generic.matmul": generic_matmul,
}
torch_bridge.register(ROUTES)
