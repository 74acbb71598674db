"""PlannerCache: one planned Matmul per problem, reused across calls and layers, bounded, with stats."""

from __future__ import annotations

import pytest


def _entries(cache):
    """The cache's entries ([planner, last pointers, run]), least recently used first (white-box)."""
    store = cache._cache  # noqa: SLF001 - the PlanCache under the planner cache
    return [store.peek(key) for key in store.keys()]


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
    a planned problem runs (and its planner, which has a workspace, is pinned against eviction)."""
    from nvmath.torch import _planners

    fake_gpu.workspace = 4096  # the heuristic's algorithms need a workspace
    cache = nt.PlannerCache(1)
    a, b = _f64(torch, 3, 4), _f64(torch, 4, 5)
    cache.run(a, b)  # warm-up: planned outside the capture
    monkeypatch.setattr(_planners, "capturing", lambda t: True)
    monkeypatch.setattr("nvmath.torch._capture.capturing", lambda t: True)
    monkeypatch.setattr("nvmath.torch._capture.capturing_now", lambda: True)  # (a hit's query)
    with pytest.raises(nt.CaptureError, match="once before the capture"):
        cache.run(_f64(torch, 2, 4), b)
    torch.testing.assert_close(cache.run(a, b), a @ b)
    assert cache.stats.pinned == 1
    monkeypatch.setattr(_planners, "capturing", lambda t: False)
    monkeypatch.setattr("nvmath.torch._capture.capturing", lambda t: False)
    monkeypatch.setattr("nvmath.torch._capture.capturing_now", lambda: False)
    cache.run(_f64(torch, 2, 4), b)  # over the bound, but the pinned planner stays
    assert len(cache) == 2 and cache.stats.evictions == 0


def test_failed_planning_caches_nothing(torch, nt, fake_gpu):
    """A problem the planner rejects raises its error and leaves no entry behind."""
    cache = nt.PlannerCache(2)
    with pytest.raises(ValueError):
        cache.run(_f64(torch, 3, 4), _f64(torch, 5, 2))
    assert len(cache) == 0 and cache.stats.misses == 1


def test_products_run_on_addresses_with_new_operands(torch, nt, fake_gpu, monkeypatch):
    """A hit of run() on a plan that can run on addresses resets nothing and reads the call's operands
    (moved ones and in-place updates alike); aux outputs come back as on the first call."""
    from nvmath.linalg.advanced import Matmul
    from nvmath.linalg.advanced import MatmulEpilog as E

    cache = nt.PlannerCache(4)
    a, b, g = _f64(torch, 3, 4), _f64(torch, 4, 5), _f64(torch, 3, 5)
    cache.run(a, b)
    cache.run(a.mT, g, epilog=E.BGRADB)  # a weight gradient and its bias gradient
    monkeypatch.setattr(Matmul, "reset_operands_unchecked", lambda self, **kw: pytest.fail("reset"))
    a.mul_(2)
    torch.testing.assert_close(cache.run(a, b), a @ b)
    a2, b2, g2 = _f64(torch, 3, 4), _f64(torch, 4, 5), _f64(torch, 3, 5)
    torch.testing.assert_close(cache.run(a2, b2), a2 @ b2)
    out, aux = cache.run(a2.mT, g2, epilog=E.BGRADB)
    torch.testing.assert_close(out, a2.mT @ g2)
    torch.testing.assert_close(aux["bgradb"].reshape(-1), g2.sum(0))
    assert [entry[2] is not None for entry in _entries(cache)] == [True, True]
    assert cache.stats.hits == 3 and cache.stats.misses == 2


def test_unchanged_operands_are_not_reset_and_moved_ones_are(torch, nt, fake_gpu, monkeypatch):
    """A hit on a planner that cannot run on addresses swaps in only operands whose address moved;
    results follow in-place updates and new tensors."""
    from nvmath.linalg.advanced import Matmul
    from nvmath.torch import _planners

    monkeypatch.setattr(_planners, "address_run_possible", lambda mm, names=(): False)
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
    (mm, *_), *_ = _entries(cache)
    assert type(mm._options.allocator).__name__ == "_OutsideTorchPools"  # workspaces outside torch's pools


# ---------------------------------------------------------------- linear(): the address-only hit path
def _linear_ref(torch, x, w, b, act=None):
    y = torch.nn.functional.linear(x, w, b)
    return torch.relu(y) if act == "relu" else y


def test_linear_hits_run_on_addresses_with_new_tensors(torch, nt, fake_gpu, monkeypatch):
    """After the first call, calls with new x, weight and bias (same layouts) run the planned problem on
    their addresses: no reset, no wrap, no heuristic; every result element is written and matches torch."""
    from nvmath.linalg.advanced import Matmul
    from nvmath.linalg.advanced import MatmulEpilog as E

    cache = nt.PlannerCache(4)
    x, w, b = _f64(torch, 6, 4), _f64(torch, 3, 4), _f64(torch, 3)
    y, extras = cache.linear(x, w, b, E.RELU_BIAS)
    torch.testing.assert_close(y, _linear_ref(torch, x, w, b, "relu"))
    assert extras is None and y.shape == (6, 3) and y.is_contiguous()
    resets = []
    monkeypatch.setattr(Matmul, "reset_operands_unchecked", lambda self, **kw: resets.append(kw))
    empty = torch.Tensor.new_empty_strided
    monkeypatch.setattr(torch.Tensor, "new_empty_strided", lambda t, *a: empty(t, *a).fill_(float("nan")))
    for _ in range(3):
        x, w, b = _f64(torch, 6, 4), _f64(torch, 3, 4), _f64(torch, 3)
        y, _ = cache.linear(x, w, b, E.RELU_BIAS)
        torch.testing.assert_close(y, _linear_ref(torch, x, w, b, "relu"))
    x.mul_(-2)  # same addresses, new values: read at the next call
    torch.testing.assert_close(cache.linear(x, w, b, E.RELU_BIAS)[0], _linear_ref(torch, x, w, b, "relu"))
    s = cache.stats
    assert not resets and (s.hits, s.misses, s.size) == (4, 1, 1) and fake_gpu.heuristic_calls == 1


def test_linear_another_layout_dtype_or_alignment_is_another_problem(torch, nt, fake_gpu):
    """A padded x, another dtype or a less aligned pointer misses (planned anew, right result); going
    back to the first layout hits its planner again."""
    from nvmath.linalg.advanced import MatmulEpilog as E

    cache = nt.PlannerCache(8)
    x, w, b = _f64(torch, 6, 4), _f64(torch, 3, 4), _f64(torch, 3)
    cache.linear(x, w, b, E.BIAS)
    strided = _f64(torch, 6, 8)[:, :4]  # padded rows
    misaligned = _f64(torch, 6 * 4 + 1)[1:].view(6, 4)
    for xi, wi, bi in ((strided, w, b), (misaligned, w, b), (x.float(), w.float(), b.float())):
        torch.testing.assert_close(cache.linear(xi, wi, bi, E.BIAS)[0], _linear_ref(torch, xi, wi, bi))
    assert cache.stats.misses == 4 and len(cache) == 4
    x2 = _f64(torch, 6, 4)
    torch.testing.assert_close(cache.linear(x2, w, b, E.BIAS)[0], _linear_ref(torch, x2, w, b))
    assert cache.stats.misses == 4


def test_linear_batched_input_and_the_copying_reshape_fallback(torch, nt, fake_gpu):
    """A 3-D x viewable as rows runs on addresses with y in x's batch shape; one whose reshape copies
    (a transposed batch) is run through views instead, and stays right on later calls."""
    from nvmath.linalg.advanced import MatmulEpilog as E

    cache = nt.PlannerCache(8)
    w, b = _f64(torch, 3, 4), _f64(torch, 3)
    for _ in range(2):
        x = _f64(torch, 2, 5, 4)
        y, _ = cache.linear(x, w, b, E.BIAS)
        assert y.shape == (2, 5, 3)
        torch.testing.assert_close(y, _linear_ref(torch, x, w, b))
    for _ in range(2):
        x = _f64(torch, 5, 2, 4).transpose(0, 1)
        torch.testing.assert_close(cache.linear(x, w, b, E.BIAS)[0], _linear_ref(torch, x, w, b))
    runs = [entry[2] is not None for entry in _entries(cache)]
    assert runs == [True, False] and cache.stats.hits == 2


@pytest.mark.parametrize("keep", [True, False])
def test_linear_planner_holds_no_tensor_once_on_addresses(torch, nt, fake_gpu, keep):
    """A Linear-layer planner that runs on addresses keeps none of the caller's tensors (either cache)."""
    import gc
    import weakref

    from nvmath.linalg.advanced import MatmulEpilog as E

    cache = nt.PlannerCache(2, keep_operands=keep)
    x, w, b = _f64(torch, 6, 4), _f64(torch, 3, 4), _f64(torch, 3)
    refs = [weakref.ref(t) for t in (x, w, b)]
    y = cache.linear(x, w, b, E.BIAS)[0]
    torch.testing.assert_close(y, _linear_ref(torch, x, w, b))
    del x, w, b
    gc.collect()
    assert all(r() is None for r in refs), "the planner still holds an operand"
    x, w, b = _f64(torch, 6, 4), _f64(torch, 3, 4), _f64(torch, 3)
    torch.testing.assert_close(cache.linear(x, w, b, E.BIAS)[0], _linear_ref(torch, x, w, b))


