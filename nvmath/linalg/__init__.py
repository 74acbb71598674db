"""Linear algebra: matrix multiplication on cuBLASLt (:mod:`nvmath.linalg.advanced`) and dense solvers
(``DirectSolver`` / ``direct_solver`` as in nvmath-python 1.0, plus Cholesky, LU, QR, eigh, SVD,
least squares, inverse and solve on cuSOLVER / cuBLAS, or LAPACK for host operands).

The execution space classes are shared with :mod:`nvmath.fft`: ``ExecutionCUDA(device_id=0)`` and
``ExecutionCPU(num_threads=None)``; the strings ``'cuda'`` / ``'cpu'`` are accepted too.
"""

from __future__ import annotations

from nvmath._errors import InvalidDirectSolverState, InvalidMatmulState, InvalidSolverState, LinAlgError
from nvmath._internal.execution import ExecutionCPU, ExecutionCUDA
from nvmath.linalg import advanced
from nvmath.linalg._solvers import (
    LU,
    QR,
    SVD,
    Cholesky,
    CholeskySolve,
    DirectSolver,
    DirectSolverOptions,
    Eigh,
    Inverse,
    Lstsq,
    LstsqResult,
    LUSolve,
    SolverOptions,
    cholesky,
    cholesky_solve,
    direct_solver,
    eigh,
    eigvalsh,
    inv,
    lstsq,
    lu_factor,
    lu_solve,
    qr,
    solve,
    solver_plan_cache,
    svd,
    svdvals,
)

__all__ = [
    "advanced",
    "LU",
    "QR",
    "SVD",
    "Cholesky",
    "CholeskySolve",
    "DirectSolver",
    "DirectSolverOptions",
    "Eigh",
    "Inverse",
    "InvalidSolverState",
    "LUSolve",
    "Lstsq",
    "LstsqResult",
    "SolverOptions",
    "cholesky",
    "cholesky_solve",
    "direct_solver",
    "eigh",
    "eigvalsh",
    "inv",
    "lstsq",
    "lu_factor",
    "lu_solve",
    "qr",
    "solve",
    "solver_plan_cache",
    "svd",
    "svdvals",
    "ExecutionCPU",
    "ExecutionCUDA",
    "InvalidDirectSolverState",
    "InvalidMatmulState",
    "LinAlgError",
]
