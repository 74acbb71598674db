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

from nvmath._internal import dtypes
from nvmath._internal.execution import resolve_execution
from nvmath._internal.options import check_or_create_options
from nvmath._internal.plan_cache import PlanCache
from nvmath._internal.state import PlannerState
from nvmath._internal.tensors import wrap
from nvmath._internal.tensors.base import TensorAdapter
from nvmath._internal.tensors.dispatch import adapter_class
from nvmath.fft._callbacks import as_device_callable
from nvmath.fft._options import FFTDirection, FFTOptions
from nvmath.fft._planner import FFT
from nvmath.fft._traits import normalize_axes
from nvmath.fft._validation import check_kind as _check_kind

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


class _Tail:
    """The plan-deciding call arguments of a cache key (axes, options, execution, callbacks), hashed once."""

    __slots__ = ("_hash", "values")

    def __init__(self, *values: Any):
        self.values = values
        self._hash = hash(values)

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        return self is other or (type(other) is _Tail and self.values == other.values)

    def __repr__(self) -> str:
        return f"_Tail{self.values!r}"


# Raw readers: operand -> (key head, data address, the object an in-place call returns), or None
# when the operand needs the full wrapping path (host, lazily conjugated, unknown dtype, ...).
def _read_adapter(a: Any) -> tuple | None:
    if a.is_conjugate:
        return None
    return (a.package, a.device_id, tuple(a.shape), tuple(a.strides), a.dtype, False), a.data_ptr, a.tensor


def _read_torch(t: Any) -> tuple | None:
    if not t.is_cuda:
        return None
    info = dtypes._TORCH_TO_INFO.get(t.dtype)
    if info is None or (info[2] and t.is_conj()):
        return None
    return ("torch", t.get_device(), t.shape, t.stride(), info[0], False), t.data_ptr(), t


def _read_cupy(a: Any) -> tuple | None:
    from nvmath._internal.tensors.numpy_adapter import element_strides

    name = dtypes._NUMPY_TO_NAME.get(a.dtype)
    if name is None:
        return None
    try:
        strides = element_strides(a.strides, a.itemsize)
    except ValueError:
        return None
    data = a.data
    return ("cupy", data.device_id, a.shape, strides, name, False), data.ptr, a


_READERS: dict[type, Any] = {}


def _reader(tp: type) -> Any:
    """The raw reader of operands of type ``tp`` (``None``: always wrap); cached per type."""
    reader = None
    if issubclass(tp, TensorAdapter):
        reader = _read_adapter
    else:
        cls = adapter_class(tp)
        name = getattr(cls, "__name__", None)
        if name == "TorchAdapter":
            reader = _read_torch
        elif name == "CupyAdapter":
            reader = _read_cupy
    if len(_READERS) >= 64:
        _READERS.clear()
    _READERS[tp] = reader
    return reader


# (fft_type, axes as given, ndim, device_id) -> _Tail, for calls with default options, execution
# and no callbacks: such a call makes its cache key from raw reads of the operand, without wrapping it.
_TAILS: dict[tuple, _Tail] = {}
_MISSING = object()
_FREED = PlannerState.FREED.value


def _hit(key: tuple) -> _CachedFFT | None:
    """The cached plan for ``key`` on a hit (counted, made most recent), else ``None``; not pinned.

    :meth:`PlanCache.use` without its pin: the caller holds the plan's lock while using it, and an
    eviction frees the plan under that lock, so the caller only has to check that it was not freed
    between this lookup and taking the lock (then it goes through ``plan_cache.use``).
    """
    return plan_cache.get(key, count_miss=False)


def _axes_key(axes: Any) -> Any:
    """``axes`` as a hashable key for :data:`_TAILS` (``None`` or a tuple of ``int``; a list becomes a
    tuple), or ``_MISSING`` when the call must take the general path."""
    if axes is None:
        return None
    kind = type(axes)
    if kind is not tuple and kind is not list:
        return _MISSING
    for a in axes:
        if type(a) is not int:
            return _MISSING
    return axes if kind is tuple else tuple(axes)


def _build(adapter: Any, tail: _Tail, stream: Any) -> _CachedFFT:
    axes, options, execution, prolog, epilog = tail.values
    planner = FFT(adapter, axes=axes, options=options, execution=execution, stream=stream)
    try:
        planner.plan(prolog=prolog, epilog=epilog, stream=stream)
    except BaseException:
        planner.free()
        raise
    planner.release_operand()  # a cached plan keeps no operand alive; each call supplies its own
    return _CachedFFT(planner)


def _fast_transform(
    operand: Any,
    axes: Any,
    direction: Any,
    stream: Any,
    fft_type: str | None,
    check_dtype: str | None,
    function: str,
) -> Any:
    """The stateless call keyed by raw tensor reads (default options only); ``_MISSING`` if not applicable."""
    reader = _READERS.get(type(operand), _MISSING)
    if reader is _MISSING:
        reader = _reader(type(operand))
    raw = None if reader is None else reader(operand)
    if raw is None:
        return _MISSING
    head, ptr, tensor = raw
    tail = _TAILS.get((fft_type, axes, len(head[2]), head[1]))
    if tail is None:
        return _MISSING
    _check_kind(head[4], check_dtype, function)
    key = (*head, tail)
    cached = _hit(key)
    if cached is not None:
        with cached.lock:
            planner = cached.fft
            if not planner._lifecycle.bits & _FREED:  # not freed by an eviction meanwhile
                return planner._execute_stateless(operand, ptr, tensor, direction, stream)

    def build() -> _CachedFFT:
        return _build(wrap(operand, "operand"), tail, stream)

    with plan_cache.use(key, build) as cached, cached.lock:
        return cached.fft._execute_stateless(operand, ptr, tensor, direction, stream)


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
    axes_key = _axes_key(axes)
    defaults = (
        options is None
        and execution is None
        and prolog is None
        and epilog is None
        and axes_key is not _MISSING
    )
    if defaults:
        result = _fast_transform(operand, axes_key, direction, stream, fft_type, check_dtype, function)
        if result is not _MISSING:
            return result
    adapter = wrap(operand, "operand")
    _check_kind(adapter.dtype, check_dtype, function)
    ndim = len(adapter.shape)
    normalized = normalize_axes(axes, ndim)
    resolved = _execution(execution, adapter.device_id)
    tail = _Tail(
        normalized,
        _options(options, fft_type),
        resolved,
        as_device_callable(prolog, "prolog"),
        as_device_callable(epilog, "epilog"),
    )
    if defaults:
        if len(_TAILS) >= 256:
            _TAILS.clear()
        _TAILS[(fft_type, axes_key, ndim, adapter.device_id)] = tail
    key = (
        adapter.package, adapter.device_id, tuple(adapter.shape), tuple(adapter.strides), adapter.dtype,
        adapter.is_conjugate, tail,
    )  # fmt: skip
    with plan_cache.use(key, lambda: _build(adapter, tail, stream)) as cached, cached.lock:
        return cached.fft._execute_stateless(adapter, None, None, direction, stream)


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
    options: Any = None,
    execution: Any = None,
    prolog: Any = None,
    epilog: Any = None,
    stream: Any = None,
    check_dtype: str | None = "complex",
) -> Any:
    """N-D inverse complex-to-complex FFT, unnormalized: ``ifft(fft(x)) == N * x``.

    Arguments as for :func:`fft`, without ``direction`` (as in nvmath-python: an inverse transform
    has no direction to choose; ``ifft(x, direction=...)`` is a ``TypeError``).
    """
    return _transform(
        operand, axes=axes, direction=FFTDirection.INVERSE, options=options, execution=execution, prolog=prolog,
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
