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

The entry owns the lock that gives one caller at a time the use of its planner, and the liveness check
(a plan evicted and freed by another thread between the lookup and taking the lock is not used: the
call then goes through :meth:`PlanCache.use`, which pins what it returns).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from typing import Any, Generic, Protocol, TypeVar

from nvmath._internal.plan_cache import PlanCache

__all__ = ["CachedPlan", "CachedPlanner", "call_cached"]


class CachedPlanner(Protocol):
    """What a planner offers the stateless path."""

    @property
    def is_planned(self) -> bool:
        """Whether the planner is planned and not freed (cheap: one attribute read and one ``&``)."""
        ...

    def run_cached(self, *args: Any) -> Any:
        """Run one stateless call on the planned object (the caller holds the entry's lock)."""
        ...

    def free(self) -> None:
        """Release everything the planner holds (idempotent)."""
        ...


P = TypeVar("P", bound=CachedPlanner)


class CachedPlan(Generic[P]):
    """A cache entry: a planned planner and the lock that gives one caller at a time its use."""

    __slots__ = ("lock", "planner")

    def __init__(self, planner: P):
        self.planner = planner
        self.lock = threading.Lock()

    def free(self) -> None:
        """Release the planner (called by the cache on eviction; waits for a running call)."""
        with self.lock:
            self.planner.free()


def call_cached(
    cache: PlanCache[CachedPlan[Any]], key: Hashable | None, build: Callable[[], CachedPlan[Any]], *args: Any
) -> Any:
    """Run one stateless call: on the plan cached under ``key``, or on a new one from ``build()``.

    ``key=None`` (some argument cannot be part of a key) plans, runs and frees. A factory that raises
    caches nothing; the error propagates.
    """
    if key is None:
        entry = build()
        try:
            with entry.lock:
                return entry.planner.run_cached(*args)
        finally:
            entry.free()
    entry = cache.get(key, count_miss=False)
    if entry is not None:
        with entry.lock:
            planner = entry.planner
            if planner.is_planned:  # not freed by an eviction since the lookup
                return planner.run_cached(*args)
    with cache.use(key, build) as entry, entry.lock:
        return entry.planner.run_cached(*args)
