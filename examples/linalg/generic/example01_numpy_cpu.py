"""The generic matmul on numpy operands: it runs on the CPU (numpy / scipy BLAS) by default.

alpha * a @ b + beta * c, N-D batches that broadcast like numpy.matmul, and the CPU thread count.
"""

import numpy as np

import nvmath.linalg

rng = np.random.default_rng(0)
a = rng.standard_normal((64, 32))
b = rng.standard_normal((32, 16))
c = rng.standard_normal((64, 16))

# numpy in, numpy out; nothing touches a GPU.
d = nvmath.linalg.matmul(a, b, c, alpha=0.5, beta=2.0)
assert np.allclose(d, 0.5 * a @ b + 2.0 * c)

# Batch dimensions broadcast as in numpy.matmul: (4, 1) with (3,) gives a (4, 3) batch.
x = rng.standard_normal((4, 1, 8, 5))
y = rng.standard_normal((3, 5, 7))
z = nvmath.linalg.matmul(x, y)
assert z.shape == (4, 3, 8, 7) and np.allclose(z, x @ y)

# The BLAS threads used for this call (threadpoolctl applies it when installed).
w = nvmath.linalg.matmul(a, b, execution=nvmath.linalg.ExecutionCPU(num_threads=1))
assert np.allclose(w, a @ b)
print("ok:", d.shape, z.shape, w.shape)