def test_linear_without_plan_returns_none_on_a_miss(torch, nt, fake_gpu):
    """linear(..., plan=False) neither plans nor counts a problem that is not cached."""
    from nvmath.linalg.advanced import MatmulEpilog as E

    cache = nt.PlannerCache(2)
    x, w = _f64(torch, 6, 4), _f64(torch, 3, 4)
    assert cache.linear(x, w, None, None, plan=False) is None
    assert cache.stats.misses == 0 and len(cache) == 0
    cache.linear(x, w, None, E.RELU)
    y, _ = cache.linear(x, w, None, E.RELU, plan=False)
    torch.testing.assert_close(y, torch.relu(x @ w.T))


def test_linear_hit_inside_a_capture_pins_the_planner(torch, nt, fake_gpu, monkeypatch):
    """A Linear-layer hit while a CUDA graph is captured pins its planner when it has a workspace (never
    evicted afterwards)."""
    from nvmath.linalg.advanced import MatmulEpilog as E
    from nvmath.torch import _capture, _planners

    fake_gpu.workspace = 4096  # the heuristic's algorithms need a workspace
    cache = nt.PlannerCache(1)
    x, w, b = _f64(torch, 6, 4), _f64(torch, 3, 4), _f64(torch, 3)
    cache.linear(x, w, b, E.BIAS)
    monkeypatch.setattr(_capture, "capturing_now", lambda: True)  # (a hit's query)
    torch.testing.assert_close(cache.linear(x, w, b, E.BIAS)[0], _linear_ref(torch, x, w, b))
    assert cache.stats.pinned == 1
    monkeypatch.setattr(_capture, "capturing_now", lambda: False)
    monkeypatch.setattr(_planners, "capturing", lambda t: False)
    cache.linear(_f64(torch, 2, 4), w, b, E.BIAS)
    assert len(cache) == 2 and cache.stats.evictions == 0


