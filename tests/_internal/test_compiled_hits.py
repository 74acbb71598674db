"""``nvmath._internal.compiled_hits.StatelessHits``'s bookkeeping, without a GPU: only ``torch.Tensor``
operands are offered; a plan whose entry cannot be made is not tried again on the same stream (so a
plain call the table cannot serve pays one dictionary lookup, not an entry attempt), but is on another;
``clear`` forgets it. (The tables themselves: ``tests/linalg/*/test__matmul_hit.py``.)"""

from __future__ import annotations

import threading

import numpy as np
import pytest
from fastcall_probes import needs_extension

from nvmath._internal import compiled_hits, streams

pytestmark = needs_extension


class _Entry:
    """A plan-cache entry as the hits see it (its lock and liveness)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.live = True


@pytest.fixture
def stream(torch, monkeypatch):
    """``now``: torch's current raw stream as the hits read it (device 0)."""
    now = {"stream": 5}
    monkeypatch.setattr(streams, "torch_raw_stream", lambda: lambda device_id: now["stream"])
    monkeypatch.setattr(streams, "torch_device_getter", lambda: lambda: 0)
    return now


def test_only_torch_tensors_are_offered(torch, stream):
    """``wanted`` is false for operands other than a plain ``torch.Tensor`` (numpy arrays, subclasses)."""
    hits = compiled_hits.StatelessHits(lambda *args: None, lambda made: True)
    entry = _Entry()
    assert hits.wanted(entry, torch.zeros(2))
    assert not hits.wanted(entry, np.zeros(2))
    assert not hits.wanted(entry, torch.nn.Parameter(torch.zeros(2)))


def test_a_refused_plan_is_retried_only_on_another_stream(torch, stream):
    """An entry ``build`` refuses is remembered per (plan, thread) with the current stream: not wanted
    again there, wanted on another stream and after ``clear``."""
    built = []
    hits = compiled_hits.StatelessHits(lambda *args: built.append(args) and None, lambda made: True)
    entry, a = _Entry(), torch.zeros(2)
    hits.offer("key", entry, a, a)
    assert len(built) == 1 and hits.table is not None and len(hits.table) == 0
    assert not hits.wanted(entry, a)
    assert hits.wanted(_Entry(), a)  # (another plan)
    stream["stream"] = 7
    assert hits.wanted(entry, a)
    stream["stream"] = 5
    hits.clear()
    assert hits.wanted(entry, a)


def test_a_plan_with_another_lock_type_is_not_built(torch, stream):
    """An entry whose lock is not a plain ``threading.Lock`` (whose ``locked()`` the C call may not
    call safely) gets no table entry: ``build`` is not called."""
    built = []
    hits = compiled_hits.StatelessHits(lambda *args: built.append(args), lambda made: True)
    entry, a = _Entry(), torch.zeros(2)
    entry.lock = threading.RLock()
    hits.offer("key", entry, a, a)
    assert built == [] and not hits.wanted(entry, a)


def test_fold_of_no_table_is_nothing():
    """``fold`` of a missing or empty table touches nothing."""
    compiled_hits.fold(None, None)


def test_context_fields_only_for_real_cuda_tensors_and_torchs_getter(torch, monkeypatch):
    """``context_fields`` gives the driver check only for a real CUDA tensor read with torch's own device
    getter, where the driver answers: a CPU (fake GPU) tensor, another getter, or no driver give ``{}``
    (the getter is asked)."""
    from nvmath._internal import devices, fastpath

    class _Cuda:
        is_cuda = True

    getter = getattr(torch._C, "_cuda_getDevice", None)
    if getter is None:
        getter = lambda: 0
        monkeypatch.setattr(torch._C, "_cuda_getDevice", getter, raising=False)
    monkeypatch.setattr(
        fastpath, "driver_symbol_address", lambda name: 1234 if name == "cuCtxGetCurrent" else 0
    )
    monkeypatch.setattr(devices, "primary_context", lambda device_id: 5000 + device_id)
    assert compiled_hits.context_fields(1, getter, _Cuda()) == {"ctx_get": 1234, "ctx": 5001}
    assert compiled_hits.context_fields(1, getter, torch.zeros(1)) == {}
    assert compiled_hits.context_fields(1, lambda: 0, _Cuda()) == {}

    def no_driver(name):
        raise OSError("no libcuda")

    monkeypatch.setattr(fastpath, "driver_symbol_address", no_driver)
    assert compiled_hits.context_fields(1, getter, _Cuda()) == {}
