"""Tests of nvmath._internal.plan_cache: the bounded, thread-safe LRU plan cache."""

from __future__ import annotations

import threading
import time

import pytest

from nvmath._internal.plan_cache import CacheStats, PlanCache, release_plan


class Plan:
    """A fake plan recording whether it was freed."""

    def __init__(self, key):
        self.key, self.freed = key, 0

    def free(self):
        self.freed += 1


def test_get_put_and_stats():
    """get/put store and return plans and count hits and misses."""
    c = PlanCache(4)
    assert c.get("a") is None
    p = Plan("a")
    assert c.put("a", p) is True
    assert c.get("a") is p and "a" in c and len(c) == 1
    assert c.stats == CacheStats(hits=1, misses=1, evictions=0, size=1, maxsize=4)


def test_lru_eviction_frees_least_recent():
    """Past maxsize the least recently used plan is evicted and freed."""
    c = PlanCache(2)
    a, b, d = Plan("a"), Plan("b"), Plan("d")
    c.put("a", a)
    c.put("b", b)
    c.get("a")  # a is now most recent
    c.put("d", d)
    assert list(c.keys()) == ["a", "d"]
    assert b.freed == 1 and a.freed == 0 and c.stats.evictions == 1


def test_put_replaces_and_frees_old_value():
    """Putting a new plan under an existing key frees the old one, not a re-put of the same."""
    c = PlanCache(2)
    old, new = Plan(1), Plan(1)
    c.put(1, old)
    c.put(1, old)
    assert old.freed == 0
    c.put(1, new)
    assert old.freed == 1 and c.get(1) is new


def test_get_or_create_builds_once():
    """get_or_create calls the factory on a miss only."""
    c = PlanCache(4)
    calls = []
    make = lambda: calls.append(1) or Plan("k")
    p1 = c.get_or_create("k", make)
    p2 = c.get_or_create("k", make)
    assert p1 is p2 and calls == [1]
    assert (c.stats.hits, c.stats.misses) == (1, 1)


def test_failed_factory_caches_nothing():
    """A factory that raises leaves no entry and the next call builds again."""
    c = PlanCache(4)

    def boom():
        raise ValueError("no algorithm")

    with pytest.raises(ValueError):
        c.get_or_create("k", boom)
    assert "k" not in c
    assert c.get_or_create("k", lambda: Plan("k")).key == "k"


def test_clear_frees_everything():
    """clear() frees every cached plan and empties the cache."""
    c = PlanCache(4)
    plans = [Plan(i) for i in range(3)]
    for p in plans:
        c.put(p.key, p)
    c.clear()
    assert len(c) == 0 and all(p.freed == 1 for p in plans)
    assert c.stats.evictions == 0


def test_resize_shrinks_and_disables():
    """resize() evicts beyond the new limit; resize(0) disables caching."""
    c = PlanCache(4)
    plans = [Plan(i) for i in range(4)]
    for p in plans:
        c.put(p.key, p)
    c.resize(2)
    assert list(c.keys()) == [2, 3] and plans[0].freed == plans[1].freed == 1
    c.resize(0)
    assert not c.enabled and len(c) == 0
    assert c.put("x", Plan("x")) is False


def test_enabled_toggle():
    """Setting enabled=False clears and stops caching; True resumes with the same maxsize."""
    c = PlanCache(3)
    p = Plan("a")
    c.put("a", p)
    c.enabled = False
    assert p.freed == 1 and not c.enabled
    fresh = c.get_or_create("a", lambda: Plan("a"))
    assert "a" not in c and fresh.freed == 0  # caller owns uncached values
    c.enabled = True
    assert c.enabled and c.maxsize == 3
    with pytest.raises(TypeError):
        c.enabled = 1  # type: ignore[assignment]


def test_use_frees_uncached_plan_after_the_block():
    """With caching disabled, use() builds a plan, yields it and frees it afterwards."""
    c = PlanCache(0)
    with c.use("k", lambda: Plan("k")) as plan:
        assert plan.freed == 0
    assert plan.freed == 1


