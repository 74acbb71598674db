"""``nvmath.torch.fp8``: FP8 training recipes, :func:`fp8_autocast` and the skip-step helper.

See :mod:`nvmath.torch._fp8` for the scaling rules and the non-finite amax policy, and
``docs/fp8_training.rst`` for a guide.
"""

from __future__ import annotations

from nvmath.torch._fp8 import (
    FP8_MAX,
    CurrentScaling,
    DelayedScaling,
    Format,
    MXFP8BlockScaling,
    ScalingState,
    amax_of,
    current_recipe,
    dequantize,
    fp8_autocast,
    optimizer_step,
    quantize,
    scale_from_amax,
)

__all__ = [
    "FP8_MAX",
    "CurrentScaling",
    "DelayedScaling",
    "Format",
    "MXFP8BlockScaling",
    "ScalingState",
    "amax_of",
    "current_recipe",
    "dequantize",
    "fp8_autocast",
    "optimizer_step",
    "quantize",
    "scale_from_amax",
]
