"""numpy operands computed on the GPU with execution="cuda": copied there and back, numpy result."""

from nvmath._diagnostics.requirements import require

require("gpu")  # or exit 77 ("skipped") with a message saying what is missing

import numpy as np

import nvmath.linalg as la

rng = np.random.default_rng(4)
a = rng.standard_normal((512, 256)).astype(np.float32)
b = rng.standard_normal((256, 128)).astype(np.float32)
out = la.matmul(a, b, execution="cuda")
assert isinstance(out, np.ndarray) and np.allclose(out, a @ b, rtol=1e-4, atol=1e-3)

# A triangular operand needs the GPU: execution=ExecutionCUDA(device_id=0).
q = np.array(
    [la.TriangularMatrixQualifier.create(uplo=la.FillMode.UPPER), la.GeneralMatrixQualifier.create()]
)
t = rng.standard_normal((256, 256))
x = rng.standard_normal((256, 8))
assert np.allclose(la.matmul(t, x, qualifiers=q, execution=la.ExecutionCUDA(device_id=0)), np.triu(t) @ x)
print("ok")
