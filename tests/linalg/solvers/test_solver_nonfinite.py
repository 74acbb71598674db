"""The non-finite policy of every dense solver, the same on the CPU and the GPU (docs/solvers.rst):
a matrix operand holding NaN or Inf anywhere raises nvmath.LinAlgError through the ``info`` check
(``check="auto"`` where that costs no synchronization, ``check=True`` always), naming the batch
member; with ``check=False`` the member's results are all NaN (never a finite wrong answer, never a
hang) and the other members are computed as without it. NaN, +Inf and -Inf are put in every position
class of a 4x4 matrix: the diagonal, strictly upper and lower, first/last row and column, alone and
as member 1 of a batch of 3. GPU spaces are marked ``gpu``."""

from __future__ import annotations

import numpy as np
import pytest
from solver_testing import SPACES

import nvmath
import nvmath.linalg as L
from nvmath.linalg._solvers._nonfinite import NONFINITE_INFO

N = 4
POSITIONS = {
    "diagonal": (2, 2),
    "strictly-upper": (0, 3),
    "strictly-lower": (3, 0),
    "first-row": (0, 1),
    "last-row": (3, 2),
    "first-col": (2, 0),
    "last-col": (1, 3),
}
VALUES = (np.nan, np.inf, -np.inf)


def _outputs(result) -> list:
    """The tensors of a result (the GPU lstsq computes only the solution: the Nones are dropped)."""
    if isinstance(result, L.LstsqResult):
        outs = [result.solution, result.residuals, result.singular_values]
    else:
        outs = list(result) if isinstance(result, (tuple, list)) else [result]
    return [x for x in outs if x is not None]


CALLS = {
    "cholesky": lambda a, b, kw: L.cholesky(a, **kw),
    "lu_factor": lambda a, b, kw: L.lu_factor(a, **kw),
    "solve": lambda a, b, kw: L.solve(a, b, **kw),
    "inv": lambda a, b, kw: L.inv(a, **kw),
    "qr": lambda a, b, kw: L.qr(a, **kw),
    "eigh": lambda a, b, kw: L.eigh(a, **kw),
    "eigvalsh": lambda a, b, kw: L.eigvalsh(a, **kw),
    "svd": lambda a, b, kw: L.svd(a, **kw),
    "svdvals": lambda a, b, kw: L.svdvals(a, **kw),
    "lstsq": lambda a, b, kw: L.lstsq(a, b, **kw),
    "direct_solver": lambda a, b, kw: L.direct_solver(a, b, **kw),
}


