"""Copies between adapters, across memory spaces and packages: :func:`copy_into`.

The last link of the tensors chain (``base -> host -> transfers -> device_array -> the package adapters
-> copy``): it knows every adapter. Callers copy with ``copy_into(dst, src, stream)``.

Semantics:

* into host memory: blocking; the data is on the host when the call returns;
* into device memory: ordered on the given stream, returns without waiting (host sources are
  staged by the driver, so they may be reused at once);
* within one package that has its own strided copy (torch, cupy: :data:`COPIERS`) that copy;
  otherwise raw ``cuMemcpy*`` of the span a layout touches (:mod:`.transfers`), with host-side (numpy)
  re-layout, and nvmath's strided-copy kernel (:mod:`.kernels`) for device-to-device copies between
  layouts.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from typing import Any

import numpy as np

from nvmath._internal import streams
from nvmath._internal.streams import StreamHandle
from nvmath._internal.tensors.base import TensorAdapter, is_dense
from nvmath._internal.tensors.device_array import DeviceArray
from nvmath._internal.tensors.host import host_view
from nvmath._internal.tensors.kernels import strided_copy
from nvmath._internal.tensors.torch_adapter import TorchAdapter
from nvmath._internal.tensors.transfers import (
    device_to_host_array,
    host_to_dense_device,
    mark_written,
    memcpy,
    span_bytes,
    stream_for,
)

__all__ = ["COPIERS", "copy_into"]

logger = logging.getLogger(__name__)


def copy_into(dst: TensorAdapter, src: TensorAdapter, stream: Any = None) -> TensorAdapter:
    """Copy ``src`` into ``dst`` (same shape and dtype); see the module docstring for blocking.

    Returns:
        ``dst``.
    """
    if tuple(dst.shape) != tuple(src.shape):
        raise ValueError(f"cannot copy shape {tuple(src.shape)} into shape {tuple(dst.shape)}")
    if dst.dtype != src.dtype:
        raise ValueError(f"cannot copy dtype {src.dtype} into dtype {dst.dtype}: no casting")
    if dst.size == 0:
        return dst
    dgpu, sgpu = dst.device == "cuda", src.device == "cuda"
    if dgpu and sgpu and dst.device_id != src.device_id:
        raise ValueError(f"copies between GPUs are not supported (device {src.device_id} -> {dst.device_id})")
    own = COPIERS.get((dst.package, src.package))
    if own is not None:
        own(dst, src, stream)
        return dst
    if src.is_conjugate:
        src = _resolved(src)
    if not dgpu and not sgpu:
        np.copyto(host_view(dst), host_view(src))
    elif not dgpu:
        np.copyto(host_view(dst), device_to_host_array(src, stream))
    elif not sgpu:
        _host_to_device(dst, host_view(src), stream_for(dst, stream))
    else:
        _device_to_device(dst, src, stream_for(dst, stream))
    return dst


def _resolved(adapter: TensorAdapter) -> TensorAdapter:
    """Materialise torch's lazy conjugation (other packages have none)."""
    return TorchAdapter(adapter.tensor.resolve_conj())


def _torch_copy(dst: TensorAdapter, src: TensorAdapter, stream: Any) -> None:
    torch = sys.modules["torch"]
    gpu = dst.device_id if dst.device == "cuda" else src.device_id
    if gpu == "cpu":
        dst.tensor.copy_(src.tensor)
        return
    handle = stream_for(dst if dst.device == "cuda" else src, stream)
    with torch.cuda.stream(streams.native_stream(handle, "torch")):
        dst.tensor.copy_(src.tensor, non_blocking=dst.device == "cuda")


def _cupy_copy(dst: TensorAdapter, src: TensorAdapter, stream: Any) -> None:
    cupy = sys.modules["cupy"]
    handle = stream_for(dst, stream)
    with cupy.cuda.Device(dst.device_id), streams.native_stream(handle, "cupy"):
        cupy.copyto(dst.tensor, src.tensor)


COPIERS: dict[tuple[str, str], Callable[[TensorAdapter, TensorAdapter, Any], None]] = {
    ("torch", "torch"): _torch_copy,
    ("cupy", "cupy"): _cupy_copy,
}
"""``(destination package, source package) -> copy(dst, src, stream)``: the packages whose own copy
:func:`copy_into` uses (the CPU test fakes add their fake packages here)."""


def _host_to_device(dst: TensorAdapter, host: np.ndarray, handle: StreamHandle) -> None:
    shape = tuple(dst.shape)
    if not is_dense(shape, tuple(dst.strides)):
        # a destination with gaps (a slice): fill a dense temporary, then copy on the device
        tmp = dst.empty(shape, dst.dtype, device_id=dst.device_id, stream=handle)
        host_to_dense_device(tmp, host, handle)
        _device_to_device(dst, tmp, handle)
        return
    host_to_dense_device(dst, host, handle)


def _device_to_device(dst: TensorAdapter, src: TensorAdapter, handle: StreamHandle) -> None:
    shape = tuple(dst.shape)
    if tuple(dst.strides) == tuple(src.strides) and is_dense(shape, tuple(dst.strides)):
        address, nbytes = span_bytes(dst)
        src_address, _ = span_bytes(src)
        memcpy("DtoD", address, src_address, nbytes, handle)
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
        strided_copy(
            dst.data_ptr, tuple(dst.strides), src.data_ptr, tuple(src.strides), shape, dst.itemsize,
            dst.device_id, handle,  # type: ignore[arg-type]
        )  # fmt: skip
    mark_written(dst, handle)


def _exportable(adapter: TensorAdapter) -> Any:
    """An object exporting ``adapter``'s memory through DLPack (a zero-copy DeviceArray view)."""
    shape, strides = tuple(adapter.shape), tuple(adapter.strides)
    return DeviceArray(adapter.data_ptr, shape, strides, adapter.dtype, adapter.device_id, adapter)
