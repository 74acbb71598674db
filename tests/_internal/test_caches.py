"""Tests of nvmath._internal.caches: the registry of every module-level cache."""

from __future__ import annotations

import pytest

import nvmath.fft
import nvmath.linalg
import nvmath.linalg.advanced  # noqa: F401 - registers its caches
from nvmath._internal import caches
from nvmath._internal.plan_cache import PlanCache


def test_memo_is_bounded_and_counts_clears():
    """A Memo keeps at most maxsize entries: put() on a full memo empties it first and counts that."""
    m = caches.Memo("test memo", 2)
    assert m.put("a", 1) == 1 and m.put("b", 2) == 2 and m.get("a") == 1
    m.put("c", 3)
    assert dict(m) == {"c": 3} and m.stats == caches.MemoStats(size=1, maxsize=2, clears=1)


def test_every_known_cache_is_registered_and_bounded():
    """The plan caches, memos and shared workspaces of matmul, FFT and the solvers are in the registry."""
    names = caches.registered()
    for expected in (
        "nvmath.linalg.advanced: matmul plans", "nvmath.linalg.advanced: matmul traits",
        "nvmath.linalg.advanced: matmul problems", "nvmath.linalg.advanced: workspace caps",
        "nvmath.linalg.advanced: heuristics", "nvmath.linalg.advanced: shared workspaces",
        "nvmath.fft: plans", "nvmath.fft: call tails", "nvmath.linalg: solver plans",
        "nvmath._internal.stateless: raw readers",
    ):  # fmt: skip
        assert expected in names, expected
    for name, cache in names.items():
        if isinstance(cache, caches.Memo):
            assert cache.maxsize > 0, name
        elif isinstance(cache, PlanCache):
            assert cache.maxsize > 0, name
    assert nvmath.fft.plan_cache.max_bytes is not None  # FFT plans hold their workspaces


def test_clear_all_empties_memos_and_plan_caches():
    """clear_all() empties every memo and frees every cached plan."""
    traits = caches.registered()["nvmath.linalg.advanced: matmul traits"]
    traits.put("some key", "some value")
    freed = []

    class Plan:
        def free(self):
            freed.append(self)

    cache = nvmath.linalg.advanced.plan_cache
    cache.put("k", Plan())
    caches.clear_all()
    assert len(traits) == 0 and len(cache) == 0 and len(freed) == 1


def test_register_refuses_a_second_cache_under_one_name():
    """A name identifies one cache (registering the same object again is harmless)."""
    m = caches.Memo("dup", 1)
    caches.register("test: dup", m)
    caches.register("test: dup", m)
    with pytest.raises(ValueError, match="already registered"):
        caches.register("test: dup", caches.Memo("dup", 1))
    caches._REGISTRY.pop("test: dup")
    assert "test: dup" not in caches.stats()
