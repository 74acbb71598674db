"""The caller's stream as a :class:`~nvmath._internal.streams.StreamHandle`, for the matmul planner:
torch's current stream, read without a driver query while a CUDA graph is being captured."""

from __future__ import annotations

import sys
from typing import Any

from nvmath._internal import devices, streams
from nvmath._internal.streams import StreamHandle

__all__ = ["is_capturing", "stream_for", "torch_raw_stream"]


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

