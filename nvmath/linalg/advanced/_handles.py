"""cuBLASLt handles and cached device/library facts used by the matmul planner.

* :func:`get_handle`: one cuBLASLt handle per (thread, device), created on first use under the
  device's primary context and destroyed when the thread's storage goes away (never at interpreter
  shutdown). ``MatmulOptions.handle`` overrides it.
* :func:`cublaslt_version`, :func:`device_info`: facts that never change in a process, queried once.

Nothing here touches the driver or loads cuBLASLt at import time.
"""

from __future__ import annotations

import dataclasses
import logging
import sys
import threading
from typing import Any

from nvmath._errors import warn_cleanup_failure
from nvmath._internal import devices, streams
from nvmath._internal.streams import StreamHandle
from nvmath.bindings import cublasLt

__all__ = [
    "DeviceInfo",
    "cublaslt_version",
    "device_info",
    "get_handle",
    "is_capturing",
    "pointer_alignment",
    "stream_for",
    "torch_raw_stream",
]

logger = logging.getLogger(__name__)

MAX_ALIGNMENT = 256
"""The largest alignment (bytes) reported to cuBLASLt (its default assumption)."""

_LOCAL = threading.local()
_VERSION: int | None = None
_DEVICES: dict[int, DeviceInfo] = {}


class _ThreadHandles:
    """The handles of one thread; destroyed with the thread-local storage that holds this object."""

    __slots__ = ("handles",)

    def __init__(self) -> None:
        self.handles: dict[int, int] = {}

    def __del__(self) -> None:
        if sys.is_finalizing():
            return
        handles, self.handles = self.handles, {}
        for device_id, handle in handles.items():
            try:
                with devices.device_ctx(device_id):
                    cublasLt.destroy(handle)
            except Exception as exc:  # noqa: BLE001 - cleanup failures warn, never raise
                warn_cleanup_failure("destroying a cuBLASLt handle", exc)


def get_handle(device_id: int) -> int:
    """Return the calling thread's cuBLASLt handle for ``device_id``, creating it on first use."""
    cache = getattr(_LOCAL, "cache", None)
    if cache is None:
        cache = _LOCAL.cache = _ThreadHandles()
    handle = cache.handles.get(device_id)
    if handle is None:
        with devices.device_ctx(device_id):
            handle = cublasLt.create()
        cache.handles[device_id] = handle
        logger.debug("created cuBLASLt handle %#x for device %d", handle, device_id)
    return handle


def cublaslt_version() -> int:
    """``cublasLtGetVersion()`` of the loaded library (``major * 10000 + minor * 100 + patch``)."""
    global _VERSION
    if _VERSION is None:
        _VERSION = int(cublasLt.get_version())
    return _VERSION


@dataclasses.dataclass(frozen=True)
class DeviceInfo:
    """Static facts of one device.

    Attributes:
        name: the device name (e.g. ``"NVIDIA H200"``).
        compute_capability: ``(major, minor)``.
        total_memory: bytes of device memory.
    """

    name: str
    compute_capability: tuple[int, int]
    total_memory: int


def device_info(device_id: int) -> DeviceInfo:
    """Return (and cache) the :class:`DeviceInfo` of ``device_id``."""
    info = _DEVICES.get(device_id)
    if info is None:
        drv = devices.driver()
        cc = devices.compute_capability(device_id)
        raw = devices.check(drv.cuDeviceGetName(256, device_id), "cuDeviceGetName")
        name = raw.split(b"\0", 1)[0].decode() if isinstance(raw, bytes) else str(raw)
        total = int(devices.check(drv.cuDeviceTotalMem(device_id), "cuDeviceTotalMem"))
        info = _DEVICES[device_id] = DeviceInfo(name, cc, total)
    return info


def pointer_alignment(ptr: int) -> int:
    """The largest power of two (capped at :data:`MAX_ALIGNMENT`) dividing ``ptr``."""
    if ptr == 0:
        return MAX_ALIGNMENT
    return min(ptr & -ptr, MAX_ALIGNMENT)


def is_capturing(ptr: int) -> bool:
    """Whether the stream ``ptr`` is capturing a CUDA graph (the default streams never are)."""
    if ptr in (0, 1, 2):
        return False
    status = devices.check(devices.driver().cuStreamIsCapturing(ptr), "cuStreamIsCapturing")
    return int(status) != 0


def stream_for(ptr: int, device_id: int, package: str) -> StreamHandle:
    """The handle of the raw stream ``ptr``; during a graph capture one built without driver queries.

    ``streams.get_stream`` asks the driver for a new stream's device and context, which a capturing
    stream refuses (and the refusal invalidates the capture); a capturing stream is assumed to belong
    to ``device_id``'s primary context.
    """
    if is_capturing(ptr):
        return StreamHandle(ptr, device_id, package, ptr, None)
    return streams.get_stream(ptr, device_id=device_id, package=package)


def torch_raw_stream() -> Any:
    """torch's raw current-stream getter (device id -> ``cudaStream_t``), or ``None`` without torch."""
    torch = sys.modules.get("torch")
    return getattr(getattr(torch, "_C", None), "_cuda_getCurrentRawStream", None)
