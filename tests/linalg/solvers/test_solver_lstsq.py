"""Linear least squares (nvmath.linalg._solvers._lstsq)."""

from __future__ import annotations

import numpy as np
import pytest
from solver_testing import DTYPES, random_matrix, rel, tol


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("bshape", [(12,), (12, 3), (2, 12, 3)])
def test_lstsq_overdetermined(space, solvers, rng, dtype, bshape):
    """The solution of a tall full-rank problem matches numpy's and satisfies the normal equations."""
    batch = bshape[:-2]
    a = random_matrix(rng, (*batch, 12, 5), dtype)
    b = random_matrix(rng, bshape, dtype)
    res = solvers.lstsq(space.put(a), space.put(b), **space.kwargs())
    x = space.get(res.solution)
    assert x.shape == (5,) if len(bshape) == 1 else (*batch, 5, bshape[-1])
    x2 = x[..., None] if len(bshape) == 1 else x
    b2 = b[..., None] if len(bshape) == 1 else b
    ah = np.conj(np.swapaxes(a, -1, -2)).astype(np.complex128)
    normal = ah @ (a @ x2 - b2)
    assert np.max(np.abs(normal)) < tol(dtype, 12, 100) * np.max(np.abs(ah @ b2))
    for idx in np.ndindex(*batch):
        ref = np.linalg.lstsq(a[idx].astype(np.complex128), b2[idx].astype(np.complex128), rcond=None)[0]
        assert rel(x2[idx], ref) < tol(dtype, 12, 100)


def test_lstsq_cpu_extras(solvers, rng):
    """On the CPU the result also holds residuals, rank and singular values (like numpy)."""
    a, b = random_matrix(rng, (10, 4), "float64"), random_matrix(rng, (10,), "float64")
    res = solvers.lstsq(a, b)
    x, resid, rank, sv = np.linalg.lstsq(a, b, rcond=None)
    assert rel(res.solution, x) < 1e-12 and rel(res.residuals, resid) < 1e-12
    assert int(res.rank) == rank and rel(res.singular_values, sv) < 1e-12


def test_lstsq_underdetermined_minimum_norm_cpu(solvers, rng):
    """On the CPU a wide system gets the minimum-norm solution (gelsd)."""
    a, b = random_matrix(rng, (3, 7), "complex128"), random_matrix(rng, (3, 2), "complex128")
    res = solvers.lstsq(a, b)
    assert rel(res.solution, np.linalg.pinv(a) @ b) < 1e-12
    assert res.residuals.size == 0


def test_lstsq_gpu_returns_solution_only(gpu_space, solvers, rng):
    """On the GPU (gels) residuals, rank and singular values are None."""
    a, b = random_matrix(rng, (10, 4), "float64"), random_matrix(rng, (10, 2), "float64")
    res = solvers.lstsq(gpu_space.put(a), gpu_space.put(b), **gpu_space.kwargs())
    assert res.residuals is None and res.rank is None and res.singular_values is None
    assert rel(gpu_space.get(res.solution), np.linalg.lstsq(a, b, rcond=None)[0]) < 1e-10