@pytest.mark.gpu
@pytest.mark.parametrize("m", [1, 8, 64])
def test_linear_address_hits_on_the_gpu(torch_cuda, nt, m):
    """On the GPU, decode-shaped Linear layers sharing one planner run on addresses (new input every
    call, the bias re-pointed per layer, also on a side stream) and match a float64 reference."""
    torch = torch_cuda
    torch.manual_seed(5)
    cache = nt.PlannerCache(8)
    layers = [nt.Linear(512, 768, device="cuda", dtype=torch.bfloat16, cache=cache) for _ in range(3)]

    def check(x):
        for layer in layers:
            y = layer(x)
            ref = x.double() @ layer.weight.double().T + layer.bias.double()
            assert y.shape == (m, 768) and y.dtype == torch.bfloat16 and y.is_contiguous()
            assert ((y.double() - ref).norm() / ref.norm()).item() < 1e-2

    with torch.no_grad():
        for _ in range(3):
            check(torch.randn(m, 512, device="cuda", dtype=torch.bfloat16))
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            check(torch.randn(m, 512, device="cuda", dtype=torch.bfloat16))
        torch.cuda.current_stream().wait_stream(side)
        torch.cuda.synchronize()
    assert cache.stats.misses == 1 and [e[2] is not None for e in _entries(cache)] == [True]


def test_planners_lists_the_cached_planners_least_recent_first(torch, nt, fake_gpu):
    """planners() gives the planned Matmul objects in LRU order, with their epilog and algorithms."""
    from nvmath.linalg.advanced import MatmulEpilog as E

    cache = nt.PlannerCache(4)
    x, w, b = _f64(torch, 6, 4), _f64(torch, 3, 4), _f64(torch, 3)
    cache.linear(x, w, b, E.BIAS)
    cache.run(x, w.mT)
    cache.linear(x, w, b, E.BIAS)
    first, second = cache.planners()
    assert first.view.epilog == E.DEFAULT and second.view.epilog == E.BIAS
    assert second.algorithms and nt.PlannerCache(1).planners() == ()


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
    (mm, *_), *_ = _entries(cache)
    assert mm._options.memory_limit == 1 << 20


