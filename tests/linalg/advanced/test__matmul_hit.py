"""The compiled hit of the stateless ``nvmath.linalg.advanced.matmul`` (``_matmul_hit``): on the fake GPU
with torch CPU tensors posing as package-"torch" CUDA tensors and the emulated ``cublasLtMatmul`` behind a
real C function (so the launches' callers are compiled), a plain ``matmul(a, b)`` is served by the table
with results bit-identical to the Python path and equal to float64 torch's; every key mismatch and every
argument the table does not serve falls back to the Python path (still correct); the plan cache's
clear, disabling and eviction leave nothing the table would run; grad behaviour is unchanged."""

from __future__ import annotations

import importlib.util
import pathlib
import sys
import threading

import pytest
from compiled_hit_helpers import force_compiled_path, on_python_path, recording_c_function, served, spy_python
from fake_gpu import torch_read_as_gpu
from fastcall_probes import needs_extension

import nvmath.linalg.advanced as adv
from nvmath._internal import caches
from nvmath.bindings import cublasLt
from nvmath.linalg.advanced import _matmul_hit, _stateless

pytestmark = needs_extension

_STATUS = [0]  # the status the emulated cublasLtMatmul returns (0: it computes)


@pytest.fixture
def gpu(torch, monkeypatch):
    """``calls``: the emulated cublasLtMatmul's calls (each reached through a C function), with the fake
    GPU as package "torch", the compiled path on and a new table."""
    force_compiled_path(_stateless, _matmul_hit.hits, monkeypatch)
    _matmul_hit.hits.clear()  # (the entries made in other tests)
    path = pathlib.Path(__file__).parents[2] / "torch" / "torch_fakes.py"
    spec = importlib.util.spec_from_file_location("torch_fakes", path)
    fakes = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fakes)
    fakes.install_as_torch(monkeypatch)
    calls: list = []
    cfunc = recording_c_function(16, cublasLt._p_cublasLtMatmul, calls, _STATUS)
    monkeypatch.setattr(cublasLt, "_p_cublasLtMatmul", cfunc)
    adv.plan_cache.clear()
    _read_as_gpu()
    yield calls
    caches.clear_all()


def _read_as_gpu() -> None:
    """Read torch CPU tensors raw as tensors on GPU 0 (the stateless hot path's reads of CUDA tensors;
    ``caches.clear_all`` forgets it)."""
    from nvmath._internal import stateless

    stateless.register_reader(sys.modules["torch"].Tensor, torch_read_as_gpu)


def _aligned(torch, *shape, dtype=None, offset=0, seed=0):
    """A random tensor whose data pointer is 256-byte aligned (plus ``offset`` elements)."""
    dtype = dtype or torch.float32
    n = 1
    for e in shape:
        n *= e
    flat = torch.randn(n + 256 + offset, dtype=dtype, generator=torch.Generator().manual_seed(seed))
    skip = (-flat.data_ptr() % 256) // flat.element_size() + offset
    return flat[skip : skip + n].view(*shape)


def _served() -> int:
    return served(_matmul_hit.hits)


def _python(a, b, **kw):
    return on_python_path(_matmul_hit.hits, adv.matmul, a, b, **kw)


def _warm(a, b, n=3):
    return [adv.matmul(a, b) for _ in range(n)]  # (plans; a keyed hit; the last call's hit)


@pytest.mark.parametrize("dtype", ["float32", "float64", "complex64"])
def test_plain_calls_are_served_bit_identical_to_the_python_path(torch, gpu, dtype):
    """After the planning call and a Python hit, the table serves ``matmul(a, b)``; every result equals,
    bit for bit, the Python path's, and float64 torch's."""
    dt = getattr(torch, dtype)
    a, b = _aligned(torch, 8, 32, dtype=dt, seed=1), _aligned(torch, 32, 16, dtype=dt, seed=2)
    first = _warm(a, b, 2)
    assert _matmul_hit.hits.table is not None and len(_matmul_hit.hits.table) == 1
    compiled = [adv.matmul(a, b) for _ in range(3)]
    assert _served() == 3
    python = _python(a, b)
    for y in (*first, *compiled):
        assert type(y) is torch.Tensor and y.shape == (8, 16) and y.dtype == dt
        assert torch.equal(y, python)
    torch.testing.assert_close(python.to(torch.complex128 if dt.is_complex else torch.float64),
                               a.to(torch.complex128) @ b.to(torch.complex128) if dt.is_complex
                               else a.double() @ b.double(), rtol=1e-5, atol=1e-5)  # fmt: skip


