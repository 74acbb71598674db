"""CUDA devices and contexts, through the driver API of ``cuda.bindings``.

Rules:

* Nothing here calls the driver at import time; ``cuda.bindings.driver`` itself is imported on
  first use. :func:`gpu_available` never raises.
* The device of a computation comes from its operands (or an explicit option), never from the
  calling thread's current device.
* :class:`device_ctx` makes a device's primary context current for a block and restores the
  caller's context on exit; when the primary context is already current it costs one
  ``cuCtxGetCurrent`` call and changes nothing.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from nvmath import _errors
from nvmath._errors import LibraryNotFoundError, NotSupportedError

__all__ = [
    "check",
    "check_device_id",
    "compute_capability",
    "context_ctx",
    "core_device",
    "current_context",
    "device_count",
    "device_ctx",
    "driver",
    "gpu_available",
    "init_driver",
    "primary_context",
    "set_current_context",
]

logger = logging.getLogger(__name__)

_DRIVER: Any = None
_INIT_LOCK = threading.Lock()
_INITIALIZED = False
_GPU_AVAILABLE: bool | None = None
_DEVICE_COUNT: int | None = None
_CC: dict[int, tuple[int, int]] = {}
_PRIMARY: dict[int, int] = {}
_THREAD = threading.local()


def driver() -> Any:
    """Return the ``cuda.bindings.driver`` module, imported on first use."""
    global _DRIVER
    if _DRIVER is None:
        from cuda.bindings import driver as drv

        _DRIVER = drv
    return _DRIVER


def check(result: Any, what: str) -> Any:
    """Unpack a ``cuda.bindings`` result tuple, raising ``RuntimeError`` on a non-success status.

    Args:
        result: the tuple returned by a driver function (status first).
        what: the name of the call, for the message.

    Returns:
        ``None``, the single value, or a tuple of the values that follow the status.
    """
    status = result[0]
    if status != 0:
        name = getattr(status, "name", str(status))
        raise RuntimeError(f"CUDA driver call {what} failed: {name} ({int(status)})")
    if len(result) == 1:
        return None
    return result[1] if len(result) == 2 else result[1:]


def init_driver() -> None:
    """Initialise the CUDA driver once (``cuInit``); raise ``LibraryNotFoundError`` without one."""
    global _INITIALIZED
    if _INITIALIZED:
        return
    with _INIT_LOCK:
        if _INITIALIZED:
            return
        try:
            (status,) = driver().cuInit(0)
        except Exception as exc:  # no libcuda.so at all
            raise LibraryNotFoundError(f"the CUDA driver could not be loaded: {exc}") from exc
        if status != 0:
            raise LibraryNotFoundError(f"cuInit failed: {getattr(status, 'name', status)}; is a GPU present?")
        _INITIALIZED = True


def gpu_available() -> bool:
    """Return whether a CUDA driver and at least one device are usable; never raises."""
    global _GPU_AVAILABLE
    if _GPU_AVAILABLE is None:
        try:
            _GPU_AVAILABLE = device_count() > 0
        except Exception as exc:  # noqa: BLE001 - never raises, by contract
            logger.debug("no usable GPU: %s", exc)
            _GPU_AVAILABLE = False
    return _GPU_AVAILABLE


def _gpu_probe_for_errors() -> bool:
    """``gpu_available()`` looked up at call time (so a replaced ``gpu_available`` is honoured)."""
    return gpu_available()


# nvmath._errors adds "no NVIDIA GPU or CUDA driver was found" to library errors only when this
# probe says so; registered here because _errors must not import this module (it is the bottom).
_errors.gpu_probe = _gpu_probe_for_errors


def device_count() -> int:
    """Return the number of CUDA devices (cached; raises ``LibraryNotFoundError`` without a driver)."""
    global _DEVICE_COUNT
    if _DEVICE_COUNT is None:
        init_driver()
        _DEVICE_COUNT = int(check(driver().cuDeviceGetCount(), "cuDeviceGetCount"))
    return _DEVICE_COUNT


def check_device_id(device_id: Any, what: str = "device_id") -> int:
    """Validate a CUDA device ordinal and return it as ``int``.

    Raises:
        TypeError: ``device_id`` is not an int.
        ValueError: it is out of range for this machine.
    """
    if isinstance(device_id, bool) or not isinstance(device_id, int):
        raise TypeError(f"{what} must be an int CUDA device ordinal; got {device_id!r}")
    count = device_count()
    if not 0 <= device_id < count:
        raise ValueError(f"{what}={device_id} is out of range: this machine has {count} CUDA device(s)")
    return device_id


def compute_capability(device_id: int) -> tuple[int, int]:
    """Return ``(major, minor)`` of device ``device_id`` (cached)."""
    cc = _CC.get(device_id)
    if cc is None:
        drv = driver()
        check_device_id(device_id)
        attr = drv.CUdevice_attribute
        major = check(
            drv.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device_id),
            "cuDeviceGetAttribute",
        )
        minor = check(
            drv.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device_id),
            "cuDeviceGetAttribute",
        )
        cc = _CC[device_id] = (int(major), int(minor))
    return cc


def primary_context(device_id: int) -> int:
    """Return the handle (int) of device ``device_id``'s primary context, retained once per process."""
    ctx = _PRIMARY.get(device_id)
    if ctx is None:
        check_device_id(device_id)
        handle = check(driver().cuDevicePrimaryCtxRetain(device_id), "cuDevicePrimaryCtxRetain")
        # a racing thread may retain twice: harmless, the primary context lives for the process
        ctx = _PRIMARY.setdefault(device_id, int(handle))
    return ctx


