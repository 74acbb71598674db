"""nvmath in PyTorch pipelines: autograd, ``torch.compile`` custom ops, CUDA graphs, fused modules.

Importing this package needs torch (``import nvmath`` never imports it). It registers the
``torch.ops.nvmath.*`` custom operators and provides:

* :class:`Linear` -- a drop-in ``torch.nn.Linear`` with a fused activation (``None``, ``"relu"``,
  ``"gelu"`` = tanh approximation), and :class:`MLP`, two of them with the activation's backward
  fused into a GEMM;
* :func:`linear`, :func:`mlp` -- their functional forms;
* :class:`PlannerCache` / :data:`default_cache` / :data:`compiled_cache` -- planned matmuls kept per
  problem for training loops (eager calls and the custom ops);
* :mod:`nvmath.torch.fp8` -- FP8 training recipes (current and delayed per-tensor scaling) for
  ``Linear(fp8=recipe)`` / ``MLP(fp8=recipe)`` or :func:`fp8_autocast`;
* :class:`GroupedLinear` -- a mixture-of-experts layer (one weight per group, tokens grouped by expert);
* :class:`CaptureError` -- raised for capture-unsafe work (first-time planning) inside a CUDA graph capture.

Autograd for ``nvmath.linalg.advanced.matmul``, ``Matmul.execute`` and ``nvmath.linalg.matmul`` needs
no import: those calls route here by themselves when a torch operand requires grad or when
``torch.compile`` traces them.
"""

from __future__ import annotations

try:
    import torch  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised only without torch
    raise ImportError("nvmath.torch needs PyTorch (pip install torch)") from exc

from nvmath.torch import _dispatch, _ops, fp8  # noqa: F401  (_dispatch, _ops: register the routes and torch.ops.nvmath.*)
from nvmath.torch._capture import CaptureError
from nvmath.torch._fp8 import fp8_autocast
from nvmath.torch._functional import linear, mlp
from nvmath.torch._grouped import GroupedLinear, grouped_linear
from nvmath.torch._modules import MLP, Linear
from nvmath.torch._planners import CacheStats, PlannerCache, compiled_cache, default_cache

__all__ = [
    "MLP",
    "CacheStats",
    "CaptureError",
    "GroupedLinear",
    "Linear",
    "PlannerCache",
    "compiled_cache",
    "default_cache",
    "fp8",
    "fp8_autocast",
    "grouped_linear",
    "linear",
    "mlp",
]
