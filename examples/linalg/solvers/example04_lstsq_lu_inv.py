"""Least squares, LU with pivots, and the inverse."""

import numpy as np

from nvmath import linalg

rng = np.random.default_rng(2)
a = rng.standard_normal((50, 6))
b = rng.standard_normal(50)

result = linalg.lstsq(a, b)
print("lstsq solution:", np.round(result.solution, 4))
print("rank:", result.rank, "residual sum of squares:", result.residuals)

m = rng.standard_normal((4, 5, 5)).astype(np.float32)
lu, piv = linalg.lu_factor(m)  # piv: int32, 1-based (LAPACK convention)
x = linalg.lu_solve(lu, piv, np.ones((4, 5, 1), dtype=np.float32))
print("lu_solve residual:", np.abs(m @ x - 1).max())
print("inverse residual:", np.abs(linalg.inv(m) @ m - np.eye(5)).max())
