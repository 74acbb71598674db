"""The low-overhead paths of the planner on the fake GPU: raw-tensor cache keys of the stateless
``matmul`` (no adapters on a hit), the precomputed ``execute()`` arguments and the GPU fast path of
``reset_operands`` (which must keep every check)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import nvmath.linalg.advanced as adv
from nvmath._internal import caches
from nvmath.linalg.advanced import _stateless

import matmul_fakes as F  # (tests/linalg/advanced is on sys.path: see conftest.py)


@pytest.fixture
def lt(monkeypatch):
    fake = F.install(monkeypatch)
    F.register_readers(monkeypatch)
    adv.plan_cache.clear()
    yield fake
    caches.clear_all()


_aligned = F.aligned


def _rand(rng, shape, dtype=np.float32):
    return _aligned(rng.uniform(-1, 1, shape).astype(dtype))


def test_raw_key_hits_use_the_new_pointers(lt, rng):
    """Repeated calls hit the cache (no re-plan) and read each call's own operands."""
    s0 = adv.plan_cache.stats
    for i in range(4):
        a, b = _rand(rng, (8, 5)), _rand(rng, (5, 6))
        out = adv.matmul(F.fake(a), F.fake(b))
        np.testing.assert_allclose(out.array, a @ b, rtol=1e-5, atol=1e-6)
    assert lt.heuristic_calls == 1
    s = adv.plan_cache.stats
    assert (s.hits - s0.hits, s.misses - s0.misses, s.size) == (3, 1, 1)


def test_raw_key_with_addend_and_scalars(lt, rng):
    """alpha/beta change per call; alpha falls back to 1 when not given again."""
    a, b, c = _rand(rng, (7, 4)), _rand(rng, (4, 3)), _rand(rng, (7, 3))
    out = adv.matmul(F.fake(a), F.fake(b), F.fake(c), alpha=2.0, beta=0.5)
    np.testing.assert_allclose(out.array, 2 * a @ b + 0.5 * c, rtol=1e-5, atol=1e-6)
    c2 = _rand(rng, (7, 3))
    out = adv.matmul(F.fake(a), F.fake(b), F.fake(c2), beta=1.0)
    np.testing.assert_allclose(out.array, a @ b + c2, rtol=1e-5, atol=1e-6)
    out = adv.matmul(F.fake(a), F.fake(b), alpha=3.0)
    np.testing.assert_allclose(out.array, 3 * a @ b, rtol=1e-5, atol=1e-6)
    out = adv.matmul(F.fake(a), F.fake(b))
    np.testing.assert_allclose(out.array, a @ b, rtol=1e-5, atol=1e-6)


def test_raw_key_separates_layouts_and_alignment(lt, rng):
    """Another layout, dtype or pointer alignment is another plan (the key says everything)."""
    a, b = _rand(rng, (8, 8)), _rand(rng, (8, 8))
    adv.matmul(F.fake(a), F.fake(b))
    out = adv.matmul(F.fake(np.asfortranarray(a)), F.fake(b))
    np.testing.assert_allclose(out.array, a @ b, rtol=1e-5, atol=1e-6)
    raw = np.empty(a.nbytes + 256 + 4, dtype=np.uint8)
    start = (-raw.ctypes.data % 256) + 4  # 4-byte aligned only
    mis = raw[start : start + a.nbytes].view(np.float32).reshape(a.shape)
    mis[...] = a
    out = adv.matmul(F.fake(mis), F.fake(b))
    np.testing.assert_allclose(out.array, a @ b, rtol=1e-5, atol=1e-6)
    assert adv.plan_cache.stats.size == 3
    last = lt.preferences[-1]
    assert min(last["MIN_ALIGNMENT_A_BYTES"], last["MIN_ALIGNMENT_B_BYTES"]) == 4


def test_mixed_types_fall_back_to_adapters(lt, rng):
    """A raw-keyed a with an adapter-only b takes the adapter path and still checks consistency."""
    a, b = _rand(rng, (4, 4)), _rand(rng, (4, 4))
    with pytest.raises(TypeError):
        adv.matmul(F.fake(a), b)  # numpy b: another package
    with pytest.raises((TypeError, ValueError)):
        adv.matmul(F.fake(a), F.FakeHostTensor(b))  # another package and device


def test_raw_key_beta_without_c_warns(lt, rng):
    a, b = _rand(rng, (4, 4)), _rand(rng, (4, 4))
    with pytest.warns(UserWarning, match="beta"):
        out = adv.matmul(F.fake(a), F.fake(b), beta=2.0)
    np.testing.assert_allclose(out.array, a @ b, rtol=1e-5, atol=1e-6)


