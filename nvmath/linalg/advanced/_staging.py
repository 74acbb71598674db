"""Planner-owned dense copies of operands that an epilog cannot read in their own memory order.

cuBLASLt 13.1 refuses BGRADA / BGRADB (NOT_SUPPORTED) when the reduced operand is described as
``ORDER_ROW``; when that operand's memory order does not give the op the epilog needs, the problem
(:func:`._traits.get_problem`, ``MatmulProblem.staged``) reads a dense copy in the other order. This
module owns that copy: allocated once per plan, refreshed from the operand on the execution stream
before every launch (so ``reset_operands`` and in-place updates of the operand are seen), and reused
across executes. Problems without a staged operand never create one: the planner's hot path keeps a
single ``is None`` test.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nvmath._internal.tensors.copy import copy_into
from nvmath.linalg.advanced._operands import Slot

__all__ = ["StagedOperand", "dense_strides", "stage"]


def dense_strides(shape: tuple[int, ...], order: str) -> tuple[int, ...]:
    """Dense strides (elements) of ``shape``: batch dimensions in C order over matrices stored in
    ``order`` (``"col"``: unit stride along the rows' axis, ``"row"``: along the columns')."""
    if len(shape) < 2:
        raise ValueError(f"a staged operand has at least 2 dimensions; got shape {shape}")
    rows, cols = shape[-2], shape[-1]
    mat = (1, rows) if order == "col" else (cols, 1)
    strides: list[int] = []
    step = rows * cols
    for extent in reversed(shape[:-2]):
        strides.append(step)
        step *= extent
    return tuple(reversed(strides)) + mat


class StagedOperand:
    """The dense copy of one operand slot in the memory order the plan reads.

    Attributes:
        name: the user operand (``"a"``/``"b"``).
        order: ``"col"`` or ``"row"``.
        source: the operand's :class:`~._operands.Slot` (the copy reads ``source.device``).
        buffer: the planner-owned copy (an adapter of the operand's package).
        ptr: the copy's device address (what cuBLASLt reads).
    """

    __slots__ = ("buffer", "name", "order", "ptr", "source")

    def __init__(self, name: str, order: str, source: Slot, stream: Any):
        device = source.device
        if device is None:  # pragma: no cover - plan() requires the operands
            raise ValueError(f"operand {name!r} was released; reset_operands first")
        shape = tuple(device.shape)
        self.name, self.order, self.source = name, order, source
        self.buffer = device.empty(shape, device.dtype, strides=dense_strides(shape, order), stream=stream)
        self.ptr = self.buffer.data_ptr

    def fits(self, name: str, order: str, source: Slot) -> bool:
        """Whether this copy serves ``(name, order)`` of ``source`` (reusable by a new plan)."""
        device = source.device
        return (
            self.name == name and self.order == order and self.source is source and device is not None
            and tuple(device.shape) == tuple(self.buffer.shape) and device.dtype == self.buffer.dtype
        )  # fmt: skip

    def refresh(self, stream: Any) -> None:
        """Copy the operand into the buffer, ordered on ``stream`` (the execution stream)."""
        copy_into(self.buffer, self.source.device, stream)  # type: ignore[arg-type]


def stage(
    staged: tuple[str, str] | None, slots: Mapping[str, Slot], current: StagedOperand | None, stream: Any
) -> StagedOperand | None:
    """The :class:`StagedOperand` a plan needs (``staged``: ``MatmulProblem.staged``), reusing
    ``current`` when it fits; ``None`` when the plan reads its operands directly."""
    if staged is None:
        return None
    name, order = staged
    if current is not None and current.fits(name, order, slots[name]):
        return current
    return StagedOperand(name, order, slots[name], stream)
