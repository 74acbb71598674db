"""The stateless transforms :func:`fft`, :func:`ifft`, :func:`rfft`, :func:`irfft`, and their plan cache.

Each call looks up a planned :class:`~nvmath.fft.FFT` in :data:`plan_cache` (a bounded, thread-safe
LRU :class:`~nvmath._internal.plan_cache.PlanCache`) under a key made of everything that decides the
plan -- the operand's package, device, shape, strides and dtype, the axes, the options, the
execution space and the callbacks -- swaps the operand in, executes on the caller's stream (a cached
plan is re-bound to it) and drops the operand again. So a repeated call costs little more than
:meth:`FFT.execute`. Calls sharing a cached plan from several threads take turns on it.

The cache::

    nvmath.fft.plan_cache.stats          # hits, misses, evictions, size, maxsize
    nvmath.fft.plan_cache.resize(64)     # keep at most 64 plans (each holds its cuFFT workspace)
    nvmath.fft.plan_cache.clear()        # free every cached plan
    nvmath.fft.plan_cache.enabled = False  # plan and free on every call (as nvmath-python does)
"""

from __future__ import annotations

import dataclasses
import threading
from typing import Any

from nvmath._internal.execution import resolve_execution
from nvmath._internal.options import check_or_create_options
from nvmath._internal.plan_cache import PlanCache
from nvmath._internal.tensors import wrap
from nvmath.fft._callbacks import as_device_callable
from nvmath.fft._options import FFTDirection, FFTOptions
from nvmath.fft._planner import FFT
from nvmath.fft._traits import normalize_axes

__all__ = ["DEFAULT_CACHE_SIZE", "fft", "ifft", "irfft", "plan_cache", "rfft"]

DEFAULT_CACHE_SIZE = 32
"""How many planned transforms :data:`plan_cache` keeps by default."""


class _CachedFFT:
    """A cached planner and the lock that gives one caller at a time the use of it."""

    __slots__ = ("fft", "lock")

    def __init__(self, planner: FFT):
        self.fft = planner
        self.lock = threading.Lock()

    def free(self) -> None:
        """Release the planner's resources (called by the cache on eviction)."""
        with self.lock:
            self.fft.free()


plan_cache: PlanCache[_CachedFFT] = PlanCache(maxsize=DEFAULT_CACHE_SIZE, name="nvmath.fft plan cache")
"""The plan cache of the stateless FFT functions (see the module documentation)."""

_COMPLEX = frozenset({"complex32", "complex64", "complex128"})


def _check_kind(dtype: str, check_dtype: str | None, function: str) -> None:
    if check_dtype == "complex" and dtype not in _COMPLEX:
        raise ValueError(f"{function}() needs a complex operand; got {dtype} (use rfft() for real operands)")
    if check_dtype == "real" and dtype in _COMPLEX:
        raise ValueError(f"{function}() needs a real operand; got {dtype} (use fft() for complex operands)")


_DEFAULT_OPTIONS = {None: FFTOptions(), "R2C": FFTOptions(fft_type="R2C"), "C2R": FFTOptions(fft_type="C2R")}
_DEFAULT_EXECUTION: dict[Any, Any] = {}


def _options(options: Any, fft_type: str | None) -> FFTOptions:
    if options is None:
        return _DEFAULT_OPTIONS[fft_type]
    options = check_or_create_options(FFTOptions, options, "FFT options")
    if fft_type is not None and options.fft_type != fft_type:
        options = dataclasses.replace(options, fft_type=fft_type)
    return options


def _execution(execution: Any, device_id: Any) -> Any:
    if execution is not None:
        return resolve_execution(execution, device_id)
    resolved = _DEFAULT_EXECUTION.get(device_id)
    if resolved is None:
        resolved = _DEFAULT_EXECUTION[device_id] = resolve_execution(None, device_id)
    return resolved


