"""Host-array helpers: numpy views of adapters' memory, arrays with exact strides, stride conversion.

The first link of the tensors chain after :mod:`.base` (``base -> host -> transfers -> device_array
-> the package adapters -> copy``): it knows numpy and the adapter protocol, nothing else.
"""

from __future__ import annotations

import ctypes
import sys

import numpy as np

from nvmath._internal import caches, dtypes
from nvmath._internal.tensors.base import TensorAdapter, axis_order, is_dense, span

__all__ = [
    "array_ptr",
    "densify",
    "element_strides",
    "host_empty",
    "host_view",
    "raw_numpy_dtype",
    "view_from_ptr",
]


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


def _slow_ptr(a: np.ndarray) -> int:
    return int(a.__array_interface__["data"][0])


_STRIDE_CACHE = caches.memo("nvmath._internal.tensors: element strides", 32)
"""itemsize -> {byte strides -> element strides} (each inner dict bounded by ``_STRIDE_CACHE_MAX``)."""
_STRIDE_CACHE_MAX = 512


def element_strides(byte_strides: tuple[int, ...], itemsize: int) -> tuple[int, ...]:
    """Convert byte strides to element strides (memoised; ``ValueError`` if not a multiple)."""
    cache = _STRIDE_CACHE.get(itemsize)
    if cache is None:
        cache = _STRIDE_CACHE.put(itemsize, {})
    strides = cache.get(byte_strides)
    if strides is None:
        if any(s % itemsize for s in byte_strides):
            raise ValueError(f"byte strides {byte_strides} are not multiples of the item size {itemsize}")
        strides = tuple(s // itemsize for s in byte_strides)
        if len(cache) >= _STRIDE_CACHE_MAX:
            cache.clear()
        cache[byte_strides] = strides
    return strides


def array_ptr(a: np.ndarray) -> int:
    """The address of element 0 of a numpy array."""
    if _PTR_OFFSET is not None:
        return _from_address(id(a) + _PTR_OFFSET).value or 0
    return _slow_ptr(a)  # pragma: no cover


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
    if adapter.package == "numpy":  # a NumpyAdapter: its tensor is the view
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
