"""FP8 :class:`~nvmath.torch.GroupedLinear` (experimental): each group's Linear in FP8 through :mod:`._fp8_linear`.

Experimental: correct (equal to a loop of FP8 ``Linear`` layers) but slow. Measured on an H200 (8
experts 4096 -> 2048, 16384 bf16 tokens, forward + backward): 31 ms per step with delayed scaling and
40 ms with current scaling, against 2.47 ms for a torch bf16 loop (0.06-0.08x): each group is a whole
FP8 Linear step (its quantizations, scale updates and transposes: tens of small launches per group),
host-bound. So only ``GroupedLinear(fp8=recipe)`` runs it; :func:`~nvmath.torch.fp8_autocast` does not
switch a ``GroupedLinear`` to FP8. What would make it fast: one scaling state for all experts (or
stacked per-expert scales in one tensor), one quantization of ``x`` and of the stacked weights per
step, and the per-group FP8 GEMMs written into slices as the bfloat16 path does.

With ``GroupedLinear(fp8=recipe)`` group ``g``'s tokens run the library's FP8 Linear (``fp8_linear(x_g, weight[g], bias[g])``): per-tensor
scales, e4m3 input and weight, gradients in the recipe's format (e5m2 under ``Format.HYBRID``), the
weight's FP8 copies made once per weight version, each GEMM on a planned ``Matmul`` (bias fused in
bfloat16 / float16 layers). Every group has its own scaling state (``fp8_states[g]``: scales and amax
histories of its input, weight and output gradient, in ``state_dict``), as each expert's activations
and weights have their own ranges. The groups' outputs are joined by one ``torch.cat``; groups without
tokens take no part (their gradients are zero).

Sizes: cuBLASLt's FP8 GEMMs need ``in_features``, ``out_features`` and every group's token count (the
weight-gradient GEMM's reduction) multiples of 16; others raise ``ValueError`` before any launch,
naming the group (pad each group's tokens). Block scaling (MXFP8) is refused as for ``Linear``.
"""

from __future__ import annotations

from typing import Any

import torch

from nvmath.torch import _fp8, _fp8_hooks
from nvmath.torch._grouped_checks import check_operands

__all__ = ["check_group_sizes", "grouped_fp8_forward", "setup"]


def setup(module: torch.nn.Module, recipe: Any, device: Any) -> None:
    """Set ``module.fp8`` and, with a per-tensor recipe, register ``module.fp8_states`` (one
    :class:`~._fp8_linear.FP8LinearState` per group) now, so that a checkpoint loads into a fresh layer."""
    module.fp8 = _fp8_hooks.check_layer_recipe(recipe)
    if recipe is not None and not isinstance(recipe, _fp8.MXFP8BlockScaling):
        module.add_module("fp8_states", _new_states(module.num_groups, recipe, device))


def _new_states(groups: int, recipe: Any, device: Any) -> torch.nn.ModuleList:
    from nvmath.torch import _fp8_linear, _fp8_ops  # noqa: F401  (_fp8_ops: the custom ops, before any trace)

    return torch.nn.ModuleList(_fp8_linear.FP8LinearState(recipe, device) for _ in range(groups))


def check_group_sizes(counts: list[int], in_features: int, out_features: int) -> None:
    """Raise ``ValueError`` naming the first group whose FP8 GEMMs cuBLASLt cannot take (see the notes)."""
    from nvmath.torch._fp8_linear import FP8_MULTIPLE, check_fp8_sizes

    check_fp8_sizes(0, in_features, out_features)
    for g, c in enumerate(counts):
        if c % FP8_MULTIPLE:
            raise ValueError(
                f"FP8 GroupedLinear needs every group's token count a multiple of {FP8_MULTIPLE} (the weight "
                f"gradient's FP8 GEMM reduces over it); group {g} has {c} tokens (counts {counts}). Pad each "
                "group's tokens or run this layer without FP8."
            )


def _states(module: Any, recipe: Any, device: torch.device) -> list:
    """``module.fp8_states`` for ``recipe`` (made on first use when :func:`setup` made none: MXFP8)."""
    from nvmath.torch import _fp8_linear

    states = getattr(module, "fp8_states", None)
    if states is None:
        _fp8.check_recipe(recipe, device)
        states = _new_states(module.num_groups, recipe, device)
        module.add_module("fp8_states", states)
    if states[0].recipe != recipe:
        raise ValueError(
            f"this layer's FP8 scaling states were made for {states[0].recipe!r}; it now runs under "
            f"{recipe!r}. Use one recipe per layer (or delete its fp8_states to start afresh)."
        )
    if not torch.compiler.is_compiling():  # (compiled: the custom operators check, at run time)
        for state in states:
            _fp8_linear.check_device(state, device)
    return list(states)


def grouped_fp8_forward(module: Any, x: torch.Tensor, counts: Any) -> torch.Tensor:
    """``module``'s forward in FP8 under its recipe (``module.fp8``); see the module notes.

    Raises:
        TypeError, RuntimeError, ValueError: bad operands or counts (as ``grouped_linear``), an input
            dtype FP8 layers do not take, sizes that are not multiples of 16; all before any launch.
        RuntimeError, NotImplementedError: a recipe the device cannot run (as ``Linear(fp8=)``).
    """
    from nvmath.torch import _fp8_linear, _fp8_ops

    weight, bias = module.weight, module.bias
    values = check_operands(x, weight, bias, counts)
    if x.dtype not in (torch.bfloat16, torch.float16, torch.float32):
        raise TypeError(
            f"FP8 GroupedLinear layers compute in bfloat16, float16 or float32; the input is {x.dtype}"
        )
    check_group_sizes(values, weight.shape[2], weight.shape[1])
    states = _states(module, module.fp8, weight.device)
    compiling = torch.compiler.is_compiling()
    outs, start = [], 0
    for g, c in enumerate(values):
        if c:
            xg, wg, bg = x[start : start + c], weight[g], None if bias is None else bias[g]
            if compiling:  # the custom op torch.compile traces (nvmath.torch._fp8_ops)
                outs.append(_fp8_ops.fp8_linear_compiled(xg, wg, bg, None, states[g]))
            else:
                outs.append(_fp8_linear.fp8_linear(xg, wg, bg, None, states[g]))
        start += c
    if not outs:
        return x.new_empty((0, weight.shape[1]))
    return outs[0] if len(outs) == 1 else torch.cat(outs)
