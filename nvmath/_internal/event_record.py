"""The done-event record (``cuEventRecord``) of the launch paths, through the compiled caller when active.

:func:`recorder` gives ``record(event, stream)`` for a driver module: a ``FastCall`` of the driver's
``cuEventRecord`` when the compiled path is active and ``drv`` is ``cuda.bindings.driver`` (a fake
driver, or no ``libcuda``, keeps the driver module's own call); a failure raises ``RuntimeError`` naming
the call and status either way, as :func:`nvmath._internal.devices.check` does.

:func:`capture_checked` gives the done-event rule of one stream handle (see
:func:`nvmath._internal.streams.record_done`): ``record()`` asks whether the stream is capturing a CUDA
graph and records only when it is not, in one compiled call when the path is active.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from nvmath._internal import devices, fastpath

__all__ = ["EventRecordError", "capture_checked", "combined_caller", "recorder"]

logger = logging.getLogger(__name__)

Record = Callable[[Any, int], None]

_MADE: dict[int, tuple[Any, Record]] = {}  # id(drv) -> (drv, its recorder)


class EventRecordError(RuntimeError):
    """``cuEventRecord`` returned a failure status (``.status``)."""

    def __init__(self, status: int):
        super().__init__(f"CUDA driver call cuEventRecord failed: status {int(status)}")
        self.status = int(status)


def recorder(drv: Any) -> Record:
    """``record(event, stream)`` for ``drv`` (made once per driver module)."""
    made = _MADE.get(id(drv))
    if made is not None and made[0] is drv:
        return made[1]
    record = _compiled(drv) or _pure(drv)
    _MADE[id(drv)] = (drv, record)
    return record


def _pure(drv: Any) -> Record:
    def record(event: Any, stream: int) -> None:
        devices.check(drv.cuEventRecord(event, stream), "cuEventRecord")

    return record


def _compiled(drv: Any) -> Record | None:
    if not fastpath.available() or getattr(drv, "__name__", "") != "cuda.bindings.driver":
        return None
    try:
        address = fastpath.driver_symbol_address("cuEventRecord")
    except Exception as exc:  # noqa: BLE001 - no driver library: the driver module's own call
        logger.debug("cuEventRecord stays on the driver module's call: %s", exc)
        return None
    call = fastpath.make_caller(address, (0, 0), (0, 1), error=EventRecordError)

    def record(event: Any, stream: int) -> None:
        call(int(event), stream)

    return record


def capture_checked(drv: Any, event: Any, stream: int) -> Callable[[], None]:
    """``record()``: record ``event`` on ``stream`` unless the stream is capturing a CUDA graph.

    The capture state is asked on every call (it changes behind our back); the event, the stream and
    the driver's entry points are fixed. Compiled when the path is active and ``drv`` is
    ``cuda.bindings.driver``: one call of the extension's ``record_unless_capturing``, which calls
    ``cuStreamIsCapturing`` then ``cuEventRecord``; else the driver module's calls. A failed query
    records anyway (the record reports the stream's error); a failed record raises
    :class:`EventRecordError` on both paths.
    """
    compiled = _compiled_capture_checked(drv, event, stream)
    if compiled is not None:
        return compiled
    record = recorder(drv)

    def record_unless_capturing() -> None:
        status, capture = drv.cuStreamIsCapturing(stream)
        if int(capture) and not int(status):
            return
        record(event, stream)

    return record_unless_capturing


def _compiled_capture_checked(drv: Any, event: Any, stream: int) -> Callable[[], Any] | None:
    if not fastpath.available() or getattr(drv, "__name__", "") != "cuda.bindings.driver":
        return None
    try:
        query = fastpath.driver_symbol_address("cuStreamIsCapturing")
        record = fastpath.driver_symbol_address("cuEventRecord")
    except Exception as exc:  # noqa: BLE001 - no driver library: the driver module's own calls
        logger.debug("the capture-checked record stays on the driver module's calls: %s", exc)
        return None
    return combined_caller(query, record, int(event), stream)


def combined_caller(query: int, record: int, event: int, stream: int) -> Callable[[], Any]:
    """The compiled ``record_unless_capturing(query, record, stream, event)`` with every argument fixed
    (``query``, ``record``: addresses of functions with the signatures of ``cuStreamIsCapturing`` and
    ``cuEventRecord``); needs the compiled path (:func:`nvmath._internal.fastpath.available`)."""
    from nvmath import _fastcall

    address = _fastcall.record_unless_capturing_address()
    return fastpath.make_caller(address, (query, record, stream, event), (), error=EventRecordError)