@pytest.mark.parametrize("layout", ["a.T", "b.T", "both.T", "batched"])
def test_other_layouts_are_served_bit_identical(torch, gpu, layout):
    """Column-major operands (the plan may form the product swapped) and a batched product are served
    with results bit-identical to the Python path and equal to float64 torch's."""
    if layout == "batched":
        a, b = _aligned(torch, 3, 8, 32, seed=1), _aligned(torch, 3, 32, 16, seed=2)
    else:
        a = (
            _aligned(torch, 32, 8, seed=1).mT
            if layout in ("a.T", "both.T")
            else _aligned(torch, 8, 32, seed=1)
        )
        b = (
            _aligned(torch, 16, 32, seed=2).mT
            if layout in ("b.T", "both.T")
            else _aligned(torch, 32, 16, seed=2)
        )
    first = _warm(a, b)
    served = _served()
    compiled = [adv.matmul(a, b) for _ in range(2)]
    assert _served() == served + 2
    python = _python(a, b)
    for y in (*first, *compiled):
        assert torch.equal(y, python) and y.stride() == python.stride()
    torch.testing.assert_close(python.double(), a.double() @ b.double(), rtol=1e-5, atol=1e-5)


def _mismatches(torch):
    """name -> (a, b, keywords) of calls differing from the warm problem (a (8, 32) @ b (32, 16),
    float32) in one key item or one argument the table does not serve."""
    a, b = _aligned(torch, 8, 32, seed=1), _aligned(torch, 32, 16, seed=2)
    c = _aligned(torch, 8, 16, seed=3)
    return {
        "dtype": (a.double(), b.double(), {}),
        "a shape": (_aligned(torch, 4, 32), b, {}),
        "b shape": (a, _aligned(torch, 32, 8), {}),
        "a strides": (_aligned(torch, 32, 8).mT, b, {}),
        "a alignment": (_aligned(torch, 8, 32, offset=4), b, {}),
        "a subclass": (torch.nn.Parameter(a, requires_grad=False), b, {}),
        "alpha": (a, b, {"alpha": 2.0}),
        "c and beta": (a, b, {"c": c, "beta": 0.5}),
        "epilog": (a, b, {"epilog": adv.MatmulEpilog.RELU}),
        "options": (a, b, {"options": {"blocking": "auto"}}),
        "preferences": (a, b, {"preferences": {"limit": 2}}),
    }


def _reference(torch, a, b, kw):
    out = kw.get("alpha", 1.0) * (a.double() @ b.double())
    if "c" in kw:
        out = out + kw["beta"] * kw["c"].double()
    if kw.get("epilog") is not None:
        out = torch.relu(out)
    return out


MISMATCHES = [
    "dtype", "a shape", "b shape", "a strides", "a alignment", "a subclass", "alpha", "c and beta", "epilog",
    "options", "preferences",
]  # fmt: skip


def _spy_python(monkeypatch) -> list:
    return spy_python(_stateless, monkeypatch)


@pytest.mark.parametrize("name", MISMATCHES)
def test_each_mismatch_takes_the_python_path(torch, gpu, name, monkeypatch):
    """A call differing from a served problem in one key item, or giving an argument beyond the two
    operands, is not served by the table; the Python path runs it, and the result is right; the next
    plain call of the served problem is served again (and right: a call's alpha is not kept)."""
    a, b = _aligned(torch, 8, 32, seed=1), _aligned(torch, 32, 16, seed=2)
    _warm(a, b)
    assert _served() >= 1
    a2, b2, kw = _mismatches(torch)[name]
    python = _spy_python(monkeypatch)
    y = adv.matmul(a2, b2, **kw)
    assert python == [1]
    tol = 1e-12 if name == "dtype" else 1e-5
    torch.testing.assert_close(y.double(), _reference(torch, a2, b2, kw), rtol=tol, atol=tol)
    ys = [adv.matmul(a, b) for _ in range(3)]
    assert len(python) <= 2  # (a call after another's alpha restores it on the Python path)
    for y in ys:
        assert torch.equal(y, _python(a, b))


def test_conjugate_view_is_not_served(torch, gpu, monkeypatch):
    """A complex operand with torch's conjugate bit set is not served by the plain operand's entry."""
    a = _aligned(torch, 8, 32, dtype=torch.complex64, seed=1)
    b = _aligned(torch, 32, 16, dtype=torch.complex64, seed=2)
    _warm(a, b)
    python = _spy_python(monkeypatch)
    y = adv.matmul(a.conj(), b)
    assert python == [1]
    assert torch.equal(y, _python(a.conj(), b))  # (what the Python path makes of it, unchanged)


