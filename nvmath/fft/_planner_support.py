"""Helpers of the :class:`~nvmath.fft.FFT` planner that need no planner state: operand traits,
result allocators, current-stream getters, plan keys and host views."""

from __future__ import annotations

import sys
from typing import Any

from nvmath._internal import dtypes, streams
from nvmath._internal.execution import ExecutionCPU, ExecutionCUDA
from nvmath._internal.tensors import wrap
from nvmath._internal.tensors.base import TensorAdapter
from nvmath._internal.tensors.host import host_view
from nvmath.fft._callbacks import as_device_callable
from nvmath.fft._options import FFTOptions
from nvmath.fft._traits import FFTTraits, PlanKey, make_traits, plan_key

__all__ = [
    "device_package",
    "fast_torch",
    "host_array",
    "make_key",
    "operand_traits",
    "resolved",
    "same_plan_traits",
    "torch_allocator",
    "torch_hit",
    "torch_result_maker",
]


def device_package(adapter: TensorAdapter) -> str:
    """The package whose allocator and streams serve the operand's device-side buffers."""
    if adapter.device == "cuda" or adapter.package == "torch":
        return adapter.package
    return "cuda"


def resolved(adapter: TensorAdapter, inplace: bool) -> TensorAdapter:
    """Materialize torch's lazy conjugation (a copy); refused in place, as is a read-only operand."""
    if inplace:
        check_writable(adapter)
    if not adapter.is_conjugate:
        return adapter
    if inplace:
        raise ValueError(
            "an in-place FFT cannot take a lazily conjugated torch tensor; call .resolve_conj() first"
        )
    return wrap(adapter.tensor.resolve_conj(), "operand")


def check_writable(adapter: TensorAdapter) -> None:
    """Refuse a read-only operand (numpy ``flags.writeable`` false) for an in-place transform.

    Raises:
        ValueError: before anything is planned (the transform would write into the operand).
    """
    flags = getattr(adapter.tensor, "flags", None)
    if flags is not None and getattr(flags, "writeable", True) is False:
        raise ValueError(
            "an in-place FFT (options inplace=True) writes into the operand, which is read-only "
            "(numpy flags.writeable is False); pass a writable copy (numpy.array(x)) or use inplace=False"
        )


def operand_traits(adapter: TensorAdapter, axes: Any, options: FFTOptions, execution: Any) -> FFTTraits:
    """The traits of a transform of ``adapter`` over ``axes`` (``execution``: a resolved execution object)."""
    return make_traits(
        adapter.shape, adapter.strides, adapter.dtype, axes=axes, options=options,
        execution=execution.name, package=adapter.package, operand_space=adapter.device,
    )  # fmt: skip


def fast_torch(adapter: TensorAdapter, traits: FFTTraits) -> bool:
    """Whether results can be made with ``torch.empty_strided`` directly (torch GPU, out of place)."""
    return (
        adapter.package == "torch"
        and adapter.device == "cuda"
        and not traits.inplace
        and not traits.cross_space
    )


def torch_device(device_id: int) -> Any:
    """The ``torch.device`` of results on GPU ``device_id`` (the CPU fake GPU of the tools puts CPU here)."""
    return sys.modules["torch"].device("cuda", device_id)


def torch_result_maker(traits: FFTTraits, device_id: int) -> tuple[Any, tuple, tuple]:
    """``(new, shape, strides)``: ``new(shape, strides)`` makes a result tensor of ``traits`` on GPU
    ``device_id`` on torch's current stream (``new_empty_strided`` of an empty template tensor of the
    result's dtype and device: no memory, no dtype or device argument to parse per call)."""
    torch = sys.modules["torch"]
    dtype = dtypes.to_torch_dtype(traits.result_dtype)
    new = torch.empty(0, dtype=dtype, device=torch_device(device_id)).new_empty_strided
    return new, tuple(traits.result_shape), tuple(traits.result_strides)


