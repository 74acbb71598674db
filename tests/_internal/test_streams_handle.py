"""The done-event rule of ``nvmath._internal.streams_handle`` (CPU only): ``record_done`` asks the capture
state on every call and records only outside a capture, through one recorder kept per handle; the
compiled ``record_unless_capturing`` behaves exactly as the pure-Python recorder (checked with C-callable
stand-ins of ``cuStreamIsCapturing`` / ``cuEventRecord`` made with ctypes)."""

from __future__ import annotations

import ctypes
import types

import pytest

from nvmath._internal import devices, event_record, fastpath, streams, streams_handle
from nvmath._internal.streams import StreamHandle

compiled_only = pytest.mark.skipif(
    not fastpath.available(), reason=f"the compiled path is not active: {fastpath.describe()}"
)

QUERY = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_uint64, ctypes.POINTER(ctypes.c_int))
RECORD = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_uint64, ctypes.c_uint64)


class Driver:
    """A driver whose capture state and statuses a test sets; records queries and records in order."""

    __name__ = "fake driver"

    def __init__(self):
        self.calls: list[tuple] = []
        self.capturing: set[int] = set()
        self.query_status = 0
        self.record_status = 0
        self.CUevent_flags = types.SimpleNamespace(CU_EVENT_DISABLE_TIMING=2)

    # the driver module's calls (the pure path)
    def cuStreamIsCapturing(self, stream):
        return self._query(stream)

    def cuEventRecord(self, event, stream):
        return (self._record(int(event), stream),)

    def cuEventCreate(self, flags):
        self.calls.append(("create",))
        return (0, 0xE0 + len(self.calls))

    def cuEventDestroy(self, event):
        return (0,)

    def _query(self, stream):
        self.calls.append(("query", stream))
        return self.query_status, int(stream in self.capturing)

    def _record(self, event, stream):
        self.calls.append(("record", event, stream))
        return self.record_status

    # C-callable stand-ins of the same calls (the compiled path)
    def c_functions(self):
        def query(stream, out):
            status, capture = self._query(stream)
            out[0] = capture
            return status

        keep = (QUERY(query), RECORD(self._record))
        return keep, [ctypes.cast(f, ctypes.c_void_p).value for f in keep]


def _pure(drv, event, stream):
    return event_record.capture_checked(drv, event, stream)  # drv is not cuda.bindings: the pure path


def _compiled(drv, event, stream):
    keep, (query, record) = drv.c_functions()
    call = event_record.combined_caller(query, record, event, stream)
    return lambda: (keep, call())[1]


PATHS = [pytest.param(_pure, id="pure"), pytest.param(_compiled, id="compiled", marks=compiled_only)]


@pytest.mark.parametrize("make", PATHS)
def test_records_outside_a_capture_only_and_asks_every_time(make):
    """Each call asks the capture state of its stream; it records the event only when the stream is not
    capturing, so a capture begun (or ended) between two calls is seen by the next one."""
    drv = Driver()
    record = make(drv, 0xE1, 0x5000)
    record()
    drv.capturing.add(0x5000)
    record()
    drv.capturing.clear()
    record()
    assert drv.calls == [
        ("query", 0x5000), ("record", 0xE1, 0x5000),
        ("query", 0x5000),
        ("query", 0x5000), ("record", 0xE1, 0x5000),
    ]  # fmt: skip


@pytest.mark.parametrize("make", PATHS)
def test_a_failed_query_records_anyway(make):
    """A failing ``cuStreamIsCapturing`` does not skip the record (which then reports the stream's error)."""
    drv = Driver()
    drv.query_status, drv.capturing = 400, {0x5000}
    make(drv, 0xE1, 0x5000)()
    assert drv.calls == [("query", 0x5000), ("record", 0xE1, 0x5000)]


@pytest.mark.parametrize("make", PATHS)
def test_a_failed_record_raises(make):
    """A nonzero ``cuEventRecord`` status raises a RuntimeError naming cuEventRecord (both paths)."""
    drv = Driver()
    drv.record_status = 700
    with pytest.raises(RuntimeError, match="cuEventRecord"):
        make(drv, 0xE1, 0x5000)()


