"""Fixtures of the nvmath-python 1.0 compatibility suite (CPU tests run on a fake GPU)."""

from __future__ import annotations

import importlib.util
import pathlib

import pytest

_FAKES = pathlib.Path(__file__).resolve().parents[1] / "linalg" / "advanced" / "matmul_fakes.py"


@pytest.fixture
def fake_gpu(monkeypatch):
    """The fake cuBLASLt GPU of the matmul tests (numpy emulation), installed for one test."""
    spec = importlib.util.spec_from_file_location("matmul_fakes_compat", _FAKES)
    fakes = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fakes)
    fakes.install(monkeypatch)
    yield fakes
    import nvmath.linalg.advanced as adv

    adv.plan_cache.clear()
