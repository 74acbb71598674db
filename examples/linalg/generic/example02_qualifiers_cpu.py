"""Structured operands through qualifiers: only the stored triangle (or the diagonal vector) is read.

Symmetric / Hermitian operands run symm / hemm, a diagonal one is a 1-D vector (dgmm), a conjugate
qualifier conjugates an operand without the caller making a copy.
"""

import numpy as np

import nvmath.linalg as la

rng = np.random.default_rng(1)
n = 6
s = rng.standard_normal((n, n))
s[np.triu_indices(n, 1)] = np.nan  # the upper triangle is never read
full = np.tril(s) + np.tril(s, -1).T
b = rng.standard_normal((n, 3))

# One record per operand (a, b): a is symmetric with its lower triangle stored.
q = np.full(2, la.GeneralMatrixQualifier.create(), dtype=la.matrix_qualifiers_dtype)
q[0] = la.SymmetricMatrixQualifier.create(uplo=la.FillMode.LOWER)
assert np.allclose(la.matmul(s, b, qualifiers=q), np.nan_to_num(full) @ b)

# A diagonal operand is a vector: diag(v) @ b, with the vector read every incx elements.
v = rng.standard_normal(2 * n)
q[0] = la.DiagonalMatrixQualifier.create(incx=2)
assert np.allclose(la.matmul(v, b, qualifiers=q), np.diag(v[::2]) @ b)

# Hermitian, conjugated: conj(H) @ b.
h = rng.standard_normal((n, n)) + 1j * rng.standard_normal((n, n))
h = h + h.conj().T
bc = b.astype(complex)
q[0] = la.HermitianMatrixQualifier.create(conjugate=True, uplo=la.FillMode.UPPER)
assert np.allclose(la.matmul(h, bc, qualifiers=q), h.conj() @ bc)

# Triangular operands (trmm) run on the GPU only: on the CPU this is a NotImplementedError.
q[0] = la.TriangularMatrixQualifier.create()
try:
    la.matmul(s, b, qualifiers=q)
except NotImplementedError as exc:
    print("as expected:", exc)
