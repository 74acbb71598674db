"""Adapter for ``cupy.ndarray`` (device memory). Loaded only once a cupy array is wrapped."""

from __future__ import annotations

import logging
import sys
from typing import Any

from nvmath._internal import dtypes, streams
from nvmath._internal.tensors.base import TensorAdapter, check_strides, span
from nvmath._internal.tensors.host import element_strides, host_empty
from nvmath._internal.tensors.numpy_adapter import NumpyAdapter
from nvmath._internal.tensors.transfers import new_host_copy

__all__ = ["CupyAdapter"]

logger = logging.getLogger(__name__)

_NAMES = dtypes.KNOWN_NUMPY


class CupyAdapter(TensorAdapter):
    """A ``cupy.ndarray`` on a CUDA device."""

    __slots__ = ("device_id",)
    package = "cupy"
    device = "cuda"
    is_conjugate = False

    def __init__(self, tensor: Any, stream: Any = None):
        self.tensor = tensor
        self.data_ptr = tensor.data.ptr
        self.shape = tensor.shape
        isz = self.itemsize = tensor.itemsize
        self.strides = element_strides(tensor.strides, isz)
        self.dtype = _NAMES.get(tensor.dtype) or dtypes.numpy_dtype_name(tensor.dtype)
        self.size = tensor.size
        self.device_id = tensor.data.device_id

    def empty(
        self,
        shape: tuple[int, ...],
        dtype: str,
        *,
        strides: tuple[int, ...] | None = None,
        device_id: int | str | None = None,
        stream: Any = None,
    ) -> TensorAdapter:
        """New cupy array from the cupy allocator on ``stream``; numpy for ``device_id="cpu"``."""
        shape = tuple(shape)
        strides = check_strides(shape, strides)
        if device_id == "cpu":
            return NumpyAdapter(host_empty(shape, strides, dtype))
        if device_id is None:
            device_id = self.device_id
        cupy = sys.modules["cupy"]
        npdt = dtypes.to_numpy_dtype(dtype)
        isz = npdt.itemsize
        lo, hi = span(shape, strides)
        nbytes = (hi - lo + 1) * isz
        with cupy.cuda.Device(device_id):
            if stream is None:
                mem = cupy.cuda.alloc(nbytes)
            else:
                with streams.native_stream(stream, "cupy"):
                    mem = cupy.cuda.alloc(nbytes)
            array = cupy.ndarray(shape, dtype=npdt, memptr=mem, strides=tuple(s * isz for s in strides))
        return CupyAdapter(array)

    def to(self, device_id: int | str, stream: Any = None) -> TensorAdapter:
        """``self`` on its own device; a numpy copy (blocking) for "cpu"; other GPUs: ValueError."""
        if device_id == self.device_id:
            return self
        if device_id != "cpu":
            raise ValueError(
                f"copies between GPUs are not supported (array on device {self.device_id}, asked for {device_id})"
            )
        return NumpyAdapter(new_host_copy(self, stream))
