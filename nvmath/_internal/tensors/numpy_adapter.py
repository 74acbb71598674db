"""Adapter for ``numpy.ndarray`` (host memory), plus host-array helpers the other adapters use."""

from __future__ import annotations

import ctypes
import logging
import sys
from typing import Any

import numpy as np

from nvmath._internal import dtypes
from nvmath._internal.tensors.base import TensorAdapter, axis_order, check_strides, is_dense, span

__all__ = [
    "NumpyAdapter",
    "densify",
    "element_strides",
    "host_empty",
    "host_view",
    "raw_numpy_dtype",
    "view_from_ptr",
]

logger = logging.getLogger(__name__)


def _probe_ptr_offset() -> int | None:
    """Find where CPython stores ``PyArrayObject.data``, checked against ``__array_interface__``."""
    if sys.implementation.name != "cpython":
        return None
    probes = [np.empty(4), np.empty((3, 5), dtype=np.float32)[1:, 2:]]
    for offset in (16, 24, 32):
        if all(
            ctypes.c_void_p.from_address(id(a) + offset).value == a.__array_interface__["data"][0]
            for a in probes
        ):
            return offset
    return None  # pragma: no cover - unusual interpreter layout: use the slow, public path


_PTR_OFFSET = _probe_ptr_offset()
_from_address = ctypes.c_void_p.from_address
_NAMES = dtypes._NUMPY_TO_NAME  # filled lazily by dtypes, read here without a function call


def _slow_ptr(a: np.ndarray) -> int:
    return int(a.__array_interface__["data"][0])


_STRIDE_CACHE: dict[int, dict[tuple[int, ...], tuple[int, ...]]] = {}
_STRIDE_CACHE_MAX = 512


def element_strides(byte_strides: tuple[int, ...], itemsize: int) -> tuple[int, ...]:
    """Convert byte strides to element strides (memoised; ``ValueError`` if not a multiple)."""
    cache = _STRIDE_CACHE.get(itemsize)
    if cache is None:
        cache = _STRIDE_CACHE[itemsize] = {}
    strides = cache.get(byte_strides)
    if strides is None:
        if any(s % itemsize for s in byte_strides):
            raise ValueError(f"byte strides {byte_strides} are not multiples of the item size {itemsize}")
        strides = tuple(s // itemsize for s in byte_strides)
        if len(cache) >= _STRIDE_CACHE_MAX:
            cache.clear()
        cache[byte_strides] = strides
    return strides


class NumpyAdapter(TensorAdapter):
    """A ``numpy.ndarray`` (or subclass) in host memory."""

    __slots__ = ()
    package = "numpy"
    device = "cpu"
    device_id = "cpu"
    is_conjugate = False

    def __init__(self, tensor: np.ndarray, stream: Any = None):
        self.tensor = tensor
        if _PTR_OFFSET is not None:
            self.data_ptr = _from_address(id(tensor) + _PTR_OFFSET).value or 0
        else:  # pragma: no cover
            self.data_ptr = _slow_ptr(tensor)
        self.shape = tensor.shape
        isz = self.itemsize = tensor.itemsize
        byte_strides = tensor.strides
        cache = _STRIDE_CACHE.get(isz)
        strides = cache.get(byte_strides) if cache is not None else None
        self.strides = strides if strides is not None else element_strides(byte_strides, isz)
        self.dtype = _NAMES.get(tensor.dtype) or dtypes.numpy_dtype_name(tensor.dtype)
        self.size = tensor.size

    def empty(
        self,
        shape: tuple[int, ...],
        dtype: str,
        *,
        strides: tuple[int, ...] | None = None,
        device_id: int | str | None = None,
        stream: Any = None,
    ) -> TensorAdapter:
        """New numpy array; a :class:`DeviceArray` when ``device_id`` is a GPU."""
        if device_id is None or device_id == "cpu":
            return NumpyAdapter(host_empty(tuple(shape), check_strides(tuple(shape), strides), dtype))
        from nvmath._internal.tensors.device_array import DeviceArray

        return DeviceArray.allocate(shape, dtype, strides=strides, device_id=device_id, stream=stream)

    def to(self, device_id: int | str, stream: Any = None) -> TensorAdapter:
        """``self`` for "cpu"; a :class:`DeviceArray` copy (same axis order, dense) for a GPU."""
        if device_id == "cpu":
            return self
        from nvmath._internal.tensors.copy import host_to_new_device

        return host_to_new_device(self, device_id, stream)


def host_empty(
    shape: tuple[int, ...], strides: tuple[int, ...], dtype: str, *, raw: bool = False
) -> np.ndarray:
    """Return a new writable numpy array with exactly ``strides`` (elements) over owned memory.

    With ``raw=True`` dtypes numpy lacks (complex32; bf16 / fp8 without ml_dtypes) get an opaque
    type of the same size, good for moving bytes.
    """
    npdt = raw_numpy_dtype(dtype) if raw else dtypes.to_numpy_dtype(dtype)
    lo, hi = span(shape, strides)
    base = np.empty(hi - lo + 1, dtype=npdt)
    isz = npdt.itemsize
    return np.ndarray(
        shape, dtype=npdt, buffer=base, offset=-lo * isz, strides=tuple(s * isz for s in strides)
    )


def raw_numpy_dtype(dtype: str) -> np.dtype:
    """The numpy dtype of ``dtype`` or, where numpy has none (complex32, bf16 without ml_dtypes),
    an opaque type of the same size: good for copying bytes."""
    try:
        return dtypes.to_numpy_dtype(dtype)
    except (ValueError, ImportError):
        return np.dtype(f"V{dtypes.itemsize(dtype)}")


def host_view(adapter: TensorAdapter) -> np.ndarray:
    """Return a numpy view of a host-memory adapter's elements (no copy).

    The view does not keep the adapter's tensor alive: use it while holding the adapter.
    """
    if type(adapter) is NumpyAdapter:
        return adapter.tensor
    return view_from_ptr(adapter.data_ptr, tuple(adapter.shape), tuple(adapter.strides), adapter.dtype)


def view_from_ptr(ptr: int, shape: tuple[int, ...], strides: tuple[int, ...], dtype: str) -> np.ndarray:
    """Return a numpy view of host memory at ``ptr`` laid out by ``shape`` / ``strides`` (elements)."""
    npdt = raw_numpy_dtype(dtype)
    isz = npdt.itemsize
    lo, hi = span(shape, strides)
    nbytes = (hi - lo + 1) * isz
    if nbytes <= 0:
        return np.empty(shape, dtype=npdt)
    buf = (ctypes.c_char * nbytes).from_address(ptr + lo * isz)
    return np.ndarray(
        shape, dtype=npdt, buffer=buf, offset=-lo * isz, strides=tuple(s * isz for s in strides)
    )


def densify(a: np.ndarray) -> np.ndarray:
    """Return ``a`` if its layout is dense, else a dense copy keeping its axis order."""
    strides = element_strides(a.strides, a.itemsize) if a.itemsize else a.strides
    if is_dense(a.shape, strides):
        return a
    order = axis_order(a.shape, strides)
    inverse = tuple(order.index(i) for i in range(a.ndim))
    return np.ascontiguousarray(a.transpose(order)).transpose(inverse)
