"""MatmulLaunch: the fixed arguments of a plan's cublasLtMatmul are captured once per committed plan,
a re-plan builds a new launch and retires the old one, a freed planner's launch refuses to run, and the
context and done-event rules (fake GPU, CPU only)."""

from __future__ import annotations

import contextlib
import ctypes

import numpy as np
import pytest

import nvmath.linalg.advanced as adv
from nvmath._errors import InvalidMatmulState
from nvmath._internal import memory, streams
from nvmath.linalg.advanced import MatmulEpilog as E
from nvmath.linalg.advanced import _launch
from nvmath.linalg.advanced._launch import BoundWorkspace, MatmulLaunch

import matmul_fakes as F  # (tests/linalg/advanced is on sys.path: see conftest.py)


def _rand(rng, shape, dtype=np.float32):
    return F.aligned(rng.uniform(-1, 1, shape).astype(dtype))


@pytest.fixture
def factory_calls(monkeypatch):
    """Every fixed-argument tuple the caller factory is given (it still makes the pure-Python caller)."""
    seen = []

    def recording(*fixed):
        seen.append(fixed)
        return _launch.python_caller(*fixed)

    monkeypatch.setattr(_launch, "make_caller", recording)
    return seen


def test_fixed_arguments_are_captured_once(lt, rng, factory_calls):
    """plan() makes one caller with the plan's descriptor, scalars and layouts; executes reuse it and
    give the product; the call gets those exact fixed arguments."""
    a, b = _rand(rng, (6, 5)), _rand(rng, (5, 4))
    with adv.Matmul(F.fake(a), F.fake(b), alpha=2.0) as mm:
        mm.plan()
        assert len(factory_calls) == 1
        launch = mm.launcher
        lay = launch.plan.layouts
        desc, alpha, la, lb, beta, lc, ld = factory_calls[0]
        assert (desc, la, lb, lc, ld) == (launch.plan.desc.ptr, lay.a.ptr, lay.b.ptr, lay.c.ptr, lay.d.ptr)
        assert (ctypes.c_float * 2).from_address(alpha)[0] == 2.0
        for _ in range(3):
            np.testing.assert_allclose(mm.execute().array, 2 * a @ b, rtol=1e-5, atol=1e-6)
        assert len(factory_calls) == 1 and mm.launcher is launch
        call = lt.matmul_calls[-1]
        assert call["algo"] is not None and call["ws_size"] == launch.workspace_size


def test_reset_operands_keeps_the_launch_and_replan_replaces_it(lt, rng, factory_calls):
    """reset_operands (same layout) keeps the launch; plan() again builds a new one and the old one
    refuses to run, so no stale layout can ever be launched."""
    a, b, bias = _rand(rng, (6, 5)), _rand(rng, (5, 4)), _rand(rng, (6,))
    with adv.Matmul(F.fake(a), F.fake(b)) as mm:
        mm.plan()
        first = mm.launcher
        a2 = _rand(rng, (6, 5))
        mm.reset_operands(a=F.fake(a2))
        assert mm.launcher is first and not first.closed
        np.testing.assert_allclose(mm.execute().array, a2 @ b, rtol=1e-5, atol=1e-6)
        mm.plan(epilog=E.BIAS, epilog_inputs={"bias": F.fake(bias)})
        second = mm.launcher
        assert second is not first and first.closed and not second.closed and len(factory_calls) == 2
        with pytest.raises(InvalidMatmulState):
            first.run(streams.StreamHandle(0, 0, "fake"), 0, 0, 0, 0)
        with pytest.raises(InvalidMatmulState):
            first.enqueue(0, 0, 0, 0, 0, 0, 0, 0, 0)
        np.testing.assert_allclose(mm.execute().array, a2 @ b + bias[:, None], rtol=1e-5, atol=1e-6)


def test_free_closes_the_launch(lt, rng):
    """After free() the planner has no launch, the one held before refuses to run (before touching any
    buffer), and execute raises as it always did."""
    a, b = _rand(rng, (4, 3)), _rand(rng, (3, 5))
    mm = adv.Matmul(F.fake(a), F.fake(b))
    mm.plan()
    held = mm.launcher
    calls = len(lt.matmul_calls)
    mm.free()
    assert mm.launcher is None and held.closed
    with pytest.raises(InvalidMatmulState, match="replaced or freed"):
        held.run(streams.StreamHandle(0, 0, "fake"), 0, 0, 0, 0)
    with pytest.raises(InvalidMatmulState):
        mm.execute()
    assert len(lt.matmul_calls) == calls


def test_autotune_selection_follows_into_the_launch(lt, rng, monkeypatch):
    """autotune() re-selects the algorithm on the same launch (what an AddressRun runs next)."""
    from nvmath.linalg.advanced import _autotune

    monkeypatch.setattr(_autotune, "tune", lambda run, count, *a: ([1, 0], [(1.0, 0.1), (2.0, 0.1)]))
    with adv.Matmul(F.fake(_rand(rng, (4, 4))), F.fake(_rand(rng, (4, 4)))) as mm:
        algs = mm.plan()
        if len(algs) < 2:
            pytest.skip("the fake heuristic offered one algorithm")
        launch = mm.launcher
        mm.autotune(iterations=1)
        assert mm.launcher is launch and launch.algo[0] == mm.algorithms[0].algo_ptr


def _result(mm):
    """An aligned result in the plan's result layout (the run writes it by address)."""
    maker = mm.result_maker
    n = int(np.prod(maker.shape))
    flat = F.aligned(np.full(n + 64, np.nan, dtype=np.float32))[:n]
    return np.lib.stride_tricks.as_strided(flat, maker.shape, tuple(4 * s for s in maker.strides))


