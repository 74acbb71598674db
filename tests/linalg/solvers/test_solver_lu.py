"""LU factorization, lu_solve, inv and solve (nvmath.linalg._solvers._lu / _inv / _direct)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg as sla
from solver_testing import DTYPES, backward_error, random_matrix, rel, tol

from nvmath import LinAlgError


def _unpack(lu: np.ndarray, piv: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(P, L, U) of one matrix from LAPACK-style factors with 1-based pivots (P a = L U)."""
    n = lu.shape[-1]
    perm = np.arange(n)
    for i, p in enumerate(piv):
        perm[[i, p - 1]] = perm[[p - 1, i]]
    return np.eye(n)[perm], np.tril(lu, -1) + np.eye(n), np.triu(lu)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("batch", [(), (4,)])
def test_lu_factor_reconstructs_pa(space, solvers, rng, dtype, batch):
    """P a = L U with 1-based int32 pivots, as LAPACK and torch.linalg.lu_factor."""
    n = 9
    a = random_matrix(rng, (*batch, n, n), dtype)
    lu, piv = solvers.lu_factor(space.put(a), **space.kwargs())
    lu, piv = space.get(lu), space.get(piv)
    assert piv.dtype == np.int32 and piv.shape == (*batch, n)
    assert piv.min() >= 1 and piv.max() <= n
    for idx in np.ndindex(*batch):
        p, low, up = _unpack(lu[idx], piv[idx])
        assert rel(low @ up, p @ a[idx]) < tol(dtype, n)


def test_pivots_match_scipy(space, solvers, rng):
    """The pivots are scipy's lu_factor pivots plus one (float64)."""
    a = random_matrix(rng, (7, 7), "float64")
    _, piv = solvers.lu_factor(space.put(a), **space.kwargs())
    assert np.array_equal(space.get(piv), sla.lu_factor(a)[1] + 1)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("trans", ["N", "T", "C"])
def test_lu_solve_trans(space, solvers, rng, dtype, trans):
    """lu_solve solves a x = b, a^T x = b or a^H x = b."""
    n = 8
    a = random_matrix(rng, (2, n, n), dtype)
    b = random_matrix(rng, (2, n, 3), dtype)
    lu, piv = solvers.lu_factor(space.put(a), **space.kwargs())
    x = space.get(solvers.lu_solve(lu, piv, space.put(b), trans=trans, **space.kwargs()))
    op = {"N": a, "T": np.swapaxes(a, -1, -2), "C": np.conj(np.swapaxes(a, -1, -2))}[trans]
    assert backward_error(op, x, b) < tol(dtype, n)


def test_lu_planner_solve(space, solvers, rng):
    """LU.execute() then LU.solve(b) for a vector right-hand side."""
    a = random_matrix(rng, (6, 6), "complex64")
    b = random_matrix(rng, (6,), "complex64")
    with solvers.LU(space.put(a), **space.kwargs()) as lu:
        lu.plan()
        lu.execute()
        x = space.get(lu.solve(space.put(b)))
    assert x.shape == (6,)
    assert backward_error(a, x, b) < tol("complex64", 6)


def test_singular_matrix_reports_pivot(space, solvers):
    """An exactly singular matrix is named by check(): 'singular: the pivot U[k, k] is exactly zero'."""
    a = np.stack([np.eye(3), np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [0.0, 0.0, 1.0]])])
    lu = solvers.LU(space.put(a), **space.kwargs())
    lu.plan()
    lu.execute()
    with pytest.raises(LinAlgError, match=r"1 of 2 matrices: matrix 1: singular: the pivot U\[1, 1\]") as err:
        lu.check()
    assert err.value.indices == ((1,),) and err.value.info == (2,)
    lu.free()


@pytest.mark.parametrize("dtype", DTYPES)
def test_inv(space, solvers, rng, dtype):
    """inv(a) @ a is the identity for random matrices (batched)."""
    n = 10
    a = random_matrix(rng, (3, n, n), dtype)
    x = space.get(solvers.inv(space.put(a), **space.kwargs()))
    assert rel(x @ a, np.broadcast_to(np.eye(n), a.shape)) < tol(dtype, n, 100)


def test_inv_of_singular_is_reported(space, solvers):
    """inv of a singular matrix with check=True raises LinAlgError naming it."""
    a = np.zeros((2, 3, 3))
    a[0] = np.eye(3)
    with pytest.raises(LinAlgError, match="matrix 1: singular"):
        solvers.inv(space.put(a), options={"check": True}, **space.kwargs())


