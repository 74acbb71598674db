"""Fixtures of the distributed runtime tests; the fakes themselves are in ``dist_fakes.py``."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)
pytest.register_assert_rewrite("dist_fakes")

from dist_fakes import FakeNccl, FakeNvshmem  # noqa: E402

from nvmath.distributed import _engines, _runtime  # noqa: E402
from nvmath.distributed.process_group import ProcessGroup  # noqa: E402


@pytest.fixture
def fake_runtime(monkeypatch):
    """Patch the runtime to use fake engines and no device; yields a factory
    ``start(group, **engine_kwargs) -> (nvshmem, nccl)`` that makes the fakes ``initialize`` will load."""
    made: dict[str, Any] = {}
    order: list[str] = []

    def start(group: ProcessGroup, *, nvshmem_status: int = 0, layout=None, fail_nccl: bool = False):
        made["nvshmem"] = FakeNvshmem(group, nvshmem_status, layout)
        made["nccl"] = FakeNccl(group, fail_nccl)
        return made["nvshmem"], made["nccl"]

    monkeypatch.setattr(_engines, "load", lambda backends: {b: made[b] for b in backends})
    monkeypatch.setattr(_runtime, "_activate_device", lambda device_id: order.append(f"device {device_id}"))
    yield start
    _runtime.abandon()  # a failing test must not leak its context into the next
