"""The compiled Linear hit (``nvmath._fastcall.LinearHits`` of a ``PlannerCache``): on the fake GPU with
torch CPU tensors posing as package-"torch" CUDA tensors and the emulated ``cublasLtMatmul`` behind a
real C function (so the launches' callers are compiled), it gives bit-identical results to the Python
path, every key mismatch falls back to the Python path (still correct), and a cleared cache or a
freed planner leaves nothing the table would run."""

from __future__ import annotations

import threading

import pytest
from compiled_hit_helpers import aligned_tensor, install_linear_hit_fake
from fastcall_probes import FastCall, needs_extension

from nvmath._internal import fastpath
from nvmath.bindings import cublasLt

pytestmark = needs_extension

ACTS = [None, "relu", "gelu"]
_STATUS = [0]  # the status the emulated cublasLtMatmul returns (0: it computes)


@pytest.fixture
def gpu(torch, torch_fakes, monkeypatch):
    """``(nvmath.torch, calls)`` of :func:`compiled_hit_helpers.install_linear_hit_fake` (status: ``_STATUS``)."""
    nt, calls = install_linear_hit_fake(torch_fakes, monkeypatch, _STATUS)
    yield nt, calls
    nt.default_cache.clear()
    nt.compiled_cache.clear()


_aligned = aligned_tensor


def _reference(torch, x, w, b, act):
    y = torch.nn.functional.linear(x.double(), w.double(), None if b is None else b.double())
    if act == "relu":
        y = torch.relu(y)
    elif act == "gelu":
        y = torch.nn.functional.gelu(y, approximate="tanh")
    return y


def _served(cache) -> int:
    """Calls the compiled table served since its counts were last folded (no stats read in between)."""
    return sum(e.hits for e in cache.linear_hits.entries())


@pytest.mark.parametrize("act", ACTS)
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "nobias"])
def test_compiled_hit_is_bit_identical_to_the_python_path(torch, gpu, act, bias):
    """After a planning call and a Python hit, the table serves the calls; each result equals, bit for
    bit, what the same cache's Python path computes (the table switched off), and torch's in float64."""
    nt, _ = gpu
    cache = nt.PlannerCache()
    assert cache.linear_hits is not None
    x, w = _aligned(torch, 8, 32), _aligned(torch, 16, 32)
    b = _aligned(torch, 16) if bias else None
    with torch.no_grad():
        first = [nt.linear(x, w, b, act, cache=cache) for _ in range(2)]  # (plans; then a Python hit)
        compiled = [nt.linear(x, w, b, act, cache=cache) for _ in range(3)]
        assert _served(cache) == 3
        table, cache.linear_hits = cache.linear_hits, None
        python = nt.linear(x, w, b, act, cache=cache)
        cache.linear_hits = table
    for y in (*first, *compiled):
        assert y.shape == (8, 16) and y.is_contiguous()
        assert torch.equal(y, python)
    torch.testing.assert_close(python.double(), _reference(torch, x, w, b, act), rtol=1e-5, atol=1e-5)


def test_linear_module_forward_and_3d_input_use_the_table(torch, gpu):
    """``nvmath.torch.Linear`` under ``no_grad`` and a (batch, tokens, features) input hit the table."""
    nt, _ = gpu
    layer = nt.Linear(32, 16, activation="relu", cache=nt.PlannerCache())
    x = _aligned(torch, 2, 4, 32)
    with torch.no_grad():
        ys = [layer(x) for _ in range(4)]
        assert _served(layer.cache) == 2
        ref = _reference(torch, x, layer.weight, layer.bias, "relu")
    for y in ys:
        assert y.shape == (2, 4, 16)
        torch.testing.assert_close(y.double(), ref, rtol=1e-5, atol=1e-5)


def _warm(nt, torch, cache, x, w, b, act=None):
    with torch.no_grad():
        for _ in range(3):
            nt.linear(x, w, b, act, cache=cache)


def _mismatches(torch):
    """name -> (x, w, b, act) of calls that differ from the warm problem (x (8, 32), w (16, 32), bias)
    in one key item each."""
    x, w, b = _aligned(torch, 8, 32), _aligned(torch, 16, 32), _aligned(torch, 16)
    return {
        "dtype": (x.double(), w.double(), b.double(), None),
        "x shape": (_aligned(torch, 4, 32), w, b, None),
        "w shape": (x, _aligned(torch, 24, 32), _aligned(torch, 24), None),
        "x strides": (_aligned(torch, 32, 8).mT, w, b, None),
        "x alignment": (_aligned(torch, 8, 32, offset=4), w, b, None),
        "no bias": (x, w, None, None),
        "activation": (x, w, b, "relu"),
        "x subclass": (torch.nn.Parameter(x, requires_grad=False), w, b, None),
    }


