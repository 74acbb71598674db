"""Linear algebra: matrix multiplication on cuBLASLt (:mod:`nvmath.linalg.advanced`) and dense solvers.

The execution space classes are shared with :mod:`nvmath.fft`: ``ExecutionCUDA(device_id=0)`` and
``ExecutionCPU(num_threads=None)``; the strings ``'cuda'`` / ``'cpu'`` are accepted too.
"""

from __future__ import annotations

from nvmath._errors import InvalidDirectSolverState, InvalidMatmulState, LinAlgError
from nvmath._internal.execution import ExecutionCPU, ExecutionCUDA
from nvmath.linalg import advanced

__all__ = [
    "advanced",
    "ExecutionCPU",
    "ExecutionCUDA",
    "InvalidDirectSolverState",
    "InvalidMatmulState",
    "LinAlgError",
]
