"""The stateless transforms :func:`fft`, :func:`ifft`, :func:`rfft`, :func:`irfft`, and their plan cache.

Each call goes the one way of :mod:`nvmath._internal.stateless`: a key made of everything that decides
the plan -- the operand's head (package, device, shape, strides, dtype, conjugation), then a
:class:`_Tail` of the axes, the options, the execution space and the callbacks -- is looked up in
:data:`plan_cache` (a bounded, thread-safe LRU :class:`~nvmath._internal.plan_cache.PlanCache`), and
:meth:`FFT.run_cached` runs the cached plan with the call's operand on the caller's stream (a cached
plan is re-bound to it) and drops the operand again. So a repeated call costs little more than
:meth:`FFT.execute`. Calls sharing a cached plan from several threads take turns on it.

A call with default options, execution and no callbacks reads its operand raw
(:data:`nvmath._internal.stateless.READERS`) and finds its whole key in :data:`_KEYS` (first its tail
in :data:`_TAILS`): no adapter and no key to build on a hit. The cache (a
:class:`~nvmath._internal.stateless.LastCallCache`) remembers the last such call: the same call again
(the common loop) runs its plan with no lookup at all.

The cache::

    nvmath.fft.plan_cache.stats          # hits, misses, evictions, size, maxsize
    nvmath.fft.plan_cache.resize(64)     # keep at most 64 plans (each holds its cuFFT workspace)
    nvmath.fft.plan_cache.clear()        # free every cached plan
    nvmath.fft.plan_cache.enabled = False  # plan and free on every call (as nvmath-python does)
"""

from __future__ import annotations

import dataclasses
from typing import Any

from nvmath._internal import caches
from nvmath._internal.execution import resolve_execution
from nvmath._internal.options import check_or_create_options, freeze_options
from nvmath._internal.state import freed_on_error
from nvmath._internal.stateless import (
    READERS,
    CachedPlan,
    LastCallCache,
    _read_torch,
    adapter_head,
    call_cached,
    call_remembered,
    reader_for,
)
from nvmath._internal.tensors import wrap
from nvmath.fft._callbacks import as_device_callable
from nvmath.fft._options import FFTDirection, FFTOptions
from nvmath.fft._planner import FFT
from nvmath.fft._traits import RealOperandRequired, normalize_axes

__all__ = ["DEFAULT_CACHE_SIZE", "fft", "ifft", "irfft", "plan_cache", "rfft"]

DEFAULT_CACHE_SIZE = 32
"""How many planned transforms :data:`plan_cache` keeps by default."""


DEFAULT_MAX_BYTES = 4 << 30
"""The default byte budget of :data:`plan_cache`: the cuFFT workspaces its plans hold (4 GiB)."""


def _workspace_bytes(entry: CachedPlan[FFT]) -> int:
    return entry.planner.workspace_bytes


plan_cache: LastCallCache = caches.register(
    "nvmath.fft: plans",
    LastCallCache(
        maxsize=DEFAULT_CACHE_SIZE, name="nvmath.fft plan cache", max_bytes=DEFAULT_MAX_BYTES,
        nbytes=_workspace_bytes,
    ),
)
"""The plan cache of the stateless FFT functions (see the module documentation). Each cached plan holds
its cuFFT workspace (allocated at its first run) until evicted: besides the count (``maxsize``), the
cache keeps the workspaces within ``max_bytes`` (default :data:`DEFAULT_MAX_BYTES`), releasing least
recently used plans beyond it; ``plan_cache.max_bytes = n`` changes the budget."""

_COMPLEX = frozenset({"complex32", "complex64", "complex128"})


def _check_kind(dtype: str, check_dtype: str | None, function: str) -> None:
    if check_dtype == "complex" and dtype not in _COMPLEX:
        raise ValueError(f"{function}() needs a complex operand; got {dtype} (use rfft() for real operands)")
    if check_dtype == "real" and dtype in _COMPLEX:
        raise RealOperandRequired(
            f"{function}() needs a real operand; got {dtype} (use fft() for complex operands)"
        )


_DEFAULT_OPTIONS = {t: freeze_options(FFTOptions(fft_type=t)) for t in (None, "R2C", "C2R")}
_DEFAULT_EXECUTION = caches.memo("nvmath.fft: default executions", 64)


