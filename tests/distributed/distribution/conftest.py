"""A fake distributed runtime: ``nvmath.distributed.get_context()`` answering a chosen (rank, nranks).

The distributions read only ``get_context().process_group.rank`` / ``.nranks``; the fixture
replaces ``get_context`` for one test (whatever the runtime branch defines there).
"""

from __future__ import annotations

from collections.abc import Callable
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
