"""The compiled hit of the stateless ``nvmath.linalg.matmul`` (``generic._matmul_hit``): on the CPU fake of
``tools/generic_host_cost.py`` (torch CPU tensors posing as package-"torch" CUDA tensors on GPU 0) with
the emulated ``cublasGemmEx`` / ``cublasGemmStridedBatchedEx`` of ``cublas_fakes.py`` behind real C
functions (so the launches' callers are compiled), a plain ``matmul(a, b)`` is served by the table with
results bit-identical to the Python path and equal to float64 torch's; other arguments and key
mismatches take the Python path (still correct); the handle's binding, the plan's liveness and the
plan cache's clear leave nothing stale to run; grad behaviour is unchanged."""

from __future__ import annotations

import importlib.util
import pathlib

import pytest
from compiled_hit_helpers import force_compiled_path, on_python_path, recording_c_function, served, spy_python
from fastcall_probes import needs_extension

import nvmath
from nvmath.bindings import cublas
from nvmath.linalg.generic import _cublas, _matmul_hit
from nvmath.linalg.generic import _stateless as generic_stateless

pytestmark = needs_extension

ROOT = pathlib.Path(__file__).resolve().parents[3]
# cuBLAS entry point -> (its number of parameters, the FakeCublas method emulating it)
_GEMMS = {
    "_p_cublasGemmEx": (19, "gemm_ex"), "_p_cublasGemmStridedBatchedEx": (23, "gemm_strided_batched_ex"),
}  # fmt: skip


