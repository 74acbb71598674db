"""A bounded, thread-safe LRU cache of plans, used by the stateless functions.

The stateless functions (``matmul``, ``fft``, the solvers) keep their planned objects in a
:class:`PlanCache`, keyed by everything that determines a plan (shapes, strides, dtypes, options,
device, ...), so that a repeated call costs little more than ``execute()``.

**Size, clearing and disabling.** Each cache is an explicit object with a size limit and statistics:

* ``cache.stats`` -- hits, misses, evictions, current size and ``maxsize``;
* ``cache.resize(n)`` -- change the size limit; the least recently used plans beyond ``n`` are freed;
* ``cache.clear()`` -- free every cached plan (e.g. to return device memory);
* ``cache.enabled = False`` or ``cache.resize(0)`` -- stop caching: every call plans from scratch and
  frees its plan afterwards.

**Byte budget.** A cache whose plans hold device memory of their own (a cuFFT plan holds its
workspace) can be given ``max_bytes`` and ``nbytes(plan)``: least recently used plans are released
while the plans' bytes exceed the budget (the newest plan is always kept); ``cache.max_bytes = n``
changes it, ``stats.nbytes`` reports the bytes held.

A plan leaving the cache is released with ``on_evict(plan)`` if given, else ``plan.free()`` (or
``plan.close()``) if it has one. Release failures are reported as warnings, never raised. A plan in use
(see :meth:`PlanCache.use`) is released only after its last user is done, so another thread's eviction
never frees a plan under a running call. The factory that builds a plan runs outside the lock; two
threads asking for the same missing key build it once, and a factory that raises caches nothing.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from nvmath._errors import warn_cleanup_failure
from nvmath._internal.options import check_nonnegative_int

__all__ = ["CacheStats", "PlanCache", "release_plan"]

V = TypeVar("V")


@dataclass(frozen=True)
class CacheStats:
    """A snapshot of a cache's counters.

    Attributes:
        hits: lookups that found a plan.
        misses: lookups that did not (each built a plan when going through ``get_or_create``/``use``).
        evictions: plans pushed out by the size limit (``resize`` included; ``clear`` not counted).
        size: plans held now.
        maxsize: the size limit (0 = disabled).
        nbytes: the device bytes the plans hold (0 when the cache does not measure them).
        max_bytes: the byte budget (``None``: none).
    """

    hits: int
    misses: int
    evictions: int
    size: int
    maxsize: int
    nbytes: int = 0
    max_bytes: int | None = None


def release_plan(plan: Any) -> None:
    """Release ``plan`` with its ``free()`` or ``close()`` method, if it has one."""
    for name in ("free", "close"):
        method = getattr(plan, name, None)
        if callable(method):
            method()
            return


class _Entry:
    __slots__ = ("evicted", "nbytes", "pins", "value")

    def __init__(self, value: Any):
        self.value, self.pins, self.evicted, self.nbytes = value, 0, False, 0


class _Use:
    """Context manager returned by :meth:`PlanCache.use`: pins the entry for the ``with`` body."""

    __slots__ = ("cache", "entry")

    def __init__(self, cache: PlanCache, entry: _Entry):
        self.cache, self.entry = cache, entry

    def __enter__(self) -> Any:
        return self.entry.value

    def __exit__(self, *exc: object) -> None:
        self.cache._unpin(self.entry)


class PlanCache(Generic[V]):
    """A bounded LRU cache of plans (see the module documentation).

    Args:
        maxsize: the most plans kept; 0 disables caching.
        name: a name for messages and ``repr``.
        on_evict: called with each plan that leaves the cache; default :func:`release_plan`.
        max_bytes: a budget for the device bytes the plans hold (``None``: none); needs ``nbytes``.
        nbytes: ``plan -> bytes of device memory it holds`` (measured when it is cached).
        pinning: allow :meth:`pin`: a pinned key is never evicted by the bounds (only :meth:`discard`
            and :meth:`clear` release it), nor is the newest plan while pinned ones fill the cache.
    """

    def __init__(
        self, maxsize: int = 128, name: str = "plan cache", on_evict: Callable[[V], Any] | None = None, *,
        max_bytes: int | None = None, nbytes: Callable[[V], int] | None = None, pinning: bool = False,
    ):  # fmt: skip
        check_nonnegative_int("maxsize", maxsize)
        if max_bytes is not None:
            check_nonnegative_int("max_bytes", max_bytes)
        if nbytes is not None and not callable(nbytes):
            raise TypeError(f"nbytes must be callable or None; got {nbytes!r}")
        if on_evict is not None and not callable(on_evict):
            raise TypeError(f"on_evict must be callable or None; got {on_evict!r}")
        self.name = name
        self._on_evict = on_evict if on_evict is not None else release_plan
        self._maxsize = maxsize
        self._enabled = True
        self._lock = threading.Lock()
        self._entries: OrderedDict[Hashable, _Entry] = OrderedDict()
        self._building: dict[Hashable, threading.Event] = {}
        self._hits = self._misses = self._evictions = 0
        self._max_bytes = max_bytes
        self._nbytes_of = nbytes
        self._bytes = 0
        self._pinning = bool(pinning)
        self.pinned: set[Hashable] = set()
        """The pinned keys (read-only by convention; :meth:`pin` adds, :meth:`discard` / :meth:`clear`
        drop them)."""

    # ----------------------------------------------------------------- properties
    @property
    def maxsize(self) -> int:
        """The size limit (0 = disabled)."""
        return self._maxsize

    @property
    def enabled(self) -> bool:
        """Whether plans are cached (``False`` also when ``maxsize == 0``). Disabling clears the cache."""
        return self._enabled and self._maxsize > 0

    @enabled.setter
    def enabled(self, value: bool) -> None:
        if not isinstance(value, bool):
            raise TypeError(f"enabled must be True or False; got {value!r}")
        self._enabled = value
        if not value:
            self.clear()

    @property
    def max_bytes(self) -> int | None:
        """The byte budget of the plans' device memory (``None``: none)."""
        return self._max_bytes

    @max_bytes.setter
    def max_bytes(self, value: int | None) -> None:
        if value is not None:
            check_nonnegative_int("max_bytes", value)
        with self._lock:
            self._max_bytes = value
            victims = self._shrink()
        self._release(victims)

    @property
    def stats(self) -> CacheStats:
        """A :class:`CacheStats` snapshot."""
        with self._lock:
            return CacheStats(
                self._hits, self._misses, self._evictions, len(self._entries), self._maxsize, self._bytes,
                self._max_bytes,
            )  # fmt: skip

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._entries

    def __repr__(self) -> str:
        s = self.stats
        return (
            f"PlanCache({self.name!r}, size={s.size}, maxsize={s.maxsize}, enabled={self.enabled}, "
            f"hits={s.hits}, misses={s.misses}, evictions={s.evictions})"
        )

    # ----------------------------------------------------------------- lookups
    def get(self, key: Hashable, default: V | None = None, *, count_miss: bool = True) -> V | None:
        """Return the plan for ``key`` (marking it most recently used), or ``default``.

        The plan is not pinned (see :meth:`use`). ``count_miss=False`` leaves a miss uncounted, for
        a fast path whose miss falls back to :meth:`use` (which counts it).
        """
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                self._misses += count_miss
                return default
            self._entries.move_to_end(key)
            self._hits += 1
            return entry.value

    def put(self, key: Hashable, value: V) -> bool:
        """Store ``value`` under ``key``; return whether it was stored (``False`` when disabled).

        A plan already stored under ``key`` is replaced and released. When the cache is disabled
        the caller keeps ownership of ``value``.
        """
        if not self.enabled:
            return False
        entry = self._new_entry(value)
        with self._lock:
            victims = self._insert(key, entry)
        self._release(victims)
        return True

    def get_or_create(self, key: Hashable, factory: Callable[[], V]) -> V:
        """Return the plan for ``key``, building it with ``factory()`` on a miss.

        The factory runs outside the lock, once per key even under contention; if it raises,
        nothing is cached and the error propagates. When the cache is disabled the new plan is
        returned uncached and the caller owns it (prefer :meth:`use`, which frees it).
        """
        return self._lookup(key, factory, pin=False).value

    def use(self, key: Hashable, factory: Callable[[], V]) -> _Use:
        """Return a context manager yielding the plan for ``key`` (built on a miss), pinned.

        While pinned the plan is not released, even if evicted meanwhile; it is released on exit
        if it was evicted (or never cached because the cache is disabled)::

            with cache.use(key, lambda: make_plan(...)) as plan:
                plan.execute(...)
        """
        return _Use(self, self._lookup(key, factory, pin=True))

    def _lookup(self, key: Hashable, factory: Callable[[], V], pin: bool) -> _Entry:
        while True:
            with self._lock:
                entry = self._entries.get(key)
                if entry is not None:
                    self._entries.move_to_end(key)
                    self._hits += 1
                    entry.pins += pin
                    return entry
                waiter = self._building.get(key)
                if waiter is None:
                    self._misses += 1
                    if self.enabled:
                        done = self._building[key] = threading.Event()
                    else:
                        done = None
                    break
            waiter.wait()  # another thread is building this key; then look again
        return self._build(key, factory, pin, done)

    def _build(
        self, key: Hashable, factory: Callable[[], V], pin: bool, done: threading.Event | None
    ) -> _Entry:
        try:
            entry = self._new_entry(factory())
        except BaseException:
            if done is not None:
                with self._lock:
                    del self._building[key]
                done.set()
            raise
        entry.pins += pin
        victims: list[_Entry] = []
        if done is None:
            entry.evicted = True  # never cached: released on unpin (use) or owned by the caller
            return entry
        with self._lock:
            del self._building[key]
            if self.enabled:
                victims = self._insert(key, entry)
            else:  # disabled while building
                entry.evicted = True
        done.set()
        self._release(victims)
        return entry

    def hit(self, key: Hashable) -> V | None:
        """:meth:`get` without the lock and without counting a miss, for an owner that serialises every
        call of this cache under its own lock (``nvmath.torch.PlannerCache``): a hit's bookkeeping at
        the cost of a dictionary lookup."""
        entry = self._entries.get(key)
        if entry is None:
            return None
        self._entries.move_to_end(key)
        self._hits += 1
        return entry.value

    def touch(self, key: Hashable, hits: int = 1) -> bool:
        """Count ``hits`` hits of ``key`` served elsewhere (a compiled hit path) and make it the most
        recently used; ``False`` when it is not cached (nothing counted). No lock, as :meth:`hit`: a key
        evicted by another thread meanwhile counts as not cached."""
        try:
            self._entries.move_to_end(key)
        except KeyError:
            return False
        self._hits += hits
        return True

    def peek(self, key: Hashable) -> V | None:
        """The plan for ``key`` or ``None``, counting nothing and leaving the recency order alone."""
        entry = self._entries.get(key)
        return None if entry is None else entry.value

    # ----------------------------------------------------------------- eviction
    def pin(self, key: Hashable) -> None:
        """Never evict ``key``'s plan by the bounds (a cache made with ``pinning=True``).

        Raises:
            ValueError: the cache was made without ``pinning``; KeyError: ``key`` is not cached.
        """
        if not self._pinning:
            raise ValueError(f"{self.name} was made without pinning=True; it cannot pin plans")
        with self._lock:
            if key not in self._entries:
                raise KeyError(key)
            self.pinned.add(key)

    def discard(self, key: Hashable) -> bool:
        """Remove and release the plan for ``key``; return whether there was one."""
        with self._lock:
            self.pinned.discard(key)
            entry = self._entries.pop(key, None)
            if entry is not None:
                self._bytes -= entry.nbytes
            victims = self._retire([entry]) if entry is not None else []
        self._release(victims)
        return entry is not None

    def clear(self) -> None:
        """Remove and release every plan (plans in use are released when their user is done)."""
        with self._lock:
            entries = list(self._entries.values())
            self._entries.clear()
            self.pinned.clear()
            self._bytes = 0
            victims = self._retire(entries)
        self._release(victims)

    def resize(self, maxsize: int) -> None:
        """Set the size limit; least recently used plans beyond it are released. 0 disables."""
        check_nonnegative_int("maxsize", maxsize)
        with self._lock:
            self._maxsize = maxsize
            victims = self._shrink()
        self._release(victims)

    def keys(self) -> Iterator[Hashable]:
        """The cached keys, least recently used first (a snapshot)."""
        with self._lock:
            return iter(list(self._entries))

    # ----------------------------------------------------------------- internals (lock held)
    def _new_entry(self, value: V) -> _Entry:  # (no lock needed)
        entry = _Entry(value)
        if self._nbytes_of is not None:
            entry.nbytes = int(self._nbytes_of(value))
        return entry

    def _insert(self, key: Hashable, entry: _Entry) -> list[_Entry]:
        old = self._entries.pop(key, None)
        if old is not None:
            self._bytes -= old.nbytes
        self._entries[key] = entry
        self._bytes += entry.nbytes
        victims = self._retire([old]) if old is not None and old.value is not entry.value else []
        return victims + self._shrink()

    def _over_budget(self) -> bool:
        return self._max_bytes is not None and self._bytes > self._max_bytes and len(self._entries) > 1

    def _shrink(self) -> list[_Entry]:
        evicted = []
        limit = self._maxsize if self._enabled else 0
        pinned = self.pinned
        while len(self._entries) > limit or self._over_budget():
            if pinned:  # the least recently used unpinned plan, never the newest
                newest = next(reversed(self._entries))
                victim = next((k for k in self._entries if k not in pinned and k != newest), None)
                if victim is None:
                    break
                entry = self._entries.pop(victim)
            else:
                _, entry = self._entries.popitem(last=False)
            self._bytes -= entry.nbytes
            evicted.append(entry)
        self._evictions += len(evicted)
        return self._retire(evicted)

    @staticmethod
    def _retire(entries: list[_Entry]) -> list[_Entry]:
        """Mark entries evicted; return those that can be released now (not pinned)."""
        for e in entries:
            e.evicted = True
        return [e for e in entries if e.pins == 0]

    def _unpin(self, entry: _Entry) -> None:
        with self._lock:
            entry.pins -= 1
            release = entry.evicted and entry.pins == 0
        if release:
            self._release([entry])

    def _release(self, entries: list[_Entry]) -> None:
        for entry in entries:
            try:
                self._on_evict(entry.value)
            except Exception as exc:  # noqa: BLE001 - cleanup failures warn, never raise
                warn_cleanup_failure(f"{self.name}: releasing a plan", exc, stacklevel=4)
