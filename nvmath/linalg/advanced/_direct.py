"""Address-only runs of a planned :class:`~._planner.Matmul`: :class:`AddressRun`.

A caller that already knows that its operands match the plan (same shapes, strides, dtypes, package,
device and pointer alignment: a cache key that vouches for all of them) can run the plan on bare
device addresses, with no adapter, no re-validation and no operand kept by the planner. The caller
also gives the result's address (a tensor it allocated in the plan's result layout), so a framework
can allocate the result in the shape its user sees. Aux outputs are still allocated by the planner.

What can run this way: a plan on GPU operands without ``c`` (so out of place), not blocking, without a
staged operand copy, quantization scales or epilog scales; its epilog inputs (a bias, say) are given as
addresses, and ``alpha`` stays what it was when the run was made.
"""

from __future__ import annotations

import sys
from typing import Any, Protocol

from nvmath._internal import streams
from nvmath._internal.streams import StreamHandle
from nvmath.bindings._unchecked import cublasLt as lt_unchecked
from nvmath.linalg.advanced import _handles
from nvmath.linalg.advanced._results import deliver

__all__ = ["AddressRun", "address_run_possible"]


class Runnable(Protocol):
    """What :class:`AddressRun` reads of a :class:`~._planner.Matmul` (nothing else; it writes nothing
    but the descriptor pointers of the epilog inputs and aux outputs, through the plan's attributes)."""

    _spec: Any
    _plan: Any
    _fast_deliver: bool
    _scales: dict
    _staged: Any
    _swap: bool
    _c_is_d: bool
    _static: tuple
    _algo: tuple[int, int]
    _aux: Any  # _aux.AuxOutputs or None
    _result: Any
    _done_always: bool
    _lt_handle: int | None
    _device_id: int
    _raw_stream: Any
    _last_stream: StreamHandle | None

    def _get_stream(self, stream: Any) -> StreamHandle: ...

    def _workspace_ptr(self, nbytes: int, handle: StreamHandle) -> int: ...


def address_run_possible(mm: Runnable, inputs: tuple[str, ...] = ()) -> bool:
    """Whether ``mm``'s installed plan can run on addresses with epilog inputs ``inputs`` (exactly the
    plan's)."""
    plan = mm._plan
    return (
        plan is not None and mm._fast_deliver and not mm._spec.has_c and mm._staged is None and not mm._scales
        and not plan.epilog_scales and tuple(sorted(plan.epilog_slots)) == tuple(sorted(inputs))
    )  # fmt: skip


