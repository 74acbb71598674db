"""Stream lifetimes (CPU, with a recording fake driver): a plan bound to a stream that may be destroyed
never touches it again -- later work waits on the event recorded after its last work instead."""

from __future__ import annotations

import contextlib
import types

import pytest

from nvmath._internal import devices, streams
from nvmath._internal.streams import StreamHandle


class FakeDriver:
    """Records the driver calls streams.py makes (each returns a cuda.bindings-style tuple)."""

    def __init__(self):
        self.calls = []
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


@pytest.fixture
def driver(monkeypatch):
    fake = FakeDriver()
    monkeypatch.setattr(devices, "driver", lambda: fake)
    monkeypatch.setattr(devices, "context_ctx", lambda ctx: contextlib.nullcontext())
    monkeypatch.setattr(devices, "primary_context", lambda device_id: 1)
    monkeypatch.setattr(devices, "check", lambda result, what: result[1] if len(result) > 1 else None)
    monkeypatch.setitem(streams._LIBRARY_STREAMS, 0, StreamHandle(0x1B, 0, "cuda"))
    return fake


def test_kinds_of_mortal_streams():
    """Raw ints, cuda.core-like and external streams are mortal; default streams never are."""
    assert StreamHandle(0x1234, 0, "cupy", 0x1234, mortal=True).mortal
    assert not StreamHandle(0, 0, "torch", 0, mortal=True).mortal  # the legacy default stream
    assert not StreamHandle(2, 0, "torch", 2, mortal=True).mortal  # per-thread default
    assert streams._is_mortal(0x1234)
    ExternalStream = type("ExternalStream", (), {"__module__": "torch.cuda.streams"})
    Stream = type("Stream", (), {"__module__": "torch.cuda.streams"})
    CoreStream = type("Stream", (), {"__module__": "cuda.core._stream"})
    assert streams._is_mortal(ExternalStream()) and not streams._is_mortal(Stream())
    assert streams._is_mortal(CoreStream())


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


def test_immortal_streams_cost_nothing(driver):
    """mark_done on a stream that cannot vanish makes no driver call."""
    streams.mark_done(StreamHandle(0x3000, 0, "torch", object()))
    assert driver.calls == []
    assert streams.survivor(StreamHandle(0x3000, 0, "torch")).ptr == 0x3000
