"""Fixtures of the nvmath.torch tests: the fake GPU over torch CPU tensors, a fresh planner cache."""

from __future__ import annotations

import importlib.util
import pathlib

import pytest


@pytest.fixture
def nt(torch):
    """``nvmath.torch`` (skips without torch)."""
    import nvmath.torch

    return nvmath.torch


@pytest.fixture
def torch_fakes():
    """The module ``tests/torch/torch_fakes.py``, loaded afresh by its path (it is not importable)."""
    spec = importlib.util.spec_from_file_location(
        "torch_fakes", pathlib.Path(__file__).with_name("torch_fakes.py")
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def fake_gpu(torch, nt, torch_fakes, monkeypatch):
    """torch CPU tensors run through the real planner on the emulated cuBLASLt; the default planner
    cache starts empty and is emptied afterwards (its planners hold fake-GPU state)."""
    nt.default_cache.clear()
    nt.compiled_cache.clear()
    fake = torch_fakes.install(monkeypatch)
    from nvmath.linalg.advanced import _stateless

    _stateless.plan_cache.clear()
    yield fake
    nt.default_cache.clear()
    nt.compiled_cache.clear()
    _stateless.plan_cache.clear()


@pytest.fixture(scope="session")
def host(tmp_path_factory):
    """The FP8 kernels' own CUDA source compiled for the CPU (tests/torch/fp8_cast_host.py), built once
    per session; skips where there is no g++."""
    import importlib.util
    import pathlib

    path = pathlib.Path(__file__).with_name("fp8_cast_host.py")
    spec = importlib.util.spec_from_file_location("fp8_cast_host", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    built = module.build(tmp_path_factory.mktemp("fp8_kernels_host"))
    if built is None:
        pytest.skip("no g++ to build the host emulation of the kernels")
    return built