MISMATCHES = [
    "dtype", "x shape", "w shape", "x strides", "x alignment", "no bias", "activation", "x subclass",
]  # fmt: skip


@pytest.mark.parametrize("name", MISMATCHES)
def test_each_key_mismatch_takes_the_python_path(torch, gpu, name, monkeypatch):
    """A call differing from a served problem in one key item is not served by that entry: the Python
    path plans or runs it, and the result is right."""
    nt, _ = gpu
    cache = nt.PlannerCache()
    x, w, b = _aligned(torch, 8, 32), _aligned(torch, 16, 32), _aligned(torch, 16)
    _warm(nt, torch, cache, x, w, b)
    served = _served(cache)
    assert served >= 1
    x2, w2, b2, act = _mismatches(torch)[name]
    python = []
    infer = cache.infer
    monkeypatch.setattr(cache, "infer", lambda *args: python.append(1) or infer(*args))
    with torch.no_grad():
        y = nt.linear(x2, w2, b2, act, cache=cache)
    assert python == [1]  # (the mismatching call took the Python path)
    tol = 1e-12 if name == "dtype" else 1e-5
    torch.testing.assert_close(y.double(), _reference(torch, x2, w2, b2, act), rtol=tol, atol=tol)


def test_grad_mode_device_and_stream_mismatches_fall_back(torch, gpu, monkeypatch):
    """With grad on and a tensor requiring grad the call takes autograd (a result with ``grad_fn``);
    another current device or another current stream is not served by the entry either."""
    nt, _ = gpu
    from nvmath._internal import streams

    now = {"device": 0, "stream": 0}
    monkeypatch.setattr(torch._C, "_cuda_getDevice", lambda: now["device"], raising=False)
    monkeypatch.setattr(torch._C, "_cuda_getCurrentRawStream", lambda device_id: now["stream"], raising=False)
    monkeypatch.setattr(streams, "_TORCH_RAW", None)
    cache = nt.PlannerCache()
    x, w, b = _aligned(torch, 8, 32), _aligned(torch, 16, 32), _aligned(torch, 16)
    _warm(nt, torch, cache, x, w, b)
    wg = w.clone().requires_grad_()
    y = nt.linear(x, wg, b, cache=cache)
    assert y.grad_fn is not None
    torch.testing.assert_close(y.double(), _reference(torch, x, w, b, None), rtol=1e-5, atol=1e-5)
    table = cache.linear_hits
    served = _served(cache)
    with torch.no_grad():  # (the C call alone: the Python path would switch the context / stream)
        now["device"] = 1
        assert table(x, w, b, None) is None
        now["device"], now["stream"] = 0, 7
        assert table(x, w, b, None) is None
        now["stream"] = 0
        assert table(x, w, b, None) is not None
    assert _served(cache) == served + 1


def test_clear_and_free_leave_nothing_to_run(torch, gpu):
    """``clear()`` empties the table (the next call plans again); a planner freed under a listed entry
    (its launch closed) is never launched by the table, and the Python path's error is unchanged."""
    nt, calls = gpu
    cache = nt.PlannerCache()
    x, w, b = _aligned(torch, 8, 32), _aligned(torch, 16, 32), _aligned(torch, 16)
    _warm(nt, torch, cache, x, w, b)
    misses = cache.stats.misses
    cache.clear()
    assert len(cache.linear_hits) == 0
    _warm(nt, torch, cache, x, w, b)
    assert cache.stats.misses == misses + 1 and len(cache.linear_hits) == 1
    (mm,) = cache.planners()
    mm.free()
    before = len(calls)
    with torch.no_grad():
        assert cache.linear_hits(x, w, b, None) is None
        assert len(calls) == before
        table, cache.linear_hits = cache.linear_hits, None
        with pytest.raises(Exception) as python_error:
            nt.linear(x, w, b, cache=cache)
        cache.linear_hits = table
        with pytest.raises(type(python_error.value)):
            nt.linear(x, w, b, cache=cache)
    assert len(calls) == before


def test_hits_are_counted_in_stats_and_keep_the_lru_order(torch, gpu):
    """The table's hits appear in ``stats.hits``; a problem served only by the table stays the most
    recently used, so a new problem evicts the other one."""
    nt, _ = gpu
    cache = nt.PlannerCache(maxsize=2)
    x, w, b = _aligned(torch, 8, 32), _aligned(torch, 16, 32), _aligned(torch, 16)
    xo = _aligned(torch, 4, 32)
    _warm(nt, torch, cache, xo, w, b)  # (the older problem)
    _warm(nt, torch, cache, x, w, b)
    hits = cache.stats.hits
    with torch.no_grad():
        for _ in range(5):
            nt.linear(xo, w, b, cache=cache)  # served by the table only
        nt.linear(_aligned(torch, 2, 32), w, b, cache=cache)  # a third problem: one must go
    assert cache.stats.hits == hits + 5 and cache.stats.evictions == 1
    with torch.no_grad():
        served = _served(cache)
        nt.linear(xo, w, b, cache=cache)  # still cached and served
    assert _served(cache) == served + 1


