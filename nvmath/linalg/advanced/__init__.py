"""Matrix multiplication on cuBLASLt: ``epilog(alpha * a @ b + beta * c)`` with fused epilogs.

Call-compatible with ``nvmath.linalg.advanced`` of nvmath-python 1.0: the stateless :func:`matmul`
(with a bounded plan cache, :data:`plan_cache`) and the stateful :class:`Matmul` (``plan``,
``autotune``, ``execute``, ``reset_operands``, ...), their options and enums. Additions: a bias
along N (``x @ W.T + b``) fuses too, autotuning never ends slower than the heuristic's first choice,
and autotuning results can persist across processes (:data:`autotune_cache`).
"""

from __future__ import annotations

from nvmath._errors import InvalidMatmulState
from nvmath.linalg.advanced import helpers as helpers  # nvmath-python 1.0: helpers.matmul
from nvmath.linalg.advanced._algorithm import Algorithm, AlgorithmCapabilities
from nvmath.linalg.advanced._autotune_cache import AutotuneCache, autotune_cache
from nvmath.linalg.advanced._options import (
    MatmulComputeType,
    MatmulEpilog,
    MatmulEpilogPreferences,
    MatmulInnerShape,
    MatmulNumericalImplFlags,
    MatmulOptions,
    MatmulPlanPreferences,
    MatmulQuantizationScales,
    MatmulReductionScheme,
    matrix_qualifiers_dtype,
)
from nvmath.linalg.advanced._planner import Matmul
from nvmath.linalg.advanced._stateless import MatmulPlanCache, matmul, plan_cache
from nvmath.linalg.advanced._view import MatmulView

__all__ = [
    "Algorithm",
    "AlgorithmCapabilities",
    "AutotuneCache",
    "InvalidMatmulState",
    "Matmul",
    "MatmulComputeType",
    "MatmulEpilog",
    "MatmulEpilogPreferences",
    "MatmulInnerShape",
    "MatmulNumericalImplFlags",
    "MatmulOptions",
    "MatmulPlanCache",
    "MatmulPlanPreferences",
    "MatmulQuantizationScales",
    "MatmulReductionScheme",
    "MatmulView",
    "autotune_cache",
    "matmul",
    "matrix_qualifiers_dtype",
    "plan_cache",
]