def _problem(batch: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """Well-conditioned symmetric positive definite matrices (every solver succeeds on them)."""
    rng = np.random.default_rng(7)
    x = rng.standard_normal(batch + (N, N))
    a = x @ np.swapaxes(x, -1, -2) + N * np.eye(N)
    return a, rng.standard_normal(batch + (N, 2))


def _poisoned(batch: tuple[int, ...], where: str, value: float) -> tuple[np.ndarray, np.ndarray]:
    a, b = _problem(batch)
    i, j = POSITIONS[where]
    a[(1,) * len(batch) + (i, j)] = value
    return a, b


@pytest.fixture(params=SPACES)
def sp(request):
    """Each execution space (GPU ones marked gpu)."""
    space = request.param
    if space.package != "numpy":
        space.module()
    if space.package == "torch" and space.device == "cuda" and not space.module().cuda.is_available():
        pytest.skip("torch has no CUDA device here")
    return space


@pytest.mark.parametrize("where", sorted(POSITIONS))
@pytest.mark.parametrize("name", sorted(CALLS))
@pytest.mark.parametrize("batch", [(), (3,)], ids=["single", "batch-member-1"])
def test_nonfinite_input_raises_linalgerror(sp, name, where, batch):
    """check=True (and the default where it costs no sync): LinAlgError naming the member and why."""
    for value in VALUES:
        a, b = _poisoned(batch, where, value)
        with pytest.raises(nvmath.LinAlgError, match="NaN or Inf") as info:
            CALLS[name](sp.put(a), sp.put(b), sp.kwargs(options={"check": True}))
        assert info.value.indices == (((1,),) if batch else ((),))
        assert info.value.info == (NONFINITE_INFO,)
        if sp.device == "cpu":  # host operands: the default ("auto") raises too, like numpy
            with pytest.raises(nvmath.LinAlgError, match="NaN or Inf"):
                CALLS[name](sp.put(a), sp.put(b), sp.kwargs())


@pytest.mark.parametrize("where", ["diagonal", "strictly-upper", "last-col"])
@pytest.mark.parametrize("name", sorted(CALLS))
@pytest.mark.parametrize("batch", [(), (3,)], ids=["single", "batch-member-1"])
def test_opting_out_propagates_nan(sp, name, where, batch):
    """check=False: no error; every floating result of the poisoned member is NaN, the other members
    equal the results of the same call without the poison."""
    clean_a, b = _problem(batch)
    clean = [sp.get(x) for x in _outputs(CALLS[name](sp.put(clean_a), sp.put(b), sp.kwargs()))]
    for value in VALUES:
        a, _ = _poisoned(batch, where, value)
        got = [sp.get(x) for x in _outputs(CALLS[name](sp.put(a), sp.put(b), sp.kwargs(options={"check": False})))]
        for out, ref in zip(got, clean):
            if out.dtype.kind not in "fc" or out.size == 0:
                continue
            bad = out[1] if batch else out
            assert np.isnan(bad).all(), (name, value, bad)
            if batch:
                np.testing.assert_allclose(out[[0, 2]], ref[[0, 2]], rtol=1e-10, atol=1e-12)


def test_issue_examples_cpu():
    """The reported cases: svd of a matrix with NaN neither hangs nor lies; svdvals is not [1, 1, 1];
    a triangular solve with NaN above the diagonal has a NaN first component when opted out."""
    a = np.eye(3)
    a[0, 1] = np.nan
    with pytest.raises(nvmath.LinAlgError):
        L.svd(a)
    with pytest.raises(nvmath.LinAlgError):
        L.svdvals(a)
    assert np.isnan(L.svdvals(a, options={"check": False})).all()
    t = np.triu(np.full((3, 3), 2.0))
    t[0, 2] = np.nan
    x = L.solve(t, np.ones((3, 1)), options={"check": False})
    assert np.isnan(x[0]).all()


def test_stateful_check_reports_nonfinite_later():
    """With check=False the planner's check() reports the poisoned member afterwards."""
    a, _ = _poisoned((3,), "diagonal", np.nan)
    with L.Cholesky(a, options={"check": False}) as planner:
        planner.plan()
        planner.execute()
        with pytest.raises(nvmath.LinAlgError, match=r"matrix 1: the input holds NaN or Inf"):
            planner.check()
        planner.reset_operands(a=_problem((3,))[0])
        planner.execute()
        planner.check()  # a clean input clears it


def test_factor_solve_of_poisoned_factorization_is_nan():
    """Cholesky.solve(b) after a poisoned execute() (check=False) returns NaN for that member, never the
    solution of the stand-in."""
    a, b = _poisoned((3,), "strictly-lower", np.inf)
    with L.Cholesky(a, options={"check": False}) as planner:
        planner.plan()
        planner.execute()
        x = planner.solve(b)
    assert np.isnan(x[1]).all() and np.isfinite(x[[0, 2]]).all()


def test_lu_factor_default_raises_for_nonfinite_but_not_for_singular():
    """LU of a singular matrix is valid (no error by default); LU of a NaN matrix is not."""
    L.lu_factor(np.zeros((3, 3)))
    with pytest.raises(nvmath.LinAlgError, match="NaN or Inf"):
        L.lu_factor(np.array([[1.0, np.nan], [0.0, 1.0]]))


def test_direct_solver_explicit_batches():
    """A DirectSolver on explicit lists: the poisoned system raises by default; opted out, its
    solution (and with inplace_a its factors) are NaN, the others are right."""
    a, b = _problem((3,))
    a_list, b_list = [m.copy() for m in a], [m.copy() for m in b]
    a_list[1][0, 3] = np.nan
    with pytest.raises(nvmath.LinAlgError, match="matrix 1"):
        L.direct_solver(a_list, b_list)
    x = L.direct_solver(a_list, b_list, options={"check": False})
    assert np.isnan(x[1]).all()
    for k in (0, 2):
        np.testing.assert_allclose(x[k], np.linalg.solve(a[k], b[k]), rtol=1e-10)


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["cholesky", "eigh", "svd", "qr", "inv", "lu_factor"])
def test_device_operands_default_gives_nan_and_check_reports(gpu_space, name):
    """GPU with device operands and the default check="auto": no synchronization, so no exception from
    the call, but the poisoned member's results are NaN and the planner's check() reports it."""
    if gpu_space.device != "cuda":
        pytest.skip("host operands raise by default (covered above)")
    a, _ = _poisoned((3,), "strictly-upper", np.nan)
    planner_cls = {"cholesky": L.Cholesky, "eigh": L.Eigh, "svd": L.SVD, "qr": L.QR, "inv": L.Inverse,
                   "lu_factor": L.LU}[name]  # fmt: skip
    with planner_cls(gpu_space.put(a)) as planner:
        planner.plan()
        for out in _outputs(planner.execute()):
            out = gpu_space.get(out)
            if out.dtype.kind in "fc":
                assert np.isnan(out[1]).all() and np.isfinite(out[[0, 2]]).all()
        with pytest.raises(nvmath.LinAlgError, match="matrix 1: the input holds NaN or Inf"):
            planner.check()


