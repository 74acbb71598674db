"""Execution spaces: :class:`ExecutionCUDA`, :class:`ExecutionCPU` and :func:`resolve_execution`.

Call-compatible with nvmath-python 1.0: both classes are frozen, slotted, keyword-only dataclasses
with a ``ClassVar`` ``name`` (``"cuda"`` / ``"cpu"``), and an ``execution=`` argument also accepts
the strings ``'cuda'`` / ``'cpu'`` (any case) or a dict with a ``'name'`` key, e.g.
``{"name": "cuda", "device_id": 1}``. ``None`` means the memory space of the operands.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from nvmath._internal.options import check_int, check_nonnegative_int, check_optional_positive_int

__all__ = ["EXECUTION_NAMES", "Execution", "ExecutionCPU", "ExecutionCUDA", "resolve_execution"]

logger = logging.getLogger(__name__)


MAX_THREADS = 2**31 - 1
"""The largest ``ExecutionCPU.num_threads`` (the CPU libraries take a C ``int``)."""

@dataclass(frozen=True, slots=True, kw_only=True)
class ExecutionCUDA:
    """Run on a CUDA device.

    Attributes:
        device_id: the CUDA device to run on when the operands are in host memory (they are copied
            there and back). For GPU operands the operands' device is used instead.
    """

    name: ClassVar[Literal["cuda"]] = "cuda"
    device_id: int = 0

    def __post_init__(self) -> None:
        check_nonnegative_int("ExecutionCUDA.device_id", self.device_id)


@dataclass(frozen=True, slots=True, kw_only=True)
class ExecutionCPU:
    """Run on the host CPU.

    Attributes:
        num_threads: the number of CPU threads to use (1 to ``2**31 - 1``, the CPU libraries' C
            ``int``); ``None`` lets the CPU library decide.
    """

    name: ClassVar[Literal["cpu"]] = "cpu"
    num_threads: int | None = None

    def __post_init__(self) -> None:
        check_optional_positive_int("ExecutionCPU.num_threads", self.num_threads)
        if self.num_threads is not None:  # the CPU libraries take a C int
            check_int("ExecutionCPU.num_threads", self.num_threads, maximum=MAX_THREADS)


Execution = ExecutionCUDA | ExecutionCPU

_CLASSES: dict[str, type[ExecutionCUDA | ExecutionCPU]] = {"cuda": ExecutionCUDA, "cpu": ExecutionCPU}
EXECUTION_NAMES: tuple[str, ...] = tuple(_CLASSES)
"""The accepted execution-space names."""

_ACCEPTED = "ExecutionCUDA, ExecutionCPU, 'cuda', 'cpu', a dict with a 'name' key, or None"


def _operand_gpu(operand_device: int | str | None) -> int | None:
    """Return the operands' CUDA device id, or ``None`` when they are in host memory."""
    if operand_device is None or (isinstance(operand_device, str) and operand_device.lower() == "cpu"):
        return None
    if isinstance(operand_device, bool) or not isinstance(operand_device, int) or operand_device < 0:
        raise ValueError(
            f"operand_device must be a CUDA device id (int >= 0), 'cpu' or None; got {operand_device!r}"
        )
    return operand_device


def _check_name(name: Any) -> str:
    if not isinstance(name, str) or name.lower() not in _CLASSES:
        raise ValueError(
            f"execution name must be one of {', '.join(map(repr, EXECUTION_NAMES))}; got {name!r}"
        )
    return name.lower()


def _from_mapping(value: Mapping[str, Any], default: str) -> Execution:
    """The execution a dict describes; without a ``'name'`` (or with ``None``) the operands' space."""
    name = value.get("name")
    cls = _CLASSES[_check_name(default if name is None else name)]
    kwargs = {k: v for k, v in value.items() if k != "name"}
    fields = [f.name for f in dataclasses.fields(cls)]
    unknown = sorted(str(k) for k in kwargs if k not in fields)
    if unknown:
        raise TypeError(
            f"unknown field(s) {', '.join(map(repr, unknown))} for {cls.__name__}; "
            f"the fields are {', '.join(fields)}"
        )
    return cls(**kwargs)


def resolve_execution(execution: Any, operand_device: int | str | None) -> Execution:
    """Return the execution space for a call.

    Args:
        execution: ``None`` (the operands' memory space), ``'cuda'`` / ``'cpu'`` (any case), a dict
            of the class's fields with a ``'name'`` key (without one: the operands' memory space, as
            in nvmath-python), or an :class:`ExecutionCUDA` /
            :class:`ExecutionCPU` instance.
        operand_device: where the operands live: a CUDA device id (int), or ``'cpu'`` / ``None`` for
            host memory.

    Returns:
        An :class:`ExecutionCUDA` or :class:`ExecutionCPU`. For GPU operands a CUDA execution always
        uses the operands' device (its ``device_id`` is replaced, as in nvmath-python).

    Raises:
        TypeError: ``execution`` is of another kind, or a dict has unknown fields.
        ValueError: an unknown execution name or an invalid field value.
    """
    gpu = _operand_gpu(operand_device)
    if execution is None:
        return ExecutionCPU() if gpu is None else ExecutionCUDA(device_id=gpu)
    if isinstance(execution, str):
        name = _check_name(execution)
        resolved: Execution = ExecutionCPU() if name == "cpu" else ExecutionCUDA(device_id=gpu or 0)
    elif isinstance(execution, (ExecutionCUDA, ExecutionCPU)):
        resolved = execution
    elif isinstance(execution, Mapping):
        resolved = _from_mapping(execution, "cpu" if gpu is None else "cuda")
    else:
        raise TypeError(f"execution must be {_ACCEPTED}; got {type(execution).__name__}: {execution!r}")
    if isinstance(resolved, ExecutionCUDA) and gpu is not None and resolved.device_id != gpu:
        logger.debug("execution device_id %d replaced by the operands' device %d", resolved.device_id, gpu)
        resolved = ExecutionCUDA(device_id=gpu)
    return resolved
