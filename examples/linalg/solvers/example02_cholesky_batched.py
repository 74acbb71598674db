"""Batched Cholesky: factor a batch of SPD matrices, solve with the factor, and find the bad ones.

By default (``check="auto"``) a failure raises nvmath.LinAlgError from ``execute()`` wherever reading
the library's ``info`` costs no extra synchronization (CPU execution, host operands such as these numpy
arrays, ``blocking=True``). Here ``check=False`` keeps the factors of the good matrices: ``check()``
then names the matrices that failed (the cheap way to look at ``info`` of non-blocking GPU work too).
"""

import numpy as np

import nvmath
from nvmath import linalg

rng = np.random.default_rng(1)
batch, n = 64, 16
g = rng.standard_normal((batch, n, n))
a = g @ g.transpose(0, 2, 1) + n * np.eye(n)  # symmetric positive definite
a[5, 3, 3] = -1e3  # make matrix 5 indefinite

with linalg.Cholesky(a, lower=True, options={"check": False}) as chol:
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