def test_another_thread_gets_its_own_entry(torch, gpu):
    """A call from another thread is not served by this thread's entry; it gets one of its own."""
    nt, _ = gpu
    cache = nt.PlannerCache()
    x, w, b = _aligned(torch, 8, 32), _aligned(torch, 16, 32), _aligned(torch, 16)
    _warm(nt, torch, cache, x, w, b)
    out = []
    thread = threading.Thread(target=lambda: _warm(nt, torch, cache, x, w, b) or out.append(True))
    thread.start()
    thread.join()
    assert out == [True] and len(cache.linear_hits) == 2
    assert len({e.thread for e in cache.linear_hits.entries()}) == 2


def test_a_new_algorithm_rebuilds_the_entry(torch, gpu):
    """Selecting another algorithm (``select``) replaces the launch's ``algo``: the entry is not run,
    the Python path runs the new algorithm and gives the table a new entry."""
    nt, calls = gpu
    cache = nt.PlannerCache()
    x, w, b = _aligned(torch, 8, 32), _aligned(torch, 16, 32), _aligned(torch, 16)
    _warm(nt, torch, cache, x, w, b)
    (mm,) = cache.planners()
    old = cache.linear_hits.entries()[0]
    mm.launcher.select(mm.algorithms[-1])
    with torch.no_grad():
        y = nt.linear(x, w, b, cache=cache)
        nt.linear(x, w, b, cache=cache)
    (new,) = cache.linear_hits.entries()
    assert new is not old and not old.listed and new.algo is mm.launcher.algo
    assert calls[-1][12] == mm.algorithms[-1].algo_ptr
    torch.testing.assert_close(y.double(), _reference(torch, x, w, b, None), rtol=1e-5, atol=1e-5)


