"""QR factorization (nvmath.linalg._solvers._qr)."""

from __future__ import annotations

import numpy as np
import pytest
from solver_testing import DTYPES, orthogonality, random_matrix, rel, tol


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(9, 6), (6, 9), (7, 7), (3, 12, 5)])
@pytest.mark.parametrize("mode", ["reduced", "complete"])
def test_qr_factors(space, solvers, rng, dtype, shape, mode):
    """Q has orthonormal columns, R is upper triangular (exact zeros below) and Q R = a."""
    a = random_matrix(rng, shape, dtype)
    q, r = solvers.qr(space.put(a), mode=mode, **space.kwargs())
    q, r = space.get(q), space.get(r)
    m, n = shape[-2:]
    k = min(m, n)
    assert q.shape == (*shape[:-2], m, k if mode == "reduced" else m)
    assert r.shape == (*shape[:-2], k if mode == "reduced" else m, n)
    assert not np.any(np.tril(r, -1)), "R must be exactly upper triangular"
    assert orthogonality(q) < tol(dtype, m)
    assert rel(q @ r, a) < tol(dtype, max(m, n))


@pytest.mark.parametrize("dtype", ["float32", "complex128"])
def test_qr_r_mode_matches_numpy(space, solvers, rng, dtype):
    """mode='r' returns R only, equal to numpy's R up to the sign of each row."""
    a = random_matrix(rng, (4, 10, 6), dtype)
    r = space.get(solvers.qr(space.put(a), mode="r", **space.kwargs()))
    ref = np.linalg.qr(a.astype(np.complex128), mode="r")
    assert r.shape == ref.shape
    assert rel(np.abs(r), np.abs(ref)) < tol(dtype, 10)


def test_qr_batched_equals_unbatched(space, solvers, rng):
    """A batch gives each matrix's own factors."""
    a = random_matrix(rng, (5, 8, 4), "float64")
    q, r = (space.get(x) for x in solvers.qr(space.put(a), **space.kwargs()))
    for i in range(5):
        qi, ri = (space.get(x) for x in solvers.qr(space.put(a[i]), **space.kwargs()))
        assert rel(q[i] @ r[i], qi @ ri) < tol("float64", 8)
        assert rel(np.abs(ri), np.abs(r[i])) < tol("float64", 8)


def test_qr_rank_deficient(space, solvers, rng):
    """A rank-deficient matrix still factors: Q R = a, Q orthonormal."""
    base = random_matrix(rng, (8, 2), "float64")
    a = np.concatenate([base, base @ random_matrix(rng, (2, 3), "float64")], axis=1)
    q, r = (space.get(x) for x in solvers.qr(space.put(a), **space.kwargs()))
    assert orthogonality(q) < tol("float64", 8)
    assert rel(q @ r, a) < tol("float64", 8)


def test_qr_planner_reset(space, solvers, rng):
    """QR plan once, execute for two operands."""
    a1, a2 = random_matrix(rng, (6, 4), "complex64"), random_matrix(rng, (6, 4), "complex64")
    with solvers.QR(space.put(a1), **space.kwargs()) as qr:
        qr.plan()
        q1, r1 = (space.get(x) for x in qr.execute())
        qr.reset_operands(a=space.put(a2))
        q2, r2 = (space.get(x) for x in qr.execute())
        qr.check()  # QR has no failure mode
    assert rel(q1 @ r1, a1) < tol("complex64", 6) and rel(q2 @ r2, a2) < tol("complex64", 6)
