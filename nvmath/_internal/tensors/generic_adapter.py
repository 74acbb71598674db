"""Adapter for any other producer: objects with ``__dlpack__`` / ``__dlpack_device__`` (jax, ...) or
``__cuda_array_interface__`` (numba-cuda), read through ``cuda.core.utils.StridedMemoryView``.

Stream ordering on import: a DLPack producer receives *our* stream (``__dlpack__(stream=ptr)``) and
orders its pending work before it; for a CUDA-array-interface producer, our stream waits on the
``stream`` it exports. Results are :class:`DeviceArray` storage handed to the producer's
``from_dlpack`` by :meth:`GenericAdapter.unwrap` after nvmath's work was queued, so the producer's
import waits for that work.
"""

from __future__ import annotations

import importlib
import logging
import sys
from collections.abc import Callable
from typing import Any

from nvmath._internal import devices, dtypes, streams
from nvmath._internal.streams import StreamHandle
from nvmath._internal.tensors import dlpack
from nvmath._internal.tensors.base import TensorAdapter, check_strides, dense_strides
from nvmath._internal.tensors.device_array import DeviceArray
from nvmath._internal.tensors.host import host_empty
from nvmath._internal.tensors.numpy_adapter import NumpyAdapter
from nvmath._internal.tensors.transfers import new_host_copy

__all__ = ["GenericAdapter", "producer_converter", "producer_package"]

logger = logging.getLogger(__name__)

_PACKAGE_ALIASES = {"jaxlib": "jax", "numba_cuda": "numba"}
_GPU_TYPES = (dlpack.KDL_CUDA, dlpack.KDL_CUDA_MANAGED)
_HOST_TYPES = (dlpack.KDL_CPU, dlpack.KDL_CUDA_HOST)


def producer_package(tp: type) -> str:
    """Return the package name reported for objects of type ``tp`` (its top module, aliased)."""
    top = (tp.__module__ or "").split(".", 1)[0]
    return _PACKAGE_ALIASES.get(top, top)


_CONVERTERS: dict[str, Callable[[Any], Any] | None] = {}
_CANDIDATES = {
    "jax": ("jax.dlpack.from_dlpack", "jax.numpy.from_dlpack"),
    "numba": ("numba.cuda.as_cuda_array",),
}


def producer_converter(package: str) -> Callable[[Any], Any] | None:
    """Return the producer's ``from_dlpack`` (or equivalent), or ``None`` if it has none.

    Only packages the process has already imported are searched.
    """
    if package in _CONVERTERS:
        return _CONVERTERS[package]
    found = None
    if package in sys.modules or package in _CANDIDATES:
        names = _CANDIDATES.get(package, (f"{package}.from_dlpack", f"{package}.dlpack.from_dlpack"))
        for qualname in names:
            module_name, attr = qualname.rsplit(".", 1)
            if module_name.split(".", 1)[0] not in sys.modules:
                continue
            try:
                found = getattr(importlib.import_module(module_name), attr, None)
            except ImportError:
                found = None
            if callable(found):
                break
            found = None
    _CONVERTERS[package] = found
    return found


def _dlpack_stream_arg(handle: StreamHandle) -> int:
    # DLPack forbids 0; the legacy default stream is 1 there
    return handle.ptr or 1


