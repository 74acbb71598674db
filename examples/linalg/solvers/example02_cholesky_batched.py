"""Batched Cholesky: factor a batch of SPD matrices, solve with the factor, and find the bad ones.

The solvers never synchronize to look at the library's ``info`` unless asked: call ``check()`` (or
pass ``options={"check": True}``) to get an nvmath.LinAlgError naming the matrices that failed.
"""

import numpy as np

import nvmath
from nvmath import linalg

rng = np.random.default_rng(1)
batch, n = 64, 16
g = rng.standard_normal((batch, n, n))
a = g @ g.transpose(0, 2, 1) + n * np.eye(n)  # symmetric positive definite
a[5, 3, 3] = -1e3  # make matrix 5 indefinite

with linalg.Cholesky(a, lower=True) as chol:
    chol.plan()
    L = chol.execute()
    try:
        chol.check()
    except nvmath.LinAlgError as err:
        print("failed matrices:", err.indices, "info:", err.info)
        print(err)

    good = [i for i in range(batch) if i != 5]
    b = rng.standard_normal((batch, n, 1))
    x = chol.solve(b)
    print("residual (good matrices):", np.abs(a[good] @ x[good] - b[good]).max())
