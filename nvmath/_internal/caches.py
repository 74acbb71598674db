"""Every module-level cache of nvmath, in one registry: bounded, with stats, and one :func:`clear_all`.

Two kinds of caches are registered:

* plan caches (:class:`~nvmath._internal.plan_cache.PlanCache`): the stateless functions' planned
  objects (LRU, hit and miss counts, an optional byte budget for plans that hold device memory) and
  the matmul heuristics memo;
* memos (:class:`Memo`): small dicts of pure results read on hot paths (traits, problems, workspace
  caps, FFT call tails, raw tensor readers). A memo stays a plain ``dict`` for lookups (one C call, no
  counting); it is bounded by clearing itself when full, and counts those clears.

Anything else with ``clear()`` and ``stats`` can be registered too (the shared matmul workspaces)::

    from nvmath._internal import caches
    caches.stats()      # {name: stats snapshot}
    caches.clear_all()  # frees every cached plan and workspace, empties every memo

Cached device memory: the FFT plan cache has a byte budget (its plans hold their cuFFT workspaces);
the matmul plans share one workspace per device (:data:`nvmath.linalg.advanced._stateless.workspaces`);
the solver plans hold their working buffers until evicted (bounded by count).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

__all__ = ["Memo", "MemoStats", "clear_all", "memo", "register", "registered", "stats"]


class Clearable(Protocol):
    """What the registry needs of a cache."""

    @property
    def stats(self) -> Any:
        """A snapshot of the cache's counters."""
        ...

    def clear(self) -> None:
        """Drop (and release) everything cached."""
        ...


C = TypeVar("C", bound=Clearable)


@dataclass(frozen=True)
class MemoStats:
    """A memo's counters: ``size`` entries now, ``maxsize`` the bound, ``clears`` times it filled up."""

    size: int
    maxsize: int
    clears: int


class Memo(dict):
    """A bounded memo: a plain ``dict`` for lookups; :meth:`put` clears it when it is full.

    Args:
        name: the name it is registered under.
        maxsize: the most entries kept.
    """

    __slots__ = ("clears", "maxsize", "name")

    def __init__(self, name: str, maxsize: int):
        super().__init__()
        self.name, self.maxsize, self.clears = name, maxsize, 0

    def put(self, key: Any, value: Any) -> Any:
        """Store ``value`` under ``key`` (emptying the memo first if it is full); return ``value``."""
        if len(self) >= self.maxsize:
            dict.clear(self)
            self.clears += 1
        self[key] = value
        return value

    @property
    def stats(self) -> MemoStats:
        """A :class:`MemoStats` snapshot."""
        return MemoStats(len(self), self.maxsize, self.clears)

    def __repr__(self) -> str:
        return f"Memo({self.name!r}, size={len(self)}, maxsize={self.maxsize})"


_REGISTRY: dict[str, Clearable] = {}
_LOCK = threading.Lock()


def register(name: str, cache: C) -> C:
    """Register ``cache`` under ``name`` (a module-level cache, registered once at import); return it."""
    with _LOCK:
        if name in _REGISTRY and _REGISTRY[name] is not cache:
            raise ValueError(f"a cache named {name!r} is already registered")
        _REGISTRY[name] = cache
    return cache


def memo(name: str, maxsize: int) -> Memo:
    """A new :class:`Memo`, registered under ``name``."""
    return register(name, Memo(name, maxsize))


def registered() -> dict[str, Clearable]:
    """The registered caches by name (a snapshot)."""
    with _LOCK:
        return dict(_REGISTRY)


def stats() -> dict[str, Any]:
    """Each registered cache's stats snapshot, by name."""
    return {name: cache.stats for name, cache in registered().items()}


def clear_all() -> None:
    """Clear every registered cache: cached plans and shared workspaces are freed, memos emptied.

    Two passes: freeing a cached plan can hand its library handles back to a handle pool registered
    (and so cleared) before the plan's cache; the second pass empties what the first refilled.
    """
    for _ in range(2):
        for cache in registered().values():
            cache.clear()
