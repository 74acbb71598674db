"""Moving a distributed array from one distribution to another on cuFFTMp's reshape:
:class:`Redistribute` (plan once, execute many times) and :func:`redistribute` (one call).

The operand is this rank's part of the global array, on the NVSHMEM symmetric heap; the input and
output distributions are this rank's :class:`Box` (or ``(lower, upper)`` pair), or a
:class:`Slab` given alike on every rank. Construction checks everything in *one* collective, so a
bad operand, a disagreement or boxes that do not tile the global array raise on every rank,
naming the ranks. :meth:`Redistribute.plan` makes the reshape (``cufftMpCreateReshape`` /
``cufftMpMakeReshape``) and its symmetric workspace; :meth:`Redistribute.execute` allocates the
result on the symmetric heap (the caller owns it: free it with
:func:`nvmath.distributed.free_symmetric_memory`) and runs ``cufftMpExecReshapeAsync`` on the
stream. Construction, ``plan``, ``execute`` and ``free`` are collective.
"""

from __future__ import annotations

import dataclasses
import weakref
from typing import Any, Literal

import numpy as np

from nvmath._errors import InvalidPlannerState
from nvmath._internal import streams
from nvmath._internal.logging import get_logger
from nvmath._internal.options import MutableOptions, check_blocking, check_logger, check_or_create_options
from nvmath._internal.state import FreedOnExit, Lifecycle, PlannerState, requires
from nvmath._internal.tensors import TensorAdapter, wrap
from nvmath.distributed import _runtime, _symmetric
from nvmath.distributed._agreement import compare_facts, gather_by_rank
from nvmath.distributed.process_group import ReductionOp

from ._distribution import Box
from ._reshape_layout import ReshapePlan, c_strides, local_facts, parse_distribution, resolve_reshape

__all__ = ["InvalidRedistributeState", "Redistribute", "RedistributeOptions", "redistribute"]

_WHAT = "nvmath.distributed.distribution.Redistribute"
LOGGER_NAME = "nvmath.distributed.distribution"


@dataclasses.dataclass(unsafe_hash=True)
class RedistributeOptions(MutableOptions):
    """Options of :class:`Redistribute` and :func:`redistribute`.

    Attributes:
        logger: a ``logging.Logger``; ``None`` selects the ``nvmath.distributed.distribution`` logger.
        blocking: ``True`` (wait for the result) or ``"auto"`` (return after enqueueing).
    """

    logger: Any = None
    blocking: Literal[True, "auto"] = "auto"

    def _check_field(self, name: str, value: Any) -> Any:
        if name == "logger":
            check_logger(value)
        elif name == "blocking":
            check_blocking(value)
        return value


class InvalidRedistributeState(InvalidPlannerState):
    """A :class:`Redistribute` method was called in a state that does not allow it."""


def _cufftmp() -> Any:
    # imported on first use: the distributions import neither the FFT package nor any engine
    from nvmath.distributed.fft import _cufftmp

    return _cufftmp


def _collected_unfreed(description: str) -> None:
    import warnings

    from nvmath._errors import NvmathWarning

    warnings.warn(
        f"{description} was garbage-collected without free(): its cuFFTMp reshape is NOT destroyed (a "
        "collective the garbage collector cannot make on every rank). Call free() on every rank, or use "
        "`with Redistribute(...) as r:`.",
        NvmathWarning,
        stacklevel=2,
    )


def _local_problem(adapter: TensorAdapter, nvshmem: Any, device: int) -> str | None:
    """What is wrong with this rank's operand, seen locally (nothing collective), or ``None``."""
    if adapter.device_id == "cpu" or adapter.package == "numpy":
        return (
            f"TypeError: the operand is a {adapter.package} array in host memory; Redistribute moves GPU "
            "tensors on the NVSHMEM symmetric heap (nvmath.distributed.allocate_symmetric_memory)"
        )
    if adapter.device_id != device:
        return f"ValueError: the operand is on device {adapter.device_id}, the runtime on device {device}"
    if any(s < 0 for s in adapter.strides):
        return f"ValueError: the operand has negative strides {tuple(adapter.strides)}"
    if not nvshmem.ptr(adapter.data_ptr, nvshmem.my_pe()):
        return (
            f"ValueError: the operand (at {adapter.data_ptr:#x}) is not on the NVSHMEM symmetric heap: "
            "allocate it with nvmath.distributed.allocate_symmetric_memory(...)"
        )
    return None


