"""A fake distributed runtime for the matmul's pure tests: ``get_context()`` answering a chosen
number of ranks (the process grids need it)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

import nvmath.distributed


@pytest.fixture
def set_nranks(monkeypatch):
    """Call ``set_nranks(n)`` to pretend the runtime runs ``n`` ranks."""

    def install(n: int) -> None:
        context = SimpleNamespace(process_group=SimpleNamespace(rank=0, nranks=n))
        monkeypatch.setattr(nvmath.distributed, "get_context", lambda: context)

    return install