class GenericAdapter(TensorAdapter):
    """Any DLPack or CUDA-array-interface object (``package`` is the producer's top module)."""

    __slots__ = ("_converter", "_stream", "_view", "device", "device_id", "package")
    is_conjugate = False

    def __init__(self, tensor: Any, stream: Any = None):
        tp = type(tensor)
        self.package = producer_package(tp)
        self._converter = None
        self._stream = None
        from cuda.core.utils import StridedMemoryView

        if hasattr(tp, "__dlpack__") and hasattr(tp, "__dlpack_device__"):
            dev_type, dev_id = tensor.__dlpack_device__()
            if dev_type in _GPU_TYPES:
                handle = self._gpu_stream(int(dev_id), stream)
                with devices.device_ctx(int(dev_id)):
                    view = StridedMemoryView.from_dlpack(tensor, stream_ptr=_dlpack_stream_arg(handle))
            elif dev_type in _HOST_TYPES:
                view = StridedMemoryView.from_dlpack(tensor, stream_ptr=-1)
            else:
                raise ValueError(f"{self.package} arrays on DLPack device type {dev_type} are not supported")
        elif hasattr(tp, "__cuda_array_interface__"):
            view = StridedMemoryView.from_cuda_array_interface(tensor, stream_ptr=-1)
            handle = self._gpu_stream(int(view.device_id), stream)
            producer = tensor.__cuda_array_interface__.get("stream")
            if producer is not None:
                streams.wait_on_ptr(handle, int(producer))
        else:
            raise TypeError(
                f"objects of type {tp.__qualname__} expose neither DLPack nor the CUDA array interface"
            )
        self._set_from_view(tensor, view)

    def _gpu_stream(self, device_id: int, stream: Any) -> StreamHandle:
        handle = stream if isinstance(stream, StreamHandle) else None
        if handle is None or handle.device_id != device_id:
            handle = streams.get_stream(stream, device_id=device_id, package=self.package)
        self._stream = handle
        return handle

    def _set_from_view(self, tensor: Any, view: Any) -> None:
        self.tensor = tensor
        self._view = view
        self.data_ptr = int(view.ptr)
        self.shape = tuple(view.shape)
        self.dtype = dtypes.numpy_dtype_name(view.dtype)
        self.itemsize = dtypes.itemsize(self.dtype)
        strides = view.strides
        self.strides = dense_strides(self.shape) if strides is None else tuple(strides)
        size = 1
        for n in self.shape:
            size *= n
        self.size = size
        if view.is_device_accessible and view.device_id >= 0:
            self.device, self.device_id = "cuda", int(view.device_id)
        else:
            self.device, self.device_id = "cpu", "cpu"

    @classmethod
    def pending(cls, storage: TensorAdapter, package: str) -> GenericAdapter:
        """A result held in ``storage`` that :meth:`unwrap` hands to ``package``'s ``from_dlpack``."""
        self = cls.__new__(cls)
        self.package = package
        self.tensor = storage.tensor
        self._view = None
        self._converter = producer_converter(package)
        self._stream = getattr(storage, "stream", None)
        for attr in ("data_ptr", "shape", "strides", "dtype", "itemsize", "size", "device", "device_id"):
            setattr(self, attr, getattr(storage, attr))
        return self

    def unwrap(self, stream: Any = None) -> Any:
        """Return the producer-package object (converted once, after the queued work on ``stream``)."""
        converter, self._converter = self._converter, None
        if converter is not None:
            storage = self.tensor
            if isinstance(stream, StreamHandle) and hasattr(storage, "mark_written"):
                storage.mark_written(stream)
            self.tensor = converter(storage)
        return self.tensor

    def empty(
        self,
        shape: tuple[int, ...],
        dtype: str,
        *,
        strides: tuple[int, ...] | None = None,
        device_id: int | str | None = None,
        stream: Any = None,
    ) -> TensorAdapter:
        """Result storage: a DeviceArray (GPU) or numpy array (host) that :meth:`unwrap` converts."""
        if device_id is None:
            device_id = self.device_id
        shape = tuple(shape)
        strides = check_strides(shape, strides)
        if device_id == "cpu":
            storage: TensorAdapter = NumpyAdapter(host_empty(shape, strides, dtype))
        else:
            if stream is None and self._stream is not None and self._stream.device_id == device_id:
                stream = self._stream
            storage = DeviceArray.allocate(shape, dtype, strides=strides, device_id=device_id, stream=stream)
        return GenericAdapter.pending(storage, self.package)

    def to(self, device_id: int | str, stream: Any = None) -> TensorAdapter:
        """A numpy copy (blocking) for "cpu", a DeviceArray copy for a GPU; ``self`` if already there."""
        if device_id == self.device_id:
            return self
        if self.device == "cpu":
            return DeviceArray.from_host(self, device_id, stream)
        if device_id != "cpu":
            raise ValueError(
                f"copies between GPUs are not supported (array on device {self.device_id}, asked for {device_id})"
            )
        return NumpyAdapter(new_host_copy(self, stream or self._stream))
