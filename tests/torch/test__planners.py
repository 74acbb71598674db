"""PlannerCache: one planned Matmul per problem, reused across calls and layers, bounded, with stats."""

from __future__ import annotations

import pytest


def _f64(torch, *shape):
    """Random float64 data at a 256-byte aligned address (the alignment is part of a planner's key)."""
    n = 1
    for e in shape:
        n *= e
    flat = torch.randn(n + 32, dtype=torch.float64)
    skip = (-flat.data_ptr() % 256) // 8
    return flat[skip : skip + n].view(*shape)


def test_reuse_counts_hits_and_shares_across_layers(torch, nt, fake_gpu):
    """Equal problems hit one planner (results still right for new operands); new shapes miss."""
    cache = nt.PlannerCache(4)
    a, b, a2, b2 = _f64(torch, 3, 4), _f64(torch, 4, 5), _f64(torch, 3, 4), _f64(torch, 4, 5)
    torch.testing.assert_close(cache.run(a, b), a @ b)
    torch.testing.assert_close(cache.run(a2, b2), a2 @ b2)
    cache.run(_f64(torch, 2, 4), b)
    s = cache.stats
    assert (s.hits, s.misses, s.size, s.maxsize, s.evictions) == (1, 2, 2, 4, 0)


def test_bounded_lru_eviction_and_clear(torch, nt, fake_gpu):
    """Beyond maxsize the least recently used planner is freed; clear() frees all; resize() shrinks."""
    cache = nt.PlannerCache(2)
    b = _f64(torch, 4, 2)
    for m in (1, 2, 3):
        cache.run(_f64(torch, m, 4), b)
    assert len(cache) == 2 and cache.stats.evictions == 1
    cache.resize(1)
    assert len(cache) == 1 and cache.stats.evictions == 2
    cache.clear()
    assert len(cache) == 0


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "8"])
def test_bad_maxsize_is_refused(nt, bad):
    """maxsize must be an int >= 1; the message names the bad value."""
    with pytest.raises(ValueError, match="maxsize must be an int >= 1"):
        nt.PlannerCache(bad)


def test_planning_inside_a_capture_is_refused_with_the_fix(torch, nt, fake_gpu, monkeypatch):
    """First use of a problem while a CUDA graph is captured raises CaptureError saying to warm up first;
    a planned problem runs (and its planner is pinned against eviction)."""
    from nvmath.torch import _planners

    cache = nt.PlannerCache(1)
    a, b = _f64(torch, 3, 4), _f64(torch, 4, 5)
    cache.run(a, b)  # warm-up: planned outside the capture
    monkeypatch.setattr(_planners, "capturing", lambda t: True)
    monkeypatch.setattr("nvmath.torch._capture.capturing", lambda t: True)
    with pytest.raises(nt.CaptureError, match="once before the capture"):
        cache.run(_f64(torch, 2, 4), b)
    torch.testing.assert_close(cache.run(a, b), a @ b)
    assert cache.stats.pinned == 1
    monkeypatch.setattr(_planners, "capturing", lambda t: False)
    monkeypatch.setattr("nvmath.torch._capture.capturing", lambda t: False)
    cache.run(_f64(torch, 2, 4), b)  # over the bound, but the pinned planner stays
    assert len(cache) == 2 and cache.stats.evictions == 0


def test_failed_planning_caches_nothing(torch, nt, fake_gpu):
    """A problem the planner rejects raises its error and leaves no entry behind."""
    cache = nt.PlannerCache(2)
    with pytest.raises(ValueError):
        cache.run(_f64(torch, 3, 4), _f64(torch, 5, 2))
    assert len(cache) == 0 and cache.stats.misses == 1


