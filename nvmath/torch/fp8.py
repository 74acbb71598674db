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


def fused_gemm_report() -> dict[str, str]:
    """The fused FP8 GEMMs of :class:`~nvmath.torch.MLP` blocks that cuBLASLt refused at planning
    (``{configuration and shapes: cuBLASLt's answer}``), which therefore run unfused; empty when every
    fused GEMM planned so far runs fused (see ``docs/fp8_training.rst``)."""
    from nvmath.torch._fp8_epilogs import fp8_epilog_gemms

    return fp8_epilog_gemms.report()


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
    "fused_gemm_report",
    "optimizer_step",
    "quantize",
    "scale_from_amax",
]
