"""cuBLASLt library handles (``cublasLtHandle_t``) and the library version, for the matmul planner.

(A "handle" in this package is a cuBLASLt handle; streams are
:class:`~nvmath._internal.streams.StreamHandle` objects, resolved in :mod:`._streams`; device facts live
in :mod:`._device`.)

* :func:`get_handle`: one cuBLASLt handle per (thread, device), created on first use under the
  device's primary context and destroyed when the thread's storage goes away (never at interpreter
  shutdown). ``MatmulOptions.handle`` overrides it.
* :func:`cublaslt_version`: queried once per process.

Nothing here touches the driver or loads cuBLASLt at import time.
"""

from __future__ import annotations

import logging
import sys
import threading

from nvmath._errors import warn_cleanup_failure
from nvmath._internal import devices
from nvmath.bindings import cublasLt

__all__ = ["cublaslt_version", "get_handle"]

logger = logging.getLogger(__name__)

_LOCAL = threading.local()
_VERSION: int | None = None


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