def _transform(
    operand: Any,
    *,
    axes: Any,
    direction: Any,
    options: Any,
    execution: Any,
    prolog: Any,
    epilog: Any,
    stream: Any,
    fft_type: str | None,
    check_dtype: str | None,
    function: str,
) -> Any:
    options = _options(options, fft_type)
    adapter = wrap(operand, "operand")
    _check_kind(adapter.dtype, check_dtype, function)
    axes = normalize_axes(axes, len(adapter.shape))
    execution = _execution(execution, adapter.device_id)
    prolog, epilog = as_device_callable(prolog, "prolog"), as_device_callable(epilog, "epilog")
    key = (
        adapter.package, adapter.device_id, tuple(adapter.shape), tuple(adapter.strides), adapter.dtype,
        adapter.is_conjugate, axes, options, execution, prolog, epilog,
    )  # fmt: skip

    def build() -> _CachedFFT:
        planner = FFT(adapter, axes=axes, options=options, execution=execution, stream=stream)
        try:
            planner.plan(prolog=prolog, epilog=epilog, stream=stream)
        except BaseException:
            planner.free()
            raise
        return _CachedFFT(planner)

    with plan_cache.use(key, build) as cached, cached.lock:
        planner = cached.fft
        planner.reset_operand_unchecked(adapter, stream=stream)
        try:
            return planner.execute(direction, stream)
        finally:
            planner.release_operand()


def fft(
    operand: Any,
    /,
    *,
    axes: Any = None,
    direction: Any = FFTDirection.FORWARD,
    options: Any = None,
    execution: Any = None,
    prolog: Any = None,
    epilog: Any = None,
    stream: Any = None,
    check_dtype: str | None = "complex",
) -> Any:
    """N-D complex-to-complex FFT over ``axes`` (all by default), unnormalized.

    Args:
        operand: a complex tensor (numpy, cupy, torch, DLPack); host operands run on the CPU unless
            ``execution`` says otherwise.
        axes: the axes to transform (any number, any order).
        direction: FORWARD (default) or INVERSE (see :class:`FFTDirection`).
        options: :class:`FFTOptions` or a dict of its fields.
        execution: ``ExecutionCUDA`` / ``ExecutionCPU`` / ``'cuda'`` / ``'cpu'`` / dict / ``None``.
        prolog, epilog: LTO callbacks (:class:`DeviceCallable`), GPU only.
        stream: the CUDA stream (``None``: the operand package's current stream).
        check_dtype: ``"complex"`` (require a complex operand), ``"real"`` or ``None`` (no check).

    Returns:
        The transform, in the operand's package and memory space (the operand itself in place).
    """
    return _transform(
        operand, axes=axes, direction=direction, options=options, execution=execution, prolog=prolog,
        epilog=epilog, stream=stream, fft_type=None, check_dtype=check_dtype, function="fft",
    )  # fmt: skip


def ifft(
    operand: Any,
    /,
    *,
    axes: Any = None,
    direction: Any = FFTDirection.INVERSE,
    options: Any = None,
    execution: Any = None,
    prolog: Any = None,
    epilog: Any = None,
    stream: Any = None,
    check_dtype: str | None = "complex",
) -> Any:
    """N-D inverse complex-to-complex FFT, unnormalized: ``ifft(fft(x)) == N * x``.

    Arguments as for :func:`fft` (``direction`` defaults to INVERSE).
    """
    return _transform(
        operand, axes=axes, direction=direction, options=options, execution=execution, prolog=prolog,
        epilog=epilog, stream=stream, fft_type=None, check_dtype=check_dtype, function="ifft",
    )  # fmt: skip


def rfft(
    operand: Any,
    /,
    *,
    axes: Any = None,
    options: Any = None,
    execution: Any = None,
    prolog: Any = None,
    epilog: Any = None,
    stream: Any = None,
) -> Any:
    """N-D real-to-complex FFT; the last of ``axes`` has ``n // 2 + 1`` outputs.

    Arguments as for :func:`fft`; the operand must be real (float16 on the GPU with power-of-two
    sizes, float32 or float64).
    """
    return _transform(
        operand, axes=axes, direction=FFTDirection.FORWARD, options=options, execution=execution,
        prolog=prolog, epilog=epilog, stream=stream, fft_type="R2C", check_dtype="real", function="rfft",
    )  # fmt: skip


def irfft(
    operand: Any,
    /,
    *,
    axes: Any = None,
    options: Any = None,
    execution: Any = None,
    prolog: Any = None,
    epilog: Any = None,
    stream: Any = None,
) -> Any:
    """N-D complex-to-real inverse FFT, unnormalized; the operand is never modified.

    The last of ``axes`` has ``2 * (m - 1)`` outputs, or ``2 * m - 1`` with
    ``options={"last_axis_parity": "odd"}``. Arguments as for :func:`fft`.
    """
    return _transform(
        operand, axes=axes, direction=FFTDirection.INVERSE, options=options, execution=execution,
        prolog=prolog, epilog=epilog, stream=stream, fft_type="C2R", check_dtype="complex", function="irfft",
    )  # fmt: skip
