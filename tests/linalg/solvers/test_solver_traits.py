"""Pure traits, kernel dispatch, options, info decoding and the plan cache of the dense solvers."""

from __future__ import annotations

import dataclasses
import logging
import subprocess
import sys

import numpy as np
import pytest

import nvmath.linalg._solvers as S
from nvmath import LinAlgError
from nvmath._internal.tensors import wrap
from nvmath.linalg._solvers import _common, _dispatch, _gpu, _kernels


def test_matrix_and_rhs_specs():
    """matrix_spec / rhs_spec report batch, rows, columns and the right-hand side kind."""
    a = _common.matrix_spec(wrap(np.ones((2, 3, 5, 5))), "a", square=True)
    assert (a.batch_shape, a.rows, a.cols, a.batch_count, a.shape) == ((2, 3), 5, 5, 6, (2, 3, 5, 5))
    b = _common.rhs_spec(wrap(np.ones((2, 3, 5, 4))), a)
    assert (b.nrhs, b.vector, b.batch_count, b.shape) == (4, False, 6, (2, 3, 5, 4))
    one = _common.matrix_spec(wrap(np.ones((5, 5))), "a", square=True)
    v = _common.rhs_spec(wrap(np.ones(5)), one)
    assert (v.vector, v.nrhs, v.shape) == (True, 1, (5,))


@pytest.mark.parametrize(
    "shape,expected",
    [
        ((3, 4), (1, 3)),
        ((2, 3, 4), (12, 1, 3)),
        ((5, 2, 3, 4), (24, 12, 1, 3)),
        ((7,), (1,)),
    ],
)
def test_colmajor_strides(shape, expected):
    """Working buffers are C-ordered batches of column-major matrices."""
    assert _common.colmajor_strides(shape) == expected


def test_batch_index():
    """Flat batch positions map to multi-indices in C order."""
    assert _common.batch_index(5, (2, 3)) == (1, 2)
    assert _common.batch_index(0, ()) == ()


@pytest.mark.parametrize(
    "kind,value,text",
    [
        ("potrf", 4, "not positive definite: the leading minor of order 4 is not positive"),
        ("getrf", 2, r"singular: the pivot U[1, 1] is exactly zero"),
        ("eig", 7, "the eigensolver did not converge (info=7)"),
        ("svd", 3, "the SVD did not converge (info=3)"),
        ("lstsq", 1, "rank deficient"),
        ("getrf", -3, "argument 3 of the library call had an illegal value"),
    ],
)
def test_describe_info(kind, value, text):
    """Each info kind has a message saying what failed and where."""
    assert text in _common.describe_info(kind, value)


def test_info_error_lists_failures():
    """info_error names every failing matrix (up to a limit) and carries indices and values."""
    info = np.zeros((2, 3), dtype=np.int32)
    info[0, 1], info[1, 2] = 5, 1
    err = _common.info_error("cholesky", "potrf", info, (2, 3))
    assert isinstance(err, LinAlgError) and isinstance(err, ValueError)
    assert err.indices == ((0, 1), (1, 2)) and err.info == (5, 1)
    assert str(err).startswith("cholesky failed for 2 of 6 matrices: matrix (0, 1): not positive definite")
    assert _common.info_error("cholesky", "potrf", np.zeros(3, dtype=np.int32), (3,)) is None
    many = _common.info_error("lu", "getrf", np.ones(20, dtype=np.int32), (20,), limit=2)
    assert "and 18 more" in str(many) and len(many.indices) == 20
    single = _common.info_error("lu_factor", "getrf", np.array([1]), ())
    assert str(single) == "lu_factor failed: singular: the pivot U[0, 0] is exactly zero"


@pytest.mark.parametrize(
    "op,rows,cols,batch,expected",
    [
        ("cholesky", 1024, 1024, 16, "batched"),
        ("cholesky", 4096, 4096, 1, "looped"),
        ("lu", 256, 256, 256, "batched"),
        ("lu", 1024, 1024, 16, "looped"),
        ("direct", 32, 32, 8192, "batched"),
        ("direct", 32, 32, 1, "looped"),
        ("qr", 32, 32, 8192, "batched"),
        ("qr", 16, 32, 100, "looped"),  # wide: geqrfBatched needs rows >= cols
        ("eigh", 32, 32, 8192, "batched"),
        ("eigh", 256, 256, 256, "batched"),
        ("eigh", 1024, 1024, 16, "looped"),
        ("svd", 32, 32, 8192, "batched"),
        ("svd", 256, 256, 256, "looped"),
        ("inv", 64, 64, 100, "batched"),
    ],
)
def test_auto_dispatch(op, rows, cols, batch, expected):
    """algorithm='auto' picks the batched kernel for batches of small matrices, the loop otherwise."""
    assert _dispatch.choose(op, rows=rows, cols=cols, batch=batch).algorithm == expected


