"""Linear algebra: the generic matrix multiplication (``matmul`` / ``Matmul`` with qualifiers, on cuBLAS or
the CPU BLAS, :mod:`nvmath.linalg.generic`), matrix multiplication on cuBLASLt (:mod:`nvmath.linalg.advanced`) and dense solvers
(``DirectSolver`` / ``direct_solver`` as in nvmath-python 1.0, plus Cholesky, LU, QR, eigh, SVD,
least squares, inverse and solve on cuSOLVER / cuBLAS, or LAPACK for host operands).

The execution space classes are shared with :mod:`nvmath.fft`: ``ExecutionCUDA(device_id=0)`` and
``ExecutionCPU(num_threads=None)``; the strings ``'cuda'`` / ``'cpu'`` are accepted too.
"""

from __future__ import annotations

from nvmath._errors import InvalidDirectSolverState, InvalidMatmulState, InvalidSolverState, LinAlgError
from nvmath._internal.execution import ExecutionCPU, ExecutionCUDA
from nvmath.bindings.cublas import ComputeType  # nvmath-python 1.0 exports cuBLAS's compute types here
from nvmath.linalg import _solvers, advanced, generic
from nvmath.linalg._solvers import *  # the solvers' public names, listed once (in _solvers.__all__)
from nvmath.linalg.generic import (
    DiagonalMatrixQualifier,
    DiagType,
    FillMode,
    GeneralMatrixQualifier,
    HermitianMatrixQualifier,
    Matmul,
    MatmulOptions,
    MatrixQualifier,
    SideMode,
    SymmetricMatrixQualifier,
    TriangularMatrixQualifier,
    matmul,
    matrix_qualifiers_dtype,
)

__all__ = [
    "ComputeType",
    "DiagType",
    "DiagonalMatrixQualifier",
    "ExecutionCPU",
    "ExecutionCUDA",
    "FillMode",
    "GeneralMatrixQualifier",
    "HermitianMatrixQualifier",
    "InvalidDirectSolverState",
    "InvalidMatmulState",
    "InvalidSolverState",
    "LinAlgError",
    "Matmul",
    "MatmulOptions",
    "MatrixQualifier",
    "SideMode",
    "SymmetricMatrixQualifier",
    "TriangularMatrixQualifier",
    "advanced",
    "generic",
    "matmul",
    "matrix_qualifiers_dtype",
]
__all__ += _solvers.__all__
