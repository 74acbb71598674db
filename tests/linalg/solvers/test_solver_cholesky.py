"""Cholesky factorization and solves with the factor (nvmath.linalg._solvers._cholesky)."""

from __future__ import annotations

import numpy as np
import pytest
from solver_testing import DTYPES, backward_error, random_hpd, random_matrix, rel, tol

from nvmath import LinAlgError


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("batch", [(), (3,), (2, 2)])
def test_cholesky_reconstructs_a(space, solvers, rng, dtype, lower, batch):
    """The factor is triangular and L L^H (or U^H U) reproduces a."""
    n = 12
    a = random_hpd(rng, batch, n, dtype)
    f = space.get(solvers.cholesky(space.put(a), lower=lower, **space.kwargs()))
    assert f.shape == a.shape and f.dtype == a.dtype
    other = np.triu(f, 1) if lower else np.tril(f, -1)
    assert not np.any(other), "the other triangle must be exactly zero"
    fh = np.conj(np.swapaxes(f, -1, -2))
    recon = f @ fh if lower else fh @ f
    assert rel(recon, a) < tol(dtype, n)


@pytest.mark.parametrize("dtype", ["float32", "complex128"])
def test_cholesky_matches_numpy(space, solvers, rng, dtype):
    """The lower factor equals numpy's float64 Cholesky factor to working precision."""
    a = random_hpd(rng, (4,), 16, dtype)
    ref = np.linalg.cholesky(a.astype(np.complex128))
    f = space.get(solvers.cholesky(space.put(a), **space.kwargs()))
    assert rel(f, ref) < tol(dtype, 16)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("rhs", ["vector", "matrix", "batched"])
def test_cholesky_solve_residual(space, solvers, rng, dtype, rhs):
    """cholesky_solve(c, b) solves a x = b with a small backward error."""
    n = 10
    batch = (3,) if rhs == "batched" else ()
    a = random_hpd(rng, batch, n, dtype)
    b = random_matrix(rng, {"vector": (n,), "matrix": (n, 2), "batched": (3, n, 4)}[rhs], dtype)
    c = solvers.cholesky(space.put(a), **space.kwargs())
    x = space.get(solvers.cholesky_solve(c, space.put(b), **space.kwargs()))
    assert x.shape == b.shape
    assert backward_error(a, x, b) < tol(dtype, n)


@pytest.mark.parametrize("lower", [True, False])
def test_planner_solve_uses_last_factor(space, solvers, rng, lower):
    """Cholesky.solve(b) reuses the factor of the last execute(), for several right-hand sides."""
    a = random_hpd(rng, (2,), 8, "float64")
    with solvers.Cholesky(space.put(a), lower=lower, **space.kwargs()) as chol:
        chol.plan()
        chol.execute()
        for nrhs in (1, 3):
            b = random_matrix(rng, (2, 8, nrhs), "float64")
            x = space.get(chol.solve(space.put(b)))
            assert backward_error(a, x, b) < tol("float64", 8)


def test_batched_equals_unbatched(space, solvers, rng):
    """Factoring a batch gives the same factors as factoring each matrix alone."""
    a = random_hpd(rng, (5,), 9, "float64")
    whole = space.get(solvers.cholesky(space.put(a), **space.kwargs()))
    for i in range(5):
        one = space.get(solvers.cholesky(space.put(a[i]), **space.kwargs()))
        assert rel(whole[i], one) < tol("float64", 9)


def test_not_positive_definite_reports_minor(space, solvers):
    """A non-PD matrix is reported by check() with its batch index and the order of the failing minor."""
    a = np.stack([np.eye(4), np.diag([1.0, 2.0, -1.0, 4.0]), np.eye(4)])
    chol = solvers.Cholesky(space.put(a), options={"check": False}, **space.kwargs())
    chol.plan()
    chol.execute()  # check=False: never raises, info is kept for check()
    with pytest.raises(
        LinAlgError, match=r"matrix 1: not positive definite: the leading minor of order 3"
    ) as err:
        chol.check()
    assert err.value.indices == ((1,),) and err.value.info == (3,)
    chol.free()


def test_default_check_raises_where_it_costs_no_sync(space, solvers):
    """By default (check="auto") a non-PD matrix raises from execute() where reading info adds no
    synchronization (CPU execution, host operands); on the GPU with device operands and
    blocking="auto" it stays in info until check()."""
    a = np.diag([1.0, -1.0, 1.0])
    chol = solvers.Cholesky(space.put(a), **space.kwargs())
    chol.plan()
    free = not chol.on_gpu or space.device == "cpu"
    if free:
        with pytest.raises(LinAlgError, match="leading minor of order 2"):
            chol.execute()
    else:
        chol.execute()
        with pytest.raises(LinAlgError, match="leading minor of order 2"):
            chol.check()
    blocking = solvers.Cholesky(space.put(a), options={"blocking": True}, **space.kwargs())
    with pytest.raises(LinAlgError, match="leading minor of order 2"):
        blocking.plan()
        blocking.execute()  # blocking=True syncs anyway: checked by default everywhere
    chol.free()
    blocking.free()


def test_check_option_raises_from_execute(space, solvers):
    """options.check=True makes execute() itself raise LinAlgError for a non-PD matrix."""
    a = -np.eye(3)
    with pytest.raises(LinAlgError, match="the leading minor of order 1"):
        solvers.cholesky(space.put(a), options={"check": True}, **space.kwargs())


def test_nan_input_gives_a_nan_factor(space, solvers):
    """A NaN in a (check=False): no exception, the whole factor is NaN (the non-finite policy of
    docs/solvers.rst; test_solver_nonfinite.py covers every solver and position)."""
    a = np.eye(3)
    a[1, 1] = np.nan
    chol = solvers.Cholesky(space.put(a), options={"check": False}, **space.kwargs())
    chol.plan()
    f = space.get(chol.execute())
    assert np.isnan(f).all()
    chol.free()


def test_only_the_named_triangle_is_read(space, solvers, rng):
    """Garbage in the unused triangle does not change the factor."""
    a = random_hpd(rng, (), 6, "float64")
    junk = a + np.triu(np.full((6, 6), 1e3), 1)
    f = space.get(solvers.cholesky(space.put(junk), lower=True, **space.kwargs()))
    assert rel(f @ f.T, a) < tol("float64", 6)


def test_reset_operands_refactors(space, solvers, rng):
    """reset_operands(a=) followed by execute() factors the new matrix."""
    a1, a2 = random_hpd(rng, (), 5, "float32"), random_hpd(rng, (), 5, "float32")
    with solvers.Cholesky(space.put(a1), **space.kwargs()) as chol:
        chol.plan()
        f1 = space.get(chol.execute())
        chol.reset_operands(a=space.put(a2))
        f2 = space.get(chol.execute())
    assert rel(f1 @ f1.T, a1) < tol("float32", 5)
    assert rel(f2 @ f2.T, a2) < tol("float32", 5)