def test_pinned_plan_released_only_after_use():
    """A plan evicted while in use is freed when its user is done, not before."""
    c = PlanCache(1)
    with c.use("a", lambda: Plan("a")) as a:
        c.put("b", Plan("b"))  # evicts a
        assert "a" not in c and a.freed == 0
        c.clear()
        assert a.freed == 0
    assert a.freed == 1


def test_discard():
    """discard() removes and frees one plan and reports whether it existed."""
    c = PlanCache(2)
    p = Plan("a")
    c.put("a", p)
    assert c.discard("a") is True and p.freed == 1
    assert c.discard("a") is False


def test_custom_on_evict_and_failure_warns():
    """on_evict replaces free(); a failing release warns and never raises."""
    seen = []
    c = PlanCache(1, name="fft plans", on_evict=seen.append)
    c.put(1, "p1")
    c.put(2, "p2")
    assert seen == ["p1"]

    def bad(_):
        raise OSError("driver gone")

    c2 = PlanCache(1, name="fft plans", on_evict=bad)
    c2.put(1, "p1")
    with pytest.warns(RuntimeWarning, match="fft plans: releasing a plan failed: OSError: driver gone"):
        c2.clear()


def test_release_plan_prefers_free_then_close():
    """release_plan calls free(), else close(), else does nothing."""

    class Closable:
        closed = False

        def close(self):
            self.closed = True

    p, q = Plan(0), Closable()
    release_plan(p)
    release_plan(q)
    release_plan(object())
    assert p.freed == 1 and q.closed


def test_concurrent_builders_build_once():
    """Threads missing the same key wait for one factory call instead of building twice."""
    c = PlanCache(8)
    calls = []
    barrier = threading.Barrier(8)

    def make():
        calls.append(1)
        time.sleep(0.05)
        return Plan("k")

    results = []

    def worker():
        barrier.wait()
        results.append(c.get_or_create("k", make))

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1 and len({id(r) for r in results}) == 1


def test_waiters_retry_after_failed_build():
    """If the building thread fails, a waiting thread builds the plan itself."""
    c = PlanCache(8)
    started = threading.Event()

    def failing():
        started.set()
        time.sleep(0.05)
        raise RuntimeError("first build fails")

    errors, results = [], []

    def first():
        try:
            c.get_or_create("k", failing)
        except RuntimeError as exc:
            errors.append(exc)

    t1 = threading.Thread(target=first)
    t1.start()
    started.wait()
    t2 = threading.Thread(target=lambda: results.append(c.get_or_create("k", lambda: Plan("k"))))
    t2.start()
    t1.join()
    t2.join()
    assert len(errors) == 1 and results[0].key == "k" and "k" in c


