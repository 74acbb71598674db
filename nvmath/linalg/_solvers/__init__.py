"""Dense solvers: cuSOLVER / cuBLAS on the GPU, LAPACK (scipy) on the CPU.

Public names (exported through :mod:`nvmath.linalg`):

* nvmath-python 1.0 compatible: :class:`DirectSolver`, :func:`direct_solver`, :class:`DirectSolverOptions`;
* planners (plan once, execute many, ``reset_operands``, ``free``): :class:`Cholesky`,
  :class:`CholeskySolve`, :class:`LU`, :class:`LUSolve`, :class:`QR`, :class:`Eigh`, :class:`SVD`,
  :class:`Lstsq`, :class:`Inverse`, sharing :class:`SolverOptions`;
* stateless functions (plans cached in :data:`solver_plan_cache`): :func:`cholesky`,
  :func:`cholesky_solve`, :func:`lu_factor`, :func:`lu_solve`, :func:`qr`, :func:`eigh`,
  :func:`eigvalsh`, :func:`svd`, :func:`svdvals`, :func:`lstsq`, :func:`inv`, :func:`solve`.

Importing this package imports neither torch nor cupy and makes no driver call.
"""

from nvmath.linalg._solvers._cache import solver_plan_cache
from nvmath.linalg._solvers._cholesky import Cholesky, CholeskySolve, cholesky, cholesky_solve
from nvmath.linalg._solvers._direct import DirectSolver, direct_solver, solve
from nvmath.linalg._solvers._eigh import Eigh, eigh, eigvalsh
from nvmath.linalg._solvers._inv import Inverse, inv
from nvmath.linalg._solvers._lstsq import Lstsq, LstsqResult, lstsq
from nvmath.linalg._solvers._lu import LU, LUSolve, lu_factor, lu_solve
from nvmath.linalg._solvers._options import DirectSolverOptions, SolverOptions
from nvmath.linalg._solvers._qr import QR, qr
from nvmath.linalg._solvers._svd import SVD, svd, svdvals

__all__ = [
    "LU",
    "QR",
    "SVD",
    "Cholesky",
    "CholeskySolve",
    "DirectSolver",
    "DirectSolverOptions",
    "Eigh",
    "Inverse",
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
]
