"""A bounded cache of planned :class:`~nvmath.linalg.advanced.Matmul` objects for training loops.

A training or decode loop multiplies the same few shapes again and again (each layer's forward,
weight-gradient and input-gradient products). :class:`PlannerCache` keeps one planned ``Matmul`` per
problem (shapes, strides, dtype, device, pointer alignment, epilog) and runs a call as
``reset_operands_unchecked`` + ``execute`` on it: no re-planning, no heuristic query. Layers of equal
shapes share planners (the operands are swapped in per call).

Planners used while a CUDA graph was captured are pinned: a graph replays their workspace pointer,
so they are never evicted (only :meth:`PlannerCache.clear` frees them, which must not happen while
such a graph may still be replayed).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable, Mapping
from typing import Any, NamedTuple

from nvmath.linalg.advanced import Matmul
from nvmath.torch._capture import capturing, refuse_planning

__all__ = ["CacheStats", "PlannerCache", "compiled_cache", "default_cache"]


class CacheStats(NamedTuple):
    """Counters of a :class:`PlannerCache`."""

    hits: int
    misses: int
    evictions: int
    size: int
    maxsize: int
    pinned: int


def _tkey(t: Any, ptr: int) -> tuple:
    return (t.shape, t.stride(), t.dtype, t.device, min(ptr & -ptr, 256) if ptr else 256)


class _Block:
    """A workspace block of :class:`_OutsideTorchPools` (``ptr`` for nvmath, ``free()`` stream-ordered)."""

    __slots__ = ("buffer", "ptr", "stream")

    def __init__(self, buffer: Any, stream: Any):
        self.buffer, self.stream, self.ptr = buffer, stream, int(buffer.handle)

    def free(self) -> None:
        self.buffer.close(self.stream)


class _OutsideTorchPools:
    """Workspace memory from cuda.core's stream-ordered device memory resource, not torch's caching
    allocator: a CUDA graph tree (``mode="reduce-overhead"``) checks that its memory pool holds nothing
    but tracked tensors, and a planner first run during its warm-up would otherwise put the workspace
    there."""

    def memalloc_async(self, size: int, stream: Any) -> _Block:
        return _Block(stream.device.memory_resource.allocate(size, stream=stream), stream)


_OUTSIDE_TORCH_POOLS = {"allocator": _OutsideTorchPools()}

SMALL_PRODUCT_SIDE = 1024
"""Products whose smaller output side (the token count of a Linear layer) is at most this are planned
under :data:`SMALL_PRODUCT_WORKSPACE` bytes of workspace, as torch plans its own cuBLASLt calls.