def test_device_stream_and_lock_mismatches_are_misses(torch, gpu, monkeypatch):
    """Another current device or stream, or the plan's lock held (a Python-path call owns the plan), is
    a miss of the table itself (the Python path then resolves the stream or waits for the lock)."""
    from nvmath._internal import streams

    now = {"device": 0, "stream": 0}
    monkeypatch.setattr(torch._C, "_cuda_getDevice", lambda: now["device"], raising=False)
    monkeypatch.setattr(torch._C, "_cuda_getCurrentRawStream", lambda device_id: now["stream"], raising=False)
    monkeypatch.setattr(streams, "_TORCH_RAW", None)
    a, b = _aligned(torch, 8, 32, seed=1), _aligned(torch, 32, 16, seed=2)
    _warm(a, b)
    table, nones = _matmul_hit.hits.table, (None,) * 10
    now["device"] = 1
    assert table(a, b, None, None, *nones) is None
    now["device"], now["stream"] = 0, 7
    assert table(a, b, None, None, *nones) is None
    now["stream"] = 0
    (entry,) = [adv.plan_cache.peek(k) for k in adv.plan_cache.keys()]
    with entry.lock:
        assert table(a, b, None, None, *nones) is None
    served = _served()
    assert torch.equal(table(a, b, None, None, *nones), _python(a, b))
    assert _served() == served + 1


def test_grad_behaviour_is_unchanged(torch, gpu, monkeypatch):
    """With grad on, an operand that requires grad takes the autograd path (a result with ``grad_fn``,
    torch's gradients); under ``no_grad`` the table serves it."""
    a, b = _aligned(torch, 8, 32, seed=1), _aligned(torch, 32, 16, seed=2)
    _warm(a, b)
    ag = a.clone().requires_grad_()
    python = _spy_python(monkeypatch)
    y = adv.matmul(ag, b)
    assert y.grad_fn is not None and python[:1] == [1]
    y.sum().backward()
    torch.testing.assert_close(ag.grad, torch.ones(8, 16) @ b.T, rtol=1e-5, atol=1e-5)
    with torch.no_grad():
        _warm(ag, b)
        n = len(python)
        assert adv.matmul(ag, b).grad_fn is None and len(python) == n


def test_grad_mode_is_asked_only_when_an_operand_requires_grad(torch, gpu, monkeypatch):
    """The stateless table reads the operands' ``requires_grad`` first: a plain call of tensors that
    need no grad is served without asking grad mode; one that requires grad asks it, and is a miss with
    grad on and served under ``no_grad``."""
    asked = []
    real = torch.is_grad_enabled
    monkeypatch.setattr(torch, "is_grad_enabled", lambda: asked.append(1) or real())
    a, b = _aligned(torch, 8, 32, seed=1), _aligned(torch, 32, 16, seed=2)
    ag = a.clone().requires_grad_()
    _warm(a, b)
    with torch.no_grad():
        _warm(ag, b)  # (its own entry: another alignment class, maybe)
    table, nones = _matmul_hit.hits.table, (None,) * 10
    asked.clear()
    y = table(a, b, None, None, *nones)
    assert y is not None and asked == []
    assert table(ag, b, None, None, *nones) is None and asked == [1]
    with torch.no_grad():
        yg = table(ag, b, None, None, *nones)
    assert yg is not None and yg.grad_fn is None
    assert torch.equal(y, _python(a, b)) and torch.equal(yg, y)


def test_clear_all_empties_the_table(torch, gpu):
    """``caches.clear_all()`` empties the table with the plan cache (the fake's adapters go with it: the
    test ends there)."""
    a, b = _aligned(torch, 8, 32, seed=1), _aligned(torch, 32, 16, seed=2)
    _warm(a, b)
    assert len(_matmul_hit.hits.table) == 1
    caches.clear_all()
    assert len(_matmul_hit.hits.table) == 0 and len(adv.plan_cache) == 0


def test_clear_disable_and_eviction_leave_nothing_to_run(torch, gpu):
    """``plan_cache.clear()`` and ``enabled = False`` empty the table; a plan
    evicted (freed) under a listed entry is never launched by it (its launch is closed)."""
    calls = gpu
    a, b = _aligned(torch, 8, 32, seed=1), _aligned(torch, 32, 16, seed=2)
    _warm(a, b)
    assert len(_matmul_hit.hits.table) == 1
    adv.plan_cache.clear()
    assert len(_matmul_hit.hits.table) == 0
    _warm(a, b)
    adv.plan_cache.enabled = False
    try:
        assert len(_matmul_hit.hits.table) == 0
        y = adv.matmul(a, b)  # (planned, run and freed)
        assert len(_matmul_hit.hits.table) == 0 and torch.equal(y, _python(a, b))
    finally:
        adv.plan_cache.enabled = True
    _warm(a, b)
    (made,) = _matmul_hit.hits.table.entries()
    size = adv.plan_cache.maxsize
    adv.plan_cache.resize(0)  # (evicts and frees the plan: its launch closes)
    adv.plan_cache.resize(size)
    assert made.launch.closed
    before = len(calls)
    assert _matmul_hit.hits.table(a, b, None, None) is None and len(calls) == before
    torch.testing.assert_close(adv.matmul(a, b).double(), a.double() @ b.double(), rtol=1e-5, atol=1e-5)


