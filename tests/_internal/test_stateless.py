"""Tests of nvmath._internal.stateless: the one key -> cache -> entry -> planner path of stateless calls."""

from __future__ import annotations

import pytest

from nvmath._internal.plan_cache import PlanCache
from nvmath._internal.stateless import CachedPlan, call_cached


class Planner:
    """A fake planner: counts runs and frees; run_cached returns its arguments."""

    def __init__(self):
        self.runs, self.frees, self.is_planned = 0, 0, True

    def run_cached(self, *args):
        self.runs += 1
        return args

    def free(self):
        self.frees += 1
        self.is_planned = False


def test_miss_builds_then_hit_reuses():
    """A miss builds and caches one entry; a hit runs the same planner without building again."""
    cache: PlanCache = PlanCache(4)
    built = []

    def build():
        built.append(CachedPlan(Planner()))
        return built[-1]

    assert call_cached(cache, "k", build, 1, 2) == (1, 2)
    assert call_cached(cache, "k", build, 3) == (3,)
    assert len(built) == 1 and built[0].planner.runs == 2
    assert cache.stats.hits == 1 and cache.stats.misses == 1


def test_none_key_plans_runs_and_frees():
    """An uncacheable call (key None) plans, runs and frees its planner, caching nothing."""
    cache: PlanCache = PlanCache(4)
    entry = CachedPlan(Planner())
    assert call_cached(cache, None, lambda: entry, "x") == ("x",)
    assert entry.planner.frees == 1 and len(cache) == 0


def test_freed_entry_is_not_used():
    """An entry whose planner was freed after the lookup is rebuilt through the cache, not run."""
    cache: PlanCache = PlanCache(4)
    stale = CachedPlan(Planner())
    cache.put("k", stale)
    stale.planner.is_planned = False
    fresh = CachedPlan(Planner())
    cache.discard("k")
    assert call_cached(cache, "k", lambda: fresh, 7) == (7,)
    assert stale.planner.runs == 0 and fresh.planner.runs == 1


def test_failed_build_caches_nothing():
    """A factory that raises propagates its error and leaves no entry behind."""
    cache: PlanCache = PlanCache(4)

    def build():
        raise ValueError("bad operand")

    with pytest.raises(ValueError, match="bad operand"):
        call_cached(cache, "k", build)
    assert len(cache) == 0


def test_eviction_frees_under_the_lock():
    """Evicting an entry frees its planner (through CachedPlan.free)."""
    cache: PlanCache = PlanCache(1)
    first = CachedPlan(Planner())
    call_cached(cache, "a", lambda: first)
    call_cached(cache, "b", lambda: CachedPlan(Planner()))
    assert first.planner.frees == 1


def test_entry_freed_after_the_lookup_is_rebuilt(monkeypatch):
    """A hit on an entry freed between the lookup and its lock (an eviction) runs a new plan instead."""
    cache: PlanCache = PlanCache(4)
    stale = CachedPlan(Planner())
    stale.free()
    assert not stale.live and stale.planner.frees == 1
    monkeypatch.setattr(cache, "get", lambda key, default=None, count_miss=True: stale)
    fresh = CachedPlan(Planner())
    assert call_cached(cache, "k", lambda: fresh, 1) == (1,)
    assert stale.planner.runs == 0 and fresh.planner.runs == 1


def test_build_args_are_given_to_build_on_a_miss_only():
    """build(*build_args) runs on a miss; a hit neither builds nor needs a closure."""
    cache: PlanCache = PlanCache(4)
    calls = []

    def build(x, y):
        calls.append((x, y))
        return CachedPlan(Planner())

    assert call_cached(cache, "k", build, 5, build_args=(1, 2)) == (5,)
    assert call_cached(cache, "k", build, 6, build_args=(3, 4)) == (6,)
    assert calls == [(1, 2)]
    assert call_cached(cache, None, build, 7, build_args=(8, 9)) == (7,) and calls[-1] == (8, 9)


def test_shared_lock_is_the_entry_lock():
    """An entry built with a lock (one shared by several plans) uses it; free() takes it."""
    import threading

    lock = threading.Lock()
    entry = CachedPlan(Planner(), lock)
    assert entry.lock is lock
    entry.free()
    assert not lock.locked() and entry.planner.frees == 1


def test_raw_reader_gives_the_adapter_head(torch):
    """A torch tensor read raw gives the head its adapter gives, its address and the tensor itself."""
    from nvmath._internal.stateless import READERS, adapter_head, reader_for
    from nvmath._internal.tensors import wrap

    t = torch.arange(12, dtype=torch.float32).reshape(3, 4)[:, 1:]
    adapter = wrap(t)  # registers the dtype the reader looks up
    read = READERS.get(type(t)) or reader_for(type(t))
    head, ptr, obj = read(t)
    assert head == adapter_head(adapter) and hash(head) == hash(adapter_head(adapter))
    assert ptr == adapter.data_ptr and obj is t
    assert reader_for(type(adapter))(adapter)[0] == head


def test_raw_reader_conjugation_matches_the_adapter(torch):
    """A lazily conjugated complex tensor reads conjugated, a plain one and a real one not, as their
    adapters say (the reader asks torch only for complex dtypes)."""
    from nvmath._internal.stateless import reader_for
    from nvmath._internal.tensors import wrap

    z = torch.randn(2, 3, dtype=torch.complex64)
    for t in (z, z.conj(), torch.ones(2, 3).conj()):
        adapter = wrap(t)  # (registers the dtype the reader looks up)
        head = reader_for(type(t))(t)[0]
        assert head[5] is t.is_conj() and head[5] == adapter.is_conjugate


def test_unreadable_types_answer_none():
    """Types without a raw reader (numpy arrays, plain objects) answer None: the caller wraps them."""
    import numpy as np

    from nvmath._internal.stateless import reader_for

    assert reader_for(np.ndarray)(np.zeros(3)) is None
    assert reader_for(object)(object()) is None


def test_last_call_cache_remembers_hits_only_and_counts_them():
    """call_remembered: a miss builds and runs (nothing remembered), a hit becomes the last call with the
    runner entry_of gives; memo hits add to stats.hits; clear() and an eviction make it unusable."""
    from nvmath._internal.stateless import NO_LAST, LastCallCache, call_remembered

    cache = LastCallCache(1)
    built = []

    def build():
        built.append(CachedPlan(Planner()))
        return built[-1]

    assert call_remembered(cache, "call", "k", build, 1) == (1,)
    assert cache.last is NO_LAST  # (a miss: the next call looks up)
    assert call_remembered(cache, "call", "k", build, 2, entry_of=lambda p: p.run_cached) == (2,)
    call, entry, run = cache.last
    assert call == "call" and entry is built[0] and run(3) == (3,)
    base = cache.stats.hits
    cache.memo_hits += 2
    assert cache.stats.hits == base + 2
    call_remembered(cache, "other", "k2", build)  # evicts the last call's entry (maxsize 1)
    assert not entry.live and cache.last[1] is entry  # (still remembered: its live flag says no)
    cache.clear()
    assert cache.last is NO_LAST and cache.stats.hits == base + 2