def torch_allocator(traits: FFTTraits, device_id: int) -> Any:
    """A function ``(stream, current) -> tensor | None``: a result tensor of ``traits`` (shape, strides,
    dtype) on GPU ``device_id`` when ``stream`` is torch's current stream, else ``None`` (the caller then
    allocates through the operand's adapter, ordered on ``stream``).

    ``current=True``: the caller knows ``stream`` is torch's current stream (its resolver read it this
    call), so the stream is not read again. Results come from ``new_empty_strided`` of an empty template
    tensor (:func:`torch_result_maker`): torch's allocator on its current stream.
    """
    raw = streams.torch_raw_stream()
    new, shape, strides = torch_result_maker(traits, device_id)

    def allocate(stream: Any, current: bool) -> Any:
        if not current and stream.ptr != raw(device_id):
            return None
        return new(shape, strides)

    return allocate


def torch_hit(
    plan: Any, run_cached: Any, cs: streams.CallerStream, directions: tuple, result: tuple
) -> Any:  # fmt: skip
    """The Python hit of a planned FFT whose results torch makes (``FFT.hit_entry``):
    ``hit(operand, ptr, tensor, direction, stream)`` runs a call on torch's current stream in an allowed
    direction (``None``: the default) as one launch of ``plan`` (a
    :class:`~nvmath.fft._cufft_plan.CufftPlan`) into a new result, and gives any other call (an explicit
    stream, another direction object, no address) to ``run_cached``.

    ``cs``: torch's stream resolver of the planner (its memo compared inline); ``directions``: the
    allowed :class:`~nvmath.fft.FFTDirection` members with their ``int``, the default first
    (``((FORWARD, -1), (INVERSE, 1))``); ``result``: :func:`torch_result_maker`'s.
    """
    raw, dev = cs.current, cs.device_id
    (default, d0), (other, d1) = directions[0], directions[-1]
    new, shape, strides = result

    def hit(operand: Any, ptr: int | None, tensor: Any, direction: Any, stream: Any) -> Any:
        if direction is None or direction is default:
            d = d0
        elif direction is other:
            d = d1
        else:
            return run_cached(operand, ptr, tensor, direction, stream)
        if stream is not None or ptr is None:
            return run_cached(operand, ptr, tensor, direction, stream)
        s = cs.last
        if s is None or s.ptr != raw(dev):
            s = cs(None)
        out = new(shape, strides)  # (torch's current stream: cs is torch's resolver)
        plan.launch(ptr, out.data_ptr(), d, s)
        return out

    return hit


def _execution_key(execution: ExecutionCUDA | ExecutionCPU) -> tuple:
    if isinstance(execution, ExecutionCUDA):
        return ("cuda", execution.device_id)
    return ("cpu", execution.num_threads)


def _callable_key(value: Any, what: str) -> tuple | None:
    callable_ = as_device_callable(value, what)
    return None if callable_ is None else callable_.key()


def make_key(traits: FFTTraits, execution: Any, prolog: Any, epilog: Any) -> tuple:
    return (
        "nvmath.fft",
        PlanKey(traits),
        _callable_key(prolog, "prolog"),
        _callable_key(epilog, "epilog"),
        _execution_key(execution),
    )


def host_array(adapter: TensorAdapter) -> Any:
    """A numpy view of a host adapter's data (torch CPU tensors share their memory)."""
    if adapter.package == "torch":
        return adapter.tensor.detach().numpy()
    return host_view(adapter)


def same_plan_traits(
    adapter: TensorAdapter, planned: FFTTraits, options: FFTOptions, execution: Any
) -> FFTTraits:
    """The traits of ``adapter`` when the plan made for ``planned`` runs it (equal :func:`plan_key`).

    Raises:
        ValueError: the new operand's layout needs another plan (or none at all).
    """
    try:
        traits = operand_traits(adapter, planned.axes, options, execution)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"reset_operand: the new operand does not fit the planned FFT: {exc}") from exc
    if plan_key(traits) != plan_key(planned):
        raise ValueError(
            f"reset_operand: the new operand (shape {traits.operand_shape}, strides "
            f"{traits.operand_strides}) needs another cuFFT plan than the planned one (shape "
            f"{planned.operand_shape}, strides {planned.operand_strides}): transform sizes, batch count "
            "and distance must match"
        )
    return traits
