"""Stream lifetimes (CPU, with a recording fake driver): a plan bound to a stream that may be destroyed
never touches it again -- later work waits on the event recorded after its last work instead."""

from __future__ import annotations

import contextlib
import gc
import subprocess
import sys
import types
from pathlib import Path

import pytest

from nvmath._errors import NvmathWarning
from nvmath._internal import devices, memory, streams
from nvmath._internal.streams import StreamHandle


class FakeDriver:
    """Records the driver calls streams.py makes (each returns a cuda.bindings-style tuple)."""

    def __init__(self):
        self.calls = []
        self.destroy_status = 0
        self.capturing = set()
        self.CUevent_flags = types.SimpleNamespace(CU_EVENT_DISABLE_TIMING=2)

    def cuEventCreate(self, flags):
        self.calls.append(("create",))
        return (0, f"event{len(self.calls)}")

    def cuEventRecord(self, event, stream):
        self.calls.append(("record", event, stream))
        return (0,)

    def cuStreamWaitEvent(self, stream, event, flags):
        self.calls.append(("wait", stream, event))
        return (0,)

    def cuEventDestroy(self, event):
        self.calls.append(("destroy", event))
        return (self.destroy_status,)

    def cuStreamSynchronize(self, stream):
        self.calls.append(("sync", stream))
        return (0,)

    def cuStreamIsCapturing(self, stream):
        return (0, int(stream in self.capturing))

    def count(self, kind):
        return sum(call[0] == kind for call in self.calls)

    def streams_touched(self):
        """The raw streams recorded on, waited on or synchronized (events excluded)."""
        touched = ("record", "wait", "sync")
        return [call[-1] if call[0] == "record" else call[1] for call in self.calls if call[0] in touched]


@pytest.fixture
def driver(monkeypatch):
    fake = FakeDriver()
    monkeypatch.setattr(devices, "driver", lambda: fake)
    monkeypatch.setattr(devices, "context_ctx", lambda ctx: contextlib.nullcontext())
    monkeypatch.setattr(devices, "primary_context", lambda device_id: 1)
    monkeypatch.setattr(devices, "check", lambda result, what: result[1] if len(result) > 1 else None)
    monkeypatch.setitem(streams._LIBRARY_STREAMS, 0, StreamHandle(0x1B, 0, "cuda"))
    monkeypatch.setattr(streams, "_OBJ_CACHE", {})  # handles with fake events stay in this test
    monkeypatch.setattr(streams, "_INT_CACHE", {})
    yield fake
    gc.collect()  # the fake events of this test's handles are destroyed by the fake driver


def test_kinds_of_mortal_streams():
    """Raw ints, cuda.core-like and external streams are mortal; default streams never are."""
    assert StreamHandle(0x1234, 0, "cupy", 0x1234, mortal=True).mortal
    assert not StreamHandle(0, 0, "torch", 0, mortal=True).mortal  # the legacy default stream
    assert not StreamHandle(2, 0, "torch", 2, mortal=True).mortal  # per-thread default
    assert streams._is_mortal(0x1234)
    CoreStream = type("Stream", (), {"__module__": "cuda.core._stream"})
    assert streams._is_mortal(CoreStream())


def _torch_stream(kind: str, stream_id: int, ptr: int):
    """A stand-in for a torch stream object with torch's stream-id encoding (as seen with torch 2.11)."""
    cls = type(kind, (), {"__module__": "torch.cuda.streams"})
    obj = cls()
    obj.stream_id, obj.cuda_stream = stream_id, ptr
    return obj


@pytest.mark.parametrize(
    "kind, stream_id, ptr, mortal",
    [
        ("Stream", 3, 0x618D300, False),  # a pooled stream (torch.cuda.Stream()): lives as long as torch
        ("Stream", 0, 0, False),  # the default stream
        ("ExternalStream", 0x5E82D60, 0x5E82D60, True),  # torch.cuda.ExternalStream: its owner destroys it
        ("Stream", 0x5E82D60, 0x5E82D60, True),  # current_stream() while an external stream is current
        ("Stream", 4, 0x618D300, True),  # an id torch's encoding does not give its own streams
    ],
)
def test_torch_streams_are_mortal_only_when_external(kind, stream_id, ptr, mortal):
    """torch's own streams never get done events; external ones (by stream id, whatever the type) do."""
    assert streams._is_mortal(_torch_stream(kind, stream_id, ptr)) is mortal