def test_unchanged_operands_are_not_reset_and_moved_ones_are(torch, nt, fake_gpu, monkeypatch):
    """A hit swaps in only operands whose address moved; results follow in-place updates and new tensors."""
    from nvmath.linalg.advanced import Matmul

    cache = nt.PlannerCache(2)
    a, b, b2 = _f64(torch, 3, 4), _f64(torch, 4, 5), _f64(torch, 4, 5)
    cache.run(a, b)
    calls = []
    original = Matmul.reset_operands_unchecked
    monkeypatch.setattr(
        Matmul, "reset_operands_unchecked", lambda self, **kw: calls.append(kw) or original(self, **kw)
    )
    a.mul_(2)  # same address: no reset, new values read
    torch.testing.assert_close(cache.run(a, b), a @ b)
    torch.testing.assert_close(cache.run(a, b2), a @ b2)
    assert len(calls) == 1 and calls[0]["a"] is None and calls[0]["b"] is b2


def test_autotune_option_times_new_problems_once(torch, nt, fake_gpu, monkeypatch):
    """autotune=N runs Matmul.autotune(iterations=N) once per new problem, never on hits; bad values raise."""
    from nvmath.linalg.advanced import Matmul

    seen = []
    monkeypatch.setattr(Matmul, "autotune", lambda self, iterations=10, **kw: seen.append(iterations))
    cache = nt.PlannerCache(4, autotune=3)
    a, b = _f64(torch, 3, 4), _f64(torch, 4, 5)
    cache.run(a, b)
    torch.testing.assert_close(cache.run(a, b), a @ b)
    assert seen == [3]
    with pytest.raises(ValueError, match="autotune must be"):
        nt.PlannerCache(4, autotune=0)


def test_keep_operands_false_holds_no_tensor_between_calls(torch, nt, fake_gpu):
    """With keep_operands=False (the custom ops' cache) a planner drops its operands after each call
    (CUDA graph trees need that) and the next call, moved or not, is still right."""
    import weakref

    cache = nt.PlannerCache(2, keep_operands=False)
    a, b = _f64(torch, 3, 4), _f64(torch, 4, 5)
    torch.testing.assert_close(cache.run(a, b), a @ b)
    first = weakref.ref(a)  # the operand the planner was planned with
    ref = weakref.ref(b)
    a2 = _f64(torch, 3, 4)
    torch.testing.assert_close(cache.run(a2, b), a2 @ b)
    del b, a
    assert ref() is None and first() is None, "the planner still holds an operand"
    torch.testing.assert_close(
        cache.run(a2, _f64(torch, 4, 5) * 0 + 1), a2 @ torch.ones(4, 5, dtype=torch.float64)
    )
    assert nt.compiled_cache.stats.maxsize == 64 and nt.compiled_cache._keep is False
    (mm, _), *_ = cache._entries.values()
    assert type(mm._options.allocator).__name__ == "_OutsideTorchPools"  # workspaces outside torch's pools


@pytest.mark.parametrize("keep", [True, False])
@pytest.mark.parametrize("m, n, small", [(64, 4096, True), (4096, 1, True), (1024, 2048, True), (1025, 2048, False)])
def test_small_products_are_planned_under_torchs_workspace_cap(torch, nt, fake_gpu, keep, m, n, small):
    """A product whose smaller output side is <= 1024 (decode-shaped layers) is planned with a 1 MiB
    workspace cap, as torch plans its own; larger ones keep the default; the allocator rule holds either way."""
    from nvmath.torch import _planners

    options = _planners._options(torch.empty(m, 8), torch.empty(8, n), keep)
    options = dict(options or {})
    assert options.get("memory_limit") == (1 << 20 if small else None)
    assert ("allocator" in options) is (not keep)


def test_cache_plans_small_products_with_the_small_cap(torch, nt, fake_gpu):
    """The planner a cache makes for a small product carries the 1 MiB memory_limit (and still computes)."""
    cache = nt.PlannerCache(2)
    a, b = _f64(torch, 3, 4), _f64(torch, 4, 5)
    torch.testing.assert_close(cache.run(a, b), a @ b)
    (mm, _), *_ = cache._entries.values()
    assert mm._options.memory_limit == 1 << 20
