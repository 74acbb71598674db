"""Solve a @ x = b with the stateful DirectSolver, then solve again for a new right-hand side.

The factorization is computed once; reset_operands(b=...) followed by solve() reuses it. numpy
operands run on the CPU (LAPACK) by default; pass execution="cuda" to run on the GPU.
"""

import numpy as np

from nvmath import linalg

rng = np.random.default_rng(0)
n = 200
a = rng.standard_normal((n, n))  # random, no diagonal boost
b = rng.standard_normal((n, 3))

with linalg.DirectSolver(a, b) as solver:
    solver.plan()
    solver.factorize()
    x = solver.solve()
    print("residual 1:", np.linalg.norm(a @ x - b) / np.linalg.norm(b))

    b2 = rng.standard_normal((n, 3))
    solver.reset_operands(b=b2)
    x2 = solver.solve()  # no refactorization
    print("residual 2:", np.linalg.norm(a @ x2 - b2) / np.linalg.norm(b2))

# The stateless form (plans are cached between calls):
x3 = linalg.direct_solver(a, b)
assert np.allclose(x3, x)