def test_hits_are_counted_in_stats_and_keep_the_lru_order(torch, gpu):
    """The table's hits appear in ``plan_cache.stats.hits``; a problem served only by the table stays
    the most recently used, so a new problem evicts the other one."""
    adv.plan_cache.resize(2)
    try:
        b = _aligned(torch, 32, 16, seed=2)
        older, newer = _aligned(torch, 4, 32, seed=1), _aligned(torch, 8, 32, seed=1)
        _warm(older, b)
        _warm(newer, b)
        before = adv.plan_cache.stats
        for _ in range(5):
            adv.matmul(older, b)  # served by the table only
        assert adv.plan_cache.stats.hits == before.hits + 5
        adv.matmul(_aligned(torch, 2, 32), b)  # a third problem: one must go
        assert adv.plan_cache.stats.evictions == before.evictions + 1
        served = _served()
        adv.matmul(older, b)  # still cached and served
        assert _served() == served + 1
    finally:
        adv.plan_cache.resize(_stateless.DEFAULT_CACHE_SIZE)


def test_another_thread_gets_its_own_entry(torch, gpu):
    """A call from another thread is not served by this thread's entry; it gets one of its own."""
    a, b = _aligned(torch, 8, 32, seed=1), _aligned(torch, 32, 16, seed=2)
    _warm(a, b)
    out = []
    thread = threading.Thread(target=lambda: out.append(_warm(a, b)[-1]))
    thread.start()
    thread.join()
    assert len(_matmul_hit.hits.table) == 2 and torch.equal(out[0], _python(a, b))


def test_a_failed_launch_raises_the_bindings_error(torch, gpu):
    """A nonzero cublasLtMatmul status in the compiled hit raises ``cuBLASLtError``, as the Python path."""
    calls = gpu
    a, b = _aligned(torch, 8, 32, seed=1), _aligned(torch, 32, 16, seed=2)
    _warm(a, b)
    before = len(calls)
    _STATUS[0] = 13  # (CUBLAS_STATUS_EXECUTION_FAILED)
    try:
        with pytest.raises(cublasLt.cuBLASLtError) as error:
            adv.matmul(a, b)
    finally:
        _STATUS[0] = 0
    assert len(calls) == before + 1 and error.value.status == 13


def test_pure_path_makes_no_table(torch, gpu, monkeypatch):
    """With the compiled path off (``NVMATH_PURE_PYTHON=1``: nothing offered) no table is made and the
    calls give the same results."""
    monkeypatch.setattr(_stateless, "_OFFER", False)
    a, b = _aligned(torch, 8, 32, seed=1), _aligned(torch, 32, 16, seed=2)
    ys = _warm(a, b, 4)
    assert _matmul_hit.hits.table is None
    for y in ys:
        torch.testing.assert_close(y.double(), a.double() @ b.double(), rtol=1e-5, atol=1e-5)


def test_the_context_check_replaces_the_device_getter(torch, gpu, monkeypatch):
    """An entry given ``ctx_get`` / ``ctx`` (real CUDA tensors: ``compiled_hits.context_fields``) asks the
    driver's current context, through a C function, instead of torch's current device: served while the
    device's context is current (whatever the device getter says), a miss (the Python path, right
    result) while another one is."""
    import ctypes

    from nvmath._internal import compiled_hits, streams

    now = {"ctx": 77, "device": 0, "asked": 0}

    def current(out):
        now["asked"] += 1
        out[0] = now["ctx"]
        return 0

    ctx_get = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_uint64))(current)
    address = ctypes.cast(ctx_get, ctypes.c_void_p).value
    monkeypatch.setattr(
        compiled_hits, "context_fields", lambda device_id, get, t: {"ctx_get": address, "ctx": 77}
    )
    monkeypatch.setattr(torch._C, "_cuda_getDevice", lambda: now["device"], raising=False)
    monkeypatch.setattr(streams, "_TORCH_RAW", None)
    a, b = _aligned(torch, 8, 32, seed=1), _aligned(torch, 32, 16, seed=2)
    _warm(a, b)
    table, nones = _matmul_hit.hits.table, (None,) * 10
    served, asked = _served(), now["asked"]
    now["device"] = 1  # (not asked: the context is)
    assert torch.equal(table(a, b, None, None, *nones), _python(a, b))
    assert _served() == served + 1 and now["asked"] == asked + 1
    now["ctx"] = 78
    assert table(a, b, None, None, *nones) is None
    now["device"] = 0
    assert torch.equal(adv.matmul(a, b), _python(a, b))  # (the Python path, right)
    now["ctx"] = 77
    assert torch.equal(table(a, b, None, None, *nones), _python(a, b))
