"""The stateful distributed FFT, :class:`FFT`, on cuFFTMp (slab distributions).

Construction is collective and checks everything once: each rank checks its own operand locally
(a GPU tensor of the runtime's device, on the NVSHMEM symmetric heap, in the in-place layout),
then *one* collective gathers every rank's facts and local verdict, so that a bad operand or a
disagreement (dtype, distribution, options, extents) raises on every rank, naming the ranks --
never one rank going on alone into a collective. :meth:`FFT.plan` makes the cuFFTMp plan (and,
with ``redistribute=True``, the reshape back to the operand's slab) and registers the object with
the runtime (``finalize`` refuses while it is alive). :meth:`FFT.execute` runs in place on the
caller's stream and returns the result: a view of the operand's buffer.

``plan()``, a first ``execute()`` in a new direction (a C2C plan is made per direction) and
``free()`` are collective: call them on every rank, in the same order.
"""

from __future__ import annotations

import contextlib
import warnings
import weakref
from typing import Any

from nvmath._errors import InvalidPlannerState, NvmathWarning
from nvmath._internal import streams
from nvmath._internal.logging import get_logger
from nvmath._internal.options import check_or_create_options
from nvmath._internal.state import FreedOnExit, Lifecycle, PlannerState, requires
from nvmath._internal.tensors import TensorAdapter, transfers, wrap
from nvmath.distributed import _runtime, _symmetric
from nvmath.distributed._agreement import compare_facts, gather_by_rank
from nvmath.distributed.distribution import Box
from nvmath.distributed.process_group import ReductionOp
from nvmath.fft._options import FFTDirection

from . import _cufftmp
from ._boxes import BoxFFTTraits, BoxPair, box_capacity_bytes, box_fft_traits, box_view
from ._checks import (
    check_operand_layout,
    fft_layout,
    global_slab_shape,
    layout_name,
    local_facts,
    resolve_direction,
)
from ._layout import View, local_operand_view, operand_view, reshape_boxes, result_view, slab_capacity_bytes
from ._options import LOGGER_NAME, FFTOptions
from ._traits import SlabFFTTraits, slab_fft_traits

__all__ = ["FFT", "InvalidFFTState"]

_WHAT = "nvmath.distributed.fft.FFT"


class InvalidFFTState(InvalidPlannerState):
    """A distributed FFT method was called in a state that does not allow it."""


def _collected_unfreed(description: str) -> None:
    warnings.warn(
        f"{description} was garbage-collected without free(): its cuFFTMp plan is NOT destroyed (that "
        "is a collective, which the garbage collector cannot make on every rank) and its symmetric "
        "workspace stays reserved. Call free() on every rank, or use `with FFT(...) as f:`.",
        NvmathWarning,
        stacklevel=2,
    )


def _local_view(adapter: TensorAdapter, layout: int | BoxPair) -> View:
    """The layout this rank's operand must have, knowable before any communication."""
    if isinstance(layout, BoxPair):
        return box_view(tuple(u - lo for lo, u in zip(*layout.input, strict=True)), adapter.dtype)
    return local_operand_view(tuple(adapter.shape), adapter.dtype)


def _local_problem(
    adapter: TensorAdapter, nvshmem: Any, device: int, layout: int | BoxPair
) -> tuple[BaseException | None, int | None]:
    """``(error, symmetric bytes from the operand)`` of this rank's operand (nothing collective)."""
    try:
        view = _local_view(adapter, layout)
        check_operand_layout(adapter.package, adapter.device_id, tuple(adapter.shape),
                             tuple(adapter.strides), adapter.dtype, view, device)  # fmt: skip
        if not nvshmem.ptr(adapter.data_ptr, nvshmem.my_pe()):
            raise ValueError(
                f"the operand (at {adapter.data_ptr:#x}) is not on the NVSHMEM symmetric heap: allocate it "
                "with nvmath.distributed.fft.allocate_operand(...) or "
                "nvmath.distributed.allocate_symmetric_memory(...)"
            )
        return None, _symmetric.bytes_from(adapter.data_ptr)
    except Exception as exc:  # noqa: BLE001 - reported to every rank, re-raised on this one
        return exc, None