class AddressRun:
    """``mm``'s product on device addresses: ``run(a_ptr, b_ptr, d_ptr, input_ptrs)``.

    Args:
        mm: a planned :class:`~._planner.Matmul` (see :func:`address_run_possible`). The caller must not
            use it otherwise while it runs this way (it may autotune or re-plan it in between: the run
            follows the installed plan and algorithm).
        inputs: the names of the plan's epilog inputs, in the order their addresses are given.

    Raises:
        ValueError: the plan cannot run on addresses (host operands, ``c``, blocking, scales, staged
            copies, other epilog inputs).
    """

    __slots__ = ("_device", "_inputs", "_mm", "_plan", "_pointers", "_static", "_swap", "result_layout")

    def __init__(self, mm: Runnable, inputs: tuple[str, ...] = ()):
        if not address_run_possible(mm, inputs):
            raise ValueError(
                "this Matmul cannot run on addresses (it needs GPU operands, no c, no blocking, no staged "
                f"copy, no scales, and exactly the epilog inputs {inputs})"
            )
        self._mm, self._inputs = mm, inputs
        # torch's current device (one C call): when it is the operands' device, torch keeps that device's
        # primary context current, and the launch needs no context switch (nor the driver query that
        # checks for one)
        torch_c = getattr(sys.modules.get("torch"), "_C", None) if mm._raw_stream is not None else None
        self._device = getattr(torch_c, "_cuda_getDevice", None)
        self.result_layout: tuple = ()
        """``(shape, strides, dtype)`` of the result the run writes at ``d_ptr`` (as the plan computes it)."""
        self._bind()

    def _bind(self) -> None:
        mm = self._mm
        plan = self._plan = mm._plan
        layout = (mm._result.shape, mm._result.strides, mm._result.dtype)
        if not address_run_possible(mm, self._inputs) or self.result_layout not in ((), layout):
            raise ValueError("the re-planned Matmul can no longer run on addresses (with that result layout)")
        self.result_layout = layout
        self._pointers = tuple(tuple(plan.input_pointers.get(n, ())) for n in self._inputs)
        desc, alpha, la, lb, beta, lc, ld = mm._static
        self._static = (desc, alpha, la, lb, beta, lc, ld, mm._c_is_d)
        self._swap = mm._swap

    def __call__(self, a_ptr: int, b_ptr: int, d_ptr: int, input_ptrs: tuple[int, ...] = ()) -> dict | None:
        """Enqueue the product on the current stream of the operands' package (torch: its current
        stream) into the result at ``d_ptr``; return the aux outputs (``None`` without).

        The operands must match the plan (see the module notes); ``d_ptr`` is a result of the plan's
        result shape, strides and dtype, 256-byte aligned.
        """
        mm = self._mm
        if mm._plan is not self._plan:
            self._bind()
        raw = mm._raw_stream
        handle = mm._last_stream
        if raw is None or handle is None or handle.ptr != raw(mm._device_id):
            handle = mm._get_stream(None)
        for attrs, ptr in zip(self._pointers, input_ptrs):
            for attr in attrs:
                attr.set(ptr)
        aux = mm._aux
        made = aux.new(handle) if aux is not None else None  # (also points the descriptor at them)
        algo_ptr, ws_size = mm._algo
        ws_ptr = mm._workspace_ptr(ws_size, handle) if ws_size else 0
        desc, alpha, la, lb, beta, lc, ld, c_is_d = self._static
        if self._swap:
            a_ptr, b_ptr = b_ptr, a_ptr
        # the unchecked binding: plan-time descriptors, the planner's handle, workspace and stream (as in
        # Matmul._launch), and the caller's tensor addresses (ints from torch / the adapters)
        args = (
            mm._lt_handle or _handles.get_handle(mm._device_id), desc, alpha, a_ptr, la, b_ptr, lb, beta,
            d_ptr if c_is_d else 0, lc, d_ptr, ld, algo_ptr, ws_ptr, ws_size, handle.ptr,
        )  # fmt: skip
        # the stream may be gone when the workspace is next used or freed (see Matmul._commit)
        done = handle.mortal and (ws_size or mm._done_always)
        device = self._device
        if device is not None and handle.ctx is None and device() == mm._device_id:
            return self._launch(args, handle, made, done)  # torch keeps its device's primary context current
        with streams.stream_ctx(handle):  # the caller's thread may have another device current
            return self._launch(args, handle, made, done)

    def _launch(self, args: tuple, handle: StreamHandle, made: Any, done: bool) -> dict | None:
        """``cublasLtMatmul``, the library's own aux step if the plan has one (see :class:`._aux.AuxOutputs`)
        and the done event, with the stream's context current; the aux outputs (``None`` without)."""
        lt_unchecked.matmul(*args)
        if made is None:
            if done:
                streams.record_done(handle)
            return None
        made = self._mm._aux.finish(made, handle)
        if done:
            streams.record_done(handle)
        return {name: deliver(out, is_adapter, handle) for name, (out, _, is_adapter) in made}

    @property
    def workspace_size(self) -> int:
        """The workspace bytes the next run uses (0: the run references no memory of the planner's, so a
        CUDA graph that captured it replays nothing the planner owns)."""
        return self._mm._algo[1]
