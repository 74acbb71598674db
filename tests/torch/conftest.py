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


@pytest.fixture
def cast_recorder(torch, monkeypatch):
    """The FP8 cast kernels' launches recorded, not made: cuda.core's ``launch`` replaced by a recorder
    (the returned list gets ``(config, kernel key, args)`` per launch), the compiled launcher switched off
    (it would launch the real kernel on a machine with a GPU), the kernels, stream and context stubbed
    and CPU tensors posing as CUDA ones."""
    core = pytest.importorskip("cuda.core")
    import contextlib

    from nvmath._internal import devices, kernel_launch, streams
    from nvmath.torch import _fp8_cast as C

    calls: list = []
    monkeypatch.setattr(
        core, "launch", lambda stream, config, kernel, *args: calls.append((config, kernel, args))
    )
    monkeypatch.setattr(devices, "device_ctx", lambda device_id: contextlib.nullcontext())
    monkeypatch.setattr(streams, "current_stream", lambda device_id, package: type("H", (), {"core": "s"})())
    monkeypatch.setattr(C, "_kernels", lambda device_id: {k: k for k in C._NAMES})
    monkeypatch.setattr(C, "available", lambda x, aux=None: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.Tensor, "is_cuda", property(lambda self: True))
    monkeypatch.setattr(C, "_DIRECT", {})
    monkeypatch.setattr(kernel_launch, "_MADE", [None])
    return calls