def test_dispatch_kernel_names_and_override(caplog):
    """The choice names the kernel, can be forced, and is logged at DEBUG with its reason."""
    log = logging.getLogger("test.solvers.dispatch")
    with caplog.at_level(logging.DEBUG, logger="test.solvers.dispatch"):
        c = _dispatch.choose("eigh", rows=16, cols=16, batch=100, logger=log)
    assert c.kernel == "syevjBatched" and "batch 100 > 1" in c.reason
    assert any("syevjBatched" in r.getMessage() for r in caplog.records)
    assert _dispatch.choose("eigh", rows=64, cols=64, batch=10).kernel == "XsyevBatched"
    assert _dispatch.choose("lu", rows=8, cols=8, batch=100, algorithm="looped").algorithm == "looped"
    assert _dispatch.choose("lu", rows=2048, cols=2048, batch=2, algorithm="batched").algorithm == "batched"
    assert (
        _dispatch.choose("svd", rows=64, cols=8, batch=4, algorithm="gesvda").kernel == "gesvdaStridedBatched"
    )
    with pytest.raises(ValueError, match="needs rows >= cols"):
        _dispatch.choose("svd", rows=8, cols=64, batch=4, algorithm="gesvda")
    with pytest.raises(ValueError, match="potrsBatched needs nrhs == 1"):
        _dispatch.choose("cho_solve", rows=8, cols=8, batch=4, algorithm="batched", nrhs=3)


def test_options_are_frozen_and_accept_dicts():
    """Options are frozen dataclasses; planners accept a dict of their fields."""
    opts = S.SolverOptions(check=True)
    with pytest.raises(dataclasses.FrozenInstanceError):
        opts.check = False  # type: ignore[misc]
    chol = S.Cholesky(np.eye(2), options={"check": True, "algorithm": "looped"})
    assert chol.options == S.SolverOptions(check=True, algorithm="looped")
    assert S.DirectSolver(
        np.eye(2), np.ones(2), options=S.DirectSolverOptions(inplace_b=True)
    ).options.inplace_b


def test_execution_defaults_to_operand_space():
    """Host operands execute on the CPU unless execution='cuda' is given (no GPU touched to decide)."""
    assert not S.Cholesky(np.eye(2)).on_gpu
    assert S.Cholesky(np.eye(2), execution="cuda").on_gpu
    assert S.Cholesky(np.eye(2), execution={"name": "cuda", "device_id": 0}).execution.device_id == 0


def test_plan_cache_reuses_and_releases_operands():
    """A repeated stateless call hits the cache, and the cached plan keeps no reference to the operands."""
    S.solver_plan_cache.clear()
    a = np.eye(3) * 2
    before = S.solver_plan_cache.stats
    S.cholesky(a)
    S.cholesky(np.eye(3) * 3)
    stats = S.solver_plan_cache.stats
    assert stats.misses == before.misses + 1 and stats.hits == before.hits + 1
    key = next(iter(S.solver_plan_cache._entries))
    plan = S.solver_plan_cache.get(key).planner
    assert plan._operands == {} and plan._lifecycle.operands_released


def test_plan_cache_can_be_disabled():
    """With the cache disabled every call plans and frees; results are unchanged."""
    S.solver_plan_cache.enabled = False
    try:
        x = S.solve(np.eye(3) * 2, np.ones(3))
        assert np.allclose(x, 0.5) and len(S.solver_plan_cache) == 0
    finally:
        S.solver_plan_cache.enabled = True


def test_unhashable_options_skip_the_cache():
    """An unhashable allocator bypasses the cache instead of failing."""

    class Alloc:
        __hash__ = None  # type: ignore[assignment]

        def memalloc(self, size):  # pragma: no cover - CPU execution never allocates
            raise AssertionError

    S.solver_plan_cache.clear()
    x = S.inv(np.eye(2) * 4, options={"allocator": Alloc()})
    assert np.allclose(x, np.eye(2) / 4) and len(S.solver_plan_cache) == 0


def test_public_names():
    """__all__ lists exactly the public names, and each exists."""
    assert sorted(S.__all__) == sorted(set(S.__all__))
    for name in S.__all__:
        assert getattr(S, name) is not None


def test_import_is_light():
    """Importing the solvers imports neither torch nor cupy and makes no CUDA driver call."""
    code = (
        "import sys, nvmath.linalg._solvers as S;"
        "bad=[m for m in ('torch','cupy','cuda.bindings.driver') if m in sys.modules];"
        "print(','.join(bad))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_gpu_type_tables():
    """BLAS prefixes and cudaDataType values of the supported dtypes."""
    assert [_gpu.prefix(d) for d in ("float32", "float64", "complex64", "complex128")] == ["s", "d", "c", "z"]
    assert [_gpu.data_type(d) for d in ("float32", "float64", "complex64", "complex128")] == [0, 1, 4, 5]


def test_identity_words_encode_one():
    """The identity kernel writes the IEEE bit pattern of 1 (real part) for each dtype."""
    for dtype, (words, w0, w1) in _kernels._ONE_WORDS.items():
        one = np.zeros(words, dtype=np.uint32)
        one[0] = w0
        if words > 1:
            one[1] = w1
        value = one.view(np.dtype(dtype))[0]
        assert value == 1, dtype


def test_kernel_source_compiles():
    """The NVRTC source of the solver kernels compiles for sm_90 (no GPU needed to compile)."""
    core = pytest.importorskip("cuda.core")
    try:
        program = core.Program(_kernels._SOURCE, "c++", core.ProgramOptions(arch="sm_90", std="c++17"))
        program.compile("cubin", name_expressions=tuple(_kernels._NAMES.values()))
    except Exception as exc:
        if "nvrtc" in str(exc).lower() and "not found" in str(exc).lower():
            pytest.skip(f"NVRTC is not available: {exc}")
        raise
