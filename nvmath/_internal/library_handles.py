"""One library handle per (thread, device): the pool behind cuBLASLt's and cuBLAS's ``get_handle``.

A handle is created on first use under the device's primary context and destroyed when the thread's
storage goes away (never at interpreter shutdown, when the library may already be unloaded). A failure
while destroying warns (:class:`~nvmath._errors.NvmathWarning`), never raises.

Nothing here touches the driver or loads a library at import time: ``create`` and ``destroy`` run on use.
"""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import Callable

from nvmath._errors import warn_cleanup_failure
from nvmath._internal import devices

__all__ = ["ThreadHandles"]

logger = logging.getLogger(__name__)


class _Owned:
    """The handles one thread made; destroyed with the thread-local storage that holds this object."""

    __slots__ = ("handles", "pool")

    def __init__(self, pool: ThreadHandles) -> None:
        self.pool = pool
        self.handles: dict[int, int] = {}

    def __del__(self) -> None:
        if sys.is_finalizing():
            return
        handles, self.handles = self.handles, {}
        for device_id, handle in handles.items():
            self.pool.destroy(device_id, handle)


class ThreadHandles:
    """Library handles, one per (calling thread, device).

    Args:
        name: the library's name, for log lines and warnings (``"cuBLASLt"``).
        create: makes a handle (called under the device's context).
        destroy: releases a handle (called under the device's context).
        forget: called with each handle made or destroyed, for memos keyed by handle address (a new
            handle may reuse a destroyed one's address).
    """

    def __init__(
        self,
        name: str,
        create: Callable[[], int],
        destroy: Callable[[int], object],
        forget: Callable[[int], object] | None = None,
    ) -> None:
        self.name = name
        self._create, self._destroy, self._forget = create, destroy, forget
        self._local = threading.local()
        self.here = self._local
        """The pool's thread-local storage: ``here.handles`` is the calling thread's ``{device_id: handle}``
        (absent before its first :meth:`get`), for a hot path that reads it inline (a ``get`` frame less)
        and calls :meth:`get` when it misses. Read only."""

    def get(self, device_id: int) -> int:
        """The calling thread's handle for ``device_id``, created on first use."""
        owned = getattr(self._local, "owned", None)
        if owned is None:
            owned = self._local.owned = _Owned(self)
            self._local.handles = owned.handles  # (the same dict: see ``here``)
        handle = owned.handles.get(device_id)
        if handle is None:
            with devices.device_ctx(device_id):
                handle = self._create()
            owned.handles[device_id] = handle
            if self._forget is not None:
                self._forget(handle)
            logger.debug("created %s handle %#x for device %d", self.name, handle, device_id)
        return handle

    def destroy(self, device_id: int, handle: int) -> None:
        """Release ``handle`` (made for ``device_id``); a failure warns, never raises."""
        if self._forget is not None:
            self._forget(handle)
        try:
            with devices.device_ctx(device_id):
                self._destroy(handle)
        except Exception as exc:  # noqa: BLE001 - cleanup failures warn, never raise
            warn_cleanup_failure(f"destroying a {self.name} handle", exc)