def test_many_threads_keep_invariants():
    """Concurrent use never exceeds maxsize and frees every evicted plan exactly once."""
    c = PlanCache(4)
    made = []
    lock = threading.Lock()

    def factory(k):
        p = Plan(k)
        with lock:
            made.append(p)
        return p

    def worker(seed):
        for i in range(300):
            k = (seed * 7 + i) % 10
            with c.use(k, lambda k=k: factory(k)) as p:
                assert p.freed == 0
            assert c.stats.size <= 4

    threads = [threading.Thread(target=worker, args=(s,)) for s in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    c.clear()
    assert all(p.freed == 1 for p in made)


def test_validation_and_repr():
    """maxsize must be a non-negative int, on_evict callable; repr shows the counters."""
    with pytest.raises(ValueError):
        PlanCache(-1)
    with pytest.raises(TypeError):
        PlanCache(1.5)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        PlanCache(1, on_evict=3)  # type: ignore[arg-type]
    assert repr(PlanCache(2, name="matmul plans")).startswith("PlanCache('matmul plans', size=0, maxsize=2")


def test_get_can_leave_a_miss_uncounted():
    """get(count_miss=False) counts hits but not misses (its caller falls back to use(), which counts)."""
    cache = PlanCache(maxsize=2)
    assert cache.get("k", count_miss=False) is None
    assert cache.stats.misses == 0
    cache.put("k", 1)
    assert cache.get("k", count_miss=False) == 1
    assert (cache.stats.hits, cache.stats.misses) == (1, 0)


def test_byte_budget_releases_least_recently_used_plans():
    """With max_bytes, plans beyond the budget are released oldest first; the newest always stays."""
    released = []
    cache = PlanCache(10, on_evict=released.append, max_bytes=100, nbytes=lambda p: p[1])
    cache.put("a", ("a", 40))
    cache.put("b", ("b", 40))
    cache.get("a")  # a is now the most recent
    cache.put("c", ("c", 40))
    assert released == [("b", 40)] and cache.stats.nbytes == 80 and cache.stats.max_bytes == 100
    cache.put("huge", ("huge", 500))
    assert "huge" in cache and len(cache) == 1 and cache.stats.nbytes == 500
    cache.max_bytes = None
    cache.put("d", ("d", 1))
    assert len(cache) == 2
    cache.discard("d")
    assert cache.stats.nbytes == 500
    cache.clear()
    assert cache.stats.nbytes == 0


def test_byte_budget_arguments_are_checked():
    """max_bytes must be a non-negative int and nbytes a callable."""
    with pytest.raises(ValueError):
        PlanCache(4, max_bytes=-1, nbytes=len)
    with pytest.raises(TypeError):
        PlanCache(4, max_bytes=10, nbytes=3)


# -- pinning (pinning=True) ---------------------------------------------------------------------------


def test_pinned_plan_is_never_evicted_by_the_bound():
    """A pinned key stays beyond maxsize; the least recently used unpinned plan goes instead, and the
    newest plan is kept even when only pinned ones remain (the cache then runs over its bound)."""
    c = PlanCache(2, pinning=True)
    plans = {k: Plan(k) for k in "abcd"}
    c.put("a", plans["a"])
    c.pin("a")
    c.put("b", plans["b"])
    c.put("c", plans["c"])  # over the bound: b (unpinned, least recent) goes, pinned a stays
    assert list(c.keys()) == ["a", "c"] and plans["b"].freed == 1 and plans["a"].freed == 0
    c.pin("c")
    c.put("d", plans["d"])  # a and c pinned: the newest is kept over the bound
    assert list(c.keys()) == ["a", "c", "d"] and c.pinned == {"a", "c"}
    c.resize(1)
    assert list(c.keys()) == ["a", "c", "d"] and c.stats.evictions == 1


def test_clear_and_discard_release_pinned_plans():
    """clear() and discard() release pinned plans and forget the pins."""
    c = PlanCache(4, pinning=True)
    a, b = Plan("a"), Plan("b")
    c.put("a", a)
    c.put("b", b)
    c.pin("a")
    c.pin("b")
    assert c.discard("a") and a.freed == 1 and c.pinned == {"b"}
    c.clear()
    assert b.freed == 1 and c.pinned == set() and len(c) == 0


def test_pin_refuses_without_pinning_and_unknown_keys():
    """pin() on a cache made without pinning is a ValueError naming the option; an uncached key a
    KeyError."""
    c = PlanCache(2)
    c.put("a", Plan("a"))
    with pytest.raises(ValueError, match="pinning=True"):
        c.pin("a")
    with pytest.raises(KeyError):
        PlanCache(2, pinning=True).pin("missing")


def test_peek_counts_nothing():
    """peek() returns the plan (or None) without counting a hit or a miss or changing the LRU order."""
    c = PlanCache(2)
    a = Plan("a")
    c.put("a", a)
    c.put("b", Plan("b"))
    assert c.peek("a") is a and c.peek("zz") is None
    assert (c.stats.hits, c.stats.misses) == (0, 0) and list(c.keys()) == ["a", "b"]


def test_hit_counts_a_hit_and_no_miss():
    """hit() (the lock-free lookup of an owner holding its own lock) marks the plan most recent and
    counts a hit; a missing key returns None and counts nothing."""
    c = PlanCache(2)
    a = Plan("a")
    c.put("a", a)
    c.put("b", Plan("b"))
    assert c.hit("a") is a and c.hit("zz") is None
    assert (c.stats.hits, c.stats.misses) == (1, 0) and list(c.keys()) == ["b", "a"]
