"""Static facts of a device for the matmul planner (name, compute capability, memory) and pointer
alignment; queried once per device, no driver call at import time."""

from __future__ import annotations

import dataclasses

from nvmath._internal import devices

__all__ = ["MAX_ALIGNMENT", "DeviceInfo", "device_info", "pointer_alignment"]

MAX_ALIGNMENT = 256
"""The largest alignment (bytes) reported to cuBLASLt (its default assumption)."""

_DEVICES: dict[int, DeviceInfo] = {}
"""device id -> its facts (bounded by the number of devices)."""


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