def test_torch_stream_without_an_id_is_mortal():
    """A torch stream object of unknown shape is assumed destroyable (the safe side)."""
    assert streams._is_mortal(type("Stream", (), {"__module__": "torch.cuda"})())


@pytest.mark.parametrize("stream_id, current_ptr, ptr, mortal", [
    (3, 0x6000, 0x6000, False), (0x6000, 0x6000, 0x6000, True), (3, 0x7000, 0x6000, True),
])  # fmt: skip
def test_torch_current_stream_mortality_is_read_from_torch(monkeypatch, stream_id, current_ptr, ptr, mortal):
    """The handle of torch's current stream (a raw pointer) is mortal only if torch says it is external
    (or torch's current stream is not that pointer any more)."""
    current = _torch_stream("Stream", stream_id, current_ptr)
    fake = types.SimpleNamespace(cuda=types.SimpleNamespace(current_stream=lambda device_id: current))
    monkeypatch.setitem(sys.modules, "torch", fake)
    assert streams._torch_current_mortal(0, ptr) is mortal


def test_record_done_needs_no_context_switch(driver, monkeypatch):
    """record_done (hot paths, context already current) queries capture and records: no context switch."""
    monkeypatch.setattr(devices, "context_ctx", lambda ctx: pytest.fail("record_done switched context"))
    s = StreamHandle(0x1000, 0, "cupy", 0x1000, mortal=True)
    streams.record_done(s)
    assert driver.calls[-1] == ("record", s._done, 0x1000)
    driver.calls.clear()
    streams.record_done(StreamHandle(0x3000, 0, "torch", 0x3000))  # immortal: nothing at all
    assert driver.calls == []


def test_wait_after_a_mortal_stream_uses_its_event(driver):
    """mark_done records on the live stream; a later wait uses that event, never the stream again."""
    old = StreamHandle(0x1000, 0, "cupy", 0x1000, mortal=True)
    new = StreamHandle(0x2000, 0, "cupy", 0x2000, mortal=True)
    streams.mark_done(old)
    event = old._done
    assert driver.calls[-1] == ("record", event, 0x1000)
    driver.calls.clear()
    streams.stream_wait(new, old)  # old may be destroyed by now
    assert driver.calls == [("wait", 0x2000, event)]


def test_late_release_orders_on_the_library_stream(driver):
    """A free ordered after a mortal stream's work goes on the library stream, after its event."""
    old = StreamHandle(0x1000, 0, "cupy", 0x1000, mortal=True)
    streams.mark_done(old)
    driver.calls.clear()
    lib = streams.survivor(old)
    assert lib.ptr == 0x1B
    assert driver.calls == [("wait", 0x1B, old._done)]


def test_no_event_is_recorded_into_a_capture(driver):
    """mark_done on a mortal stream that is capturing records nothing (an event of a capture cannot be
    waited on outside it); a later release waits on the last record made outside the capture."""
    s = StreamHandle(0x1000, 0, "torch", 0x1000, mortal=True)
    streams.mark_done(s)
    before = s._done
    driver.capturing.add(0x1000)
    driver.calls.clear()
    streams.mark_done(s)
    assert driver.calls == []
    driver.capturing.clear()
    streams.survivor(s)
    assert driver.calls == [("wait", 0x1B, before)]


def test_immortal_streams_cost_nothing(driver):
    """mark_done on a stream that cannot vanish makes no driver call."""
    streams.mark_done(StreamHandle(0x3000, 0, "torch", object()))
    assert driver.calls == []
    assert streams.survivor(StreamHandle(0x3000, 0, "torch")).ptr == 0x3000


