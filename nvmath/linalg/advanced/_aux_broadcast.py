"""The batched copy of an aux input shared by every batch entry: :class:`BroadcastAux`.

A batched DRELU / DGELU (and their ``_BGRAD`` forms) may be given the aux of one unbatched forward
pass (as nvmath-python accepts). cuBLASLt does not honour an aux batch stride of 0 (see
:class:`._epilogs.BroadcastInput`), so the plan reads a planner-owned buffer with one copy of the
matrix per batch entry: allocated once when the plan is built (with the operands' package, like
:mod:`._staging`'s copies), refreshed from the user's aux on the execution stream before every launch
(so ``reset_operands`` and in-place updates of the aux are seen), by ``1 + ceil(log2(count))``
device-to-device copies (slot 0 from the user's matrix, then the filled slots doubled). Plans whose
aux is batched (or that have no aux input) never create one.
"""

from __future__ import annotations

from typing import Any

from nvmath._internal.streams import StreamHandle
from nvmath._internal.tensors import transfers
from nvmath.linalg.advanced._epilogs import BroadcastInput
from nvmath.linalg.advanced._operands import Slot

__all__ = ["BroadcastAux", "copy_plan"]


def copy_plan(count: int, block: int, span: int) -> list[tuple[int, int, int]]:
    """The copies that fill ``count`` slots of ``block`` bytes from one matrix of ``span`` bytes:
    ``(destination offset, source offset or -1 for the user's matrix, bytes)``, in order."""
    copies = [(0, -1, span)]
    filled = 1
    while filled < count:
        step = min(filled, count - filled)
        copies.append((filled * block, 0, step * block))
        filled += step
    return copies


class BroadcastAux:
    """The batched buffer that a plan's aux input is materialised in.

    Attributes:
        spec: what to materialise (:class:`._epilogs.BroadcastInput`).
        source: the aux input's :class:`~._operands.Slot` (the copy reads ``source.ptr``).
        buffer: the planner-owned buffer (an adapter of the aux's package, ``count * block`` bytes).
        ptr: the buffer's device address (what the descriptor's ``EPILOGUE_AUX_POINTER`` holds).
    """

    __slots__ = ("_copies", "buffer", "ptr", "source", "spec")

    def __init__(self, spec: BroadcastInput, source: Slot, stream: StreamHandle | Any):
        device = source.device
        if device is None:  # pragma: no cover - plan() requires the epilog inputs
            raise ValueError(f"epilog input {spec.name!r} was released; reset_operands first")
        self.spec, self.source = spec, source
        self.buffer = device.empty((spec.count * spec.block,), "uint8", stream=stream)
        self.ptr = self.buffer.data_ptr
        self._copies = [
            (self.ptr + dst, src if src < 0 else self.ptr + src, nbytes)
            for dst, src, nbytes in copy_plan(spec.count, spec.block, spec.span)
        ]

    def refresh(self, stream: StreamHandle) -> None:
        """Copy the user's aux into every slot, ordered on ``stream`` (the execution stream)."""
        user = self.source.ptr
        for dst, src, nbytes in self._copies:
            transfers.memcpy("DtoD", dst, user if src < 0 else src, nbytes, stream)
