"""Tests of the generic (DLPack / CUDA array interface) adapter: CPU producers here, jax / numba on GPU."""

from __future__ import annotations

import os

import numpy as np
import pytest

from nvmath._internal import streams
from nvmath._internal.tensors import wrap, wrap_operands
from nvmath._internal.tensors.generic_adapter import GenericAdapter, producer_converter, producer_package
from nvmath._internal.tensors.numpy_adapter import NumpyAdapter
from nvmath._internal.tensors.copy import copy_into


class OnlyDLPack:
    """A minimal producer exposing only __dlpack__ / __dlpack_device__ over a numpy array."""

    def __init__(self, array):
        self._array = array
        self.stream_seen = "unset"

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        self.stream_seen = stream
        return self._array.__dlpack__(max_version=max_version)

    def __dlpack_device__(self):
        return self._array.__dlpack_device__()


class OtherDevice(OnlyDLPack):
    """A producer claiming an unsupported DLPack device (Vulkan)."""

    def __dlpack_device__(self):
        return (7, 0)


def test_cpu_producer_layout():
    """A host DLPack producer wraps with the right pointer, shape, element strides and dtype."""
    base = np.arange(24, dtype=np.complex64).reshape(4, 6)
    view = base[1:, ::2]
    obj = OnlyDLPack(view)
    w = wrap(obj)
    assert isinstance(w, GenericAdapter) and w.tensor is obj
    assert w.data_ptr == view.__array_interface__["data"][0]
    assert (w.shape, w.strides, w.dtype, w.itemsize, w.size) == ((3, 3), (6, 2), "complex64", 8, 9)
    assert (w.device, w.device_id, w.is_conjugate) == ("cpu", "cpu", False)
    assert w.package == producer_package(OnlyDLPack)
    assert obj.stream_seen in (None, -1)  # host data: no stream ordering requested


def test_cpu_producer_0d_and_empty():
    """0-d and zero-size producers wrap (planners, not adapters, reject them)."""
    assert wrap(OnlyDLPack(np.array(3.0))).shape == ()
    assert wrap(OnlyDLPack(np.zeros((0, 4), dtype=np.float32))).size == 0


def test_unsupported_device_names_operand():
    """A DLPack device type other than CPU / CUDA raises ValueError naming the operand."""
    with pytest.raises(ValueError, match="operand 'x'.*device type 7"):
        wrap(OtherDevice(np.zeros(2)), "operand 'x'")


def test_empty_and_unwrap_without_from_dlpack():
    """empty() of a producer with no from_dlpack gives numpy storage, returned by unwrap()."""
    w = wrap(OnlyDLPack(np.zeros((2, 3), dtype=np.float32)))
    r = w.empty((3, 2), "float32", strides=(1, 3))
    assert isinstance(r, GenericAdapter) and r.package == w.package and r.strides == (1, 3)
    out = r.unwrap()
    assert isinstance(out, np.ndarray) and out.shape == (3, 2)


def test_to_cpu_is_identity():
    """to('cpu') of a host producer returns the same adapter."""
    w = wrap(OnlyDLPack(np.zeros(3)))
    assert w.to("cpu") is w


def test_producer_package_aliases():
    """jaxlib array types report the package 'jax'."""
    jax_like = type("ArrayImpl", (), {"__module__": "jaxlib._jax"})
    assert producer_package(jax_like) == "jax"


def test_producer_converter_numpy():
    """numpy's from_dlpack is found as the converter of package 'numpy'; unknown packages have none."""
    assert producer_converter("numpy") is np.from_dlpack
    assert producer_converter("no_such_package_xyz") is None


def test_mixing_generic_and_numpy_names_packages():
    """A DLPack producer mixed with numpy arrays raises TypeError naming both operands."""
    with pytest.raises(TypeError, match="operand 'b' is a numpy array but 'a' is a "):
        wrap_operands(a=OnlyDLPack(np.zeros(2)), b=np.zeros(2))


def test_numpy_array_is_not_generic():
    """numpy arrays (which also speak DLPack) use the native numpy adapter."""
    assert isinstance(wrap(np.zeros(2)), NumpyAdapter)


