"""LTO callbacks without a GPU: DeviceCallable, symbol lookup, compile errors (GPU runs: test_fft_gpu_callbacks)."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

import nvmath.fft as nf
from nvmath.fft import DeviceCallable
from nvmath.fft._callbacks import as_device_callable, callback_symbol, find_symbol


def test_device_callable_from_bytes():
    """bytes give the size; data defaults to 0; the object is hashable (plan keys)."""
    c = DeviceCallable(b"abc")
    assert (c.size, c.data, c.name) == (3, 0, None)
    assert hash(c) == hash(DeviceCallable(bytearray(b"abc")))
    assert DeviceCallable(b"abc", data=None).data == 0


def test_device_callable_from_pointer():
    """An address needs an explicit size."""
    c = DeviceCallable(0x1000, size=64, data=0x2000)
    assert (c.ltoir, c.size, c.data) == (0x1000, 64, 0x2000)


@pytest.mark.parametrize(
    "kwargs, error, text",
    [
        ({"ltoir": b""}, ValueError, "empty"),
        ({"ltoir": b"ab", "size": 3}, ValueError, "size=3"),
        ({"ltoir": 10}, ValueError, "got None"),
        ({"ltoir": 10, "size": 0}, ValueError, "got 0"),
        ({"ltoir": "text"}, TypeError, "str"),
        ({"ltoir": b"a", "data": -1}, TypeError, "-1"),
        ({"ltoir": b"a", "data": 1.5}, TypeError, "1.5"),
        ({"ltoir": b"a", "name": ""}, TypeError, "''"),
    ],
)
def test_device_callable_validation(kwargs, error, text):
    """Bad DeviceCallable fields raise with the value in the message."""
    with pytest.raises(error, match=text):
        DeviceCallable(**kwargs)


def test_as_device_callable():
    """None, instances, dicts and bytes are accepted; other kinds and unknown keys are not."""
    assert as_device_callable(None, "prolog") is None
    c = DeviceCallable(b"x")
    assert as_device_callable(c, "prolog") is c
    assert as_device_callable({"ltoir": b"x", "data": 8}, "prolog") == DeviceCallable(b"x", data=8)
    assert as_device_callable(b"x", "prolog") == c
    with pytest.raises(TypeError, match="'code'"):
        as_device_callable({"code": b"x"}, "epilog")
    with pytest.raises(TypeError, match="list"):
        as_device_callable([b"x"], "epilog")


def test_symbol_lookup():
    """The symbol is the given name, ours when present, or a single cuFFT-style mangled name."""
    ours = callback_symbol("prolog", "complex64")
    assert ours == "nvmath_fft_load_complex64"
    assert callback_symbol("epilog", "float64") == "nvmath_fft_store_float64"
    assert find_symbol(DeviceCallable(b"..." + ours.encode()), "prolog", "complex64") == ours
    mangled = b"_Z31cufftJITCallbackLoadComplexPvyS_S_"
    assert find_symbol(DeviceCallable(b"\x00" + mangled + b"\x00"), "prolog", "complex64") == mangled.decode()
    assert find_symbol(DeviceCallable(b"x", name="mine"), "prolog", "complex64") == "mine"
    assert find_symbol(DeviceCallable(0x10, size=4), "epilog", "float32") == "nvmath_fft_store_float32"


def test_compile_rejects_bad_arguments_before_numba():
    """Bad dtypes and representations raise ValueError whether or not numba is installed."""
    with pytest.raises(ValueError, match="element_dtype.*'float16'"):
        nf.compile_prolog(lambda *a: 0, "float16", "float32")
    with pytest.raises(ValueError, match="user_info_dtype.*'int8'"):
        nf.compile_epilog(lambda *a: 0, "complex64", "int8")
    with pytest.raises(ValueError, match="'ptx'"):
        nf.compile_prolog(lambda *a: 0, "complex64", "float32", representation="ptx")
    with pytest.raises(ValueError, match="compute_capability"):
        nf.compile_prolog(lambda *a: 0, np.complex64, np.float32, compute_capability="sm90")


@pytest.mark.skipif(importlib.util.find_spec("numba") is not None, reason="numba is installed here")
def test_compile_without_numba_says_what_to_install():
    """Without numba-cuda, compiling raises RuntimeError naming the package to install."""
    with pytest.raises(RuntimeError, match="numba-cuda"):
        nf.compile_prolog(lambda d, o, u, x: d[o], "complex64", "float32", compute_capability="90")