def _options(options: Any, fft_type: str | None) -> FFTOptions:
    """The call's options with the function's transform type, as nvmath-python resolves them:
    ``irfft`` always computes C2R; ``rfft`` uses R2C unless the options name a type (which is
    checked against the operand like any other, so ``rfft(x, options={"fft_type": "C2C"})`` raises
    for a real ``x``); ``fft`` / ``ifft`` use the options' type."""
    if options is None:
        return _DEFAULT_OPTIONS[fft_type]
    options = check_or_create_options(FFTOptions, options, "FFT options")
    if fft_type == "R2C" and options.fft_type is not None:
        return options
    if fft_type is not None and options.fft_type != fft_type:
        options = freeze_options(dataclasses.replace(options, fft_type=fft_type))
    return options


def _execution(execution: Any, device_id: Any) -> Any:
    if execution is not None:
        return resolve_execution(execution, device_id)
    resolved = _DEFAULT_EXECUTION.get(device_id)
    if resolved is None:
        resolved = _DEFAULT_EXECUTION.put(device_id, resolve_execution(None, device_id))
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


# (fft_type, axes as given, ndim, device_id, dtype, check_dtype) -> _Tail, for calls with default
# options, execution and no callbacks whose dtype passed check_dtype: such a call makes its cache key
# from raw reads of the operand, without wrapping it.
_TAILS = caches.memo("nvmath.fft: call tails", 256)
_MISSING = object()


class _Key(tuple):
    """A plan-cache key (``(*head, tail)``) that hashes once: the key :data:`_KEYS` hands out again and
    again, so that the plan cache finds its entry by identity (equal to, and hashed as, the plain tuple)."""

    def __init__(self, items: tuple):
        self.hash = tuple.__hash__(self)

    def __hash__(self) -> int:
        return self.hash

    def __eq__(self, other: object) -> bool:
        return self is other or tuple.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)


# (fft_type, check_dtype, axes as given, operand head) -> its _Key, for the calls _TAILS serves: a
# repeated call finds its whole plan-cache key with one lookup, and the plan cache its entry by identity.
# Only keys are kept (no plan): an evicted plan is planned again under the same key, as without it.
_KEYS = caches.memo("nvmath.fft: call keys", 256)


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


def _build(adapter: Any, tail: _Tail, stream: Any) -> CachedPlan[FFT]:
    axes, options, execution, prolog, epilog = tail.values
    planner = FFT(adapter, axes=axes, options=options, execution=execution, stream=stream)
    with freed_on_error(planner):
        planner.plan(prolog=prolog, epilog=epilog, stream=stream)
    planner.release_operand()  # a cached plan keeps no operand alive; each call supplies its own
    return CachedPlan(planner)


def _build_raw(operand: Any, tail: _Tail, stream: Any) -> CachedPlan[FFT]:
    return _build(wrap(operand, "operand"), tail, stream)


_OTHER = object()
"""What :func:`_hot` returns for a call it does not serve."""
_torch_tensor: Any = None
"""``torch.Tensor`` once one was keyed by a raw read (:func:`_hot`)."""


def _hot(operand: Any, axes_key: Any, direction: Any, stream: Any, fft_type: Any, check_dtype: Any) -> Any:
    """A call with default options, execution and callbacks on an operand read raw, or :data:`_OTHER`.

    The cache's last call runs again without a lookup when this call equals it: a ``torch.Tensor``
    operand is compared by its raw attributes (shape, strides, dtype, device, conjugation: what decides
    its key, read without making it), other operands by their key. Otherwise the key comes from
    :data:`_KEYS` (made once from :data:`_TAILS`), and the call goes through the cache and becomes the
    last one.
    """
    global _torch_tensor
    tp = type(operand)
    call: Any = None
    if tp is _torch_tensor and READERS.get(tp) is _read_torch:  # (read as a raw read would read it)
        call = (fft_type, check_dtype, axes_key, operand.shape, operand.stride(), operand.dtype,
                operand.get_device(), operand.is_conj())  # fmt: skip
        last, entry, run = plan_cache.last
        if call == last:  # the last call again: its plan without a lookup
            lock = entry.lock  # (acquire / release: half the cost of `with` on a lock)
            lock.acquire()
            try:
                if entry.live:  # not freed by an eviction or a clear since
                    plan_cache.memo_hits += 1
                    return run(operand, operand.data_ptr(), operand, direction, stream)
            finally:
                lock.release()
    read = READERS.get(tp) or reader_for(tp)
    raw = read(operand)
    if raw is None or raw[0][5]:  # (a lazily conjugated operand is materialized: wrapped)
        return _OTHER
    head = raw[0]
    keyed = (fft_type, check_dtype, axes_key, head)
    if call is None:
        last, entry, run = plan_cache.last
        if keyed == last:
            lock = entry.lock
            lock.acquire()
            try:
                if entry.live:
                    plan_cache.memo_hits += 1
                    return run(operand, raw[1], raw[2], direction, stream)
            finally:
                lock.release()
        call = keyed
        if _torch_tensor is None and read is _read_torch:
            _torch_tensor = tp  # (the next call on one is compared raw)
    key = _KEYS.get(keyed)
    if key is None:
        tail = _TAILS.get((fft_type, axes_key, len(head[2]), head[1], head[4], check_dtype))
        if tail is None:  # (stored once the dtype passed check_dtype)
            return _OTHER
        key = _KEYS.put(keyed, _Key((*head, tail)))
    return call_remembered(
        plan_cache, call, key, _build_raw, operand, raw[1], raw[2], direction, stream,
        build_args=(operand, key[6], stream), entry_of=_hit_entry,
    )  # fmt: skip


