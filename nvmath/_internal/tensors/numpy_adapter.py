"""Adapter for ``numpy.ndarray`` (host memory); its GPU copies and GPU results are :class:`DeviceArray`.

One of the package adapters of the tensors chain (``base -> host -> transfers -> device_array -> the
package adapters -> copy``); the host-array helpers it uses live in :mod:`.host`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from nvmath._internal import dtypes
from nvmath._internal.tensors.base import TensorAdapter, check_strides
from nvmath._internal.tensors.device_array import DeviceArray
from nvmath._internal.tensors.host import (  # noqa: F401 - re-exported names other modules import from here
    _PTR_OFFSET,
    _STRIDE_CACHE,
    _from_address,
    array_ptr,
    densify,
    element_strides,
    host_empty,
    host_view,
    raw_numpy_dtype,
    view_from_ptr,
)

__all__ = ["NumpyAdapter"]

_NAMES = dtypes.KNOWN_NUMPY  # filled lazily by dtypes, read here without a function call


class NumpyAdapter(TensorAdapter):
    """A ``numpy.ndarray`` (or subclass) in host memory."""

    __slots__ = ()
    package = "numpy"
    device = "cpu"
    device_id = "cpu"
    is_conjugate = False

    def __init__(self, tensor: np.ndarray, stream: Any = None):
        self.tensor = tensor
        if _PTR_OFFSET is not None:  # array_ptr() inlined: this runs on every wrap
            self.data_ptr = _from_address(id(tensor) + _PTR_OFFSET).value or 0
        else:  # pragma: no cover
            self.data_ptr = array_ptr(tensor)
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
        return DeviceArray.allocate(shape, dtype, strides=strides, device_id=device_id, stream=stream)

    def to(self, device_id: int | str, stream: Any = None) -> TensorAdapter:
        """``self`` for "cpu"; a :class:`DeviceArray` copy (same axis order, dense) for a GPU."""
        if device_id == "cpu":
            return self
        return DeviceArray.from_host(self, device_id, stream)
