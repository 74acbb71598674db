"""DirectSolver / direct_solver: the nvmath-python 1.0 compatible dense LU solver."""

from __future__ import annotations

import inspect
import logging

import numpy as np
import pytest
from solver_testing import DTYPES, backward_error, random_matrix, rel, tol

from nvmath import InvalidPlannerState
from nvmath._errors import InvalidDirectSolverState


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "ashape,bshape",
    [((16, 16), (16,)), ((16, 16), (16, 3)), ((5, 16, 16), (5, 16, 2)), ((2, 3, 16, 16), (2, 3, 16, 1))],
)
def test_direct_solver_residual(space, solvers, rng, dtype, ashape, bshape):
    """plan -> factorize -> solve gives x of b's shape with a small backward error."""
    a, b = random_matrix(rng, ashape, dtype), random_matrix(rng, bshape, dtype)
    with solvers.DirectSolver(space.put(a), space.put(b), **space.kwargs()) as solver:
        assert solver.plan() is None
        assert solver.factorize() is None
        x = space.get(solver.solve())
    assert x.shape == b.shape and x.dtype == b.dtype
    assert backward_error(a, x, b) < tol(dtype, 16)


@pytest.mark.parametrize("dtype", ["float32", "complex128"])
def test_direct_solver_function(space, solvers, rng, dtype):
    """direct_solver(a, b) equals the stateful result."""
    a, b = random_matrix(rng, (4, 12, 12), dtype), random_matrix(rng, (4, 12, 2), dtype)
    x = space.get(solvers.direct_solver(space.put(a), space.put(b), **space.kwargs()))
    assert backward_error(a, x, b) < tol(dtype, 12)


def test_explicit_batching(space, solvers, rng):
    """Sequences of systems give a list of solutions, one per system."""
    a = [random_matrix(rng, (8, 8), "float64") for _ in range(3)]
    b = [random_matrix(rng, (8,), "float64") for _ in range(3)]
    xs = solvers.direct_solver([space.put(m) for m in a], [space.put(v) for v in b], **space.kwargs())
    assert isinstance(xs, list) and len(xs) == 3
    for ai, bi, xi in zip(a, b, xs):
        xi = space.get(xi)
        assert xi.shape == (8,)
        assert backward_error(ai, xi, bi) < tol("float64", 8)


def test_explicit_batching_matches_implicit(space, solvers, rng):
    """An explicit batch solves the same systems as the stacked implicit batch."""
    a, b = random_matrix(rng, (4, 6, 6), "complex64"), random_matrix(rng, (4, 6, 2), "complex64")
    implicit = space.get(solvers.direct_solver(space.put(a), space.put(b), **space.kwargs()))
    explicit = solvers.direct_solver([space.put(m) for m in a], [space.put(v) for v in b], **space.kwargs())
    for i, xi in enumerate(explicit):
        assert rel(space.get(xi), implicit[i]) < tol("complex64", 6, 100)


def test_batched_equals_unbatched(space, solvers, rng):
    """Solving a batch gives each system's own solution."""
    a, b = random_matrix(rng, (6, 10, 10), "float64"), random_matrix(rng, (6, 10, 1), "float64")
    whole = space.get(solvers.direct_solver(space.put(a), space.put(b), **space.kwargs()))
    for i in range(6):
        one = space.get(solvers.direct_solver(space.put(a[i]), space.put(b[i]), **space.kwargs()))
        assert rel(whole[i], one) < tol("float64", 10, 100)


def test_reset_b_reuses_factors_and_reset_a_needs_factorize(space, solvers, rng):
    """reset_operands(b=) solves again without refactoring; reset_operands(a=) requires factorize()."""
    a, b1, b2 = (
        random_matrix(rng, (7, 7), "float64"),
        random_matrix(rng, (7, 2), "float64"),
        random_matrix(rng, (7, 2), "float64"),
    )
    solver = solvers.DirectSolver(space.put(a), space.put(b1), **space.kwargs())
    solver.plan()
    solver.factorize()
    x1 = space.get(solver.solve())
    solver.reset_operands(b=space.put(b2))
    x2 = space.get(solver.solve())
    assert backward_error(a, x1, b1) < tol("float64", 7) and backward_error(a, x2, b2) < tol("float64", 7)
    a2 = random_matrix(rng, (7, 7), "float64")
    solver.reset_operands(a=space.put(a2))
    with pytest.raises(InvalidDirectSolverState, match=r"solve\(\) called before factorize\(\)"):
        solver.solve()
    solver.factorize()
    assert backward_error(a2, space.get(solver.solve()), b2) < tol("float64", 7)
    solver.free()


def test_inplace_b_overwrites_and_returns_b(space, solvers, rng):
    """With inplace_b the solution is written into b and b itself is returned."""
    a, b = random_matrix(rng, (3, 5, 5), "float64"), random_matrix(rng, (3, 5, 2), "float64")
    bt = space.put(b.copy())
    x = solvers.direct_solver(space.put(a), bt, options={"inplace_b": True}, **space.kwargs())
    assert x is bt
    assert backward_error(a, space.get(bt), b) < tol("float64", 5)


def test_inplace_a_holds_lu_factors(space, solvers, rng):
    """With inplace_a, factorize() writes the LU factors (as scipy's lu_factor) into a."""
    a = random_matrix(rng, (6, 6), "float64")
    at = space.put(a.copy())
    solver = solvers.DirectSolver(
        at, space.put(np.ones(6)), options=solvers.DirectSolverOptions(inplace_a=True), **space.kwargs()
    )
    solver.plan()
    solver.factorize()
    import scipy.linalg as sla

    assert rel(space.get(at), sla.lu_factor(a)[0]) < tol("float64", 6)
    solver.free()