Measured on an H200 (bf16 Linear + bias, 4096<->14336, CUDA-graph GPU time per call against torch):
under cuBLASLt's 32 MiB default the heuristic picks split-K kernels for 32-256 tokens that ran at
0.85-0.91x torch's; under 1 MiB its choice ran at 0.99-1.03x for 1 to 4096 tokens. Larger products keep
the default (the training MLP's products are measured there)."""

SMALL_PRODUCT_WORKSPACE = 1 << 20


def _options(a: Any, b: Any, keep: bool) -> Any:
    """The planner options of the product ``a @ b``: the workspace cap by size, the allocator by ``keep``."""
    small = min(a.shape[-2], b.shape[-1]) <= SMALL_PRODUCT_SIDE
    if keep:
        return {"memory_limit": SMALL_PRODUCT_WORKSPACE} if small else None
    return {**_OUTSIDE_TORCH_POOLS, "memory_limit": SMALL_PRODUCT_WORKSPACE} if small else _OUTSIDE_TORCH_POOLS


class PlannerCache:
    """Planned ``Matmul`` objects by problem, least recently used evicted beyond ``maxsize``.

    Args:
        maxsize: the most planners kept (each may hold a cuBLASLt workspace), >= 1.
        autotune: time the candidate algorithms of each new problem (``Matmul.autotune``) before its
            first use; ``True`` for 10 iterations per candidate, or an int. Off by default.
        keep_operands: let a planner keep its last operands between calls (so a call on a layer whose
            weight did not move swaps in the input only). ``False`` drops them after every call
            (``release_operands``) and takes the workspaces from cuda.core's memory pool instead of
            torch's allocator: what ``torch.compile(mode="reduce-overhead")`` needs, whose CUDA graph
            pools must hold nothing but tracked tensors (:data:`compiled_cache`).

    ``stats`` reports hits, misses and evictions; :meth:`clear` frees every planner;
    :meth:`resize` changes the bound.
    """

    def __init__(self, maxsize: int = 64, *, autotune: bool | int = False, keep_operands: bool = True):
        self._check_size(maxsize)
        self._keep = bool(keep_operands)
        if isinstance(autotune, bool):
            self._autotune = 10 if autotune else 0
        elif isinstance(autotune, int) and autotune >= 1:
            self._autotune = autotune
        else:
            raise ValueError(f"autotune must be a bool or an int >= 1 (iterations); got {autotune!r}")
        self._maxsize = maxsize
        self._entries: OrderedDict[Hashable, list] = OrderedDict()  # key -> [planner, last pointers]
        self._pinned: set[Hashable] = set()
        self._lock = threading.RLock()
        self._hits = self._misses = self._evictions = 0

    @staticmethod
    def _check_size(maxsize: Any) -> None:
        if isinstance(maxsize, bool) or not isinstance(maxsize, int) or maxsize < 1:
            raise ValueError(f"maxsize must be an int >= 1; got {maxsize!r}")

    @property
    def stats(self) -> CacheStats:
        """The cache's counters and size."""
        return CacheStats(
            self._hits, self._misses, self._evictions, len(self._entries), self._maxsize, len(self._pinned)
        )

    def __len__(self) -> int:
        return len(self._entries)

    def resize(self, maxsize: int) -> None:
        """Change the bound (evicting least recently used unpinned planners beyond it)."""
        self._check_size(maxsize)
        with self._lock:
            self._maxsize = maxsize
            self._evict()

    def clear(self) -> None:
        """Free every planner (do not call while a CUDA graph that used one may still be replayed)."""
        with self._lock:
            entries = list(self._entries.values())
            self._entries.clear()
            self._pinned.clear()
        for mm, _ in entries:
            mm.free()

    def run(
        self, a: Any, b: Any, *, epilog: Any = None, epilog_inputs: Mapping[str, Any] | None = None
    ) -> Any:
        """``epilog(a @ b)`` on the cached planner of this problem (planned on first use).

        Returns what :meth:`Matmul.execute` returns: the result, or ``(result, aux_dict)``.

        Raises:
            CaptureError: the problem is not planned yet and a CUDA graph is being captured.
        """
        inputs = epilog_inputs or {}
        pa, pb = a.data_ptr(), b.data_ptr()
        pins = tuple(t.data_ptr() for t in inputs.values())
        key = (
            epilog,
            _tkey(a, pa),
            _tkey(b, pb),
            *((n, _tkey(t, p)) for (n, t), p in zip(inputs.items(), pins)),
        )
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return self._plan_and_run(key, a, b, epilog, epilog_inputs, (pa, pb, pins))
            return self._hit(key, entry, a, b, epilog_inputs, (pa, pb, pins))

    def run_linear(self, a: Any, b: Any, bias: Any, epilog: Any) -> Any:
        """:meth:`run` with ``epilog_inputs={"bias": bias.view(-1, 1)}`` (none when ``bias`` is ``None``),
        the bias view made only when the planner needs it (planning, or the bias moved): a layer's hot
        call builds its key from cheap reads and makes no tensor but the ones it swaps in."""
        pa, pb = a.data_ptr(), b.data_ptr()
        if bias is None:
            pins: tuple = ()
            key = (epilog, "linear", _tkey(a, pa), _tkey(b, pb))
        else:
            pins = (bias.data_ptr(),)
            key = (epilog, "linear", _tkey(a, pa), _tkey(b, pb), _tkey(bias, pins[0]))
        with self._lock:
            entry = self._entries.get(key)
            last = None if entry is None else entry[1]
            inputs = None
            if bias is not None and (last is None or last[2] != pins):
                inputs = {"bias": bias.view(-1, 1)}
            if entry is None:
                return self._plan_and_run(key, a, b, epilog, inputs, (pa, pb, pins))
            return self._hit(key, entry, a, b, inputs, (pa, pb, pins))

    def _hit(self, key: Hashable, entry: list, a: Any, b: Any, epilog_inputs: Any, ptrs: tuple) -> Any:
        """Run on a cached planner (the caller holds the lock), swapping in only the operands that moved."""
        self._hits += 1
        self._entries.move_to_end(key)
        if key not in self._pinned and capturing(a):
            self._pinned.add(key)
        mm, last = entry
        if last is None:  # operands released after the last call: give them all
            mm.reset_operands_unchecked(a=a, b=b, epilog_inputs=epilog_inputs)
        elif last != ptrs:  # swap in only what moved (a layer's weight often stays)
            mm.reset_operands_unchecked(
                a=a if ptrs[0] != last[0] else None,
                b=b if ptrs[1] != last[1] else None,
                epilog_inputs=epilog_inputs if ptrs[2] != last[2] else None,
            )
        return self._execute(entry, mm, ptrs)

    def _execute(self, entry: list, mm: Any, ptrs: tuple) -> Any:
        try:
            return mm.execute()
        finally:
            if self._keep:
                entry[1] = ptrs
            else:
                mm.release_operands()
                entry[1] = None

    def run_general(
        self, a: Any, b: Any, c: Any, *, alpha: float, beta: float | None, epilog: Any = None,
        epilog_inputs: Mapping[str, Any] | None = None,
    ) -> Any:  # fmt: skip
        """``epilog(alpha * a @ b + beta * c)`` on the cached planner of this problem (every operand and
        scalar is swapped in on each call; for the ``nvmath::matmul`` custom op)."""
        inputs = epilog_inputs or {}
        parts = [
            (n, _tkey(t, t.data_ptr()))
            for n, t in (("a", a), ("b", b), ("c", c), *inputs.items())
            if t is not None
        ]
        key = ("general", epilog, *parts)
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return self._plan_and_run(key, a, b, epilog, epilog_inputs, (), c=c, alpha=alpha, beta=beta)
            self._hits += 1
            self._entries.move_to_end(key)
            if key not in self._pinned and capturing(a):
                self._pinned.add(key)
            mm = entry[0]
            mm.reset_operands_unchecked(a=a, b=b, c=c, alpha=alpha, beta=beta, epilog_inputs=epilog_inputs)
            return self._execute(entry, mm, ())

    def _plan_and_run(
        self, key: Hashable, a: Any, b: Any, epilog: Any, epilog_inputs: Any, ptrs: tuple, *, c: Any = None,
        alpha: Any = None, beta: Any = None,
    ) -> Any:  # fmt: skip
        """Plan (and autotune, if asked) the planner of a new problem, run it and cache it (lock held)."""
        refuse_planning("nvmath.torch would plan a new matmul (first use of these shapes)", a)
        self._misses += 1
        mm = Matmul(a, b, c, alpha=alpha, beta=beta, options=_options(a, b, self._keep))
        try:
            mm.plan(epilog=epilog, epilog_inputs=epilog_inputs)
            if self._autotune:
                mm.autotune(iterations=self._autotune)
            entry = [mm, ptrs]
            out = self._execute(entry, mm, ptrs)
        except BaseException:
            mm.free()
            raise
        self._entries[key] = entry
        self._evict()
        return out

    def _evict(self) -> None:
        """Free least recently used planners beyond the bound (never a pinned one, nor the newest)."""
        while len(self._entries) > self._maxsize:
            newest = next(reversed(self._entries))
            victim = next((k for k in self._entries if k not in self._pinned and k != newest), None)
            if victim is None:
                return
            self._entries.pop(victim)[0].free()
            self._evictions += 1


default_cache = PlannerCache()
"""The planner cache that :class:`~nvmath.torch.Linear`, :class:`~nvmath.torch.MLP` and their backward
passes use in eager mode unless given another."""

compiled_cache = PlannerCache(keep_operands=False)
"""The planner cache of the ``torch.ops.nvmath.*`` custom operators (what ``torch.compile`` runs): its
planners keep no operand between calls, as CUDA graph trees (``mode="reduce-overhead"``) require."""