def _raise_problems(everyone: dict[int, dict[str, Any]], mine: BaseException | None) -> None:
    """Raise on every rank if any rank's operand had a problem: its own error on that rank, a
    ValueError naming the ranks and their problems on the others."""
    problems = {r: facts["problem"] for r, facts in everyone.items() if facts["problem"]}
    if not problems:
        return
    if mine is not None:
        raise mine
    listed = "; ".join(f"rank {r}: {p}" for r, p in sorted(problems.items()))
    raise ValueError(f"{_WHAT}: the operand of rank(s) {sorted(problems)} cannot be transformed ({listed})")


def _needed_bytes(everyone: dict[int, dict[str, Any]], traits: SlabFFTTraits | BoxFFTTraits,
                  nranks: int) -> int:  # fmt: skip
    """The symmetric bytes every rank's operand buffer must hold for this transform."""
    if isinstance(traits, BoxFFTTraits):
        pairs = {r: facts["boxes"] for r, facts in everyone.items()}
        return box_capacity_bytes(pairs, traits.operand_dtype, traits.result_dtype)
    needed = slab_capacity_bytes(traits.global_shape, traits.operand_dtype, traits.partition, nranks,
                                 fft_type=traits.fft_type, last_axis_parity="even")  # fmt: skip
    if traits.fft_type == "C2R":  # the odd parity can need more
        needed = max(needed, slab_capacity_bytes(traits.global_shape, traits.operand_dtype, traits.partition,
                                                 nranks, fft_type="C2R", last_axis_parity="odd"))  # fmt: skip
    return needed


def _check_capacity(everyone: dict[int, dict[str, Any]], traits: SlabFFTTraits | BoxFFTTraits,
                    nranks: int) -> None:  # fmt: skip
    needed = _needed_bytes(everyone, traits, nranks)
    short = {r: f["bytes"] for r, f in everyone.items() if f["bytes"] is not None and f["bytes"] < needed}
    if short:
        raise ValueError(
            f"{_WHAT}: the symmetric buffers of rank(s) {sorted(short)} hold "
            f"{sorted(set(short.values()))} bytes "
            f"from the operand, but this in-place transform needs {needed} on every rank: allocate "
            "operands with nvmath.distributed.fft.allocate_operand(...)"
        )


def _facts(adapter: TensorAdapter, layout: int | BoxPair, agreed: dict[str, Any]) -> dict[str, Any]:
    """What this rank contributes to the one agreement collective (besides its local verdict)."""
    if isinstance(layout, BoxPair):
        return {"agreed": {**agreed, "ndim": adapter.ndim}, "boxes": layout}
    return local_facts(tuple(adapter.shape), layout, agreed)


def _traits(everyone: dict[int, dict[str, Any]], layout: int | BoxPair, dtype: str, options: FFTOptions,
            group: Any) -> SlabFFTTraits | BoxFFTTraits:  # fmt: skip
    """This rank's plan facts from every rank's contribution (the same verdict on every rank)."""
    if isinstance(layout, BoxPair):
        compare_facts({r: facts["agreed"] for r, facts in everyone.items()}, _WHAT, group.rank)
        pairs = {r: facts["boxes"] for r, facts in everyone.items()}
        return box_fft_traits(pairs, dtype, group.rank, fft_type=options.fft_type,
                              last_axis_parity=options.last_axis_parity, what=_WHAT)  # fmt: skip
    global_shape = global_slab_shape(everyone, layout, _WHAT, group.rank)
    return slab_fft_traits(
        global_shape, dtype, layout, group.rank, group.nranks, fft_type=options.fft_type,
        redistribute=options.redistribute, last_axis_parity=options.last_axis_parity,
    )  # fmt: skip


def _views(traits: SlabFFTTraits | BoxFFTTraits) -> tuple[View, View]:
    """``(operand view, result view)`` of this rank."""
    if isinstance(traits, BoxFFTTraits):
        return box_view(traits.local_shape, traits.operand_dtype), box_view(
            traits.local_result_shape, traits.result_dtype)  # fmt: skip
    return operand_view(traits), result_view(traits)


_DTENSOR_CLASS: list[type] = []
"""The FFT of a DTensor (``DTensorFFT``), registered by :mod:`._dtensor` (imported with the package):
``FFT(dtensor)`` makes one. A registration, not an import, so that this module does not import its
own subclass's module."""


