"""Stateless fft/ifft/rfft/irfft and their plan cache: hits, evictions, disabling, threads."""

from __future__ import annotations

import gc
import threading
import weakref

import numpy as np
import pytest

import nvmath.fft as nf
from nvmath.fft import FFTOptions


@pytest.fixture(autouse=True)
def fresh_cache():
    """Each test starts with an empty, enabled cache of the default size."""
    cache = nf.plan_cache
    size = cache.maxsize
    cache.clear()
    cache.enabled = True
    yield cache
    cache.enabled = True
    cache.resize(size)
    cache.clear()


def cplx(rng, shape):
    """Random complex128 data."""
    return rng.uniform(-1, 1, shape) + 1j * rng.uniform(-1, 1, shape)


def test_repeated_call_hits_the_cache(rng, fresh_cache):
    """The second call with the same layout reuses the cached plan."""
    x = cplx(rng, (8, 8))
    nf.fft(x)
    before = fresh_cache.stats
    y = nf.fft(cplx(rng, (8, 8)))
    after = fresh_cache.stats
    assert (after.hits - before.hits, after.misses - before.misses, after.size) == (1, 0, 1)
    assert y.shape == (8, 8)


def test_every_plan_decider_is_in_the_key(rng, fresh_cache):
    """Shape, strides, dtype, axes, options and execution each give a new cache entry."""
    x = cplx(rng, (8, 6))
    start = fresh_cache.stats
    nf.fft(x)
    nf.fft(x[:4])
    nf.fft(x.T)
    nf.fft(x.astype(np.complex64))
    nf.fft(x, axes=[0])
    nf.fft(x, axes=[0], options={"result_layout": "natural"})
    nf.fft(x, execution={"name": "cpu", "num_threads": 1})
    nf.ifft(x)  # the direction is not part of the plan: a hit
    s = fresh_cache.stats
    assert (s.misses - start.misses, s.hits - start.hits, s.size) == (7, 1, 7)


def test_resize_evicts_least_recent(rng, fresh_cache):
    """A full cache evicts its least recently used plan; resize(0) empties it."""
    fresh_cache.resize(2)
    start = fresh_cache.stats.evictions
    for n in (4, 5, 6):
        nf.fft(cplx(rng, (n,)))
    s = fresh_cache.stats
    assert (s.size, s.evictions - start) == (2, 1)
    assert [k[2] for k in list(fresh_cache.keys())] == [(5,), (6,)]
    fresh_cache.resize(0)
    assert fresh_cache.stats.size == 0 and not fresh_cache.enabled


def test_disabled_cache_still_works(rng, fresh_cache):
    """With the cache disabled each call plans and frees its own plan."""
    fresh_cache.enabled = False
    x = cplx(rng, (5,))
    np.testing.assert_allclose(nf.fft(x), np.fft.fft(x))
    assert fresh_cache.stats.size == 0


def test_clear_frees_plans(rng, fresh_cache):
    """clear() releases every cached plan."""
    nf.fft(cplx(rng, (4,)))
    (key,) = list(fresh_cache.keys())
    planner = fresh_cache.get(key).planner
    fresh_cache.clear()
    assert fresh_cache.stats.size == 0
    assert planner._lifecycle.state.name == "FREED"


def test_cache_does_not_keep_operands_alive(rng):
    """A cached plan drops its operand after each call."""
    x = cplx(rng, (16,))
    ref = weakref.ref(x)
    nf.fft(x)
    del x
    gc.collect()
    assert ref() is None


def test_failed_call_caches_nothing(rng, fresh_cache):
    """A call that raises leaves no entry behind."""
    with pytest.raises(ValueError):
        nf.fft(cplx(rng, (4,)), axes=[3])
    with pytest.raises(ValueError):
        nf.fft(cplx(rng, (4,)), prolog={"ltoir": b"\x00"})
    assert fresh_cache.stats.size == 0


def test_irfft_does_not_mutate_options(rng):
    """irfft() leaves the caller's options object as it was (it is frozen; a copy is used)."""
    options = FFTOptions(last_axis_parity="odd")
    s = rng.uniform(-1, 1, 7)
    np.testing.assert_allclose(nf.irfft(np.fft.rfft(s), options=options), 7 * s, atol=1e-12)
    assert options.fft_type is None


def test_threads_share_the_cache_safely(rng, fresh_cache):
    """Many threads calling with the same layout get correct results and one cached plan."""
    data = [cplx(rng, (32, 16)) for _ in range(8)]
    refs = [np.fft.fft2(d) for d in data]
    errors = []

    def work(i):
        try:
            for _ in range(40):
                np.testing.assert_allclose(nf.fft(data[i]), refs[i], rtol=1e-10)
        except Exception as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert fresh_cache.stats.size == 1


def test_last_call_runs_again_without_a_lookup_and_never_after_a_free(torch, fresh_cache):
    """A repeated default call (torch operand read raw) runs the cache's last call: results equal numpy's,
    hits counted; alternating calls, a clear and an eviction each take the cache's path and stay right."""
    gen = torch.Generator().manual_seed(2)
    x = torch.randn(16, dtype=torch.complex128, generator=gen)
    y = torch.randn(8, dtype=torch.complex128, generator=gen)
    nf.fft(x)
    nf.fft(x)  # (a hit through the cache: now the last call)
    hits, memo = fresh_cache.stats.hits, fresh_cache.memo_hits
    for _ in range(3):
        np.testing.assert_allclose(nf.fft(x).numpy(), np.fft.fft(x.numpy()))
    assert fresh_cache.stats.hits == hits + 3 and fresh_cache.memo_hits == memo + 3
    for _ in range(2):  # another kind of call in between: each is the last call in turn
        np.testing.assert_allclose(nf.ifft(x).numpy(), np.fft.ifft(x.numpy()) * 16)
        np.testing.assert_allclose(nf.fft(x).numpy(), np.fft.fft(x.numpy()))
    entry = fresh_cache.last[1]
    fresh_cache.clear()
    assert not entry.live and fresh_cache.last[1] is None
    np.testing.assert_allclose(nf.fft(x).numpy(), np.fft.fft(x.numpy()))
    nf.fft(x)
    evicted = fresh_cache.last[1]
    fresh_cache.resize(1)
    np.testing.assert_allclose(nf.fft(y).numpy(), np.fft.fft(y.numpy()))  # evicts the last call's plan
    assert not evicted.live
    np.testing.assert_allclose(nf.fft(x).numpy(), np.fft.fft(x.numpy()))
