"""Stateless matmul on torch, cupy-free numpy and batched operands; the plan cache at work.
"""

from nvmath._diagnostics.requirements import require

require("gpu", "torch")  # or exit 77 ("skipped") with a message saying what is missing

import numpy as np
import torch

import nvmath.linalg.advanced as adv

# torch CUDA tensors: the result is a torch tensor on the same device, queued on torch's current stream.
a = torch.randn(1024, 512, device="cuda", dtype=torch.bfloat16)
b = torch.randn(512, 256, device="cuda", dtype=torch.bfloat16)
c = adv.matmul(a, b)
torch.testing.assert_close(c, a @ b, rtol=2e-2, atol=2e-1)

# alpha * a @ b + beta * c, with c broadcast over the columns (shape (M, 1)).
bias_col = torch.randn(1024, 1, device="cuda", dtype=torch.bfloat16)
d = adv.matmul(a, b, bias_col, alpha=0.5, beta=1.0)
torch.testing.assert_close(d, 0.5 * (a @ b) + bias_col, rtol=2e-2, atol=2e-1)

# Batched operands broadcast as numpy.matmul does; transposed views are used without copies.
x = torch.randn(8, 64, 32, device="cuda")
w = torch.randn(48, 32, device="cuda")
y = adv.matmul(x, w.T)
torch.testing.assert_close(y, x @ w.T, rtol=1e-4, atol=1e-4)

# numpy operands are copied to the GPU (options.device_id), computed there and copied back.
p, q = np.random.default_rng(0).standard_normal((2, 100, 50, 40))
qt = np.swapaxes(q, -1, -2)  # a transposed view of each matrix of the batch
r = adv.matmul(p, qt)
assert isinstance(r, np.ndarray) and np.allclose(r, p @ qt)

# Repeated calls with the same shapes, layouts and dtypes reuse the cached plan.
for _ in range(10):
    adv.matmul(a, b)
print("plan cache:", adv.plan_cache.stats)
