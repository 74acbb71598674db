"""The generic matrix multiplication: ``alpha * op(a) @ op(b) + beta * c`` on cuBLAS or the CPU BLAS.

Call-compatible with nvmath-python 1.0's ``nvmath.linalg.matmul`` / ``Matmul`` (these names are also
importable from :mod:`nvmath.linalg`): structured operands through qualifiers (symmetric, Hermitian,
triangular, diagonal), implicit N-D batches with numpy.matmul broadcasting, explicit batches as Python
sequences of operands of different shapes (one grouped GEMM launch on the GPU), GPU execution on
cuBLAS and host execution on numpy / scipy BLAS. Beyond nvmath-python: float16 and bfloat16 (float32
accumulation, on the GPU and the CPU), conjugation and diagonal operands in any layout, broadcasting batch dimensions,
and a bounded plan cache for the stateless function (:data:`plan_cache`).
"""

from __future__ import annotations

from nvmath._errors import InvalidMatmulState
from nvmath._internal.execution import ExecutionCPU, ExecutionCUDA
from nvmath.linalg.generic._options import MatmulOptions
from nvmath.linalg.generic._planner import Matmul, MatmulStateError
from nvmath.linalg.generic._qualifiers import (
    DiagonalMatrixQualifier,
    DiagType,
    FillMode,
    GeneralMatrixQualifier,
    HermitianMatrixQualifier,
    MatrixQualifier,
    SideMode,
    SymmetricMatrixQualifier,
    TriangularMatrixQualifier,
    matrix_qualifiers_dtype,
)
from nvmath.linalg.generic._stateless import GenericPlanCache, generic_key, matmul, plan_cache

__all__ = [
    "DiagType",
    "DiagonalMatrixQualifier",
    "ExecutionCPU",
    "ExecutionCUDA",
    "FillMode",
    "GeneralMatrixQualifier",
    "GenericPlanCache",
    "HermitianMatrixQualifier",
    "InvalidMatmulState",
    "MatrixQualifier",
    "Matmul",
    "MatmulOptions",
    "MatmulStateError",
    "SideMode",
    "SymmetricMatrixQualifier",
    "TriangularMatrixQualifier",
    "generic_key",
    "matmul",
    "matrix_qualifiers_dtype",
    "plan_cache",
]