def register_dtensor_class(cls: type) -> None:
    """Make ``FFT(operand)`` of a torch DTensor an instance of ``cls`` (a subclass of :class:`FFT`)."""
    _DTENSOR_CLASS[:] = [cls]


class FFT(FreedOnExit):
    """A distributed 2-D or 3-D FFT on cuFFTMp, planned once and executed many times (collective).

    Args:
        operand: this rank's part of the global array: a cupy array or torch tensor on the NVSHMEM
            symmetric heap (see :func:`allocate_operand`), in C order (real R2C slab operands padded,
            box operands dense); or a torch DTensor sharded on dimension 0 or 1 (see
            :class:`~nvmath.distributed.fft._dtensor.DTensorFFT`: ``distribution`` may be left out,
            :meth:`execute` returns a DTensor).
        distribution: ``Slab.X`` or ``Slab.Y`` (the same on every rank), or this rank's pair
            ``(input Box, output Box)`` (:class:`~nvmath.distributed.distribution.Box` es or
            ``(lower, upper)`` pairs): the boxes of all ranks must tile the operand's and the
            result's global arrays (checked on every rank, naming the rank at fault).
        options: :class:`FFTOptions` or a dict of its fields.
        stream: the stream of the first operations (``None``: the package's current stream).

    Raises:
        RuntimeError: ``nvmath.distributed`` is not initialized, or without the NVSHMEM backend.
        ImportError: cuFFTMp is not installed.
        RankDisagreementError: the ranks disagree on dtype, distribution, options or extents.
        ValueError, TypeError: an operand cuFFTMp cannot transform, or boxes that do not tile the
            global arrays (on every rank, naming the rank).
    """

    def __new__(cls, operand: Any = None, /, *args: Any, **kwargs: Any) -> Any:
        from nvmath.distributed.distribution._dtensor import is_dtensor

        if cls is FFT and _DTENSOR_CLASS and is_dtensor(operand):  # a torch DTensor: staged (_dtensor.py)
            cls = _DTENSOR_CLASS[0]
        return super().__new__(cls)

    def __init__(self, operand: Any, /, *, distribution: Any, options: Any = None, stream: Any = None):
        options = check_or_create_options(FFTOptions, options, "FFT options")
        self._logger = get_logger(LOGGER_NAME, options.logger)
        context = _runtime.context()
        self._nvshmem = _runtime.engine("nvshmem")
        self._lib = _cufftmp.bindings()
        adapter = wrap(operand, "operand")
        layout = fft_layout(distribution, adapter.ndim)
        group = context.process_group
        mine, nbytes = _local_problem(adapter, self._nvshmem, context.device_id, layout)
        problem = None if mine is None else f"{type(mine).__name__}: {mine}"
        agreed = {
            "dtype": adapter.dtype,
            "distribution": layout_name(layout),
            "fft_type": options.fft_type,
            "redistribute": options.redistribute,
            "last_axis_parity": options.last_axis_parity,
        }
        facts = {**_facts(adapter, layout, agreed), "problem": problem, "bytes": nbytes}
        everyone = gather_by_rank(group, facts)
        _raise_problems(everyone, mine)
        traits = _traits(everyone, layout, adapter.dtype, options, group)
        _check_capacity(everyone, traits, group.nranks)
        self._options, self._traits, self._group, self._device = options, traits, group, context.device_id
        self._layout, self._package = layout, adapter.package
        self._operand_view, self._result_view = _views(traits)
        self._operand: TensorAdapter | None = adapter
        self._result: Any = None
        self._stream = streams.get_stream(stream, device_id=context.device_id, package=adapter.package)
        self._handles: dict[FFTDirection, _cufftmp.MpHandle] = {}
        self._reshape: _cufftmp.MpReshape | None = None
        self._collected: weakref.finalize | None = None  # warns if planned and collected unfreed
        self._blocking = options.blocking is True
        self._lifecycle = Lifecycle("FFT", InvalidFFTState, reset_method="reset_operand",
                                    release_method="release_operand")  # fmt: skip
        self._bind(adapter)
        self._logger.info(
            "distributed FFT %s %s of %s on %d ranks (rank %d: local %s)",
            traits.fft_type,
            layout_name(layout),
            traits.global_shape,
            group.nranks,
            group.rank,
            traits.local_shape,
        )

    # -------------------------------------------------------------------------------- properties
    @property
    def global_shape(self) -> tuple[int, ...]:
        """The operand's global shape."""
        return self._traits.global_shape

    @property
    def fft_type(self) -> str:
        """``"C2C"``, ``"R2C"`` or ``"C2R"``."""
        return self._traits.fft_type

    @property
    def result_distribution(self) -> str | Box:
        """Where the result lies: ``"Slab.X"`` or ``"Slab.Y"``, or this rank's output :class:`Box`."""
        if isinstance(self._traits, BoxFFTTraits):
            return Box(*self._traits.boxes.output)
        return "Slab." + "XY"[self._traits.result_partition]

    @property
    def workspace_bytes(self) -> int:
        """Symmetric bytes held by the plans (cuFFTMp workspaces, the redistribution's scratch)."""
        extra = self._reshape.workspace_bytes if self._reshape is not None else 0
        return sum(h.workspace_bytes for h in self._handles.values()) + extra

    @property
    def is_planned(self) -> bool:
        """Whether :meth:`plan` succeeded and :meth:`free` was not called."""
        return self._lifecycle.state is PlannerState.PLANNED

    # ------------------------------------------------------------------------------------ planning
    def _agree_max(self, n: int) -> int:
        import numpy as np

        value = np.array([n], dtype=np.int64)
        self._group.allreduce_buffer(value, op=ReductionOp.MAX)
        return int(value[0])

    def _default_direction(self) -> FFTDirection:
        return FFTDirection.INVERSE if self._traits.fft_type == "C2R" else FFTDirection.FORWARD

    @requires(PlannerState.CREATED, PlannerState.PLANNED)
    def plan(self, *, stream: Any = None) -> None:
        """Make the cuFFTMp plan (and the redistribution) on every rank (collective)."""
        if self._handles:
            return
        traits, rank, nranks = self._traits, self._group.rank, self._group.nranks
        with contextlib.ExitStack() as undo:
            direction = self._default_direction()
            planning = self._stream if stream is None else streams.get_stream(
                stream, device_id=self._device, package=self._package)  # fmt: skip
            handle = _cufftmp.MpHandle(self._lib, traits, int(direction), planning.ptr)
            undo.callback(handle.close)
            reshape = None
            if isinstance(traits, SlabFFTTraits) and traits.result_partition == traits.partition:
                capacity = slab_capacity_bytes(traits.global_shape, traits.operand_dtype, traits.partition,
                                               nranks, fft_type=traits.fft_type,
                                               last_axis_parity=self._options.last_axis_parity)  # fmt: skip
                reshape = _cufftmp.MpReshape(self._lib, self._nvshmem, reshape_boxes(traits, rank, nranks),
                                             capacity, self._agree_max)  # fmt: skip
            undo.pop_all()
        self._handles[direction], self._reshape = handle, reshape
        _runtime.register_plan(self)
        self._collected = weakref.finalize(self, _collected_unfreed, repr(self))
        self._lifecycle.mark_planned()
        self._logger.info("planned (workspace %d bytes)", self.workspace_bytes)

    # ------------------------------------------------------------------------------------ operands
    def _bind(self, adapter: TensorAdapter) -> None:
        self._operand = adapter
        v = self._result_view
        self._result = _symmetric.view_at(adapter.data_ptr, v.shape, v.strides, v.dtype, self._device,
                                          adapter.tensor, self._package)  # fmt: skip
        self._lifecycle.mark_operands_reset()

    @requires(PlannerState.CREATED, PlannerState.PLANNED)
    def reset_operand(self, operand: Any = None, *, distribution: Any = None, stream: Any = None) -> None:
        """Use a new operand of the same layout (local checks only; not collective). ``None``
        releases the operand."""
        if operand is None:
            self.release_operand()
            return
        adapter = wrap(operand, "operand")
        if distribution is not None and fft_layout(distribution, adapter.ndim) != self._layout:
            planned = self._layout if isinstance(self._layout, BoxPair) else layout_name(self._layout)
            raise ValueError(f"distribution {distribution!r}: this FFT was planned for {planned}")
        if adapter.package != self._package:
            raise TypeError(
                f"the new operand is a {adapter.package} tensor; the FFT was planned for {self._package}"
            )
        error, _ = _local_problem(adapter, self._nvshmem, self._device, self._layout)
        if error is not None:
            raise error
        check_operand_layout(adapter.package, adapter.device_id, tuple(adapter.shape), tuple(adapter.strides),
                             adapter.dtype, self._operand_view, self._device)  # fmt: skip
        if stream is not None:
            self._stream = streams.get_stream(stream, device_id=self._device, package=self._package)
        self._bind(adapter)

    def reset_operand_unchecked(self, operand: Any, *, distribution: Any = None, stream: Any = None) -> None:
        """:meth:`reset_operand` without the checks (the caller guarantees the layout)."""
        if stream is not None:
            self._stream = streams.get_stream(stream, device_id=self._device, package=self._package)
        self._bind(wrap(operand, "operand"))

    def release_operand(self) -> None:
        """Drop the references to the operand and the result (until :meth:`reset_operand`)."""
        self._operand = self._result = None
        self._lifecycle.mark_operands_released()

    # ----------------------------------------------------------------------------------- execution
    def _handle(self, direction: FFTDirection, stream_ptr: int) -> _cufftmp.MpHandle:
        handle = self._handles.get(direction)
        if handle is None:  # the other direction of a C2C: one more (collective) cuFFTMp plan
            handle = _cufftmp.MpHandle(self._lib, self._traits, int(direction), stream_ptr)
            self._handles[direction] = handle
        return handle

    @requires(PlannerState.PLANNED, operands=True)
    def execute(self, *, direction: Any = None, stream: Any = None, release_workspace: bool = False,
                sync_symmetric_memory: bool = True) -> Any:  # fmt: skip
        """Transform in place and return the result (a view of the operand's buffer, in
        :attr:`result_distribution`).

        Args:
            direction: for C2C, ``"forward"`` (default) or ``"inverse"``; R2C runs forward, C2R inverse.
            stream: the stream to run on (``None``: the one of construction / the last reset).
            release_workspace: accepted for compatibility; cuFFTMp keeps its symmetric workspace
                with the plan (freed by :meth:`free`).
            sync_symmetric_memory: first synchronize every rank's symmetric memory on the stream
                (``nvshmemx_sync_all_on_stream``), so that the other ranks' writes are complete.
        """
        direction = resolve_direction(direction, self._traits.fft_type)
        stream_handle = self._stream if stream is None else streams.get_stream(
            stream, device_id=self._device, package=self._package)  # fmt: skip
        handle = self._handles.get(direction) or self._handle(direction, stream_handle.ptr)
        address = self._operand.data_ptr  # type: ignore[union-attr]
        if sync_symmetric_memory:
            self._nvshmem.sync_all_on_stream(stream_handle.ptr)
        handle.execute(address, stream_handle.ptr)
        if self._reshape is not None:
            self._reshape.execute(address, self._result_view.nbytes, stream_handle, transfers.memcpy)
        if self._blocking:
            streams.synchronize(stream_handle)
        return self._result

    # ----------------------------------------------------------------------------------- lifecycle
    def run_cached(self, operand: Any, direction: Any, stream: Any, sync_symmetric_memory: bool) -> Any:
        """One stateless call on this cached, planned FFT (see ``_stateless.py``)."""
        self.reset_operand(operand)
        # None means the package's current stream now, not the one current when the plan was cached
        self._stream = streams.get_stream(stream, device_id=self._device, package=self._package)
        try:
            return self.execute(direction=direction, sync_symmetric_memory=sync_symmetric_memory)
        finally:
            self.release_operand()

    def free(self) -> None:
        """Destroy the cuFFTMp plans and free the redistribution's symmetric memory (collective;
        idempotent)."""
        if self._lifecycle.state is PlannerState.FREED:
            return
        handles, self._handles = list(self._handles.values()), {}
        reshape, self._reshape = self._reshape, None
        try:
            for handle in handles:
                handle.close()
            if reshape is not None:
                reshape.close()
        finally:
            self._operand = self._result = None
            if self._collected is not None:
                self._collected.detach()
            _runtime.unregister_plan(self)
            self._lifecycle.mark_freed()

    def __repr__(self) -> str:
        t, state = self._traits, self._lifecycle.state.name
        return (
            f"<nvmath.distributed.fft.FFT {t.fft_type} {t.global_shape} {layout_name(self._layout)} -> "
            f"{self.result_distribution}, {state}>"
        )
