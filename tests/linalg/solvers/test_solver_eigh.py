"""Hermitian eigensolver (nvmath.linalg._solvers._eigh)."""

from __future__ import annotations

import numpy as np
import pytest

from nvmath import LinAlgError
from solver_testing import DTYPES, orthogonality, random_hermitian, rel, tol


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("batch", [(), (4,), (2, 3)])
@pytest.mark.parametrize("n", [5, 40])
def test_eigh_residual_and_orthogonality(space, solvers, rng, dtype, batch, n):
    """a v = v diag(w), v unitary, w ascending and equal to numpy's float64 eigenvalues."""
    a = random_hermitian(rng, batch, n, dtype)
    w, v = solvers.eigh(space.put(a), **space.kwargs())
    w, v = space.get(w), space.get(v)
    real = np.float32 if dtype in ("float32", "complex64") else np.float64
    assert w.dtype == real and w.shape == (*batch, n) and v.shape == a.shape
    assert np.all(np.diff(w, axis=-1) >= 0)
    scale = np.linalg.norm(a.astype(np.complex128), axis=(-2, -1), keepdims=True)
    resid = np.linalg.norm(a @ v - v * w[..., None, :], axis=(-2, -1), keepdims=True) / scale
    assert resid.max() < tol(dtype, n)
    assert orthogonality(v) < tol(dtype, n)
    ref = np.linalg.eigvalsh(a.astype(np.complex128))
    assert np.max(np.abs(w - ref)) <= tol(dtype, n) * scale.max()


@pytest.mark.parametrize("lower", [True, False])
def test_eigh_reads_one_triangle(space, solvers, rng, lower):
    """Only the triangle named by `lower` is read (the other may hold garbage)."""
    a = random_hermitian(rng, (), 6, "float64")
    junk = a + (np.triu(np.full((6, 6), 50.0), 1) if lower else np.tril(np.full((6, 6), 50.0), -1))
    w = space.get(solvers.eigvalsh(space.put(junk), lower=lower, **space.kwargs()))
    assert rel(w, np.linalg.eigvalsh(a)) < tol("float64", 6)


def test_eigvalsh_matches_eigh(space, solvers, rng):
    """eigvalsh returns the eigenvalues of eigh without the vectors."""
    a = random_hermitian(rng, (3,), 12, "complex64")
    w = space.get(solvers.eigvalsh(space.put(a), **space.kwargs()))
    w2, _ = solvers.eigh(space.put(a), **space.kwargs())
    assert rel(w, space.get(w2)) < tol("complex64", 12)


def test_eigh_batched_equals_unbatched(space, solvers, rng):
    """A batch gives each matrix's own eigenvalues."""
    a = random_hermitian(rng, (5,), 10, "float64")
    w = space.get(solvers.eigvalsh(space.put(a), **space.kwargs()))
    for i in range(5):
        assert rel(w[i], space.get(solvers.eigvalsh(space.put(a[i]), **space.kwargs()))) < tol("float64", 10)


def test_eigh_degenerate_spectrum(space, solvers):
    """Repeated eigenvalues (identity plus a rank-one term) still give an orthonormal basis."""
    u = np.ones((8, 1)) / np.sqrt(8)
    a = np.eye(8) + 3 * (u @ u.T)
    w, v = (space.get(x) for x in solvers.eigh(space.put(a), **space.kwargs()))
    assert np.allclose(w, [1] * 7 + [4])
    assert orthogonality(v) < tol("float64", 8)


def test_eigh_nan_gives_nan_and_reports(space, solvers):
    """NaN input (check=False): NaN eigenvalues, and check() reports the non-finite input (the
    non-finite policy of docs/solvers.rst)."""
    a = np.eye(4)
    a[2, 1] = a[1, 2] = np.nan
    eig = solvers.Eigh(space.put(a), vectors=False, options={"check": False}, **space.kwargs())
    eig.plan()
    w = space.get(eig.execute())
    assert np.isnan(w).all()
    with pytest.raises(LinAlgError, match="NaN or Inf"):
        eig.check()
    eig.free()