@pytest.mark.parametrize("dtype", DTYPES)
def test_solve_random_without_boost(space, solvers, rng, dtype):
    """solve() on random n=100 systems without a diagonal boost (nvmath-python issue 56)."""
    n = 100
    a = random_matrix(rng, (n, n), dtype)
    b = random_matrix(rng, (n, 2), dtype)
    x = space.get(solvers.solve(space.put(a), space.put(b), **space.kwargs()))
    assert backward_error(a, x, b) < tol(dtype, n)
    ref = np.linalg.solve(a.astype(np.complex128), b)
    cond = np.linalg.cond(a.astype(np.complex128))
    assert rel(x, ref) < tol(dtype, n) * cond


def test_solve_ill_conditioned_is_backward_stable(space, solvers):
    """A Hilbert system (cond ~ 1e13) still has a tiny backward error in float64."""
    n = 10
    a = sla.hilbert(n)
    b = np.ones((n, 1))
    x = space.get(solvers.solve(space.put(a), space.put(b), **space.kwargs()))
    assert backward_error(a, x, b) < tol("float64", n)


def test_singular_solve_gives_non_finite_without_check(space, solvers):
    """A singular system with check=False returns non-finite values instead of raising."""
    a = np.array([[1.0, 2.0], [2.0, 4.0]])
    x = space.get(
        solvers.solve(space.put(a), space.put(np.ones((2, 1))), options={"check": False}, **space.kwargs())
    )
    assert not np.all(np.isfinite(x))


def test_singular_solve_raises_by_default_where_free(space, solvers):
    """numpy-like default: solve() and inv() of a singular matrix raise LinAlgError (a ValueError, like
    numpy.linalg.LinAlgError) where checking costs no sync; otherwise the result is non-finite."""
    a = np.array([[1.0, 2.0], [2.0, 4.0]])
    free = space.device == "cpu"
    for call in (
        lambda: solvers.solve(space.put(a), space.put(np.ones((2, 1))), **space.kwargs()),
        lambda: solvers.inv(space.put(a), **space.kwargs()),
        lambda: solvers.direct_solver(space.put(a), space.put(np.ones(2)), **space.kwargs()),
    ):
        if free:
            with pytest.raises(LinAlgError, match="singular"):
                call()
        else:
            assert not np.all(np.isfinite(space.get(call())))


@pytest.mark.parametrize("bad", [0, 3, -5, 99, 2**31 - 1])
def test_lu_solve_refuses_out_of_range_pivots(space, solvers, bad):
    """A pivot outside 1..n never reaches LAPACK/cuSOLVER: host pivots raise ValueError before any
    work; device pivots flag the matrix in info (LinAlgError from check()) and give NaN, not a wrong x."""
    a = np.array([[4.0, 1.0], [2.0, 3.0]])
    lu, piv = solvers.lu_factor(space.put(a), **space.kwargs())
    host_piv = np.array(space.get(piv))
    host_piv[0] = bad
    b = space.put(np.ones((2, 1)))
    if space.device == "cpu":
        with pytest.raises(ValueError, match=rf"piv\[0\] = {bad}"):
            solvers.lu_solve(lu, space.put(host_piv.astype(np.int32)), b, **space.kwargs())
        return
    solver = solvers.LUSolve(lu, space.put(host_piv.astype(np.int32)), b, options={"check": False}, **space.kwargs())
    solver.plan()
    x = space.get(solver.execute())
    assert np.all(np.isnan(x))
    with pytest.raises(LinAlgError, match=r"pivot piv\[0\] is outside 1..n"):
        solver.check()
    solver.free()


def test_lu_solve_refuses_pivots_of_the_wrong_dtype(space, solvers):
    """Pivots must be int32 (as lu_factor returns them): int64 or float pivots are a ValueError."""
    a = np.array([[4.0, 1.0], [2.0, 3.0]])
    lu, piv = solvers.lu_factor(space.put(a), **space.kwargs())
    host_piv = np.array(space.get(piv))
    for dtype in (np.int64, np.float64):
        with pytest.raises(ValueError, match="operand 'piv' must be int32"):
            solvers.lu_solve(lu, space.put(host_piv.astype(dtype)), space.put(np.ones(2)), **space.kwargs())


def test_lu_nan_policy(space, solvers):
    """NaN input: LinAlgError with check=True, an all-NaN solution with check=False -- on the GPU too,
    where cuSOLVER's elimination alone skips multiplications by zero and would solve an identity with
    one NaN below the diagonal to all ones (the non-finite policy of docs/solvers.rst)."""
    a = np.eye(3)
    a[2, 0] = np.nan
    with pytest.raises(LinAlgError, match="NaN or Inf"):
        solvers.solve(space.put(a), space.put(np.ones((3, 1))), options={"check": True}, **space.kwargs())
    x = solvers.solve(space.put(a), space.put(np.ones((3, 1))), options={"check": False}, **space.kwargs())
    assert np.isnan(space.get(x)).all()
