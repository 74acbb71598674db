"""The one path of every stateless function: key -> plan cache -> cached entry -> the planner's fast entry.

A stateless function (``nvmath.linalg.advanced.matmul``, ``nvmath.linalg.matmul``, ``nvmath.fft.fft``,
the solver functions) does three things, in one direction::

    key = <api>_key(operands, kwargs)          # one key builder per API; None: cannot be cached
    return call_cached(plan_cache, key, build, *args)
        # hit:  entry = plan_cache.get(key) -> entry.lock -> entry.planner.run_cached(*args)
        # miss: plan_cache.use(key, build) -> the new entry -> entry.planner.run_cached(*args)

``build()`` constructs and plans the planner (giving it at construction anything it shares with other
cached plans, such as a workspace) and returns a :class:`CachedPlan`. The planner exposes one typed fast
entry, :meth:`CachedPlanner.run_cached`, which runs one call on the planned object with the call's own
operands and returns the result; the stateless module reads no private field of the planner.

The entry owns the lock that gives one caller at a time the use of its planner (plans that share a
resource, such as matmul's shared workspace, share its lock), and the liveness check: its ``live``
flag, cleared by :meth:`CachedPlan.free` under the lock (a plan evicted and freed by another thread
between the lookup and taking the lock is not used: the call then goes through
:meth:`PlanCache.use`, which pins what it returns). A hot path passes ``build`` as a module-level
function and its arguments as ``build_args`` rather than make a closure on every call.

Other helpers: :func:`run_once` (plan, run, free: a call whose key is ``None``). A
:class:`LastCallCache` also remembers the last call: a repeated call (the common loop) runs without a
cache lookup; :func:`call_remembered` is :func:`call_cached` that makes a hit the last call.

Key builders read tensors through :data:`READERS` (exact type -> reader): a reader gives the operand's
*head* ``(package, device_id, shape, strides, dtype name, is_conjugate)``, its address and the object an
in-place call returns, from cheap reads of the raw tensor (torch, cupy) or of an adapter; the head is
equal to :func:`adapter_head` of the operand's adapter, so a key built from raw reads (the hot path: no
adapter) is the key built from adapters. A reader answers ``None`` for an operand it cannot describe
(the caller then wraps it).
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Hashable
from typing import Any, Generic, Protocol, TypeVar

from nvmath._internal import caches, dtypes
from nvmath._internal.plan_cache import CacheStats, PlanCache
from nvmath._internal.tensors import TensorAdapter, adapter_class
from nvmath._internal.tensors.host import element_strides

__all__ = [
    "READERS",
    "CachedPlan",
    "CachedPlanner",
    "LastCallCache",
    "NO_LAST",
    "Read",
    "adapter_head",
    "call_cached",
    "call_remembered",
    "reader_for",
    "register_reader",
    "run_once",
]

Read = tuple[tuple, int, Any]
"""What a reader returns: ``(head, data address, the object an in-place call returns)``."""


class CachedPlanner(Protocol):
    """What a planner offers the stateless path."""

    @property
    def is_planned(self) -> bool:
        """Whether the planner is planned and not freed (``build`` returns planned planners; a cached
        planner is freed only through its entry, whose ``live`` flag the hot path reads instead)."""
        ...

    def run_cached(self, *args: Any) -> Any:
        """Run one stateless call on the planned object (the caller holds the entry's lock)."""
        ...

    def free(self) -> None:
        """Release everything the planner holds (idempotent)."""
        ...


P = TypeVar("P", bound=CachedPlanner)


class CachedPlan(Generic[P]):
    """A cache entry: a planned planner, the lock that gives one caller at a time its use, and its
    liveness (``live``: false once :meth:`free` ran; read on every hit, so a plain attribute)."""

    __slots__ = ("live", "lock", "planner")

    def __init__(self, planner: P, lock: Any = None):
        """``lock``: the lock to use (plans sharing a resource, such as a workspace, share its lock);
        default: a new one."""
        self.planner = planner
        self.lock = threading.Lock() if lock is None else lock
        self.live = True

    def free(self) -> None:
        """Release the planner (called by the cache on eviction; waits for a running call)."""
        with self.lock:
            self.live = False
            self.planner.free()


def call_cached(
    cache: PlanCache[CachedPlan[Any]], key: Hashable | None, build: Callable[..., CachedPlan[Any]],
    *args: Any, build_args: tuple = (),
) -> Any:  # fmt: skip
    """Run one stateless call: on the plan cached under ``key``, or on a new one from ``build()``.

    ``key=None`` (some argument cannot be part of a key) plans, runs and frees. A factory that raises
    caches nothing; the error propagates. ``build_args``: arguments for ``build`` (a hot path passes
    a module-level ``build`` and its arguments rather than make a closure on every call, hit or not).
    """
    if key is None:
        return run_once(build(*build_args), *args)
    entry = cache.get(key, count_miss=False)
    if entry is not None:
        with entry.lock:
            if entry.live:  # not freed by an eviction since the lookup
                return entry.planner.run_cached(*args)
    with cache.use(key, (lambda: build(*build_args)) if build_args else build) as entry, entry.lock:
        return entry.planner.run_cached(*args)


NO_LAST: tuple = (None, None, None)
""":attr:`LastCallCache.last` when there is no last call."""


class LastCallCache(PlanCache):
    """A :class:`~nvmath._internal.plan_cache.PlanCache` whose stateless function remembers its last call.

    :attr:`last` is ``(call, entry, run)``: the last call's description (a tuple of raw reads and
    arguments that decide its plan), its cache entry and the callable that runs a call on the entry's
    planner. A call equal to it runs ``run`` under the entry's lock when the entry is live, with no
    cache lookup (the stateless function compares and runs it inline); any other call goes through the
    cache (:func:`call_remembered`) and becomes the last one. The recency order stays right: a repeated
    call is the most recent already. One tuple, read and replaced whole, so threads only ever see a
    consistent one.

    ``stats.hits`` include the calls served by :attr:`last` (:attr:`memo_hits`, counted under the
    entry's lock); :meth:`clear` forgets the last call.
    """

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.last: tuple = NO_LAST
        self.memo_hits = 0

    @property
    def stats(self) -> CacheStats:
        """A :class:`~nvmath._internal.plan_cache.CacheStats` snapshot (the last call's hits included)."""
        base = super().stats
        return dataclasses.replace(base, hits=base.hits + self.memo_hits)

    def clear(self) -> None:
        """Forget the last call, then free every cached plan."""
        self.last = NO_LAST
        super().clear()


def call_remembered(
    cache: LastCallCache, call: Hashable, key: Hashable, build: Callable[..., CachedPlan[Any]], *args: Any,
    build_args: tuple = (), entry_of: Callable[[Any], Callable[..., Any]] | None = None,
) -> Any:  # fmt: skip
    """:func:`call_cached` under ``key`` that makes a hit the cache's last call (``call``); ``entry_of``
    gives the callable that runs a call on the planner (default: its ``run_cached``)."""
    entry = cache.get(key, count_miss=False)
    if entry is not None:
        with entry.lock:
            if entry.live:
                planner = entry.planner
                run = planner.run_cached if entry_of is None else entry_of(planner)
                cache.last = (call, entry, run)
                return run(*args)
    return call_cached(cache, key, build, *args, build_args=build_args)


def run_once(entry: CachedPlan[Any], *args: Any) -> Any:
    """Run one call on a planned entry that is not cached, then free it (the ``key=None`` path)."""
    try:
        with entry.lock:
            return entry.planner.run_cached(*args)
    finally:
        entry.free()


# ---------------------------------------------------------------------------------------- raw readers
def adapter_head(a: TensorAdapter) -> tuple:
    """The head of a wrapped operand: ``(package, device_id, shape, strides, dtype, is_conjugate)``."""
    return (a.package, a.device_id, tuple(a.shape), tuple(a.strides), a.dtype, a.is_conjugate)


def _read_adapter(a: TensorAdapter) -> Read:
    head = (a.package, a.device_id, tuple(a.shape), tuple(a.strides), a.dtype, a.is_conjugate)
    return head, a.data_ptr, a.tensor


def _read_torch(t: Any) -> Read | None:
    info = dtypes.KNOWN_TORCH.get(t.dtype)  # filled when the first tensor of the dtype is wrapped
    if info is None:
        return None
    try:
        device = t.get_device() if t.is_cuda else "cpu"
        conj = t.is_conj() if info[2] else False  # (torch sets the conjugate bit on complex tensors only)
        return ("torch", device, t.shape, t.stride(), info[0], conj), t.data_ptr(), t
    except (RuntimeError, TypeError):  # sparse, nested, ...: the adapter judges it
        return None


def _read_cupy(a: Any) -> Read | None:
    name = dtypes.KNOWN_NUMPY.get(a.dtype)
    if name is None:
        return None
    try:
        strides = element_strides(a.strides, a.itemsize)
    except ValueError:
        return None
    data = a.data
    return ("cupy", data.device_id, a.shape, strides, name, False), data.ptr, a


def _unreadable(obj: Any) -> None:
    return None


READERS = caches.memo("nvmath._internal.stateless: raw readers", 64)
"""Exact operand type -> its reader (:func:`_unreadable` for types that are always wrapped); filled by
:func:`reader_for` on first sight of a type."""


def reader_for(tp: type) -> Callable[[Any], Read | None]:
    """The reader of operands of type ``tp`` (found once per type; then one lookup in :data:`READERS`)."""
    reader: Callable[[Any], Read | None] = _unreadable
    if issubclass(tp, TensorAdapter):
        reader = _read_adapter
    else:
        name = getattr(adapter_class(tp), "__name__", None)
        if name == "TorchAdapter":
            reader = _read_torch
        elif name == "CupyAdapter":
            reader = _read_cupy
    register_reader(tp, reader)
    return reader


def register_reader(tp: type, reader: Callable[[Any], Read | None]) -> None:
    """Use ``reader`` for operands of exactly type ``tp`` (tests register their fake tensors here)."""
    READERS.put(tp, reader)