def _load(name: str, path: pathlib.Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def gpu(torch, monkeypatch):
    """``calls``: the emulated GEMMs' calls (each reached through a C function), with the generic
    matmul's GPU route on the fake, the compiled path on and a new table."""
    force_compiled_path(generic_stateless, _matmul_hit.hits, monkeypatch)
    _matmul_hit.hits.clear()  # (the entries made in other tests)
    for name in ("torch_host_cost", "fft_host_cost", "generic_host_cost"):
        _load(name, ROOT / "tools" / f"{name}.py").install(monkeypatch)
    fake = _load("cublas_fakes", pathlib.Path(__file__).with_name("cublas_fakes.py")).FakeCublas()
    calls: list = []
    for symbol, (nargs, method) in _GEMMS.items():
        monkeypatch.setattr(cublas, symbol, recording_c_function(nargs, getattr(fake, method), calls))
    generic_stateless.plan_cache.clear()
    yield calls
    generic_stateless.plan_cache.clear()
    torch.set_flush_denormal(False)  # (torch_host_cost's install turns it on)


def _served() -> int:
    return served(_matmul_hit.hits)


def _python(a, b, **kw):
    return on_python_path(_matmul_hit.hits, nvmath.linalg.matmul, a, b, **kw)


def _rand(torch, *shape, dtype=None, seed=0):
    return torch.randn(*shape, dtype=dtype or torch.float32, generator=torch.Generator().manual_seed(seed))


def _warm(a, b, n=4):
    return [nvmath.linalg.matmul(a, b) for _ in range(n)]  # (plans; a keyed hit; the memo; then C)


@pytest.mark.parametrize("dtype", ["float32", "float64", "complex128"])
@pytest.mark.parametrize("shapes", [((8, 32), (32, 16)), ((4, 8, 32), (4, 32, 16))], ids=["gemm", "batched"])
def test_plain_calls_are_served_bit_identical_to_the_python_path(torch, gpu, dtype, shapes):
    """After the planning call and two Python hits, the table serves ``matmul(a, b)`` (one GEMM or a
    strided batch); every result equals, bit for bit, the Python path's, and float64 torch's."""
    dt = getattr(torch, dtype)
    a, b = _rand(torch, *shapes[0], dtype=dt, seed=1), _rand(torch, *shapes[1], dtype=dt, seed=2)
    first = _warm(a, b)
    assert len(_matmul_hit.hits.table) == 1
    served = _served()
    compiled = [nvmath.linalg.matmul(a, b) for _ in range(3)]
    assert _served() == served + 3
    python = _python(a, b)
    for y in (*first, *compiled):
        assert type(y) is torch.Tensor and y.dtype == dt and torch.equal(y, python)
    wide = torch.complex128 if dt.is_complex else torch.float64
    torch.testing.assert_close(python.to(wide), a.to(wide) @ b.to(wide), rtol=1e-5, atol=1e-5)


def _spy_python(monkeypatch) -> list:
    return spy_python(generic_stateless, monkeypatch)


MISMATCHES = ["dtype", "a shape", "a strides", "alpha", "beta and c", "options"]


def _mismatch(torch, name, a, b):
    """``(a, b, keywords)`` differing from the warm call in one key item or one argument (the operand
    types the table refuses are tested with the advanced matmul's: the same check)."""
    return {
        "dtype": (a.double(), b.double(), {}),
        "a shape": (_rand(torch, 4, 32), b, {}),
        "a strides": (_rand(torch, 32, 8).mT, b, {}),
        "alpha": (a, b, {"alpha": 2.0}),
        "beta and c": (a, b, {"c": _rand(torch, 8, 16, seed=3), "beta": 0.5}),
        "options": (a, b, {"options": {}}),
    }[name]


@pytest.mark.parametrize("name", MISMATCHES)
def test_each_mismatch_takes_the_python_path(torch, gpu, name, monkeypatch):
    """A call differing from a served problem in one key item, or giving another argument, is not served
    by the table; the result is right; the next plain calls are served again and right (a call's alpha
    and beta are not kept)."""
    a, b = _rand(torch, 8, 32, seed=1), _rand(torch, 32, 16, seed=2)
    _warm(a, b)
    assert _served() >= 1
    a2, b2, kw = _mismatch(torch, name, a, b)
    python = _spy_python(monkeypatch)
    y = nvmath.linalg.matmul(a2, b2, **kw)
    want = kw.get("alpha", 1.0) * (a2.double() @ b2.double())
    if "c" in kw:
        want = want + kw["beta"] * kw["c"].double()
    assert python[:1] == [1]
    tol = 1e-12 if name == "dtype" else 1e-5
    torch.testing.assert_close(y.double(), want, rtol=tol, atol=tol)
    for y in [nvmath.linalg.matmul(a, b) for _ in range(4)]:
        assert torch.equal(y, _python(a, b))


def test_binding_liveness_and_lock_are_checked(torch, gpu):
    """The table does not run a plan whose handle is bound to another stream or workspace (it leaves
    binding to the Python path), a freed plan, or a plan whose lock a Python-path call holds."""
    a, b = _rand(torch, 8, 32, seed=1), _rand(torch, 32, 16, seed=2)
    _warm(a, b)
    table, nones = _matmul_hit.hits.table, (None,) * 6
    (made,) = table.entries()
    handle = 0x1234  # (the fake's cuBLAS handle)
    bound = _cublas.bindings[handle]
    _cublas.bindings[handle] = (bound[0] + 1, *bound[1:])
    assert table(a, b, None, None, *nones) is None
    _cublas.bindings[handle] = bound
    with made.launch.lock:
        assert table(a, b, None, None, *nones) is None
    served = _served()
    assert torch.equal(table(a, b, None, None, *nones), _python(a, b)) and _served() == served + 1
    size = generic_stateless.plan_cache.maxsize
    generic_stateless.plan_cache.resize(0)  # (evicts and frees the plan)
    generic_stateless.plan_cache.resize(size)
    assert not made.launch.live and table(a, b, None, None, *nones) is None


def test_clear_empties_the_table(torch, gpu):
    """``plan_cache.clear()`` and ``enabled = False`` empty the table; the calls stay right."""
    a, b = _rand(torch, 8, 32, seed=1), _rand(torch, 32, 16, seed=2)
    _warm(a, b)
    generic_stateless.plan_cache.clear()
    assert len(_matmul_hit.hits.table) == 0
    _warm(a, b)
    generic_stateless.plan_cache.enabled = False
    try:
        assert len(_matmul_hit.hits.table) == 0
        y = nvmath.linalg.matmul(a, b)
        torch.testing.assert_close(y.double(), a.double() @ b.double(), rtol=1e-5, atol=1e-5)
    finally:
        generic_stateless.plan_cache.enabled = True


def test_hits_are_counted_in_stats(torch, gpu):
    """The table's hits appear in ``plan_cache.stats.hits``."""
    a, b = _rand(torch, 8, 32, seed=1), _rand(torch, 32, 16, seed=2)
    _warm(a, b)
    hits = generic_stateless.plan_cache.stats.hits
    for _ in range(5):
        nvmath.linalg.matmul(a, b)
    assert generic_stateless.plan_cache.stats.hits == hits + 5


def test_grad_behaviour_is_unchanged(torch, gpu):
    """With grad on, an operand that requires grad is differentiated as before (nvmath.torch's product,
    whose forward may be served by the table with grad off); torch's gradients."""
    a, b = _rand(torch, 8, 32, seed=1), _rand(torch, 32, 16, seed=2)
    _warm(a, b)
    for _ in range(3):
        ag = a.clone().requires_grad_()
        y = nvmath.linalg.matmul(ag, b)
        assert y.grad_fn is not None
        y.sum().backward()
        torch.testing.assert_close(ag.grad, torch.ones(8, 16) @ b.T, rtol=1e-5, atol=1e-5)
    with torch.no_grad():
        assert nvmath.linalg.matmul(a.clone().requires_grad_(), b).grad_fn is None


def test_pure_path_makes_no_table(torch, gpu, monkeypatch):
    """With the compiled path off (nothing offered) no table is made; the results are the same."""
    monkeypatch.setattr(generic_stateless, "_OFFER", False)
    a, b = _rand(torch, 8, 32, seed=1), _rand(torch, 32, 16, seed=2)
    ys = _warm(a, b, 5)
    assert _matmul_hit.hits.table is None
    for y in ys:
        torch.testing.assert_close(y.double(), a.double() @ b.double(), rtol=1e-5, atol=1e-5)