def test_training_forward_without_gelu_uses_the_table(torch, gpu):
    """The forward of a training step without GELU runs through the table (grad is off inside the
    autograd function), and the gradients are torch's."""
    nt, _ = gpu
    cache = nt.PlannerCache()
    x = _aligned(torch, 8, 32).requires_grad_()
    w, b = _aligned(torch, 16, 32).requires_grad_(), _aligned(torch, 16).requires_grad_()
    served = []
    for _ in range(3):
        y = nt.linear(x, w, b, "relu", cache=cache)
        served.append(_served(cache))  # (before the backward, whose planning folds the counts)
        y.sum().backward()
    assert served[-1] >= 1
    xr, wr, br = (t.detach().double().requires_grad_() for t in (x, w, b))
    torch.relu(torch.nn.functional.linear(xr, wr, br)).sum().backward()
    torch.testing.assert_close(w.grad.double() / 3, wr.grad, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(b.grad.double() / 3, br.grad, rtol=1e-5, atol=1e-5)


def test_pure_path_has_no_table(torch, nt, monkeypatch):
    """With the compiled path off (``NVMATH_PURE_PYTHON=1``) a new cache has no table."""
    monkeypatch.setattr(fastpath, "_COMPILED", None)
    assert nt.PlannerCache().linear_hits is None


def test_backward_input_gradient_uses_the_table(torch, gpu):
    """A training step's input gradient (the plain product ``dz @ w``) and weight gradient are served by
    the table from the third step on, and equals torch's in float64 (with and without bias)."""
    nt, _ = gpu
    cache = nt.PlannerCache()
    x = _aligned(torch, 8, 32).requires_grad_()
    w = _aligned(torch, 16, 32).requires_grad_()
    g = _aligned(torch, 8, 16)
    for _ in range(4):
        nt.linear(x, w, None, cache=cache).backward(g)
    assert len(cache.linear_hits) == 3  # (the forward, the weight gradient and the input gradient)
    assert sum(e.hits for e in cache.linear_hits.entries()) >= 2
    xr, wr = x.detach().double().requires_grad_(), w.detach().double().requires_grad_()
    torch.nn.functional.linear(xr, wr).backward(g.double())
    torch.testing.assert_close(x.grad.double() / 4, xr.grad, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(w.grad.double() / 4, wr.grad, rtol=1e-5, atol=1e-5)


def test_a_moved_bias_is_set_on_the_descriptor(torch, gpu):
    """Layers of one shape share a planner: alternating biases served by the table each reach the
    product (the descriptor's bias pointer is set from C when it moved)."""
    nt, _ = gpu
    cache = nt.PlannerCache()
    x, w = _aligned(torch, 8, 32), _aligned(torch, 16, 32)
    b1, b2 = _aligned(torch, 16), _aligned(torch, 16)
    _warm(nt, torch, cache, x, w, b1)
    python = []
    infer = cache.infer
    cache.infer = lambda *args: python.append(1) or infer(*args)
    with torch.no_grad():
        ys = [nt.linear(x, w, b, cache=cache) for b in (b2, b1, b2, b1)]
    assert python == []  # (all four served by the table)
    for y, b in zip(ys, (b2, b1, b2, b1)):
        torch.testing.assert_close(y.double(), _reference(torch, x, w, b, None), rtol=1e-5, atol=1e-5)


def test_a_failed_launch_raises_the_bindings_error(torch, gpu):
    """A nonzero cublasLtMatmul status in the compiled hit raises ``cuBLASLtError`` (with the status),
    as the Python path does."""
    nt, calls = gpu
    cache = nt.PlannerCache()
    x, w, b = _aligned(torch, 8, 32), _aligned(torch, 16, 32), _aligned(torch, 16)
    _warm(nt, torch, cache, x, w, b)
    before = len(calls)
    _STATUS[0] = 13  # (CUBLAS_STATUS_EXECUTION_FAILED)
    try:
        with torch.no_grad(), pytest.raises(cublasLt.cuBLASLtError) as error:
            cache.linear_hits(x, w, b, None)
    finally:
        _STATUS[0] = 0
    assert len(calls) == before + 1 and error.value.status == 13


# ------------------------------------------------------------------------------------------- on the GPU
def _spy_python(cache, monkeypatch) -> list:
    """Calls that reach the cache's Python hit path (``infer``)."""
    seen: list = []
    infer = cache.infer
    monkeypatch.setattr(cache, "infer", lambda *args: seen.append(1) or infer(*args))
    return seen


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("act", ACTS)
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "nobias"])
def test_gpu_compiled_hit_is_bit_identical_to_the_python_path(torch_cuda, nt, monkeypatch, dtype, act, bias):
    """On the GPU the table serves repeated no-grad calls (1, 8 and 64 tokens), each result equal bit
    for bit to the same cache's Python path (the table switched off) and close to torch in float64."""
    torch = torch_cuda
    monkeypatch.setattr(fastpath, "_COMPILED", FastCall)
    dt = getattr(torch, dtype)
    cache = nt.PlannerCache()
    assert cache.linear_hits is not None
    w = torch.randn(384, 256, device="cuda", dtype=dt)
    b = torch.randn(384, device="cuda", dtype=dt) if bias else None
    python = _spy_python(cache, monkeypatch)
    for m in (1, 8, 64):
        x = torch.randn(m, 256, device="cuda", dtype=dt)
        with torch.no_grad():
            nt.linear(x, w, b, act, cache=cache)
            nt.linear(x, w, b, act, cache=cache)  # (plans; then a Python hit gives the table its entry)
            before = len(python)
            ys = [nt.linear(x, w, b, act, cache=cache) for _ in range(3)]
            assert len(python) == before
            table, cache.linear_hits = cache.linear_hits, None
            ref = nt.linear(x, w, b, act, cache=cache)
            cache.linear_hits = table
        for y in ys:
            assert torch.equal(y, ref)
        want = _reference(torch, x, w, b, act)
        assert ((ref.double() - want).norm() / want.norm()).item() < (1e-5 if dtype == "float32" else 1e-2)
    cache.clear()


@pytest.mark.gpu
def test_gpu_external_stream_and_graph_capture(torch_cuda, nt, monkeypatch):
    """The table serves calls on a torch ``ExternalStream`` (a stream nvmath treats as mortal: the done
    event is recorded after each call that used the workspace), and a CUDA graph captured around a
    served layer replays to eager's result."""
    torch = torch_cuda
    monkeypatch.setattr(fastpath, "_COMPILED", FastCall)
    cache = nt.PlannerCache()
    layer = nt.Linear(4096, 1024, device="cuda", dtype=torch.bfloat16, cache=cache)
    x = torch.randn(8, 4096, device="cuda", dtype=torch.bfloat16)
    own = torch.cuda.Stream()
    external = torch.cuda.ExternalStream(own.cuda_stream)
    with torch.no_grad():
        eager = torch.nn.functional.linear(x, layer.weight, layer.bias)
        with torch.cuda.stream(external):
            outs = [layer(x) for _ in range(4)]
        external.synchronize()
        assert sum(e.hits for e in cache.linear_hits.entries()) >= 1
        for y in outs:
            torch.testing.assert_close(y, eager, rtol=2e-2, atol=2e-2)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                layer(x)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            captured = layer(x)
        x.copy_(torch.randn_like(x))
        graph.replay()
        torch.cuda.synchronize()
        want = torch.nn.functional.linear(x, layer.weight, layer.bias)
        torch.testing.assert_close(captured, want, rtol=2e-2, atol=2e-2)
    cache.clear()