def _mortal(ptr: int) -> StreamHandle:
    handle = StreamHandle(ptr, 0, "cupy", ptr, mortal=True)
    handle._core = f"core{ptr:#x}"  # what a fake memory manager receives
    return handle


class _Manager:
    """A stream-ordered fake memory manager (addresses only; frees are recorded)."""

    def __init__(self):
        self.log = []

    def memalloc_async(self, size, stream):
        self.log.append(("alloc", stream))
        log = self.log
        return types.SimpleNamespace(device_ptr=0x9000, free=lambda: log.append(("free",)))


# ----------------------------------------------------------------------------- event ownership
def test_done_event_is_destroyed_once_when_its_handle_is_dropped(driver):
    """A mortal handle's done event is created once, re-recorded by every mark_done, and destroyed
    exactly once when the handle is collected."""
    handle = _mortal(0x1000)
    streams.mark_done(handle)
    streams.mark_done(handle)
    event = handle._done
    assert (driver.count("create"), driver.count("record")) == (1, 2)
    del handle
    gc.collect()
    gc.collect()
    assert [c for c in driver.calls if c[0] == "destroy"] == [("destroy", event)]


def test_a_new_raw_stream_per_call_leaks_no_events(driver, monkeypatch):
    """A program passing a new raw stream on every call: the handles evicted from the bounded cache
    destroy their events, so at most STREAM_CACHE_SIZE events are alive; clearing the cache frees all."""

    def new_handle(ptr, device_id, package, obj, mortal=None):
        return StreamHandle(ptr, device_id, package, obj, mortal=True)  # no driver queries

    monkeypatch.setattr(streams, "_new_handle", new_handle)
    n = 3 * streams.STREAM_CACHE_SIZE
    for i in range(n):
        streams.mark_done(streams.get_stream(0x10000 + 0x100 * i, device_id=0, package="cupy"))
    gc.collect()
    assert driver.count("create") == n
    assert driver.count("destroy") == n - len(streams._INT_CACHE["cupy"])
    assert len(streams._INT_CACHE["cupy"]) <= streams.STREAM_CACHE_SIZE
    streams.clear_stream_cache()
    gc.collect()
    created = [f"event{i + 1}" for i, c in enumerate(driver.calls) if c[0] == "create"]
    assert sorted(c[1] for c in driver.calls if c[0] == "destroy") == sorted(created)


def test_event_outlives_the_cache_while_a_workspace_holds_its_handle(driver):
    """A handle evicted from the caches but still bound to a workspace keeps its event; a switch to
    another stream waits on that event (never on the old stream), and only then is the event destroyed."""
    ws = memory.Workspace(device_id=0, package="numpy", allocator=_Manager(), name="ws")
    old = _mortal(0x1000)
    ws.ensure(64, old)
    event = old._done
    assert event is not None  # bound: it has a done event even before any work is marked
    del old
    gc.collect()
    assert driver.count("destroy") == 0
    driver.calls.clear()
    new = _mortal(0x2000)
    ws.ensure(64, new)
    gc.collect()
    assert driver.calls[0] == ("wait", 0x2000, event)
    assert driver.calls.index(("destroy", event)) > 0
    ws.release()  # ordered on the library stream, after the new stream's event
    # the switch's wait and event are on the live new stream; the release only on the library stream
    assert driver.streams_touched() == [0x2000, 0x2000, 0x1B]
    assert driver.calls[-1] == ("wait", 0x1B, new._done)


def test_a_failing_event_destroy_warns_and_does_not_raise(driver):
    """cuEventDestroy failing in the finalizer is an NvmathWarning, not an exception."""
    driver.destroy_status = 700
    handle = _mortal(0x1000)
    streams.mark_done(handle)
    with pytest.warns(NvmathWarning, match="done event"):
        del handle
        gc.collect()


