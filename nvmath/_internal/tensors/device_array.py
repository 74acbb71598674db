"""``DeviceArray``: nvmath's own strided array over device memory.

The link of the tensors chain after :mod:`.transfers` (``base -> host -> transfers -> device_array ->
the package adapters -> copy``). Host results it makes (``to("cpu")``, ``empty(device_id="cpu")``) are
numpy arrays wrapped through :func:`.dispatch.wrap`, which finds the numpy adapter.

It is at once a tensor adapter (``package == "cuda"``, ``tensor is self``) and an array object that
any DLPack or ``__cuda_array_interface__`` consumer can import without a copy. It serves as the
GPU mirror of numpy operands and as result storage for producers nvmath has no adapter for.

Stream semantics: :attr:`DeviceArray.stream` is the stream the last write was queued on (set by
nvmath's copies and by :meth:`DeviceArray.mark_written`). A DLPack consumer passing its stream is
made to wait for that stream; the CUDA array interface exports it as ``stream`` for the consumer.
"""

from __future__ import annotations

import logging
from typing import Any

from nvmath._internal import dtypes, memory, streams
from nvmath._internal.streams import StreamHandle
from nvmath._internal.tensors import dlpack
from nvmath._internal.tensors.base import TensorAdapter, check_strides, dense_strides, span
from nvmath._internal.tensors.dispatch import wrap
from nvmath._internal.tensors.host import densify, element_strides, host_empty, host_view
from nvmath._internal.tensors.transfers import host_to_dense_device, new_host_copy

__all__ = ["DeviceArray"]

logger = logging.getLogger(__name__)


