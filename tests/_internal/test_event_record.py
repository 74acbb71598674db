"""The done-event record: compiled ``cuEventRecord`` only for the real driver module with the compiled
path on; a fake driver keeps its own call; both raise RuntimeError on a failure status (CPU only)."""

from __future__ import annotations

import ctypes
import types

import pytest
from fastcall_probes import FastCall, Recorder, needs_extension

from nvmath._internal import event_record, fastpath


class FakeDriver:
    """A driver module stand-in recording cuEventRecord calls."""

    __name__ = "fake.driver"

    def __init__(self, status: int = 0):
        self.calls: list[tuple] = []
        self.status = status

    def cuEventRecord(self, event, stream):
        self.calls.append((event, stream))
        return (self.status,)


def test_fake_driver_keeps_its_own_call():
    """A driver module that is not cuda.bindings.driver is called as before, once per record."""
    drv = FakeDriver()
    record = event_record.recorder(drv)
    record(5, 7)
    assert drv.calls == [(5, 7)] and event_record.recorder(drv) is record


def test_fake_driver_failure_raises_runtime_error():
    """A failure status raises RuntimeError naming cuEventRecord."""
    with pytest.raises(RuntimeError, match="cuEventRecord"):
        event_record.recorder(FakeDriver(status=1))(5, 7)


@needs_extension
def test_real_driver_name_gets_the_compiled_call(monkeypatch):
    """For cuda.bindings.driver with the compiled path on, the record is a FastCall of the driver's
    cuEventRecord with (int(event), stream); a nonzero status raises EventRecordError (a RuntimeError)."""
    probe = Recorder(2, status=0)
    monkeypatch.setattr(fastpath, "_COMPILED", FastCall)
    monkeypatch.setattr(fastpath, "driver_symbol_address", lambda symbol: probe.address)
    drv = types.SimpleNamespace(__name__="cuda.bindings.driver")
    record = event_record.recorder(drv)
    record(ctypes.c_void_p(0x1234).value, 0x55)
    assert probe.calls == [(0x1234, 0x55)]
    probe.status = 700
    with pytest.raises(RuntimeError, match="status 700"):
        record(1, 2)


def test_pure_path_uses_the_driver_module(monkeypatch):
    """With the compiled path off, even cuda.bindings.driver is called through the module."""
    monkeypatch.setattr(fastpath, "_COMPILED", None)
    drv = FakeDriver()
    drv.__name__ = "cuda.bindings.driver"
    event_record.recorder(drv)(3, 4)
    assert drv.calls == [(3, 4)]
