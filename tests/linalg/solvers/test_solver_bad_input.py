"""Bad input is rejected before any work with the exact exception type and a message naming the value."""

from __future__ import annotations

import logging

import numpy as np
import pytest

import nvmath.linalg._solvers as S
from nvmath._errors import InvalidDirectSolverState, InvalidSolverState, NotSupportedError

A = np.eye(4)
B = np.ones((4, 2))
BATCH = np.stack([np.eye(4)] * 3)


def _torch():
    return pytest.importorskip("torch")


CASES = [
    # (id, callable, exception, message pattern)
    (
        "a-is-a-list-of-lists",
        lambda: S.cholesky([[1.0, 0.0], [0.0, 1.0]]),
        TypeError,
        r"operand 'a' is a builtins.list",
    ),
    ("a-is-a-scalar", lambda: S.inv(3.0), TypeError, r"operand 'a' is a builtins.float"),
    (
        "a-1d",
        lambda: S.cholesky(np.ones(4)),
        ValueError,
        r"'a' must have at least 2 dimensions .* shape \(4,\)",
    ),
    (
        "a-not-square-cholesky",
        lambda: S.cholesky(np.ones((4, 3))),
        ValueError,
        r"'a' must be square for cholesky; got 4x3",
    ),
    (
        "a-not-square-lu",
        lambda: S.lu_factor(np.ones((2, 4, 3))),
        ValueError,
        r"must be square for lu_factor; got 4x3",
    ),
    ("a-not-square-eigh", lambda: S.eigh(np.ones((3, 5))), ValueError, r"must be square for eigh; got 3x5"),
    ("a-not-square-inv", lambda: S.inv(np.ones((3, 5))), ValueError, r"must be square for inv"),
    (
        "a-not-square-direct",
        lambda: S.DirectSolver(np.ones((4, 3)), B),
        ValueError,
        r"must be square for DirectSolver",
    ),
    (
        "int-dtype",
        lambda: S.cholesky(np.eye(3, dtype=np.int64)),
        ValueError,
        r"dtype int64.*float32, float64, complex64, complex128",
    ),
    (
        "float16-dtype",
        lambda: S.svd(np.eye(3, dtype=np.float16)),
        ValueError,
        r"dtype float16, which the dense solvers do not support",
    ),
    ("empty-matrix", lambda: S.qr(np.ones((0, 3))), ValueError, r"shape \(0, 3\): empty matrices"),
    ("empty-batch", lambda: S.eigh(np.ones((0, 3, 3))), ValueError, r"empty matrices and empty batches"),
    (
        "b-dtype-mismatch",
        lambda: S.solve(A, B.astype(np.float32)),
        ValueError,
        r"'b' has dtype float32 but 'a' has dtype float64",
    ),
    (
        "b-unsupported-dtype",
        lambda: S.solve(A, B.astype(np.int32)),
        ValueError,
        r"'b' has dtype int32, which the dense",
    ),
    (
        "b-rows-mismatch",
        lambda: S.solve(A, np.ones((5, 2))),
        ValueError,
        r"'b' of shape \(5, 2\) has 5 rows but 'a' has 4",
    ),
    ("b-vector-rows-mismatch", lambda: S.solve(A, np.ones(5)), ValueError, r"'b' has 5 rows but 'a' has 4"),
    (
        "b-batch-mismatch",
        lambda: S.solve(BATCH, np.ones((2, 4, 1))),
        ValueError,
        r"batch shape \(2,\) but 'a' has batch shape \(3,\)",
    ),
    (
        "b-vector-with-batched-a",
        lambda: S.solve(BATCH, np.ones(4)),
        ValueError,
        r"one vector but 'a' is a batch.*\(3, 4, 1\)",
    ),
    ("b-scalar", lambda: S.solve(A, np.array(1.0)), ValueError, r"'b' must be a vector .* got a scalar"),
    (
        "b-empty",
        lambda: S.solve(A, np.ones((4, 0))),
        ValueError,
        r"'b' has shape \(4, 0\): empty right-hand sides",
    ),
    (
        "explicit-a-list-b-tensor",
        lambda: S.DirectSolver([A], B),
        TypeError,
        r"both 'a' and 'b' must be sequences",
    ),
    ("explicit-empty", lambda: S.DirectSolver([], []), ValueError, r"at least one system"),
    (
        "explicit-length-mismatch",
        lambda: S.DirectSolver([A, A], [B]),
        ValueError,
        r"'a' has 2 matrices but 'b' has 1",
    ),
    (
        "explicit-shape-mismatch",
        lambda: S.DirectSolver([A, np.eye(3)], [B, np.ones((3, 2))]),
        ValueError,
        r"'a\[1\]' has shape \(3, 3\).*'a\[0\]' has shape \(4, 4\)",
    ),
    (
        "explicit-batched-element",
        lambda: S.DirectSolver([BATCH], [np.ones((3, 4, 1))]),
        ValueError,
        r"explicit batching takes single \(n, n\) matrices",
    ),
    (
        "options-wrong-type",
        lambda: S.cholesky(A, options=3),
        TypeError,
        r"Cholesky options must be a SolverOptions object, a dict of its fields or None; got int",
    ),
    (
        "options-unknown-field",
        lambda: S.cholesky(A, options={"inplace": True}),
        TypeError,
        r"unknown field\(s\) 'inplace' for SolverOptions",
    ),
    (
        "direct-options-unknown-field",
        lambda: S.DirectSolver(A, B, options={"inplace_c": True}),
        TypeError,
        r"'inplace_c' for DirectSolverOptions",
    ),
    (
        "blocking-invalid",
        lambda: S.SolverOptions(blocking=False),
        ValueError,
        r"blocking must be True or 'auto'; got False",
    ),
    (
        "algorithm-invalid",
        lambda: S.SolverOptions(algorithm="fast"),
        ValueError,
        r"algorithm must be one of 'auto', 'batched', 'looped', 'gesvda'; got 'fast'",
    ),
    (
        "algorithm-wrong-type",
        lambda: S.SolverOptions(algorithm=1),
        TypeError,
        r"algorithm must be a str; got int",
    ),
    ("check-not-bool", lambda: S.SolverOptions(check=1), TypeError, r"check must be True, False or 'auto'; got int"),
    ("check-other-str", lambda: S.SolverOptions(check="maybe"), TypeError, r"check must be True, False or 'auto'; got str: 'maybe'"),
    (
        "inplace-not-bool",
        lambda: S.DirectSolverOptions(inplace_b="yes"),
        TypeError,
        r"inplace_b must be True or False",
    ),
    (
        "handle-wrong-type",
        lambda: S.SolverOptions(handle="h"),
        TypeError,
        r"handle must be a cusolverDn handle \(int\) or None; got str",
    ),
    (
        "logger-wrong-type",
        lambda: S.SolverOptions(logger="log"),
        TypeError,
        r"logger must be a logging.Logger",
    ),
    (
        "allocator-wrong-type",
        lambda: S.SolverOptions(allocator=object()),
        TypeError,
        r"allocator must implement nvmath.memory.BaseCUDAMemoryManager",
    ),
    (
        "execution-bad-name",
        lambda: S.cholesky(A, execution="tpu"),
        ValueError,
        r"execution name must be one of 'cuda', 'cpu'; got 'tpu'",
    ),
    (
        "execution-wrong-type",
        lambda: S.cholesky(A, execution=7),
        TypeError,
        r"execution must be ExecutionCUDA, ExecutionCPU",
    ),
    (
        "qr-mode",
        lambda: S.qr(A, mode="full"),
        ValueError,
        r"mode must be one of 'reduced', 'complete', 'r'; got 'full'",
    ),
    ("lower-not-bool", lambda: S.cholesky(A, lower="L"), TypeError, r"lower must be True or False; got str"),
    (
        "full-matrices-not-bool",
        lambda: S.svd(A, full_matrices=None),
        TypeError,
        r"full_matrices must be True or False",
    ),
    (
        "trans-invalid",
        lambda: S.lu_solve(A, np.ones(4, dtype=np.int32), B, trans="X"),
        ValueError,
        r"trans must be 'N', 'T' or 'C'; got 'X'",
    ),
    (
        "piv-wrong-dtype",
        lambda: S.lu_solve(A, np.ones(4, dtype=np.int64), B),
        ValueError,
        r"'piv' must be int32 of shape \(4,\).*got int64",
    ),
    (
        "piv-wrong-shape",
        lambda: S.lu_solve(A, np.ones(3, dtype=np.int32), B),
        ValueError,
        r"'piv' must be int32 of shape \(4,\).*shape \(3,\)",
    ),
    (
        "rcond-wrong-type",
        lambda: S.lstsq(A, B, rcond="small"),
        TypeError,
        r"rcond must be a float or None; got str",
    ),
    (
        "gesvda-not-svd",
        lambda: S._dispatch.choose("qr", rows=4, cols=4, batch=1, algorithm="gesvda"),
        ValueError,
        r"gesvda' applies to the SVD only",
    ),
    (
        "gesvda-full-matrices",
        lambda: S.SVD(A, options={"algorithm": "gesvda"}),
        ValueError,
        r"pass full_matrices=False",
    ),
    (
        "batched-svd-too-large",
        lambda: S._dispatch.choose("svd", rows=64, cols=64, batch=4, algorithm="batched"),
        ValueError,
        r"gesvdjBatched needs rows, cols <= 32 \(got 64x64\)",
    ),
    *[
        (f"cpu-stream-{name}-{where}", call, error, text)
        for name, bad, error, text in (
            ("str", "notastream", TypeError, r"stream must be"),
            ("minus1", -1, ValueError, r"int in \[0, 2\*\*64\); got -1"),
            ("object", object(), TypeError, r"type object"),
            ("float", 2.5, TypeError, r"stream must be"),
        )
        for where, call in (
            ("cholesky", lambda bad=bad: S.cholesky(np.eye(3), stream=bad)),
            ("solve", lambda bad=bad: S.solve(np.eye(3), np.ones(3), stream=bad)),
            ("Cholesky", lambda bad=bad: S.Cholesky(np.eye(3), stream=bad)),
            ("execute", lambda bad=bad: _planned(S.Cholesky(np.eye(3))).execute(stream=bad)),
            ("DirectSolver", lambda bad=bad: S.DirectSolver(np.eye(3), np.ones(3), stream=bad)),
        )
    ],
    ("lu_solve-piv-out-of-range", lambda: S.lu_solve(*_lu_bad_piv(2**31 - 1)), ValueError, r"piv\[0\] = 2147483647"),
    ("lu_solve-piv-zero", lambda: S.lu_solve(*_lu_bad_piv(0)), ValueError, r"in 1..3"),
    ("lu_solve-piv-negative", lambda: S.lu_solve(*_lu_bad_piv(-5)), ValueError, r"piv\[0\] = -5"),
    ("lu_solve-piv-int64", lambda: S.lu_solve(*_lu_bad_piv(1, np.int64)), ValueError, r"must be int32"),
    ("lu_solve-piv-float", lambda: S.lu_solve(*_lu_bad_piv(1, np.float64)), ValueError, r"must be int32"),
]