def _raise_problems(everyone: dict[int, dict[str, Any]], rank: int) -> None:
    problems = {r: f["problem"] for r, f in everyone.items() if f["problem"]}
    if not problems:
        return
    listed = "; ".join(f"rank {r}: {p}" for r, p in sorted(problems.items()))
    error = TypeError if all(p.startswith("TypeError") for p in problems.values()) else ValueError
    raise error(f"{_WHAT}: the operand of rank(s) {sorted(problems)} cannot be redistributed (seen on "
                f"rank {rank}): {listed}")  # fmt: skip


class Redistribute(FreedOnExit):
    """Redistribute a distributed array with cuFFTMp's reshape, planned once (collective).

    Args:
        operand: this rank's part of the global array: a cupy array or torch tensor on the NVSHMEM
            symmetric heap, with 4-, 8- or 16-byte elements (any strides >= 0). Every rank's operand
            must lie at the same place of the same symmetric allocation (made by the same
            :func:`~nvmath.distributed.allocate_symmetric_memory` call on every rank, viewed alike):
            NVSHMEM finds the other ranks' data by this rank's addresses.
        input_distribution: the operand's distribution: this rank's :class:`Box` (or ``(lower,
            upper)`` pair), or a :class:`Slab` (the same on every rank).
        output_distribution: the result's, likewise.
        options: :class:`RedistributeOptions` or a dict of its fields.
        stream: the stream of the first operations (``None``: the package's current stream).

    Raises:
        RuntimeError: ``nvmath.distributed`` is not initialized, or without the NVSHMEM backend.
        ImportError: cuFFTMp is not installed.
        RankDisagreementError: the ranks disagree on dtype, dimensionality or distribution kinds.
        ValueError, TypeError: an operand that cannot be moved, or boxes that do not tile the
            global array (on every rank, naming the rank).
    """

    def __init__(self, operand: Any, /, input_distribution: Any, output_distribution: Any, *,
                 options: Any = None, stream: Any = None):  # fmt: skip
        options = check_or_create_options(RedistributeOptions, options, "Redistribute options")
        self._logger = get_logger(LOGGER_NAME, options.logger)
        context = _runtime.context()
        self._nvshmem = _runtime.engine("nvshmem")
        self._lib = _cufftmp().bindings()
        adapter = wrap(operand, "operand")
        source = parse_distribution(input_distribution, adapter.ndim, "input_distribution")
        target = parse_distribution(output_distribution, adapter.ndim, "output_distribution")
        group = context.process_group
        problem = _local_problem(adapter, self._nvshmem, context.device_id)
        facts = local_facts(tuple(adapter.shape), adapter.dtype, source, target, problem)
        everyone = gather_by_rank(group, facts)
        _raise_problems(everyone, group.rank)
        compare_facts({r: f["agreed"] for r, f in everyone.items()}, _WHAT, group.rank)
        self._plan: ReshapePlan = resolve_reshape(everyone, source, target, adapter.dtype, group.rank, _WHAT)
        self._group, self._device, self._package = group, context.device_id, adapter.package
        self._head = (tuple(adapter.shape), tuple(adapter.strides), adapter.dtype)
        self._operand: TensorAdapter | None = adapter
        self._stream = streams.get_stream(stream, device_id=context.device_id, package=adapter.package)
        self._reshape: Any = None
        self._collected: weakref.finalize | None = None
        self._blocking = options.blocking is True
        self._lifecycle = Lifecycle("Redistribute", InvalidRedistributeState, reset_method="reset_operand",
                                    release_method="release_operand")  # fmt: skip
        self._logger.info("redistribute %s %s on %d ranks: rank %d %s -> %s", adapter.dtype,
                          self._plan.global_shape, group.nranks, group.rank, self._plan.input_box,
                          self._plan.output_box)  # fmt: skip

    # -------------------------------------------------------------------------------- properties
    @property
    def global_shape(self) -> tuple[int, ...]:
        """The global shape of the array."""
        return self._plan.global_shape

    @property
    def input_box(self) -> Box:
        """This rank's part of the operand."""
        return Box(*self._plan.input_box)

    @property
    def output_box(self) -> Box:
        """This rank's part of the result."""
        return Box(*self._plan.output_box)

    @property
    def workspace_bytes(self) -> int:
        """Symmetric bytes held by the reshape's workspace (0 before :meth:`plan`)."""
        return 0 if self._reshape is None else self._reshape.workspace_bytes

    # ------------------------------------------------------------------------------------ planning
    def _agree_max(self, n: int) -> int:
        value = np.array([n], dtype=np.int64)
        self._group.allreduce_buffer(value, op=ReductionOp.MAX)
        return int(value[0])

    @requires(PlannerState.CREATED, PlannerState.PLANNED)
    def plan(self, *, stream: Any = None) -> None:
        """Make the cuFFTMp reshape and its symmetric workspace on every rank (collective)."""
        if self._reshape is not None:
            return
        cufftmp = _cufftmp()
        from nvmath.distributed.fft._layout import ReshapeBoxes

        plan, (_, strides, dtype) = self._plan, self._head
        boxes = ReshapeBoxes(_itemsize(dtype), *plan.input_box, strides, *plan.output_box,
                             c_strides(plan.output_shape))  # fmt: skip
        self._reshape = cufftmp.MpReshape(self._lib, self._nvshmem, boxes, 0, self._agree_max)
        _runtime.register_plan(self)
        self._collected = weakref.finalize(self, _collected_unfreed, repr(self))
        self._lifecycle.mark_planned()
        self._logger.info("planned (workspace %d bytes)", self.workspace_bytes)

    # ------------------------------------------------------------------------------------ operands
    @requires(PlannerState.CREATED, PlannerState.PLANNED)
    def reset_operand(self, operand: Any = None, *, stream: Any = None) -> None:
        """Use a new operand of the same shape, strides and dtype (local checks only; not
        collective). ``None`` releases the operand."""
        if operand is None:
            self.release_operand()
            return
        adapter = wrap(operand, "operand")
        if adapter.package != self._package:
            raise TypeError(
                f"the new operand is a {adapter.package} tensor; this was planned for {self._package}"
            )
        head = (tuple(adapter.shape), tuple(adapter.strides), adapter.dtype)
        if head != self._head:
            raise ValueError(
                f"the new operand (shape, strides, dtype) {head} differs from the planned {self._head}"
            )
        problem = _local_problem(adapter, self._nvshmem, self._device)
        if problem is not None:
            kind, _, message = problem.partition(": ")
            raise (TypeError if kind == "TypeError" else ValueError)(message)
        self.reset_operand_unchecked(adapter, stream=stream)

    def reset_operand_unchecked(self, operand: Any, *, stream: Any = None) -> None:
        """:meth:`reset_operand` without the checks (the caller guarantees the layout)."""
        if stream is not None:
            self._stream = streams.get_stream(stream, device_id=self._device, package=self._package)
        self._operand = wrap(operand, "operand")
        self._lifecycle.mark_operands_reset()

    def release_operand(self) -> None:
        """Drop the reference to the operand (until :meth:`reset_operand`)."""
        self._operand = None
        self._lifecycle.mark_operands_released()

    # ----------------------------------------------------------------------------------- execution
    def _allocate_result(self) -> Any:
        """The result on the symmetric heap: the same size on every rank (collective)."""
        itemsize = _itemsize(self._head[2])
        flat = _symmetric.allocate_symmetric_memory(
            (self._plan.result_bytes // itemsize,), self._package, dtype=_package_dtype(self._operand),
            skip_symmetric_check=True, logger=self._logger,
        )  # fmt: skip
        address = wrap(flat, "result").data_ptr
        shape = self._plan.output_shape
        return _symmetric.view_at(address, shape, c_strides(shape), self._head[2], self._device, flat,
                                  self._package)  # fmt: skip

    @requires(PlannerState.PLANNED, operands=True)
    def execute(self, *, stream: Any = None, release_workspace: bool = False,
                sync_symmetric_memory: bool = True) -> Any:  # fmt: skip
        """Redistribute the operand and return the result: a new tensor on the symmetric heap, of
        this rank's output box (collective; free it with
        :func:`nvmath.distributed.free_symmetric_memory`).

        Args:
            stream: the stream to run on (``None``: the one of construction / the last reset).
            release_workspace: accepted for compatibility; the symmetric workspace stays with the
                plan (freed by :meth:`free`).
            sync_symmetric_memory: first synchronize every rank's symmetric memory on the stream
                (``nvshmemx_sync_all_on_stream``), so that the other ranks' writes are complete.
        """
        stream_handle = self._stream if stream is None else streams.get_stream(
            stream, device_id=self._device, package=self._package)  # fmt: skip
        result = self._allocate_result()
        if sync_symmetric_memory:
            self._nvshmem.sync_all_on_stream(stream_handle.ptr)
        self._reshape.run(wrap(result, "result").data_ptr, self._operand.data_ptr, stream_handle.ptr)
        # no rank may reuse its operand or read the result before every rank's transfers are done
        self._nvshmem.sync_all_on_stream(stream_handle.ptr)
        if self._blocking:
            streams.synchronize(stream_handle)
        return result

    # ----------------------------------------------------------------------------------- lifecycle
    def free(self) -> None:
        """Destroy the reshape and free its symmetric workspace (collective; idempotent). Results
        already returned stay valid (the caller frees them)."""
        if self._lifecycle.state is PlannerState.FREED:
            return
        reshape, self._reshape = self._reshape, None
        try:
            if reshape is not None:
                reshape.close()
        finally:
            self._operand = None
            if self._collected is not None:
                self._collected.detach()
            _runtime.unregister_plan(self)
            self._lifecycle.mark_freed()

    def __repr__(self) -> str:
        p = self._plan
        return (f"<nvmath.distributed.distribution.Redistribute {p.global_shape} {p.input_box} -> "
                f"{p.output_box}, {self._lifecycle.state.name}>")  # fmt: skip


def _itemsize(dtype: str) -> int:
    from nvmath._internal import dtypes

    return dtypes.itemsize(dtype)


def _package_dtype(adapter: Any) -> Any:
    """The operand's dtype as its package names it (what ``allocate_symmetric_memory`` takes)."""
    return adapter.tensor.dtype


def redistribute(
    operand: Any, /, input_distribution: Any, output_distribution: Any, *, sync_symmetric_memory: bool = True,
    options: Any = None, stream: Any = None,
) -> Any:  # fmt: skip
    """Redistribute ``operand`` once (collective): plan, execute and free a :class:`Redistribute`.

    Args:
        operand, input_distribution, output_distribution, options, stream: as :class:`Redistribute`.
        sync_symmetric_memory: as :meth:`Redistribute.execute`.

    Returns:
        This rank's part of the redistributed array: a new tensor on the symmetric heap (free it
        with :func:`nvmath.distributed.free_symmetric_memory`).
    """
    with Redistribute(operand, input_distribution, output_distribution, options=options, stream=stream) as r:
        r.plan()
        return r.execute(sync_symmetric_memory=sync_symmetric_memory)
