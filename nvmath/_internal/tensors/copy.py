"""Copies between adapters, across memory spaces and packages.

Semantics (shared by ``TensorAdapter.copy_`` and ``.to``):

* into host memory: blocking; the data is on the host when the call returns;
* into device memory: ordered on the given stream, returns without waiting (host sources are
  staged by the driver, so they may be reused at once);
* torch->torch and cupy->cupy use the package's own strided copy; otherwise raw ``cuMemcpy*`` of
  the span a layout touches, with host-side (numpy) re-layout, and nvmath's strided-copy kernel
  (:mod:`~nvmath._internal.tensors.kernels`) for device-to-device copies between layouts.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

import numpy as np

from nvmath._internal import devices, dtypes, streams
from nvmath._internal.streams import StreamHandle
from nvmath._internal.tensors.base import TensorAdapter, is_dense, span
from nvmath._internal.tensors.numpy_adapter import (
    NumpyAdapter,
    densify,
    element_strides,
    host_empty,
    host_view,
    raw_numpy_dtype,
)

__all__ = ["copy_into", "device_to_new_host", "host_to_new_device"]

logger = logging.getLogger(__name__)


def _stream_for(adapter: TensorAdapter, stream: Any) -> StreamHandle:
    if isinstance(stream, StreamHandle) and stream.device_id == adapter.device_id:
        return stream
    return streams.get_stream(stream, device_id=adapter.device_id, package=adapter.package)  # type: ignore[arg-type]


def _mark(adapter: TensorAdapter, stream: StreamHandle) -> None:
    mark = getattr(adapter.tensor, "mark_written", None)
    if mark is not None:
        mark(stream)


def _span_bytes(adapter: TensorAdapter) -> tuple[int, int]:
    """Return (lowest address, byte count) of the memory the adapter's layout touches."""
    lo, hi = span(tuple(adapter.shape), tuple(adapter.strides))
    return adapter.data_ptr + lo * adapter.itemsize, (hi - lo + 1) * adapter.itemsize


def _memcpy(kind: str, dst: int, src: int, nbytes: int, stream: StreamHandle) -> None:
    drv = devices.driver()
    fn = {"HtoD": drv.cuMemcpyHtoDAsync, "DtoH": drv.cuMemcpyDtoHAsync, "DtoD": drv.cuMemcpyDtoDAsync}[kind]
    with streams.stream_ctx(stream):
        devices.check(fn(dst, src, nbytes, stream.ptr), f"cuMemcpy{kind}Async")


def device_to_host_array(src: TensorAdapter, stream: Any) -> np.ndarray:
    """Copy a device adapter's span to new host memory; return a numpy array with its layout.

    Blocks until the data is on the host. Dtypes numpy lacks come back as opaque same-size items.
    """
    handle = _stream_for(src, stream)
    shape, strides = tuple(src.shape), tuple(src.strides)
    npdt = raw_numpy_dtype(src.dtype)
    lo, hi = span(shape, strides)
    staging = np.empty(max(hi - lo + 1, 0), dtype=npdt)
    if staging.size:
        address, nbytes = _span_bytes(src)
        _memcpy("DtoH", staging.ctypes.data, address, nbytes, handle)
        streams.synchronize(handle)
    isz = npdt.itemsize
    return np.ndarray(shape, npdt, buffer=staging, offset=-lo * isz, strides=tuple(s * isz for s in strides))


def device_to_new_host(src: TensorAdapter, stream: Any) -> NumpyAdapter:
    """Return a numpy copy of a device adapter (same layout when dense, else dense, same axis order)."""
    if src.is_conjugate:
        src = _resolved(src)
    host = device_to_host_array(src, stream)
    host = host.view(dtypes.to_numpy_dtype(src.dtype)) if host.dtype.kind == "V" else host
    return NumpyAdapter(densify(host))


def host_to_new_device(src: TensorAdapter, device_id: int | str, stream: Any) -> TensorAdapter:
    """Return a DeviceArray copy of a host adapter: dense, in the source's axis order."""
    from nvmath._internal.tensors.device_array import DeviceArray

    if not isinstance(device_id, int) or isinstance(device_id, bool):
        raise TypeError(f"device_id must be 'cpu' or a CUDA device ordinal; got {device_id!r}")
    host = densify(host_view(src))
    strides = element_strides(host.strides, host.itemsize)
    handle = streams.get_stream(stream, device_id=device_id, package="cuda")
    result = DeviceArray.allocate(
        tuple(host.shape), src.dtype, strides=strides, device_id=device_id, stream=handle
    )
    if result.size:
        address, nbytes = _span_bytes(result)
        lo, _ = span(tuple(host.shape), strides)
        _memcpy("HtoD", address, _ptr(host) + lo * host.itemsize, nbytes, handle)
    result.mark_written(handle)
    return result


def _ptr(a: np.ndarray) -> int:
    return int(a.__array_interface__["data"][0])


def _resolved(adapter: TensorAdapter) -> TensorAdapter:
    """Materialise torch's lazy conjugation (other packages have none)."""
    from nvmath._internal.tensors.torch_adapter import TorchAdapter

    return TorchAdapter(adapter.tensor.resolve_conj())


