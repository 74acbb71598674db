"""The distributed matmul's CPU fixture: ``env(group)`` initializes nvmath.distributed on fake
engines with the fake cuBLASMp of ``mm_fakes.py`` and the fake GPU's memory."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)
pytest.register_assert_rewrite("mm_fakes")

import fake_gpu
from dist_fakes import FakeNccl, FakeNvshmem
from mm_fakes import FakeCublasMp, FakeStream

import nvmath.distributed as nd
from nvmath._internal import caches, memory, streams
from nvmath._internal.tensors import copy as tcopy
from nvmath.distributed import _engines, _runtime
from nvmath.distributed.linalg.advanced import _mpobjects


@pytest.fixture
def env(monkeypatch):
    """``env(group) -> FakeCublasMp`` with nvmath.distributed initialized (NCCL backend) on fakes."""
    caches.clear_all()

    def make(group):
        lib = FakeCublasMp(group)
        engines = {"nvshmem": FakeNvshmem(group), "nccl": FakeNccl(group)}
        monkeypatch.setattr(_engines, "load", lambda backends: {b: engines[b] for b in backends})
        monkeypatch.setattr(_engines, "start_nccl", lambda nccl, group: 0xC0)  # one context for thread-ranks
        monkeypatch.setattr(_runtime, "_activate_device", lambda device_id: None)
        monkeypatch.setattr(_mpobjects, "bindings", lambda: lib)
        monkeypatch.setattr(memory, "allocate", lambda n, **kw: fake_gpu.HostAllocation(n))
        for pair in (("fakegpu", "numpy"), ("fakegpu", "fakegpu"), ("numpy", "fakegpu")):
            monkeypatch.setitem(tcopy.COPIERS, pair, fake_gpu.host_copy)
        monkeypatch.setattr(streams, "get_stream", lambda s, **k: FakeStream(7 if s is None else s))
        monkeypatch.setattr(streams, "synchronize", lambda s: lib.calls.append((0, "synchronize", s.ptr)))
        nd.initialize(0, group, backends=["nccl"])
        return lib

    yield make
    _runtime.abandon()
