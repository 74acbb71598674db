"""Batched solvers on the GPU with cupy arrays; the kernel choice is logged at DEBUG.
"""

from nvmath._diagnostics.requirements import require

require("gpu", "cupy")  # or exit 77 ("skipped") with a message saying what is missing

import logging

import cupy as xp
import numpy as np

from nvmath import linalg

logging.basicConfig(level=logging.DEBUG, format="%(name)s %(message)s")

batch, n = 4096, 32
rng = np.random.default_rng(3)
g = xp.asarray(rng.standard_normal((batch, n, n)), dtype=xp.float32)
a = g @ g.transpose(0, 2, 1) + n * xp.eye(n, dtype=xp.float32)

w = linalg.eigvalsh(a)  # syevjBatched: one call for the whole batch
L = linalg.cholesky(a, options={"algorithm": "batched"})  # potrfBatched
x = linalg.solve(a, xp.ones((batch, n, 1), dtype=xp.float32))  # cuBLAS getrf/getrsBatched
xp.cuda.get_current_stream().synchronize()
print("eigenvalue range:", float(w.min()), float(w.max()))
print("cholesky residual:", float(xp.abs(L @ L.transpose(0, 2, 1) - a).max()))
print("solve residual:", float(xp.abs(a @ x - 1).max()))
