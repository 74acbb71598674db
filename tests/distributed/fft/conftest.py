"""Fixtures of the distributed FFT's CPU tests: the runtime on fake engines, a fake cuFFTMp that
computes with numpy (``mp_fakes.py``), host memory posing as symmetric GPU memory."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)
pytest.register_assert_rewrite("mp_fakes")

from mp_fakes import OWNERS, install_fakes

from nvmath._internal import caches
from nvmath.distributed import _runtime


@pytest.fixture
def make_env(monkeypatch):
    """``make_env(group) -> Env`` with nvmath.distributed initialized on fake engines (an NVSHMEM
    already running, so thread-ranks share one context); finalized (or abandoned) afterwards."""
    caches.clear_all()
    syncs: list = []

    def make(group, views=None):
        """``views``: how symmetric tensors come back (default: numpy views of the fake heap)."""
        return install_fakes(monkeypatch, group, views, syncs)

    yield make
    caches.clear_all()
    _runtime.abandon()
    OWNERS.clear()
