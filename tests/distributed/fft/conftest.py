"""Fixtures of the distributed FFT's CPU tests: the runtime on fake engines, a fake cuFFTMp that
computes with numpy (``mp_fakes.py``), host memory posing as symmetric GPU memory."""

from __future__ import annotations

import ctypes
import sys
from pathlib import Path

import numpy as np
import pytest

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)
pytest.register_assert_rewrite("mp_fakes")

from dist_fakes import FakeNccl
from mp_fakes import OWNERS, FakeCufftMp, FakeDevice, HeapNvshmem, host_view, numpy_view

import nvmath.distributed as nd
from nvmath._internal import caches, streams
from nvmath._internal.tensors import transfers
from nvmath.distributed import _engines, _runtime, _symmetric
from nvmath.distributed.fft import _cufftmp


class FakeStream:
    def __init__(self, ptr):
        self.ptr, self.device_id, self.ctx, self.mortal, self._done = ptr, 0, None, False, None


class Env:
    """What the ``mp`` fixture made: the group, fakes, and helpers to make operands."""

    def __init__(self, group, nvshmem, lib, syncs):
        self.group, self.nvshmem, self.lib, self.syncs = group, nvshmem, lib, syncs

    def operand(self, local_shape, dtype, *, padded=None, nbytes=None):
        """A FakeDevice on the fake heap: C order, the last axis padded to ``padded`` elements."""
        dtype = np.dtype(dtype)
        row = padded or local_shape[-1]
        strides, step = [0] * len(local_shape), 1
        for i in reversed(range(len(local_shape))):
            strides[i] = step
            step *= row if i == len(local_shape) - 1 else local_shape[i]
        size = nbytes or 4 * max(step, 1) * 16
        address = self.nvshmem.malloc(size)
        return FakeDevice(host_view(address, tuple(local_shape), tuple(strides), dtype))

    def run(self, function):
        """``function(rank)`` on every rank (threads for a ThreadGroup), exceptions returned."""
        if hasattr(self.group, "run"):
            return self.group.run(function)
        try:
            return [function(0)]
        except BaseException as exc:  # noqa: BLE001
            return [exc]


@pytest.fixture
def make_env(monkeypatch):
    """``make_env(group) -> Env`` with nvmath.distributed initialized on fake engines (an NVSHMEM
    already running, so thread-ranks share one context); finalized (or abandoned) afterwards."""
    caches.clear_all()
    syncs: list = []

    def make(group, views=None):
        """``views``: how symmetric tensors come back (default: numpy views of the fake heap)."""
        nvshmem, nccl, lib = HeapNvshmem(group), FakeNccl(group), FakeCufftMp(group)
        engines = {"nvshmem": nvshmem, "nccl": nccl}
        monkeypatch.setattr(_engines, "load", lambda backends: {b: engines[b] for b in backends})
        monkeypatch.setattr(_runtime, "_activate_device", lambda device_id: None)
        monkeypatch.setattr(_cufftmp, "bindings", lambda: lib)
        monkeypatch.setattr(_symmetric, "view_at", views or numpy_view)
        monkeypatch.setattr(streams, "get_stream", lambda s, **k: FakeStream(7 if s is None else s))
        monkeypatch.setattr(streams, "synchronize", lambda s: syncs.append(s.ptr))
        monkeypatch.setattr(transfers, "memcpy", lambda kind, dst, src, n, s: ctypes.memmove(dst, src, n))
        nd.initialize(0, group, backends=["nvshmem"])
        return Env(group, nvshmem, lib, syncs)

    yield make
    caches.clear_all()
    _runtime.abandon()
    OWNERS.clear()
