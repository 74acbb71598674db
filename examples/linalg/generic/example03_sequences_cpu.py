"""Explicit batches: Python sequences of operands of different shapes, one call.

Per-problem alpha / beta / qualifiers are sequences too; a length-1 sequence is broadcast. On the GPU
the whole sequence is one grouped GEMM launch (float32 / float64 / float16 / bfloat16).
"""

import numpy as np

import nvmath.linalg as la

rng = np.random.default_rng(2)
tokens = [rng.standard_normal((m, 64)).astype(np.float32) for m in (5, 17, 3, 40)]
expert = rng.standard_normal((64, 32)).astype(np.float32)

# Four problems of different M against one (broadcast) weight, each with its own alpha.
out = la.matmul(tokens, [expert], alpha=[1.0, 0.5, 2.0, -1.0])
assert isinstance(out, list) and [o.shape for o in out] == [(5, 32), (17, 32), (3, 32), (40, 32)]
for o, t, al in zip(out, tokens, [1.0, 0.5, 2.0, -1.0]):
    assert np.allclose(o, al * t @ expert, rtol=1e-5, atol=1e-5)
print("ok:", [o.shape for o in out])