def _planned(planner):
    planner.plan()
    return planner


def _lu_bad_piv(value, dtype=np.int32):
    lu, piv = S.lu_factor(np.array([[4.0, 1.0, 0.0], [1.0, 3.0, 1.0], [0.0, 1.0, 2.0]]))
    piv = piv.astype(dtype)
    piv[0] = value
    return lu, piv, np.ones(3)


@pytest.mark.parametrize("call,exc,pattern", [pytest.param(c, e, p, id=i) for i, c, e, p in CASES])
def test_bad_input(call, exc, pattern):
    """Each bad input raises its exact exception type with a message naming the offending value."""
    with pytest.raises(exc, match=pattern) as info:
        call()
    assert type(info.value) is exc or issubclass(type(info.value), exc)


def test_at_least_25_cases():
    """The issue asks for at least 25 bad-input cases."""
    assert len(CASES) >= 25


def test_mixed_packages_rejected():
    """A numpy a with a torch b raises TypeError naming both operands."""
    torch = _torch()
    with pytest.raises(TypeError, match=r"operand 'b' is a torch tensor but 'a' is a numpy array"):
        S.solve(A, torch.ones(4, 2, dtype=torch.float64))


def test_reset_with_other_package_rejected():
    """reset_operands with a tensor of another package raises TypeError."""
    torch = _torch()
    solver = S.DirectSolver(A, B)
    with pytest.raises(
        TypeError, match=r"new operand 'b' is a torch tensor but the object was planned for numpy"
    ):
        solver.reset_operands(b=torch.ones(4, 2, dtype=torch.float64))