@compiled_only
def test_compiled_and_pure_make_the_same_calls():
    """Over a sequence of capture states and statuses the two paths make identical driver calls."""
    script = [(set(), 0), ({0x5000}, 0), ({0x5000}, 1), ({0x6000}, 0), (set(), 0)]
    seen = []
    for make in (_pure, _compiled):
        drv = Driver()
        record = make(drv, 0xE7, 0x5000)
        for capturing, query_status in script:
            drv.capturing, drv.query_status = capturing, query_status
            record()
        seen.append(drv.calls)
    assert seen[0] == seen[1] and len(seen[0]) == 9


@compiled_only
def test_combined_caller_has_every_argument_fixed():
    """The compiled recorder is a FastCall of the extension's ``record_unless_capturing`` taking no
    per-call value: the stream, the event and both entry points are fixed when it is made."""
    from nvmath import _fastcall

    call = event_record.combined_caller(0x11, 0x22, 0xE1, 0x5000)
    assert call.address == _fastcall.record_unless_capturing_address()
    assert call.fixed == (0x11, 0x22, 0x5000, 0xE1) and call.slots == ()
    with pytest.raises(TypeError, match="0 per-call arguments"):
        call(1)


@pytest.fixture
def driver(monkeypatch):
    drv = Driver()
    monkeypatch.setattr(devices, "driver", lambda: drv)
    return drv


def test_record_done_keeps_one_recorder_per_handle(driver, monkeypatch):
    """``record_done`` creates the handle's event and its recorder once, then each call only runs it
    (a capture in between is still seen); a handle that cannot vanish makes no driver call."""
    made = []
    capture_checked = event_record.capture_checked
    monkeypatch.setattr(
        event_record, "capture_checked", lambda *a: made.append(a) or capture_checked(*a)
    )
    handle = StreamHandle(0x5000, 0, "cupy", 0x5000, mortal=True)
    streams.record_done(handle)
    event = handle.done
    driver.capturing.add(0x5000)
    streams.record_done(handle)
    driver.capturing.clear()
    streams.record_done(handle)
    assert made == [(driver, event, 0x5000)]
    assert [c[0] for c in driver.calls] == [
        "create", "query", "record", "query", "query", "record"
    ]  # fmt: skip
    driver.calls.clear()
    streams.record_done(StreamHandle(0x6000, 0, "torch", 0x6000))
    assert driver.calls == []


def test_record_done_follows_a_new_driver_module(driver, monkeypatch):
    """A recorder made for one driver module is not reused once another is in use (the fake GPU of a
    test, then the real driver): the handle keeps its event and gets a recorder of the new driver."""
    handle = StreamHandle(0x5000, 0, "cupy", 0x5000, mortal=True)
    streams.record_done(handle)
    event = handle.done
    other = Driver()
    monkeypatch.setattr(devices, "driver", lambda: other)
    streams.record_done(handle)
    assert handle.done == event
    assert other.calls == [("query", 0x5000), ("record", event, 0x5000)]


def test_done_recorder_is_the_recorder_record_done_runs(driver):
    """``done_recorder`` gives the handle's capture-checked record (made once, shared with
    ``record_done``): calling it records the handle's done event unless the stream captures."""
    handle = StreamHandle(0x5000, 0, "cupy", 0x5000, mortal=True)
    record = streams.done_recorder(handle)
    assert streams.done_recorder(handle) is record
    record()
    event = handle.done
    streams.record_done(handle)
    assert [c[0] for c in driver.calls] == ["create", "query", "record", "query", "record"]
    assert driver.calls[2] == ("record", event, 0x5000)


def test_streams_reexports_the_handle_module():
    """Callers import ``nvmath._internal.streams`` only: every public name of ``streams_handle`` but
    ``SPECIAL_STREAMS`` is the same object there."""
    for name in streams_handle.__all__:
        if name != "SPECIAL_STREAMS":
            assert getattr(streams, name) is getattr(streams_handle, name), name
            assert name in streams.__all__, name