def copy_into(dst: TensorAdapter, src: TensorAdapter, stream: Any = None) -> None:
    """Copy ``src`` into ``dst`` (same shape and dtype); see the module docstring for blocking."""
    if tuple(dst.shape) != tuple(src.shape):
        raise ValueError(f"cannot copy shape {tuple(src.shape)} into shape {tuple(dst.shape)}")
    if dst.dtype != src.dtype:
        raise ValueError(f"cannot copy dtype {src.dtype} into dtype {dst.dtype}: no casting")
    if dst.size == 0:
        return
    dgpu, sgpu = dst.device == "cuda", src.device == "cuda"
    if dgpu and sgpu and dst.device_id != src.device_id:
        raise ValueError(f"copies between GPUs are not supported (device {src.device_id} -> {dst.device_id})")
    if dst.package == src.package == "torch":
        return _torch_copy(dst, src, stream)
    if dst.package == src.package == "cupy":
        return _cupy_copy(dst, src, stream)
    if src.is_conjugate:
        src = _resolved(src)
    if not dgpu and not sgpu:
        np.copyto(host_view(dst), host_view(src))
    elif not dgpu:
        np.copyto(host_view(dst), device_to_host_array(src, stream))
    elif not sgpu:
        _host_to_device(dst, host_view(src), _stream_for(dst, stream))
    else:
        _device_to_device(dst, src, _stream_for(dst, stream))


def _torch_copy(dst: TensorAdapter, src: TensorAdapter, stream: Any) -> None:
    torch = sys.modules["torch"]
    gpu = dst.device_id if dst.device == "cuda" else src.device_id
    if gpu == "cpu":
        dst.tensor.copy_(src.tensor)
        return
    handle = _stream_for(dst if dst.device == "cuda" else src, stream)
    with torch.cuda.stream(streams.native_stream(handle, "torch")):
        dst.tensor.copy_(src.tensor, non_blocking=dst.device == "cuda")


def _cupy_copy(dst: TensorAdapter, src: TensorAdapter, stream: Any) -> None:
    cupy = sys.modules["cupy"]
    handle = _stream_for(dst, stream)
    with cupy.cuda.Device(dst.device_id), streams.native_stream(handle, "cupy"):
        cupy.copyto(dst.tensor, src.tensor)


def _host_to_device(dst: TensorAdapter, host: np.ndarray, handle: StreamHandle) -> None:
    shape, strides = tuple(dst.shape), tuple(dst.strides)
    if not is_dense(shape, strides):
        # a destination with gaps (a slice): fill a dense temporary, then copy on the device
        tmp = dst.empty(shape, dst.dtype, device_id=dst.device_id, stream=handle)
        _host_to_device(tmp, host, handle)
        _device_to_device(dst, tmp, handle)
        return
    same = host.itemsize and element_strides(host.strides, host.itemsize) == strides
    if not same:
        staging = host_empty(shape, strides, dst.dtype, raw=True)
        np.copyto(staging, host)
        host = staging
    lo, _ = span(shape, strides)
    address, nbytes = _span_bytes(dst)
    _memcpy("HtoD", address, _ptr(host) + lo * dst.itemsize, nbytes, handle)
    _mark(dst, handle)


def _device_to_device(dst: TensorAdapter, src: TensorAdapter, handle: StreamHandle) -> None:
    shape = tuple(dst.shape)
    if tuple(dst.strides) == tuple(src.strides) and is_dense(shape, tuple(dst.strides)):
        address, nbytes = _span_bytes(dst)
        src_address, _ = _span_bytes(src)
        _memcpy("DtoD", address, src_address, nbytes, handle)
    elif dst.package == "torch":
        torch = sys.modules["torch"]
        source = src.tensor if src.package == "torch" else torch.from_dlpack(_exportable(src))
        with torch.cuda.stream(streams.native_stream(handle, "torch")):
            dst.tensor.copy_(source)
    elif dst.package == "cupy":
        cupy = sys.modules["cupy"]
        with cupy.cuda.Device(dst.device_id), streams.native_stream(handle, "cupy"):
            source = src.tensor if src.package == "cupy" else cupy.from_dlpack(_exportable(src))
            cupy.copyto(dst.tensor, source)
    else:
        _strided_device_copy(dst, src, handle)
    _mark(dst, handle)


def _exportable(adapter: TensorAdapter) -> Any:
    """An object exporting ``adapter``'s memory through DLPack (a zero-copy DeviceArray view)."""
    from nvmath._internal.tensors.device_array import DeviceArray

    return DeviceArray(
        adapter.data_ptr,
        tuple(adapter.shape),
        tuple(adapter.strides),
        adapter.dtype,
        adapter.device_id,
        adapter,
    )


def _strided_device_copy(dst: TensorAdapter, src: TensorAdapter, handle: StreamHandle) -> None:
    from nvmath._internal.tensors.kernels import strided_copy

    strided_copy(
        dst.data_ptr,
        tuple(dst.strides),
        src.data_ptr,
        tuple(src.strides),
        tuple(dst.shape),
        dst.itemsize,
        dst.device_id,  # type: ignore[arg-type]
        handle,
    )