def test_reset_with_other_shape_or_dtype_rejected():
    """reset_operands with another shape or dtype raises ValueError naming both."""
    chol = S.Cholesky(A)
    with pytest.raises(
        ValueError, match=r"shape \(5, 5\) and dtype float64, but the object was planned for shape \(4, 4\)"
    ):
        chol.reset_operands(a=np.eye(5))
    with pytest.raises(
        ValueError, match=r"dtype float32, but the object was planned for shape \(4, 4\) and dtype float64"
    ):
        chol.reset_operands(a=np.eye(4, dtype=np.float32))


def test_explicit_reset_wrong_length_rejected():
    """An explicit-batch DirectSolver refuses a reset sequence of another length."""
    solver = S.DirectSolver([A, A], [B, B])
    with pytest.raises(ValueError, match=r"'b' must be a sequence of 2 tensors"):
        solver.reset_operands(b=[B])
    with pytest.raises(TypeError, match=r"'a' was a tensor at construction"):
        S.DirectSolver(A, B).reset_operands(a=[A])


@pytest.mark.parametrize(
    "make,error",
    [
        (lambda: S.Cholesky(A), InvalidSolverState),
        (lambda: S.QR(A), InvalidSolverState),
        (lambda: S.Eigh(A), InvalidSolverState),
        (lambda: S.SVD(A), InvalidSolverState),
        (lambda: S.LU(A), InvalidSolverState),
        (lambda: S.Inverse(A), InvalidSolverState),
        (lambda: S.Lstsq(A, B), InvalidSolverState),
    ],
)
def test_execute_misuse_uses_the_shared_guard(make, error):
    """execute() before plan(), after release_operands() and after free() raise the planner's state error."""
    planner = make()
    name = type(planner).__name__
    with pytest.raises(error, match=rf"{name}.execute\(\) called before plan\(\): call plan\(\) first"):
        planner.execute()
    planner.plan()
    planner.release_operands()
    with pytest.raises(error, match=rf"{name}.execute\(\) called after release_operands\(\)"):
        planner.execute()
    planner.free()
    with pytest.raises(error, match=rf"{name}.execute\(\) called after free\(\): create a new {name}"):
        planner.execute()
    assert issubclass(error, RuntimeError)


def test_solve_before_execute_rejected():
    """Cholesky.solve / LU.solve before execute() say to call execute() first."""
    for cls in (S.Cholesky, S.LU):
        planner = cls(A)
        planner.plan()
        with pytest.raises(InvalidSolverState, match=r"solve\(\) called before execute\(\)"):
            planner.solve(B)


def test_direct_solver_state_error_type():
    """DirectSolver misuse raises InvalidDirectSolverState (not the generic solver state error)."""
    solver = S.DirectSolver(A, B)
    with pytest.raises(InvalidDirectSolverState):
        solver.solve()


def test_gpu_only_restriction_is_typed():
    """lstsq with rows < cols on the GPU raises NotSupportedError at construction (no GPU needed)."""
    with pytest.raises(NotSupportedError, match=r"needs rows >= cols; a is 2x4: use execution='cpu'"):
        S.Lstsq(np.ones((2, 4)), np.ones((2, 1)), execution="cuda")


def test_logger_default_is_not_root():
    """With no logger the solvers log to 'nvmath.linalg.solvers', never the root logger."""
    chol = S.Cholesky(A)
    assert chol._log is logging.getLogger("nvmath.linalg.solvers")