# --------------------------------------------------------------------------------------------- GPU
def _jax_gpu():
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    jax = pytest.importorskip("jax")
    try:
        gpus = jax.devices("gpu")
    except RuntimeError as exc:
        pytest.skip(f"jax has no GPU backend: {exc}")
    return jax, gpus[0]


@pytest.mark.gpu
def test_jax_operand_and_result_round_trip():
    """A jax GPU array wraps zero-copy; a result comes back as a jax array with the right values."""
    jax, gpu = _jax_gpu()
    import jax.numpy as jnp

    x = jax.device_put(jnp.arange(12, dtype=jnp.float32).reshape(3, 4), gpu)
    w = wrap(x, "operand 'x'")
    assert w.package == "jax" and w.device == "cuda" and w.device_id == gpu.id
    assert w.data_ptr == x.unsafe_buffer_pointer()
    assert (w.shape, w.strides, w.dtype) == ((3, 4), (4, 1), "float32")
    handle = streams.get_stream(None, device_id=w.device_id, package="jax")
    r = w.empty((3, 4), "float32", stream=handle)
    copy_into(r, w, handle)
    out = r.unwrap(handle)
    assert type(out).__module__.split(".")[0] in ("jax", "jaxlib")
    assert np.array_equal(np.asarray(out), np.arange(12, dtype=np.float32).reshape(3, 4))
    host = w.to("cpu", handle)
    assert isinstance(host, NumpyAdapter) and np.array_equal(host.tensor, np.asarray(x))


@pytest.mark.gpu
def test_jax_receives_our_stream():
    """Importing a jax array passes our stream to __dlpack__ (the producer orders its work before it)."""
    jax, gpu = _jax_gpu()
    import jax.numpy as jnp

    x = jax.device_put(jnp.ones((256, 256), dtype=jnp.float32), gpu)
    y = x @ x  # queued work; our import must see its result
    handle = streams.get_stream(None, device_id=gpu.id, package="jax")
    w = wrap(y, stream=handle)
    host = w.to("cpu", handle)
    assert np.allclose(host.tensor, 256.0)


@pytest.mark.gpu
def test_numba_cuda_array_interface():
    """A numba-cuda device array wraps through the CUDA array interface and results return as numba arrays."""
    cuda = pytest.importorskip("numba.cuda")
    if not cuda.is_available():
        pytest.skip("numba-cuda sees no GPU")
    d = cuda.to_device(np.arange(10, dtype=np.float64))
    w = wrap(d)
    assert w.package == "numba" and w.device == "cuda" and w.shape == (10,) and w.dtype == "float64"
    handle = streams.get_stream(None, device_id=w.device_id, package="numba")
    r = w.empty((10,), "float64", stream=handle)
    copy_into(r, w, handle)
    out = r.unwrap(handle)
    streams.synchronize(handle)
    assert np.array_equal(np.asarray(out.copy_to_host()), np.arange(10.0))


class CAIOnly:
    """A producer exposing only __cuda_array_interface__ (borrowed from a cupy array)."""

    def __init__(self, array):
        self._array = array

    @property
    def __cuda_array_interface__(self):
        return self._array.__cuda_array_interface__


@pytest.mark.gpu
def test_cuda_array_interface_producer_stream_is_honoured(cupy):
    """Our stream waits on the stream a CAI producer exports: a slow producer's data arrives intact."""
    side = cupy.cuda.Stream(non_blocking=True)
    with side:
        a = cupy.ones((2048, 2048), dtype=cupy.float32)
        for _ in range(20):
            a = a @ a / 2048.0  # keeps the side stream busy; the values stay 1
        cai = a.__cuda_array_interface__
    if cai.get("stream") is None:
        pytest.skip("this cupy does not export the CAI stream")
    obj = CAIOnly(a)
    w = wrap(obj)
    assert isinstance(w, GenericAdapter) and w.device == "cuda" and w.shape == (2048, 2048)
    assert w.data_ptr == a.data.ptr and w.dtype == "float32"
    host = w.to("cpu")  # our library stream, ordered after the side stream
    assert np.allclose(host.tensor, 1.0)
