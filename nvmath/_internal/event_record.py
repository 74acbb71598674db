"""The done-event record (``cuEventRecord``) of the launch paths, through the compiled caller when active.

:func:`recorder` gives ``record(event, stream)`` for a driver module: a ``FastCall`` of the driver's
``cuEventRecord`` when the compiled path is active and ``drv`` is ``cuda.bindings.driver`` (a fake
driver, or no ``libcuda``, keeps the driver module's own call); a failure raises ``RuntimeError`` naming
the call and status either way, as :func:`nvmath._internal.devices.check` does.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from nvmath._internal import devices, fastpath

__all__ = ["EventRecordError", "recorder"]

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