def test_raw_key_host_and_inplace_plans_wrap(lt, rng):
    """Host operands (copies) and inplace plans take adapters on a raw-key hit."""
    a, b = _rand(rng, (5, 4)), _rand(rng, (4, 3))
    for _ in range(2):
        out = adv.matmul(F.FakeHostTensor(a), F.FakeHostTensor(b))
        np.testing.assert_allclose(out.array, a @ b, rtol=1e-5, atol=1e-6)
    c = _rand(rng, (5, 3))
    fc = F.fake(c.copy())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(2):
            before = fc.array.copy()
            out = adv.matmul(F.fake(a), F.fake(b), fc, beta=1.0, options={"inplace": True})
            assert out is fc
            np.testing.assert_allclose(fc.array, a @ b + before, rtol=1e-5, atol=1e-6)


def test_raw_key_evicted_plan_is_rebuilt(lt, rng):
    a, b = _rand(rng, (4, 4)), _rand(rng, (4, 4))
    adv.matmul(F.fake(a), F.fake(b))
    adv.plan_cache.clear()
    out = adv.matmul(F.fake(a), F.fake(b))
    np.testing.assert_allclose(out.array, a @ b, rtol=1e-5, atol=1e-6)


def test_last_call_memo_serves_repeats_and_counts_them_as_hits(lt, rng, monkeypatch):
    """A repeated hot call runs on the last call's entry (no key built): counted as a hit, with each
    call's own operands; calls that alternate keys each get their own plan's result."""
    a, b = _rand(rng, (6, 5)), _rand(rng, (5, 4))
    a2, b2 = _rand(rng, (4, 6)), _rand(rng, (6, 5))
    adv.matmul(F.fake(a), F.fake(b))
    built = []
    key = _stateless.matmul_key
    monkeypatch.setattr(_stateless, "matmul_key", lambda *args: built.append(1) or key(*args))
    s0 = adv.plan_cache.stats
    for _ in range(3):
        x, y = _rand(rng, (6, 5)), _rand(rng, (5, 4))
        np.testing.assert_allclose(adv.matmul(F.fake(x), F.fake(y)).array, x @ y, rtol=1e-5, atol=1e-6)
    assert built == [1]  # the first repeat looks the entry up; the next two use the memo
    assert adv.plan_cache.stats.hits - s0.hits == 3
    for _ in range(2):  # alternating problems: every result is its own product
        np.testing.assert_allclose(adv.matmul(F.fake(a2), F.fake(b2)).array, a2 @ b2, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(adv.matmul(F.fake(a), F.fake(b)).array, a @ b, rtol=1e-5, atol=1e-6)
    assert lt.heuristic_calls == 2


def test_last_call_memo_never_runs_a_freed_or_other_plan(lt, rng):
    """clear() drops the memo; an evicted (freed) entry is planned again; another alignment, epilog or
    a call with options is not served by the memo."""
    a, b = _rand(rng, (8, 8)), _rand(rng, (8, 8))
    adv.matmul(F.fake(a), F.fake(b))
    adv.matmul(F.fake(a), F.fake(b))
    assert adv.plan_cache.last[1] is not None
    adv.plan_cache.clear()
    assert adv.plan_cache.last[1] is None
    adv.matmul(F.fake(a), F.fake(b))
    adv.matmul(F.fake(a), F.fake(b))  # memoised again
    entry = adv.plan_cache.last[1]
    adv.plan_cache.resize(0)  # evicts and frees it
    assert not entry.live
    np.testing.assert_allclose(adv.matmul(F.fake(a), F.fake(b)).array, a @ b, rtol=1e-5, atol=1e-6)
    adv.plan_cache.resize(8)
    raw = np.empty(a.nbytes + 256 + 4, dtype=np.uint8)
    start = (-raw.ctypes.data % 256) + 4
    mis = raw[start : start + a.nbytes].view(np.float32).reshape(a.shape)
    mis[...] = a
    for _ in range(2):
        adv.matmul(F.fake(a), F.fake(b))
    np.testing.assert_allclose(adv.matmul(F.fake(mis), F.fake(b)).array, a @ b, rtol=1e-5, atol=1e-6)
    last = lt.preferences[-1]
    assert min(last["MIN_ALIGNMENT_A_BYTES"], last["MIN_ALIGNMENT_B_BYTES"]) == 4  # its own plan
    adv.matmul(F.fake(a), F.fake(b), preferences={"limit": 2})
    assert adv.plan_cache.last[1] is None


def test_execute_uses_precomputed_arguments_after_reset(lt, rng):
    """execute() reads the current operand pointers (swapped orientation included)."""
    a, b = _rand(rng, (3, 9)), _rand(rng, (9, 2))
    with adv.Matmul(F.fake(a), F.fake(b)) as mm:
        mm.plan()
        np.testing.assert_allclose(mm.execute().array, a @ b, rtol=1e-5, atol=1e-6)
        a2, b2 = _rand(rng, (3, 9)), _rand(rng, (9, 2))
        mm.reset_operands(a=F.fake(a2))
        np.testing.assert_allclose(mm.execute().array, a2 @ b, rtol=1e-5, atol=1e-6)
        mm.reset_operands_unchecked(b=F.fake(b2))
        np.testing.assert_allclose(mm.execute().array, a2 @ b2, rtol=1e-5, atol=1e-6)


def test_reset_fast_path_keeps_every_check(lt, rng):
    """The GPU swap path still checks shape, strides, dtype, package, device and alignment, atomically."""
    a, b = _rand(rng, (4, 6)), _rand(rng, (6, 5))
    with adv.Matmul(F.fake(a), F.fake(b)) as mm:
        mm.plan()
        good = F.fake(_rand(rng, (4, 6)))
        with pytest.raises(ValueError, match="must match"):
            mm.reset_operands(a=good, b=F.fake(_rand(rng, (6, 4))))
        with pytest.raises(ValueError, match="must match"):
            mm.reset_operands(a=F.fake(_rand(rng, (4, 6), np.float64)))
        with pytest.raises(ValueError, match="must match"):
            mm.reset_operands(a=F.fake(np.asfortranarray(_rand(rng, (4, 6)))))
        with pytest.raises(TypeError):
            mm.reset_operands(a=_rand(rng, (4, 6)))  # numpy: another package
        with pytest.raises(TypeError):
            mm.reset_operands(a=F.FakeHostTensor(_rand(rng, (4, 6))))  # another package/device
        raw = np.empty(4 * 6 * 4 + 260, dtype=np.uint8)
        start = (-raw.ctypes.data % 256) + 4
        mis = raw[start : start + 96].view(np.float32).reshape(4, 6)
        with pytest.raises(ValueError, match="aligned"):
            mm.reset_operands(a=F.fake(mis))
        with pytest.raises(ValueError, match="c was not given"):
            mm.reset_operands(c=F.fake(_rand(rng, (4, 5))))
        with pytest.raises(ValueError, match="at least one"):
            mm.reset_operands()
        # nothing was committed by the failing calls
        np.testing.assert_allclose(mm.execute().array, a @ b, rtol=1e-5, atol=1e-6)


def test_execute_calls_the_unchecked_binding(lt, rng, monkeypatch):
    """execute() hands cuBLASLt its plan-time ints through the unchecked binding, never the checked
    wrapper (whose per-argument checks it validated once); the fake asserts every argument is a uint64."""
    from nvmath.bindings import cublasLt

    def refuse(*args):
        raise AssertionError("execute() called the checked cublasLt.matmul")

    a, b, c = _rand(rng, (5, 7)), _rand(rng, (7, 3)), _rand(rng, (5, 3))
    with adv.Matmul(F.fake(a), F.fake(b), F.fake(c), beta=0.5) as mm:
        mm.plan()
        monkeypatch.setattr(cublasLt, "matmul", refuse)
        for _ in range(2):
            np.testing.assert_allclose(mm.execute().array, a @ b + 0.5 * c, rtol=1e-5, atol=1e-6)
    assert len(lt.matmul_calls) == 2


def test_execute_failure_status_raises_the_typed_error(lt, rng, monkeypatch):
    """A failure status of cublasLtMatmul on the unchecked path still raises cuBLASLtError with its
    status (CUBLAS_STATUS_EXECUTION_FAILED here), and the planner stays usable afterwards."""
    from nvmath.bindings import cublasLt

    a, b = _rand(rng, (4, 4)), _rand(rng, (4, 4))
    with adv.Matmul(F.fake(a), F.fake(b)) as mm:
        mm.plan()
        working = cublasLt._p_cublasLtMatmul
        monkeypatch.setattr(cublasLt, "_p_cublasLtMatmul", lambda *args: 13)
        with pytest.raises(cublasLt.cuBLASLtError) as info:
            mm.execute()
        assert info.value.status_name == "CUBLAS_STATUS_EXECUTION_FAILED"
        monkeypatch.setattr(cublasLt, "_p_cublasLtMatmul", working)
        np.testing.assert_allclose(mm.execute().array, a @ b, rtol=1e-5, atol=1e-6)
