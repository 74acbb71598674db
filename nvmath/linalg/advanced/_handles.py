"""cuBLASLt library handles (``cublasLtHandle_t``) and the library version, for the matmul planner.

(A "handle" in this package is a cuBLASLt handle; streams are
:class:`~nvmath._internal.streams.StreamHandle` objects, resolved in :mod:`nvmath._internal.streams`;
device facts live
in :mod:`._device`.)

* :func:`get_handle`: one cuBLASLt handle per (thread, device), created on first use under the
  device's primary context and destroyed when the thread's storage goes away (never at interpreter
  shutdown). ``MatmulOptions.handle`` overrides it.
* :func:`cublaslt_version`: queried once per process.

Nothing here touches the driver or loads cuBLASLt at import time.
"""

from __future__ import annotations

import logging

from nvmath._internal.library_handles import ThreadHandles
from nvmath.bindings import cublasLt

__all__ = ["POOL_GET", "cublaslt_version", "get_handle", "handles_here"]

logger = logging.getLogger(__name__)

_HANDLES = ThreadHandles("cuBLASLt", lambda: cublasLt.create(), lambda handle: cublasLt.destroy(handle))
_VERSION: int | None = None


get_handle = _HANDLES.get
"""``get_handle(device_id)``: the calling thread's cuBLASLt handle for ``device_id``, created on first use
(the pool's bound method itself: every launch calls it, and a wrapper would add a Python frame)."""

POOL_GET = get_handle
"""The pool's own :func:`get_handle` (a launch reads :data:`handles_here` inline only while
:func:`get_handle` is this one, not a test's replacement)."""

handles_here = _HANDLES.here
"""The pool's thread-local storage: ``handles_here.handles`` is the calling thread's ``{device_id:
handle}`` once it has one (see :attr:`~nvmath._internal.library_handles.ThreadHandles.here`)."""


def cublaslt_version() -> int:
    """``cublasLtGetVersion()`` of the loaded library (``major * 10000 + minor * 100 + patch``)."""
    global _VERSION
    if _VERSION is None:
        _VERSION = int(cublasLt.get_version())
    return _VERSION