def test_lifecycle_errors(space, solvers, rng):
    """Calls out of order raise InvalidDirectSolverState naming the method and the fix."""
    a, b = random_matrix(rng, (4, 4), "float64"), random_matrix(rng, (4,), "float64")
    solver = solvers.DirectSolver(space.put(a), space.put(b), **space.kwargs())
    with pytest.raises(InvalidDirectSolverState, match=r"DirectSolver.factorize\(\) called before plan\(\)"):
        solver.factorize()
    solver.plan()
    solver.release_operands()
    with pytest.raises(InvalidDirectSolverState, match=r"called after release_operands\(\)"):
        solver.factorize()
    solver.reset_operands(a=space.put(a), b=space.put(b))
    solver.factorize()
    solver.free()
    solver.free()  # idempotent
    for call in (solver.plan, solver.factorize, solver.solve, lambda: solver.reset_operands(b=space.put(b))):
        with pytest.raises(
            InvalidDirectSolverState, match=r"called after free\(\): create a new DirectSolver"
        ):
            call()
    assert issubclass(InvalidDirectSolverState, InvalidPlannerState) and issubclass(
        InvalidDirectSolverState, RuntimeError
    )


def test_failed_reset_leaves_object_usable(space, solvers, rng):
    """A rejected reset_operands() changes nothing: the old operands still solve."""
    a, b = random_matrix(rng, (4, 4), "float64"), random_matrix(rng, (4, 1), "float64")
    with solvers.DirectSolver(space.put(a), space.put(b), **space.kwargs()) as solver:
        solver.plan()
        solver.factorize()
        with pytest.raises(ValueError, match="planned for shape"):
            solver.reset_operands(b=space.put(random_matrix(rng, (4, 2), "float64")))
        assert backward_error(a, space.get(solver.solve()), b) < tol("float64", 4)


def test_logger_receives_phases(space, solvers, rng, caplog):
    """options.logger gets the specification/planning phases (INFO); nothing goes to the root logger."""
    logger = logging.getLogger("test.solvers.direct")
    a, b = random_matrix(rng, (3, 3), "float64"), random_matrix(rng, (3,), "float64")
    opts = {"logger": logger}
    with (
        caplog.at_level(logging.DEBUG, logger="test.solvers.direct"),
        solvers.DirectSolver(space.put(a), space.put(b), options=opts, **space.kwargs()) as s,
    ):
        s.plan()
    messages = [r.getMessage() for r in caplog.records if r.name == "test.solvers.direct"]
    assert any("DirectSolver: specification" in m for m in messages)
    assert any("DirectSolver: planning: done" in m for m in messages)


def test_signatures_match_nvmath_python():
    """DirectSolver, direct_solver and DirectSolverOptions have nvmath-python 1.0's parameters."""
    from nvmath.linalg._solvers import DirectSolver, DirectSolverOptions, direct_solver

    params = list(inspect.signature(DirectSolver).parameters)
    assert params == ["a", "b", "options", "execution", "stream"]
    assert list(inspect.signature(direct_solver).parameters) == ["a", "b", "options", "execution", "stream"]
    for method, expected in {
        "plan": ["stream"],
        "factorize": ["stream"],
        "solve": ["stream"],
        "reset_operands": ["a", "b", "stream"],
        "reset_operands_unchecked": ["a", "b", "stream"],
        "release_operands": [],
        "free": [],
    }.items():
        assert list(inspect.signature(getattr(DirectSolver, method)).parameters)[1:] == expected, method
    fields = [f for f in DirectSolverOptions.__dataclass_fields__]
    assert fields[:6] == ["allocator", "blocking", "logger", "handle", "inplace_a", "inplace_b"]
    opts = DirectSolverOptions()
    assert (opts.inplace_a, opts.inplace_b, opts.blocking) == (False, False, "auto")


def test_torch_operands_cpu_execution_from_gpu_space(gpu_space, solvers, rng):
    """GPU operands with execution='cpu' are solved on the host and returned on their device."""
    if gpu_space.device != "cuda":
        pytest.skip("needs operands in device memory")
    a, b = random_matrix(rng, (5, 5), "float64"), random_matrix(rng, (5, 1), "float64")
    x = solvers.direct_solver(gpu_space.put(a), gpu_space.put(b), execution="cpu")
    assert backward_error(a, gpu_space.get(x), b) < tol("float64", 5)


def test_replanning_requires_a_new_factorization(space, solvers, rng):
    """plan() again drops the old factors: solve() then asks for factorize() first."""
    a, b = random_matrix(rng, (5, 5), "float64"), random_matrix(rng, (5, 1), "float64")
    with solvers.DirectSolver(space.put(a), space.put(b), **space.kwargs()) as solver:
        solver.plan()
        solver.factorize()
        solver.plan()
        with pytest.raises(InvalidDirectSolverState, match=r"before factorize\(\)"):
            solver.solve()
        solver.factorize()
        assert backward_error(a, space.get(solver.solve()), b) < tol("float64", 5)


def test_plan_after_release_asks_for_operands(solvers, rng):
    """plan() after release_operands() says to supply operands first."""
    solver = solvers.DirectSolver(np.eye(3), np.ones(3))
    solver.release_operands()
    with pytest.raises(InvalidDirectSolverState, match=r"plan\(\) called after release_operands\(\)"):
        solver.plan()