def test_no_event_is_destroyed_at_interpreter_shutdown():
    """A handle still cached when the interpreter exits does not destroy its event (the driver may be
    gone by then); dropped before exit, it does."""
    root = Path(__file__).resolve().parents[2]
    script = f"""
import contextlib, sys, types
sys.path.insert(0, {str(root)!r})
from nvmath._internal import devices, streams

class Driver:
    CUevent_flags = types.SimpleNamespace(CU_EVENT_DISABLE_TIMING=2)
    def cuEventCreate(self, flags): return (0, "event")
    def cuEventRecord(self, event, stream): return (0,)
    def cuStreamIsCapturing(self, stream): return (0, 0)
    def cuEventDestroy(self, event):
        print("destroyed", event)
        return (0,)

fake = Driver()
devices.driver = lambda: fake
devices.primary_context = lambda device_id: 1
devices.context_ctx = lambda ctx: contextlib.nullcontext()
dropped = streams.StreamHandle(0x2000, 0, "cupy", 0x2000, mortal=True)
streams.mark_done(dropped)
del dropped
kept = streams.StreamHandle(0x1000, 0, "cupy", 0x1000, mortal=True)
streams.mark_done(kept)
print("ok")
"""
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["destroyed", "event", "ok"], proc.stdout + proc.stderr


# ----------------------------------------------------------------------------- planners' stream switches
def test_a_new_stream_reusing_a_destroyed_streams_handle_waits_on_its_event(driver):
    """Another handle of the same raw stream (the driver gave a destroyed stream's value to a new one)
    waits on the old handle's event; the same handle needs no wait."""
    old, new = _mortal(0x1000), _mortal(0x1000)
    streams.mark_done(old)
    driver.calls.clear()
    streams.stream_wait(old, old)
    assert driver.calls == []
    streams.stream_wait(new, old)
    assert driver.calls == [("wait", 0x1000, old._done)]


def test_solver_context_never_touches_a_stream_after_its_call(driver, monkeypatch):
    """GpuContext: a switch from a destroyed stream waits on its event; a call that failed before
    _finish_gpu still leaves an event, so close() synchronizes the library stream, never a user's."""
    from nvmath.bindings import cusolverDn
    from nvmath.linalg._solvers import _gpu

    bind = lambda handle, stream: driver.calls.append(("bind", stream))  # noqa: E731
    monkeypatch.setattr(cusolverDn, "set_stream", bind)
    monkeypatch.setattr(_gpu, "dn_handle", lambda device_id: 99)
    first = _mortal(0x1000)
    ctx = _gpu.GpuContext(0, "cupy", first)
    ctx.use_stream(first)
    streams.mark_done(first)  # what plan() / _finish_gpu do after the work
    first_event = first._done
    driver.calls.clear()  # the owner destroys `first` now
    second = _mortal(0x2000)
    ctx.use_stream(second)  # this call then fails: no _finish_gpu; the owner destroys `second`
    ctx.close()
    assert driver.calls[0] == ("wait", 0x2000, first_event)
    assert 0x1000 not in driver.streams_touched()
    assert driver.calls[-2:] == [("wait", 0x1B, second._done), ("sync", 0x1B)]


def test_cufft_plan_rebinds_from_destroyed_streams_through_their_events(driver, monkeypatch):
    """CufftPlan.run on a new stream waits on the previous (destroyed) stream's event, rebinds the
    cuFFT handles, and never records on, waits on or syncs the old stream; a new stream that reuses
    the bound raw handle value waits on the old event too."""
    from nvmath.fft import _cufft_plan

    fake = types.SimpleNamespace(set_stream=lambda handle, stream: driver.calls.append(("bind", stream)))
    monkeypatch.setattr(_cufft_plan, "_cufft", lambda: fake)
    plan = object.__new__(_cufft_plan.CufftPlan)
    plan.handles, plan._stream, plan._bound_workspace, plan.workspace_size = [7], None, 0, 0
    plan._single, plan._done_always = (7, 0, 1, 0, 0), True
    plan._xt_exec = lambda handle, src, dst, direction: driver.calls.append(("exec", handle))
    first = _mortal(0x1000)
    plan.run(0x100, 0x200, 0, -1, first)
    assert driver.calls[-1] == ("record", first._done, 0x1000)
    driver.calls.clear()
    second = _mortal(0x2000)
    plan.run(0x100, 0x200, 0, -1, second)
    assert driver.calls[0] == ("wait", 0x2000, first._done)
    assert ("bind", 0x2000) in driver.calls and 0x1000 not in driver.streams_touched()
    driver.calls.clear()
    reused = _mortal(0x2000)  # `second` destroyed; a new stream got the same handle value
    plan.run(0x100, 0x200, 0, -1, reused)
    assert driver.calls[0] == ("wait", 0x2000, second._done)
    assert plan._stream is reused