@pytest.mark.gpu
@pytest.mark.parametrize("bias", [True, False])
def test_autotuned_linear_problems_run_on_addresses_on_the_gpu(torch_cuda, nt, bias):
    """With PlannerCache(autotune=True) a Linear problem is autotuned once (a formulation other than the
    heuristic's may win) and its later calls, on addresses or through views, match a float64 reference."""
    torch = torch_cuda
    torch.manual_seed(6)
    cache = nt.PlannerCache(4, autotune=3)
    layer = nt.Linear(256, 384, bias=bias, device="cuda", dtype=torch.bfloat16, cache=cache)
    with torch.no_grad():
        for _ in range(3):
            x = torch.randn(16, 256, device="cuda", dtype=torch.bfloat16)
            y = layer(x)
            ref = x.double() @ layer.weight.double().T
            if bias:
                ref = ref + layer.bias.double()
            assert ((y.double() - ref).norm() / ref.norm()).item() < 1e-2
    assert cache.stats.misses == 1 and cache.stats.hits == 2


def test_address_runs_without_workspace_skip_the_capture_check(torch, nt, fake_gpu, monkeypatch):
    """A planner that runs on addresses with no workspace leaves nothing of its own in a captured graph:
    its hits neither query the capture state nor pin it, and it may be evicted."""
    from nvmath.linalg.advanced import MatmulEpilog as E
    from nvmath.torch import _planners

    cache = nt.PlannerCache(2)
    x, w, b = _f64(torch, 6, 4), _f64(torch, 3, 4), _f64(torch, 3)
    cache.linear(x, w, b, E.BIAS)
    cache.run(x, w.mT)
    monkeypatch.setattr(_planners, "capturing", lambda t: pytest.fail("capture state queried"))
    torch.testing.assert_close(cache.linear(x, w, b, E.BIAS)[0], _linear_ref(torch, x, w, b))
    torch.testing.assert_close(cache.run(x, w.mT), x @ w.mT)
    assert cache.stats.hits == 2 and cache.stats.pinned == 0
    monkeypatch.setattr(_planners, "capturing", lambda t: False)
    cache.run(_f64(torch, 2, 4), w.mT)
    assert cache.stats.evictions == 1 and len(cache) == 2


def test_module_caches_are_registered_and_cleared_by_clear_all(torch, nt, fake_gpu):
    """default_cache and compiled_cache are in the cache registry: caches.clear_all() frees their planners."""
    from nvmath._internal import caches

    found = caches.registered()
    assert found["nvmath.torch: default planner cache"] is nt.default_cache
    assert found["nvmath.torch: compiled planner cache"] is nt.compiled_cache
    a, b = _f64(torch, 3, 4), _f64(torch, 4, 5)
    torch.testing.assert_close(nt.default_cache.run(a, b), a @ b)
    planner = nt.default_cache.planners()[0]
    caches.clear_all()
    assert len(nt.default_cache) == 0 and not planner.is_planned



def test_planner_cache_keeps_its_planners_in_a_pinning_plan_cache(torch, nt, fake_gpu):
    """The planner cache stores its planners in the package's PlanCache (made with pinning): its stats
    are that cache's hits/evictions/size, and resize() frees the least recently used planner."""
    from nvmath._internal.plan_cache import PlanCache

    cache = nt.PlannerCache(3)
    store = cache._cache  # noqa: SLF001 - white-box: the PlanCache under it
    assert isinstance(store, PlanCache)
    a, b = _f64(torch, 3, 4), _f64(torch, 4, 5)
    for m in (2, 3, 5):
        x = _f64(torch, m, 4)
        torch.testing.assert_close(cache.run(x, b), x @ b)
    first = cache.planners()[0]
    torch.testing.assert_close(cache.run(a, b), a @ b)  # a hit (3 x 4 was planned)
    assert cache.stats.hits == store.stats.hits == 1 and cache.stats.size == store.stats.size == 3
    cache.resize(2)
    assert not first.is_planned and cache.stats.evictions == store.stats.evictions == 1