class DeviceArray(TensorAdapter):
    """A strided array in device memory owned through an :class:`~nvmath._internal.memory.Allocation`.

    Use :meth:`allocate` to make one. ``data_ptr`` is the address of element 0.
    """

    __slots__ = ("__weakref__", "_owner", "device_id", "stream")
    package = "cuda"
    device = "cuda"
    is_conjugate = False

    def __init__(
        self,
        ptr: int,
        shape: tuple[int, ...],
        strides: tuple[int, ...],
        dtype: str,
        device_id: int,
        owner: Any,
        stream: StreamHandle | None = None,
    ):
        self.data_ptr = ptr
        self.shape = tuple(shape)
        self.strides = tuple(strides)
        self.dtype = dtypes.check_dtype_name(dtype)
        self.itemsize = dtypes.itemsize(dtype)
        size = 1
        for n in self.shape:
            size *= n
        self.size = size
        self.device_id = device_id
        self.stream = stream
        self._owner = owner

    @property  # type: ignore[override]
    def tensor(self) -> DeviceArray:
        """The array itself (a DeviceArray is its own user-facing object)."""
        return self

    @classmethod
    def allocate(
        cls,
        shape: tuple[int, ...],
        dtype: str,
        *,
        strides: tuple[int, ...] | None = None,
        device_id: int,
        stream: StreamHandle | None = None,
        package: str = "cuda",
        allocator: Any = None,
    ) -> DeviceArray:
        """Allocate an uninitialised array.

        Args:
            shape: the shape.
            dtype: a canonical dtype name.
            strides: element strides (>= 0); ``None`` = C order.
            device_id: the device.
            stream: the stream the memory is first used on (``None`` = nvmath's library stream).
            package: whose allocator to use (see :func:`nvmath._internal.memory.allocate`).
            allocator: an optional user memory manager.
        """
        shape = tuple(shape)
        strides = check_strides(shape, strides)
        if stream is None:
            stream = streams.library_stream(device_id)
        lo, hi = span(shape, strides)
        isz = dtypes.itemsize(dtype)
        alloc = memory.allocate(
            (hi - lo + 1) * isz, device_id=device_id, stream=stream, package=package, allocator=allocator
        )
        return cls(alloc.ptr - lo * isz, shape, strides, dtype, device_id, alloc, stream)

    @classmethod
    def from_host(cls, src: TensorAdapter, device_id: int | str, stream: Any) -> DeviceArray:
        """A copy of a host adapter on GPU ``device_id``: dense, in the source's axis order; ordered on
        ``stream`` (the package's current stream for ``None``), returns without waiting."""
        if not isinstance(device_id, int) or isinstance(device_id, bool):
            raise TypeError(f"device_id must be 'cpu' or a CUDA device ordinal; got {device_id!r}")
        host = densify(host_view(src))
        strides = element_strides(host.strides, host.itemsize)
        handle = streams.get_stream(stream, device_id=device_id, package="cuda")
        shape = tuple(host.shape)
        result = cls.allocate(shape, src.dtype, strides=strides, device_id=device_id, stream=handle)
        if result.size:
            host_to_dense_device(result, host, handle)
        result.mark_written(handle)
        return result

    def mark_written(self, stream: StreamHandle) -> None:
        """Record that the latest write to this array was queued on ``stream``."""
        self.stream = stream

    def empty(
        self,
        shape: tuple[int, ...],
        dtype: str,
        *,
        strides: tuple[int, ...] | None = None,
        device_id: int | str | None = None,
        stream: Any = None,
    ) -> TensorAdapter:
        """A new DeviceArray; a numpy array for ``device_id="cpu"``."""
        if device_id == "cpu":
            shape = tuple(shape)
            return wrap(host_empty(shape, check_strides(shape, strides), dtype))
        return DeviceArray.allocate(
            shape,
            dtype,
            strides=strides,
            device_id=self.device_id if device_id is None else device_id,
            stream=stream,
        )

    def to(self, device_id: int | str, stream: Any = None) -> TensorAdapter:
        """``self`` on its own device; a numpy copy (blocking) for "cpu"; other GPUs: ValueError."""
        if device_id == self.device_id:
            return self
        if device_id != "cpu":
            raise ValueError(
                f"copies between GPUs are not supported (array on device {self.device_id}, asked for {device_id})"
            )
        return wrap(new_host_copy(self, stream or self.stream))

    def free(self) -> None:
        """Release the memory now, ordered on :attr:`stream` (the array must not be used after)."""
        owner, self._owner = self._owner, None
        if isinstance(owner, memory.Allocation):
            owner.free(self.stream)

    # ------------------------------------------------------------------ DLPack / CUDA array interface
    def __dlpack_device__(self) -> tuple[int, int]:
        return (dlpack.KDL_CUDA, self.device_id)

    def __dlpack__(
        self,
        *,
        stream: int | None = None,
        max_version: tuple[int, int] | None = None,
        dl_device: tuple[int, int] | None = None,
        copy: bool | None = None,
    ) -> Any:
        """Export as a DLPack capsule; the consumer's ``stream`` is made to wait for our writes."""
        if dl_device is not None and tuple(dl_device) != self.__dlpack_device__():
            raise BufferError(
                f"DeviceArray lives on {self.__dlpack_device__()}; cannot export to {dl_device}"
            )
        if copy:
            raise BufferError("DeviceArray does not export copies (copy=True)")
        if self._owner is None:
            raise BufferError("the DeviceArray has been freed")
        if stream is not None and not isinstance(stream, int):
            raise TypeError(f"stream must be an int or None; got {type(stream).__name__}")
        if stream != -1 and self.stream is not None:
            consumer = 0 if stream is None else stream
            if consumer != self.stream.ptr:
                streams.stream_wait(StreamHandle(consumer, self.device_id, "cuda"), self.stream)
        versioned = max_version is not None and max_version[0] >= 1
        return dlpack.make_capsule(
            self.data_ptr,
            self.shape,
            self.strides,
            dtypes.dlpack_dtype(self.dtype),
            self.__dlpack_device__(),
            self,
            versioned=versioned,
        )

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        """Version 3 of the CUDA array interface; ``stream`` is the stream of the last write."""
        typestr = dtypes.to_numpy_dtype(self.dtype).str
        c_order = self.strides == dense_strides(self.shape)
        stream_ptr = None
        if self.stream is not None:
            stream_ptr = self.stream.ptr or 1  # 0 is not allowed: the legacy default stream is 1
        return {
            "shape": self.shape,
            "typestr": typestr,
            "data": (self.data_ptr if self.size else 0, False),
            "version": 3,
            "strides": None if c_order else tuple(s * self.itemsize for s in self.strides),
            "descr": [("", typestr)],
            "stream": stream_ptr,
        }