def current_context() -> int:
    """Return the calling thread's current context handle (0 when none)."""
    return int(check(driver().cuCtxGetCurrent(), "cuCtxGetCurrent"))


def set_current_context(ctx: int) -> None:
    """Make context ``ctx`` (an int handle, 0 for none) current on the calling thread."""
    drv = driver()
    check(drv.cuCtxSetCurrent(drv.CUcontext(ctx)), "cuCtxSetCurrent")


class context_ctx:
    """Context manager: make context ``ctx`` (an int handle) current, restore the previous one on exit.

    Costs one ``cuCtxGetCurrent`` when ``ctx`` is already current (nothing is changed then).
    Nestable; an instance is not shareable between threads.
    """

    __slots__ = ("_prev", "ctx")

    def __init__(self, ctx: int):
        self.ctx = ctx
        self._prev: Any = None

    def __enter__(self) -> int:
        drv = _DRIVER or driver()
        status, prev = drv.cuCtxGetCurrent()
        if status != 0:
            check((status,), "cuCtxGetCurrent")
        if int(prev) != self.ctx:
            check(drv.cuCtxSetCurrent(_context_object(self.ctx)), "cuCtxSetCurrent")
            self._prev = prev
        return self.ctx

    def __exit__(self, *exc: object) -> None:
        prev = self._prev
        if prev is not None:
            self._prev = None
            check(_DRIVER.cuCtxSetCurrent(prev), "cuCtxSetCurrent")


_CONTEXT_OBJECTS: dict[int, Any] = {}


def _context_object(ctx: int) -> Any:
    obj = _CONTEXT_OBJECTS.get(ctx)
    if obj is None:
        obj = _CONTEXT_OBJECTS[ctx] = driver().CUcontext(ctx)
    return obj


class _NoContext:
    """The context manager of host work: does nothing."""

    __slots__ = ()

    def __enter__(self) -> int:
        return 0

    def __exit__(self, *exc: object) -> None:
        return None


_NO_CONTEXT = _NoContext()


def device_ctx(device_id: int | str | None) -> context_ctx | _NoContext:
    """Return a context manager making device ``device_id``'s primary context current, then restoring.

    ``device_ctx("cpu")`` and ``device_ctx(None)`` do nothing, so host-only code paths can use the
    same ``with`` statement.
    """
    if device_id is None or device_id == "cpu":
        return _NO_CONTEXT
    ctx = _PRIMARY.get(device_id)  # type: ignore[arg-type]
    return context_ctx(ctx if ctx is not None else primary_context(device_id))  # type: ignore[arg-type]


def core_device(device_id: int) -> Any:
    """Return the ``cuda.core.Device`` of ``device_id``, initialised for the calling thread.

    cuda.core requires ``Device.set_current()`` in a thread before creating streams, events or
    allocations there; this does it once per thread and device, and restores the thread's
    previous context so the caller's state is unchanged.
    """
    inited = getattr(_THREAD, "core_devices", None)
    if inited is None:
        inited = _THREAD.core_devices = {}
    dev = inited.get(device_id)
    if dev is None:
        from cuda.core import Device

        check_device_id(device_id)
        dev = Device(device_id)
        prev = current_context()
        try:
            dev.set_current()
        finally:
            if prev != primary_context(device_id):
                set_current_context(prev)
        inited[device_id] = dev
    return dev


def require_gpu(what: str) -> None:
    """Raise ``NotSupportedError`` naming ``what`` when no GPU is usable."""
    if not gpu_available():
        raise NotSupportedError(f"{what} needs an NVIDIA GPU and driver, and none is usable here")
