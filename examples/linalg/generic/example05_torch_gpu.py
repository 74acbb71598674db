"""torch CUDA tensors on cuBLAS: dtypes (bfloat16 with float32 accumulation), a triangular operand,
a user stream and a grouped sequence.
"""

from nvmath._diagnostics.requirements import require

require("gpu", "torch")  # or exit 77 ("skipped") with a message saying what is missing

import numpy as np
import torch

import nvmath.linalg as la

a = torch.randn(1024, 512, device="cuda", dtype=torch.bfloat16)
b = torch.randn(512, 256, device="cuda", dtype=torch.bfloat16)
torch.testing.assert_close(la.matmul(a, b), a @ b, rtol=2e-2, atol=2e-1)

# A lower-triangular operand: trmm reads only its lower triangle.
t = torch.randn(256, 256, device="cuda", dtype=torch.float64)
x = torch.randn(256, 64, device="cuda", dtype=torch.float64)


quals = np.array(
    [la.TriangularMatrixQualifier.create(uplo=la.FillMode.LOWER), la.GeneralMatrixQualifier.create()]
)
torch.testing.assert_close(la.matmul(t, x, qualifiers=quals), torch.tril(t) @ x)

# On a user stream: the result is ready once that stream is.
s = torch.cuda.Stream()
s.wait_stream(torch.cuda.current_stream())
y = la.matmul(x.T, x, stream=s)
s.synchronize()
torch.testing.assert_close(y, x.T @ x)

# A sequence of 64 problems of different shapes: one grouped GEMM launch.
ms = [16 * (1 + i % 8) for i in range(64)]
xs = [torch.randn(m, 512, device="cuda") for m in ms]
ws = [torch.randn(512, 128, device="cuda")]
outs = la.matmul(xs, ws)
for o, xi in zip(outs, xs):
    torch.testing.assert_close(o, xi @ ws[0], rtol=1e-4, atol=1e-3)
print("ok:", la.generic.plan_cache.stats)