def _own_launch(mm, package, *, done_always=False):
    """A launch of ``mm``'s plan built by hand (its own scalars and workspace)."""
    scalars = np.array([1.0, 0.0], dtype=np.float32)
    ws = BoundWorkspace(memory.Workspace(device_id=0, package="fake", allocator=None, name="test workspace"))
    base = scalars.ctypes.data
    launch = MatmulLaunch(mm.launcher.plan, (base, base + 4), ws, 0, package, done_always=done_always)
    return launch, scalars


def test_context_rule_skips_the_switch_on_torchs_current_device(lt, rng, monkeypatch):
    """A torch launch on a primary-context stream of torch's current device enters no context; on
    another current device (or for another package) it makes the stream's context current."""
    torch = pytest.importorskip("torch")
    entered = []
    monkeypatch.setattr(streams, "stream_ctx", lambda h: entered.append(h) or contextlib.nullcontext())
    device = [0]
    monkeypatch.setattr(torch._C, "_cuda_getDevice", lambda: device[0], raising=False)
    a, b = _rand(rng, (4, 3)), _rand(rng, (3, 5))
    with adv.Matmul(F.fake(a), F.fake(b)) as mm:
        mm.plan()
        launch, keep = _own_launch(mm, "torch")
        other, keep2 = _own_launch(mm, "fake")
        handle = streams.StreamHandle(0, 0, "torch")
        d = _result(mm)
        launch.run(handle, a.ctypes.data, b.ctypes.data, 0, d.ctypes.data)
        np.testing.assert_allclose(d, a @ b, rtol=1e-5, atol=1e-6)
        assert entered == []
        device[0] = 1
        launch.run(handle, a.ctypes.data, b.ctypes.data, 0, d.ctypes.data)
        other.run(handle, a.ctypes.data, b.ctypes.data, 0, d.ctypes.data)
        assert entered == [handle, handle]


@pytest.mark.parametrize("done_always", [False, True])
def test_done_event_rule(lt, rng, monkeypatch, done_always):
    """On a mortal stream the done event is recorded after a run that used the workspace or when the
    plan always needs it; never on a stream that cannot vanish."""
    recorded = []
    monkeypatch.setattr(streams, "record_done", recorded.append)
    a, b = _rand(rng, (4, 3)), _rand(rng, (3, 5))
    with adv.Matmul(F.fake(a), F.fake(b)) as mm:
        mm.plan()
        launch, keep = _own_launch(mm, "fake", done_always=done_always)
        d = _result(mm)
        mortal = streams.StreamHandle(0x5000, 0, "fake", mortal=True)
        # the first run binds the workspace to the stream (a binding records an event of its own)
        launch.run(mortal, a.ctypes.data, b.ctypes.data, 0, d.ctypes.data, (launch.algo[0], 64))
        recorded.clear()
        launch.run(mortal, a.ctypes.data, b.ctypes.data, 0, d.ctypes.data, (launch.algo[0], 0))
        assert recorded == ([mortal] if done_always else [])
        recorded.clear()
        launch.run(mortal, a.ctypes.data, b.ctypes.data, 0, d.ctypes.data, (launch.algo[0], 64))
        assert recorded == [mortal]
        np.testing.assert_allclose(d, a @ b, rtol=1e-5, atol=1e-6)
        recorded.clear()
        launch.run(streams.StreamHandle(0, 0, "fake"), a.ctypes.data, b.ctypes.data, 0, d.ctypes.data)
        assert recorded == []


def test_runs_use_the_calling_threads_pool_handle(lt, rng, monkeypatch):
    """With the pool's own get_handle, a run reads the calling thread's handle from the pool inline:
    the handle ``get`` made for that thread and device (on the thread's first run), another one in
    another thread; a replaced get_handle (a fake's) is called instead. (Runs in threads: their handles
    are destroyed at their exit, while the test's fake context is in place.)"""
    import threading

    from nvmath._internal import devices
    from nvmath._internal.library_handles import ThreadHandles
    from nvmath.linalg.advanced import _handles

    made = iter(range(0x5000, 0x6000))
    pool = ThreadHandles("test", lambda: next(made), lambda handle: None)
    get = pool.get  # (one bound method: the launch compares it by identity)
    monkeypatch.setattr(devices, "device_ctx", lambda device_id: contextlib.nullcontext())
    monkeypatch.setattr(_handles, "get_handle", get)
    monkeypatch.setattr(_launch, "_POOL_GET", get)
    monkeypatch.setattr(_launch, "_HERE", pool.here)
    a, b = _rand(rng, (6, 5)), _rand(rng, (5, 4))
    seen = []

    def runs(mm) -> None:
        for _ in range(2):
            np.testing.assert_allclose(mm.execute().array, a @ b, rtol=1e-5, atol=1e-6)
        seen.append((pool.here.handles[0], [c["handle"] for c in lt.matmul_calls[-2:]]))

    def in_thread(fn, *args) -> None:
        t = threading.Thread(target=fn, args=args)
        t.start()
        t.join()

    with adv.Matmul(F.fake(a), F.fake(b)) as mm:
        in_thread(mm.plan)  # (planning asks for a handle too)
        in_thread(runs, mm)
        in_thread(runs, mm)
        (h1, calls1), (h2, calls2) = seen
        assert calls1 == [h1, h1] and calls2 == [h2, h2] and h1 != h2
        monkeypatch.setattr(_handles, "get_handle", lambda device_id: 0x77)
        mm.execute()
        assert lt.matmul_calls[-1]["handle"] == 0x77
