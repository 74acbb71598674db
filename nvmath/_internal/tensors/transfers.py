"""Raw transfers between host and device memory: ``cuMemcpy*`` of the span a layout touches.

The link of the tensors chain after :mod:`.host` (``base -> host -> transfers -> device_array -> the
package adapters -> copy``): it moves bytes between numpy arrays and adapters' device memory and knows
no adapter class. Copies to the host block; copies to the device are ordered on the stream and return
without waiting (host sources are staged by the driver, so they may be reused at once).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from nvmath._internal import devices, dtypes, streams
from nvmath._internal.streams import StreamHandle
from nvmath._internal.tensors.base import TensorAdapter, span
from nvmath._internal.tensors.host import array_ptr, densify, element_strides, host_empty, raw_numpy_dtype

__all__ = [
    "device_to_host_array",
    "host_to_dense_device",
    "mark_written",
    "memcpy",
    "new_host_copy",
    "span_bytes",
    "stream_for",
]


def stream_for(adapter: TensorAdapter, stream: Any) -> StreamHandle:
    """The :class:`StreamHandle` of ``stream`` for work on ``adapter``'s device."""
    if isinstance(stream, StreamHandle) and stream.device_id == adapter.device_id:
        return stream
    device_id: Any = adapter.device_id
    return streams.get_stream(stream, device_id=device_id, package=adapter.package)


def mark_written(adapter: TensorAdapter, stream: StreamHandle) -> None:
    """Tell an adapter whose tensor tracks its last write (a DeviceArray) of a write queued on ``stream``."""
    mark = getattr(adapter.tensor, "mark_written", None)
    if mark is not None:
        mark(stream)


def span_bytes(adapter: TensorAdapter) -> tuple[int, int]:
    """Return (lowest address, byte count) of the memory the adapter's layout touches."""
    lo, hi = span(tuple(adapter.shape), tuple(adapter.strides))
    return adapter.data_ptr + lo * adapter.itemsize, (hi - lo + 1) * adapter.itemsize


def memcpy(kind: str, dst: int, src: int, nbytes: int, stream: StreamHandle) -> None:
    """``cuMemcpy{kind}Async`` (``kind``: ``"HtoD"``, ``"DtoH"`` or ``"DtoD"``) on ``stream``."""
    drv = devices.driver()
    fn = {"HtoD": drv.cuMemcpyHtoDAsync, "DtoH": drv.cuMemcpyDtoHAsync, "DtoD": drv.cuMemcpyDtoDAsync}[kind]
    with streams.stream_ctx(stream):
        devices.check(fn(dst, src, nbytes, stream.ptr), f"cuMemcpy{kind}Async")


def device_to_host_array(src: TensorAdapter, stream: Any) -> np.ndarray:
    """Copy a device adapter's span to new host memory; return a numpy array with its layout.

    Blocks until the data is on the host. Dtypes numpy lacks come back as opaque same-size items.
    """
    handle = stream_for(src, stream)
    shape, strides = tuple(src.shape), tuple(src.strides)
    npdt = raw_numpy_dtype(src.dtype)
    lo, hi = span(shape, strides)
    staging = np.empty(max(hi - lo + 1, 0), dtype=npdt)
    if staging.size:
        address, nbytes = span_bytes(src)
        memcpy("DtoH", staging.ctypes.data, address, nbytes, handle)
        streams.synchronize(handle)
    isz = npdt.itemsize
    return np.ndarray(shape, npdt, buffer=staging, offset=-lo * isz, strides=tuple(s * isz for s in strides))


def new_host_copy(src: TensorAdapter, stream: Any) -> np.ndarray:
    """A numpy copy of a (not lazily conjugated) device adapter: its layout when dense, else dense in its
    axis order; blocking."""
    host = device_to_host_array(src, stream)
    host = host.view(dtypes.to_numpy_dtype(src.dtype)) if host.dtype.kind == "V" else host
    return densify(host)


def host_to_dense_device(dst: TensorAdapter, host: np.ndarray, handle: StreamHandle) -> None:
    """Copy ``host`` into a device adapter whose layout is dense (no gaps), ordered on ``handle``."""
    shape, strides = tuple(dst.shape), tuple(dst.strides)
    same = host.itemsize and element_strides(host.strides, host.itemsize) == strides
    if not same:
        staging = host_empty(shape, strides, dst.dtype, raw=True)
        np.copyto(staging, host)
        host = staging
    lo, _ = span(shape, strides)
    address, nbytes = span_bytes(dst)
    memcpy("HtoD", address, array_ptr(host) + lo * dst.itemsize, nbytes, handle)
    mark_written(dst, handle)
