"""Fixtures of the generic-matmul tests (helpers live in ``generic_testing.py`` and ``cublas_fakes.py``)."""

from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
pytest.register_assert_rewrite("generic_testing")


@pytest.fixture
def fake_gpu(monkeypatch):
    """The fake GPU of ``cublas_fakes.py`` (numpy emulation of the cuBLAS calls); yields its call record."""
    import cublas_fakes

    from nvmath.linalg.generic import plan_cache

    plan_cache.clear()
    yield cublas_fakes.install(monkeypatch)
    plan_cache.clear()