def test_infer_runs_planned_problems_only_and_matches_linear(torch, nt, fake_gpu, monkeypatch):
    """infer() returns None for a problem not planned yet (nothing planned, nothing counted), then the
    same y as linear() on every hit, on addresses or (for a planner that cannot run so) by swapping."""
    from nvmath.linalg.advanced import MatmulEpilog as E
    from nvmath.torch import _planners

    for addresses in (True, False):
        if not addresses:
            monkeypatch.setattr(_planners, "address_run_possible", lambda mm, names=(): False)
        cache = nt.PlannerCache(4)
        x, w, b = _f64(torch, 6, 4), _f64(torch, 3, 4), _f64(torch, 3)
        assert cache.infer(x, w, b, E.BIAS) is None and len(cache) == 0 and cache.stats.misses == 0
        cache.linear(x, w, b, E.BIAS)
        assert (_entries(cache)[0][2] is not None) is addresses
        for epilog, bias in ((E.BIAS, b), (E.BIAS, _f64(torch, 3))):
            x = _f64(torch, 6, 4)
            y = cache.infer(x, w, bias, epilog)
            torch.testing.assert_close(y, _linear_ref(torch, x, w, bias))
            assert y.shape == (6, 3) and y.is_contiguous()
        assert cache.infer(x, w, None, None) is None  # (no bias: another problem)
        assert (cache.stats.hits, cache.stats.misses) == (2, 1)


def test_a_pinned_planner_skips_the_capture_query(torch, nt, fake_gpu, monkeypatch):
    """A planner with a workspace asks whether a graph is captured until it is pinned, and not after."""
    from nvmath.linalg.advanced import MatmulEpilog as E
    from nvmath.torch import _capture, _planners

    fake_gpu.workspace = 4096  # the heuristic's algorithms need a workspace
    cache = nt.PlannerCache(4)
    x, w, b = _f64(torch, 6, 4), _f64(torch, 3, 4), _f64(torch, 3)
    cache.linear(x, w, b, E.BIAS)
    cache.run(x, w.mT)
    queries = []
    monkeypatch.setattr(_capture, "capturing_now", lambda: queries.append(1) or True)  # (a hit's query)
    cache.infer(x, w, b, E.BIAS)
    cache.run(x, w.mT)
    assert len(queries) == 2 and cache.stats.pinned == 2
    torch.testing.assert_close(cache.infer(x, w, b, E.BIAS), _linear_ref(torch, x, w, b))
    torch.testing.assert_close(cache.linear(x, w, b, E.BIAS)[0], _linear_ref(torch, x, w, b))
    torch.testing.assert_close(cache.run(x, w.mT), x @ w.mT)
    assert len(queries) == 2


def test_a_replanned_problem_asks_the_capture_query_again(torch, nt, fake_gpu, monkeypatch):
    """After ``clear()`` (which unpins everything) a problem planned again is not taken as pinned: its
    hits ask whether a graph is captured until they pin it again."""
    from nvmath.linalg.advanced import MatmulEpilog as E
    from nvmath.torch import _capture, _planners

    fake_gpu.workspace = 4096
    cache = nt.PlannerCache(4)
    x, w, b = _f64(torch, 6, 4), _f64(torch, 3, 4), _f64(torch, 3)
    cache.linear(x, w, b, E.BIAS)
    queries = []
    monkeypatch.setattr(_capture, "capturing_now", lambda: queries.append(1) or True)  # (a hit's query)
    cache.infer(x, w, b, E.BIAS)
    assert len(queries) == 1 and cache.stats.pinned == 1
    cache.clear()
    assert cache.stats.pinned == 0
    monkeypatch.setattr(_capture, "capturing_now", lambda: queries.append(1) or False)
    cache.linear(x, w, b, E.BIAS)  # planned again (not captured)
    torch.testing.assert_close(cache.infer(x, w, b, E.BIAS), _linear_ref(torch, x, w, b))
    assert len(queries) == 2 and cache.stats.pinned == 0  # (the hit asked again)


def test_weight_grad_matches_torch_on_new_and_planned_problems(torch, nt, fake_gpu, monkeypatch):
    """weight_grad(x, dz, bias) is (dz.T @ x, dz.sum(0) or None), the gradient contiguous (N, K), on its
    first call, on hits with new tensors (on addresses or, for a planner that cannot run so, by
    swapping) and with the bias gradient on or off (two problems)."""
    from nvmath.torch import _planners

    for addresses in (True, False):
        if not addresses:
            monkeypatch.setattr(_planners, "address_run_possible", lambda mm, names=(): False)
        cache = nt.PlannerCache(4)
        for step in range(3):
            for bias in (True, False):
                x, dz = _f64(torch, 6, 4), _f64(torch, 6, 3)
                dw, db = cache.weight_grad(x, dz, bias)
                torch.testing.assert_close(dw, dz.T @ x)
                assert dw.shape == (3, 4) and dw.is_contiguous()
                if bias:
                    torch.testing.assert_close(db.reshape(-1), dz.sum(0))
                else:
                    assert db is None
        assert (cache.stats.hits, cache.stats.misses) == (4, 2)
        assert [entry[2] is not None for entry in _entries(cache)] == [addresses, addresses]
