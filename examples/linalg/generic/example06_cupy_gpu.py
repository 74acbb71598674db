"""cupy operands: cupy results on the same device; a Hermitian operand and a diagonal one."""

from nvmath._diagnostics.requirements import require

require("gpu", "cupy")  # or exit 77 ("skipped") with a message saying what is missing

import cupy as cp
import numpy as np

import nvmath.linalg as la

rng = np.random.default_rng(3)
h = rng.standard_normal((128, 128)) + 1j * rng.standard_normal((128, 128))
h = cp.asarray(h + h.conj().T)
x = cp.asarray(rng.standard_normal((128, 16)) + 0j)
q = np.array([la.HermitianMatrixQualifier.create(uplo=la.FillMode.UPPER), la.GeneralMatrixQualifier.create()])
out = la.matmul(h, x, qualifiers=q)
assert isinstance(out, cp.ndarray) and cp.allclose(out, h @ x)

d = cp.asarray(rng.standard_normal(128))
q = np.array([la.GeneralMatrixQualifier.create(), la.DiagonalMatrixQualifier.create()])
y = cp.asarray(rng.standard_normal((16, 128)))
assert cp.allclose(la.matmul(y, d, qualifiers=q), y * d[None, :])
print("ok")
