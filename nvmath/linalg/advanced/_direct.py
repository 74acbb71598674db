"""Address-only runs of a planned :class:`~._planner.Matmul`: :class:`AddressRun`.

A caller that already knows that its operands match the plan (same shapes, strides, dtypes, package,
device and pointer alignment: a cache key that vouches for all of them) can run the plan on bare
device addresses, with no adapter, no re-validation and no operand kept by the planner. The caller
also gives the result's address (a tensor it allocated in the plan's result layout), so a framework
can allocate the result in the shape its user sees. Aux outputs are still allocated by the planner.

What can run this way: a plan on GPU operands without ``c`` (so out of place), not blocking, without a
staged operand copy or epilog scales, nor quantization scales unless the caller keeps them as planned
(``scales=True``); its epilog inputs (a bias, say) are given as
addresses, and ``alpha`` stays what it was when the run was made.
"""

from __future__ import annotations

from typing import Any

from nvmath.linalg.advanced._results import deliver

__all__ = ["AddressRun", "address_run_possible"]


def address_run_possible(mm: Any, inputs: tuple[str, ...] = (), scales: bool = False) -> bool:
    """Whether ``mm``'s installed plan can run on addresses with epilog inputs ``inputs`` (exactly the
    plan's); ``scales``: quantization scales allowed, left as planned (see :class:`AddressRun`)."""
    launch = mm.launcher
    return (
        launch is not None and (mm.address_ok_with_scales if scales else mm.address_ok)
        and tuple(sorted(launch.plan.epilog_slots)) == tuple(sorted(inputs))
    )  # fmt: skip


class AddressRun:
    """``mm``'s product on device addresses: ``run(a_ptr, b_ptr, d_ptr, input_ptrs)``.

    Args:
        mm: a planned :class:`~._planner.Matmul` (see :func:`address_run_possible`). The caller must not
            use it otherwise while it runs this way (it may autotune or re-plan it in between: the run
            follows the installed plan and algorithm, through the planner's public ``launcher``).
        inputs: the names of the plan's epilog inputs, in the order their addresses are given.
        scales: allow a plan with quantization scales: every run reads the scale values at the addresses
            the plan was given (device tensors the caller keeps in place and rewrites in stream order,
            as :mod:`nvmath.torch._grouped_fp8_gemms` does; never ``reset_operands`` them meanwhile).

    Raises:
        ValueError: the plan cannot run on addresses (host operands, ``c``, blocking, scales, staged
            copies, other epilog inputs); also on a run after the planner was re-planned so (or freed).
    """

    __slots__ = ("_inputs", "_launch", "_mm", "_pointers", "_scales", "_streams", "result_layout")

    def __init__(self, mm: Any, inputs: tuple[str, ...] = (), scales: bool = False):
        self._scales = scales
        if not address_run_possible(mm, inputs, scales):
            raise ValueError(
                "this Matmul cannot run on addresses (it needs GPU operands, no c, no blocking, no staged "
                f"copy, no scales, and exactly the epilog inputs {inputs})"
            )
        self._mm, self._inputs = mm, inputs
        self._streams = mm.caller_stream
        self.result_layout: tuple = ()
        """``(shape, strides, dtype)`` of the result the run writes at ``d_ptr`` (as the plan computes it)."""
        self._bind(mm.launcher)

    def _bind(self, launch: Any) -> Any:
        mm = self._mm
        result = mm.result_maker
        layout = (result.shape, result.strides, result.dtype) if result is not None else None
        if not address_run_possible(mm, self._inputs, self._scales) or self.result_layout not in ((), layout):
            raise ValueError("the re-planned Matmul can no longer run on addresses (with that result layout)")
        self.result_layout = layout
        self._pointers = tuple(tuple(launch.plan.input_pointers.get(n, ())) for n in self._inputs)
        self._launch = launch
        return launch

    def __call__(self, a_ptr: int, b_ptr: int, d_ptr: int, input_ptrs: tuple[int, ...] = ()) -> dict | None:
        """Enqueue the product on the current stream of the operands' package (torch: its current
        stream) into the result at ``d_ptr``; return the aux outputs (``None`` without).

        The operands must match the plan (see the module notes); ``d_ptr`` is a result of the plan's
        result shape, strides and dtype, 256-byte aligned.
        """
        launch = self._launch
        if launch.closed:  # re-planned (or freed): follow the installed plan, if it still fits
            launch = self._bind(self._mm.launcher)
        res = self._streams
        handle, raw = res.last, res.current
        if raw is None or handle is None or handle.ptr != raw(res.device_id):
            handle = res(None)
        for attrs, ptr in zip(self._pointers, input_ptrs):
            for attr in attrs:
                if ptr != attr.value:  # (the steady case: the same bias as the last run, no call)
                    attr.set(ptr)
        made = launch.run(handle, a_ptr, b_ptr, 0, d_ptr)
        if made is None:
            return None
        return {name: deliver(out, is_adapter, handle) for name, (out, _, is_adapter) in made}

    def compiled_parts(self, aux: bool = False) -> dict[str, Any] | None:
        """:meth:`~._launch.MatmulLaunch.compiled_parts` of the next run on the stream of the last one
        (``aux``: also of a plan with a pointer-written aux output, see there), with ``launch``,
        ``handle`` (that stream's handle) and ``attrs`` (the descriptor's pointer attributes of the
        epilog inputs, in input order), or ``None`` (see there; also before a run)."""
        launch, handle = self._launch, self._streams.last
        if launch.closed or handle is None:
            return None
        parts = launch.compiled_parts(handle, aux)
        if parts is None:
            return None
        parts.update(launch=launch, handle=handle, attrs=tuple(a for attrs in self._pointers for a in attrs))
        return parts

    @property
    def workspace_size(self) -> int:
        """The workspace bytes the next run uses (0: the run references no memory of the planner's, so a
        CUDA graph that captured it replays nothing the planner owns)."""
        launch = self._launch
        if launch.closed:
            launch = self._mm.launcher
        return launch.algo[1] if launch is not None else 0