def _hit_entry(planner: FFT) -> Any:
    return planner.hit_entry()


def _transform(
    operand: Any,
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
    hot: bool = True,
) -> Any:
    """One call of a stateless transform (``hot=False``: :func:`_hot` already declined it)."""
    axes_key = None if axes is None else _axes_key(axes)  # (the common case without a call)
    defaults = (
        options is None and execution is None and prolog is None and epilog is None
        and axes_key is not _MISSING
    )  # fmt: skip
    if defaults and hot:  # the hot path: the operand read raw, the key from _KEYS / _TAILS (no adapter)
        out = _hot(operand, axes_key, direction, stream, fft_type, check_dtype)
        if out is not _OTHER:
            return out
    adapter = wrap(operand, "operand")
    if check_dtype != "complex" and check_dtype != "real" and check_dtype is not None:
        from nvmath.fft._validation import check_dtype_option

        check_dtype_option(check_dtype, function)  # an unknown value never turns the check off
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
    head = adapter_head(adapter)
    key: tuple = (*head, tail)
    if defaults:  # the next such call takes the hot path, and finds this very key
        _TAILS.put((fft_type, axes_key, ndim, adapter.device_id, adapter.dtype, check_dtype), tail)
        key = _KEYS.put((fft_type, check_dtype, axes_key, head), _Key(key))
    return call_cached(
        plan_cache, key, _build, adapter, None, None, direction, stream, build_args=(adapter, tail, stream)
    )  # fmt: skip


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
    hot = axes is None and options is None and execution is None and prolog is None and epilog is None
    if hot:  # (the common call: no _transform frame on a hit)
        out = _hot(operand, None, direction, stream, None, check_dtype)
        if out is not _OTHER:
            return out
    return _transform(
        operand, axes, direction, options, execution, prolog, epilog, stream,
        None, check_dtype, "fft", not hot,  # fft_type, check_dtype, function, hot
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

    Arguments as for :func:`fft`; ``direction`` is accepted for nvmath-python compatibility but must
    be INVERSE (a forward direction is a ``ValueError``, never a forward transform named ifft).
    """
    if direction is not FFTDirection.INVERSE:
        from nvmath.fft._validation import check_inverse

        direction = check_inverse(direction)
    hot = axes is None and options is None and execution is None and prolog is None and epilog is None
    if hot:  # (the common call: no _transform frame on a hit)
        out = _hot(operand, None, direction, stream, None, check_dtype)
        if out is not _OTHER:
            return out
    return _transform(
        operand, axes, direction, options, execution, prolog, epilog, stream,
        None, check_dtype, "ifft", not hot,  # fft_type, check_dtype, function, hot
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

    Arguments as for :func:`fft`; the operand must be real (float16 on the GPU, in the sizes cuFFT
    plans; float32 or float64).
    """
    return _transform(
        operand, axes, FFTDirection.FORWARD, options, execution, prolog, epilog, stream,
        "R2C", "real", "rfft",  # fft_type, check_dtype, function
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
        operand, axes, FFTDirection.INVERSE, options, execution, prolog, epilog, stream,
        "C2R", "complex", "irfft",  # fft_type, check_dtype, function
    )  # fmt: skip