@pytest.mark.gpu
def test_gpu_triangular_solve_with_nan_above_the_diagonal(gpu_space):
    """The reported H200 case: a triangular 3x3 with one NaN above the diagonal never solves to a finite
    answer (it was [0.5, 0.5, 0.5]): LinAlgError with check=True, all NaN with check=False."""
    t = np.triu(np.full((3, 3), 2.0))
    t[0, 2] = np.nan
    b = np.ones((3, 1))
    with pytest.raises(nvmath.LinAlgError, match="NaN or Inf"):
        L.solve(gpu_space.put(t), gpu_space.put(b), **gpu_space.kwargs(options={"check": True}))
    x = gpu_space.get(L.solve(gpu_space.put(t), gpu_space.put(b), **gpu_space.kwargs(options={"check": False})))
    assert np.isnan(x).all()


@pytest.mark.parametrize(
    ("shape", "strides", "nb", "expected"),
    [
        ((3, 4, 4), (16, 1, 4), 1, True),  # C-ordered batch of column-major matrices
        ((3, 4), (4, 1), 1, True),  # singular values
        ((2, 3, 4, 4), (48, 16, 1, 4), 2, True),
        ((3, 4, 4), (1, 12, 3), 1, False),  # batch innermost
        ((4, 4), (1, 4), 0, True),
        ((3, 4), (1, 3), 1, False),
    ],
)
def test_block_layout(shape, strides, nb, expected):
    """Results whose batch entries are consecutive dense blocks are poisoned by one kernel launch."""
    from nvmath.linalg._solvers._nonfinite import block_layout

    assert block_layout(shape, strides, nb) is expected


@pytest.mark.parametrize("dtype", ["float32", "complex64", "complex128"])
@pytest.mark.parametrize("name", ["cholesky", "solve", "eigh", "svd", "inv", "qr"])
def test_other_dtypes_and_imaginary_parts(sp, dtype, name):
    """float32 and complex inputs follow the same policy; a NaN or Inf in the imaginary part alone
    counts (Hermitian matrices for the complex case)."""
    a, b = _problem((3,))
    a, b = a.astype(dtype), b.astype(dtype)
    if dtype.startswith("complex"):
        a[1, 0, 2] += complex(0, np.inf)
    else:
        a[1, 0, 2] = np.inf
    with pytest.raises(nvmath.LinAlgError, match="matrix 1: the input holds NaN or Inf"):
        CALLS[name](sp.put(a), sp.put(b), sp.kwargs(options={"check": True}))
    for out in _outputs(CALLS[name](sp.put(a), sp.put(b), sp.kwargs(options={"check": False}))):
        out = sp.get(out)
        if out.dtype.kind in "fc":
            assert np.isnan(out[1]).all() and np.isfinite(out[[0, 2]]).all()
