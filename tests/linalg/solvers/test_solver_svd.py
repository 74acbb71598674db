"""Singular value decomposition (nvmath.linalg._solvers._svd)."""

from __future__ import annotations

import numpy as np
import pytest
from solver_testing import DTYPES, orthogonality, random_matrix, rel, tol


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(7, 5), (5, 7), (6, 6), (3, 40, 20)])
@pytest.mark.parametrize("full_matrices", [True, False])
def test_svd_factors(space, solvers, rng, dtype, shape, full_matrices):
    """U diag(S) Vh = a, U and Vh^H orthonormal, S descending and equal to numpy's float64 values."""
    a = random_matrix(rng, shape, dtype)
    u, s, vh = (
        space.get(x) for x in solvers.svd(space.put(a), full_matrices=full_matrices, **space.kwargs())
    )
    m, n = shape[-2:]
    k = min(m, n)
    assert s.shape == (*shape[:-2], k) and np.all(np.diff(s, axis=-1) <= 0)
    assert u.shape == (*shape[:-2], m, m if full_matrices else k)
    assert vh.shape == (*shape[:-2], n if full_matrices else k, n)
    assert orthogonality(u) < tol(dtype, m) and orthogonality(np.conj(np.swapaxes(vh, -1, -2))) < tol(
        dtype, n
    )
    recon = (u[..., :, :k] * s[..., None, :]) @ vh[..., :k, :]
    assert rel(recon, a) < tol(dtype, max(m, n))
    ref = np.linalg.svd(a.astype(np.complex128), compute_uv=False)
    assert rel(s, ref) < tol(dtype, max(m, n))


def test_svdvals(space, solvers, rng):
    """svdvals returns the singular values only."""
    a = random_matrix(rng, (4, 9, 3), "complex64")
    s = space.get(solvers.svdvals(space.put(a), **space.kwargs()))
    assert rel(s, np.linalg.svd(a.astype(np.complex128), compute_uv=False)) < tol("complex64", 9)


def test_svd_ill_conditioned(space, solvers, rng):
    """A matrix with singular values from 1 to 1e-12 keeps its small values to absolute accuracy."""
    n = 12
    q1, _ = np.linalg.qr(random_matrix(rng, (n, n), "float64"))
    q2, _ = np.linalg.qr(random_matrix(rng, (n, n), "float64"))
    sv = np.logspace(0, -12, n)
    a = (q1 * sv) @ q2.T
    s = space.get(solvers.svdvals(space.put(a), **space.kwargs()))
    assert np.max(np.abs(s - sv)) < tol("float64", n)


def test_svd_rank_deficient(space, solvers, rng):
    """A rank-2 matrix has (numerically) zero trailing singular values and still reconstructs."""
    a = random_matrix(rng, (8, 2), "float64") @ random_matrix(rng, (2, 6), "float64")
    u, s, vh = (space.get(x) for x in solvers.svd(space.put(a), full_matrices=False, **space.kwargs()))
    assert np.all(s[2:] < tol("float64", 8) * s[0])
    assert rel((u * s) @ vh, a) < tol("float64", 8)


def test_svd_batched_equals_unbatched(space, solvers, rng):
    """A batch gives each matrix's own singular values."""
    a = random_matrix(rng, (4, 6, 5), "float32")
    s = space.get(solvers.svdvals(space.put(a), **space.kwargs()))
    for i in range(4):
        assert rel(s[i], space.get(solvers.svdvals(space.put(a[i]), **space.kwargs()))) < tol("float32", 6)
