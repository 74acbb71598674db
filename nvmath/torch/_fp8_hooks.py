"""The hooks :class:`~nvmath.torch.Linear` / :class:`~nvmath.torch.MLP` call for FP8 (kept apart from them).

The modules call :func:`setup` in ``__init__`` and, when a recipe is set or an
``fp8_autocast`` block is active (:func:`autocast_on`, one thread-local read), :func:`linear_forward`
instead of their bf16 path.
"""

from __future__ import annotations

from typing import Any

import torch

from nvmath.torch import _fp8

__all__ = ["autocast_on", "check_layer_recipe", "linear_forward", "mlp_forward", "setup"]


def setup(module: torch.nn.Module, recipe: Any, device: Any) -> None:
    """Set ``module.fp8`` and, with a recipe, register its scaling state ``module.fp8_state`` now (so a
    checkpoint loads into a fresh layer); ``None`` for no recipe (FP8 then only under ``fp8_autocast``)."""
    from nvmath.torch import _fp8_linear

    module.fp8 = check_layer_recipe(recipe)
    if recipe is not None and not isinstance(recipe, _fp8.MXFP8BlockScaling):
        from nvmath.torch import _fp8_ops  # noqa: F401  (the custom ops its state is for, before any trace)

        module.add_module("fp8_state", _fp8_linear.FP8LinearState(recipe, device))


def check_layer_recipe(recipe: Any) -> Any:
    """``None`` or an FP8 recipe (a ``TypeError`` for anything else)."""
    if recipe is not None and not isinstance(
        recipe, _fp8.CurrentScaling | _fp8.DelayedScaling | _fp8.MXFP8BlockScaling
    ):
        raise TypeError(
            "fp8 must be None or an nvmath.torch.fp8 recipe (CurrentScaling, DelayedScaling, MXFP8BlockScaling); "
            f"got {recipe!r}"
        )
    return recipe


def autocast_on() -> bool:
    """Whether an enabled :func:`~nvmath.torch.fp8_autocast` block is active in this thread."""
    return _fp8.current_recipe() is not None


def linear_forward(
    module: Any, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None
) -> torch.Tensor:
    """``module``'s forward in FP8 under its recipe (or the autocast's), its state made on first use."""
    from nvmath.torch import _fp8_linear, _fp8_ops

    recipe = module.fp8 if module.fp8 is not None else _fp8.current_recipe()
    state = _fp8_linear.layer_state(module, recipe, weight.device)
    if torch.compiler.is_compiling():  # the custom op torch.compile traces (nvmath.torch._fp8_ops)
        _fp8_linear.check_input(x, weight)
        return _fp8_ops.fp8_linear_compiled(x, weight, bias, module.activation, state)
    return _fp8_linear.fp8_linear(x, weight, bias, module.activation, state)


def mlp_forward(module: Any, x: torch.Tensor) -> torch.Tensor:
    """An MLP block's forward in FP8: one fused block (:mod:`._fp8_mlp`) where it applies (GELU,
    bfloat16 / float16, one recipe), else its two FP8 Linear layers."""
    from nvmath.torch import _fp8_linear, _fp8_mlp, _fp8_ops

    f1, f2 = module.fc1, module.fc2
    r1 = f1.fp8 if f1.fp8 is not None else _fp8.current_recipe()
    r2 = f2.fp8 if f2.fp8 is not None else _fp8.current_recipe()
    if r1 is None or r2 is None or isinstance(r1, _fp8.MXFP8BlockScaling):
        return f2(f1(x))
    s1 = _fp8_linear.layer_state(f1, r1, f1.weight.device)
    s2 = _fp8_linear.layer_state(f2, r2, f2.weight.device)
    if not _fp8_mlp.fused_applies(module.activation, x.dtype, s1, s2):
        return f2(f1(x))
    if torch.compiler.is_compiling():  # the custom op torch.compile traces (nvmath.torch._fp8_ops)
        _fp8_mlp.check_mlp_input(x, f1.weight, f2.weight)
        return _fp8_ops.fp8_mlp_compiled(x, f1.weight, f1.bias, f2.weight, f2.bias, s1, s2)
    return _fp8_mlp.fp8_mlp(x, f1.weight, f1.bias, f2.weight, f2.bias, s1, s2)
