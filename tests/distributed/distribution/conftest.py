"""A fake distributed runtime: ``nvmath.distributed.get_context()`` answering a chosen (rank, nranks);
and, for :class:`Redistribute`, the runtime on the distributed FFT tests' fake engines (``make_env``).

The distributions read only ``get_context().process_group.rank`` / ``.nranks``; the fixture
replaces ``get_context`` for one test (whatever the runtime branch defines there).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import pytest

import nvmath.distributed


@pytest.fixture
def runtime(monkeypatch) -> Callable[..., None]:
    """Call ``runtime(nranks, rank=0)`` to pretend the runtime is initialized; ``runtime(None)`` to pretend it is not."""

    def install(nranks: int | None, rank: int = 0) -> None:
        if nranks is None:
            context = None
        else:
            context = SimpleNamespace(process_group=SimpleNamespace(rank=rank, nranks=nranks))
        monkeypatch.setattr(nvmath.distributed, "get_context", lambda: context, raising=False)

    return install


_FFT_TESTS = str(Path(__file__).resolve().parents[1] / "fft")
if _FFT_TESTS not in sys.path:
    sys.path.insert(0, _FFT_TESTS)
pytest.register_assert_rewrite("mp_fakes")


@pytest.fixture
def make_env(monkeypatch):
    """``make_env(group, views=None) -> Env``: nvmath.distributed initialized on the fake engines and
    the fake cuFFTMp of ``tests/distributed/fft/mp_fakes.py`` (host memory as the symmetric heap);
    abandoned afterwards."""
    from mp_fakes import OWNERS, install_fakes

    from nvmath._internal import caches
    from nvmath.distributed import _runtime

    caches.clear_all()
    yield lambda group, views=None: install_fakes(monkeypatch, group, views)
    caches.clear_all()
    _runtime.abandon()
    OWNERS.clear()
