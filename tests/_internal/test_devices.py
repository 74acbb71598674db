"""Tests of nvmath._internal.devices: driver-free import, gpu_available, device_ctx."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from nvmath._errors import NotSupportedError
from nvmath._internal import devices

_NO_DRIVER_AT_IMPORT = textwrap.dedent(
    """
    import cuda.bindings.driver as driver
    calls = []
    def _forbidden(*args, **kwargs):
        calls.append(1)
        raise AssertionError("driver called at import time")
    for _name in dir(driver):
        if _name.startswith("cu") and callable(getattr(driver, _name)):
            setattr(driver, _name, _forbidden)
    import numpy
    import nvmath._internal.dtypes, nvmath._internal.devices, nvmath._internal.streams
    import nvmath._internal.memory, nvmath.memory, nvmath._internal.tensors
    import nvmath._internal.tensors.numpy_adapter, nvmath._internal.tensors.device_array
    import nvmath._internal.tensors.generic_adapter, nvmath._internal.tensors.copy
    import nvmath._internal.tensors.dlpack, nvmath._internal.tensors.dispatch
    from nvmath._internal.tensors import wrap
    wrap(numpy.zeros((2, 3)))
    assert not calls, calls
    import sys
    assert "torch" not in sys.modules and "cupy" not in sys.modules and "jax" not in sys.modules
    print("ok")
    """
)


def test_import_calls_no_driver_function():
    """Importing the data-plane modules (and wrapping a numpy array) calls no driver function."""
    result = subprocess.run(
        [sys.executable, "-c", _NO_DRIVER_AT_IMPORT], check=False, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


def test_gpu_available_never_raises_when_cuinit_fails(monkeypatch):
    """gpu_available() returns False (no exception) when cuInit raises."""

    class _Driver:
        def cuInit(self, flags):
            raise OSError("libcuda.so not found")

    monkeypatch.setattr(devices, "_DRIVER", _Driver())
    monkeypatch.setattr(devices, "_INITIALIZED", False)
    monkeypatch.setattr(devices, "_GPU_AVAILABLE", None)
    monkeypatch.setattr(devices, "_DEVICE_COUNT", None)
    assert devices.gpu_available() is False


def test_gpu_available_is_false_without_a_gpu():
    """On a machine without a GPU, gpu_available() is False and require_gpu raises NotSupportedError."""
    if devices.gpu_available():
        pytest.skip("a GPU is present")
    assert devices.gpu_available() is False
    with pytest.raises(NotSupportedError, match="needs an NVIDIA GPU"):
        devices.require_gpu("this test")


def test_device_ctx_cpu_is_a_no_op():
    """device_ctx('cpu') and device_ctx(None) touch no driver."""
    with devices.device_ctx("cpu") as ctx:
        assert ctx == 0
    with devices.device_ctx(None):
        pass


@pytest.mark.parametrize("bad", [True, "0", 1.0, None])
def test_check_device_id_type(bad):
    """A device id that is not an int raises TypeError naming it (before any driver call)."""
    with pytest.raises(TypeError, match="device_id"):
        devices.check_device_id(bad)


def test_check_result_raises_with_status_name():
    """check() unpacks results and raises RuntimeError naming the failing call and status."""

    class _Status(int):
        name = "CUDA_ERROR_INVALID_VALUE"

    assert devices.check((0,), "f") is None
    assert devices.check((0, 5), "f") == 5
    assert devices.check((0, 5, 6), "f") == (5, 6)
    with pytest.raises(RuntimeError, match="cuFoo failed: CUDA_ERROR_INVALID_VALUE"):
        devices.check((_Status(1), 0), "cuFoo")


# --------------------------------------------------------------------------------------------- GPU
@pytest.mark.gpu
def test_device_count_and_capability():
    """device_count() is positive and compute_capability() is a cached (major, minor) pair."""
    assert devices.gpu_available()
    assert devices.device_count() >= 1
    cc = devices.compute_capability(0)
    assert isinstance(cc, tuple) and len(cc) == 2 and cc >= (7, 0)
    assert devices.compute_capability(0) is cc


@pytest.mark.gpu
def test_device_ctx_sets_and_restores():
    """device_ctx makes the primary context current and restores the previous (even none) after."""
    previous = devices.current_context()
    devices.set_current_context(0)
    try:
        with devices.device_ctx(0):
            assert devices.current_context() == devices.primary_context(0)
            with devices.device_ctx(0):  # nested, already current: a no-op
                assert devices.current_context() == devices.primary_context(0)
            assert devices.current_context() == devices.primary_context(0)
        assert devices.current_context() == 0
    finally:
        devices.set_current_context(previous)


@pytest.mark.gpu
def test_device_ctx_restores_on_error():
    """device_ctx restores the caller's context when the block raises."""
    previous = devices.current_context()
    devices.set_current_context(0)
    try:
        with pytest.raises(KeyError), devices.device_ctx(0):
            raise KeyError("boom")
        assert devices.current_context() == 0
    finally:
        devices.set_current_context(previous)


@pytest.mark.gpu
def test_core_device_leaves_the_context_unchanged():
    """core_device() initialises cuda.core for the thread without changing the current context."""
    previous = devices.current_context()
    devices.set_current_context(0)
    try:
        dev = devices.core_device(0)
        assert dev.device_id == 0
        assert devices.current_context() == 0
        assert devices.core_device(0) is dev
    finally:
        devices.set_current_context(previous)


@pytest.mark.gpu
def test_check_device_id_out_of_range():
    """A device id beyond the device count raises ValueError naming the count."""
    with pytest.raises(ValueError, match="out of range"):
        devices.check_device_id(devices.device_count())