def test_cufft_plan_without_workspace_records_only_at_binding(driver, monkeypatch):
    """A cuFFT plan with no workspace, no staging buffer and outputs from torch / cupy leaves nothing of
    ours in flight: on a mortal stream it records the done event when it binds the stream (later waits
    use it), not after every call."""
    from nvmath.fft import _cufft_plan

    fake = types.SimpleNamespace(set_stream=lambda handle, stream: driver.calls.append(("bind", stream)))
    monkeypatch.setattr(_cufft_plan, "_cufft", lambda: fake)
    plan = object.__new__(_cufft_plan.CufftPlan)
    plan.handles, plan._stream, plan._bound_workspace, plan.workspace_size = [7], None, 0, 0
    plan._single, plan._done_always = (7, 0, 1, 0, 0), False
    plan._xt_exec = lambda handle, src, dst, direction: driver.calls.append(("exec", handle))
    s = _mortal(0x1000)
    for _ in range(3):
        plan.run(0x100, 0x200, 0, -1, s)
    assert [c[0] for c in driver.calls].count("record") == 1  # at the binding
    plan.run(0x100, 0x200, 0x300, -1, s)  # a staging buffer: recorded after the call
    assert driver.calls[-1] == ("record", s._done, 0x1000)


def test_solver_temp_memory_is_freed_after_this_calls_work(driver, monkeypatch):
    """free_temp on a mortal stream records the stream's event now (after this call's kernels) and
    frees on the library stream after it: never after a stale event of an earlier call."""
    from nvmath.linalg._solvers import _gpu

    closed = []
    buf = types.SimpleNamespace(handle=0x9000, close=lambda stream: closed.append(stream))
    resource = types.SimpleNamespace(allocate=lambda nbytes, stream: buf)
    device = types.SimpleNamespace(memory_resource=resource)
    monkeypatch.setattr(devices, "core_device", lambda device_id: device)
    streams._LIBRARY_STREAMS[0]._core = "core-library"
    stream = _mortal(0x1000)
    streams.mark_done(stream)  # an earlier call's event
    ctx = _gpu.GpuContext(0, "numpy", stream)
    temp = ctx.temp(64)
    driver.calls.clear()  # ... this call's kernels using `temp` are queued on the stream here ...
    ctx.free_temp(temp)
    assert driver.calls == [("record", stream._done, 0x1000), ("wait", 0x1B, stream._done)]
    assert closed == ["core-library"]


def test_collected_cuda_core_memory_of_a_mortal_stream_is_freed_on_the_library_stream(driver, monkeypatch):
    """cuda.core memory allocated on a mortal stream and collected without free() (a planner's mirror
    dropped after the user destroyed the stream) is freed on the library stream after the stream's
    event, never on the stream cuda.core remembers from the allocation."""
    closed = []
    buf = types.SimpleNamespace(handle=0x9000, close=lambda stream: closed.append(stream))
    resource = types.SimpleNamespace(allocate=lambda nbytes, stream: buf)
    device = types.SimpleNamespace(memory_resource=resource)
    monkeypatch.setattr(devices, "core_device", lambda device_id: device)
    streams._LIBRARY_STREAMS[0]._core = "core-library"
    stream = _mortal(0x1000)
    allocation = memory.allocate(64, device_id=0, stream=stream, package="numpy")
    streams.mark_done(stream)  # the call's work; then the owner destroys the stream
    driver.calls.clear()
    del allocation
    gc.collect()
    assert driver.calls == [("wait", 0x1B, stream._done)]
    assert closed == ["core-library"]
