"""Per-group cuBLASLt products of :class:`~nvmath.torch.GroupedLinear`, written into slices of one output.

Why not one grouped launch on the GPU. cuBLAS's grouped GEMM (``cublasGemmGroupedBatchedEx``, what
``nvmath.linalg.matmul`` launches for a sequence of bf16 problems) runs
``cutlass_80_tensorop_bf16_s16816gemm_bf16_grouped_128x64``, an sm80 (Ampere) kernel, on Hopper too:
measured on an H200 (8 experts 4096 -> 2048, 16384 bf16 tokens), ~815 us per product against ~370 us
for the same products as per-expert cuBLASLt GEMMs (sm90 ``nvjet`` kernels). cuBLASLt 13.1, the GPU
machine's, has no grouped GEMM (its ``cublasLt.h`` knows only strided and pointer-array batches of
equal shapes; the ``CUBLASLT_BATCH_MODE_GROUPED`` layouts of later cuBLASLt versions are experimental).
So each group's product is its own cuBLASLt GEMM on a planned :class:`~nvmath.linalg.advanced.Matmul`,
run on the tensors' addresses (:class:`~nvmath.linalg.advanced._direct.AddressRun`) straight into
the group's slice of a preallocated output: no concatenation, no zero-fill, the bias in the GEMM
(``BIAS`` epilog) and its gradient out of the weight-gradient GEMM (``BGRADB``).

:class:`SliceRuns` keeps one planner per group problem (shapes, strides, dtypes, pointer alignments,
epilog), least recently used evicted, and for each product run per group the list of its launches
as offsets from its operands' base addresses (:meth:`SliceRuns.run_product`): a product seen before
replays that list, so its host cost is the launches themselves. The token counts of a
mixture-of-experts layer may change every step, and planning costs ~0.2 ms of host time per problem;
so a product is planned only when it is seen a second time (the first time ``None`` comes back and the
caller runs one grouped launch): a layer whose counts repeat (fixed-capacity routing, a benchmark)
plans once and then runs per group; one whose counts never repeat keeps the grouped launch and plans
nothing. ``SliceRuns.enabled = False`` switches the per-group path off.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from typing import Any

from nvmath._internal import caches
from nvmath._internal.plan_cache import PlanCache
from nvmath.linalg.advanced import Matmul
from nvmath.linalg.advanced._direct import AddressRun, address_run_possible
from nvmath.torch._capture import capturing
from nvmath.torch._planners import SMALL_PRODUCT_SIDE, SMALL_PRODUCT_WORKSPACE

__all__ = ["MAX_PER_GROUP_LAUNCHES", "MIN_FLOPS_PER_GROUP", "Problem", "SliceRuns", "default_runs"]

MAX_PER_GROUP_LAUNCHES = 32
"""Products of more groups with tokens than this stay one grouped launch (the host cost of one
launch per group, ~10-15 us each, outgrows the grouped kernel's loss with many small groups)."""

MIN_FLOPS_PER_GROUP = 2e9
"""Products of less work per group with tokens than this stay one grouped launch: there the GPU
runs each group's GEMM faster than the host launches it (~10-15 us of host time per launch, against
one for the grouped GEMM), so the faster per-group kernels would not show. An estimate (2 GFLOP is
~3-10 us of an H200's bfloat16 GEMM time at these sizes); the benchmark rows and
``tools/host_profile.py`` measure both sides."""

D_ALIGNMENT = 256
"""A planned out-of-place product writes its result assuming this pointer alignment (the planner
tells cuBLASLt the largest); a slice less aligned than this runs the grouped launch."""

Problem = tuple[Any, Any, Any, Any, dict | None]
"""``(a, b, d, epilog, epilog_inputs)``: ``d = epilog(a @ b)`` where ``d`` is a view of the output."""


def _tkey(t: Any) -> tuple:
    p = t.data_ptr() | D_ALIGNMENT
    return (tuple(t.shape), t.stride(), t.dtype, t.device, p & -p)


def _same_layout(shape: tuple, strides: tuple, d: Any) -> bool:
    """Whether a result of ``shape`` and ``strides`` is ``d``'s memory (strides of extent-1 dims aside)."""
    if tuple(shape) != tuple(d.shape):
        return False
    return all(s == t for s, t, n in zip(strides, d.stride(), shape) if n > 1)


class _Run:
    """A planned group problem on addresses: ``run(a, b, d, inputs)`` -> aux dict or ``None``."""

    __slots__ = ("names", "run")

    def __init__(self, run: AddressRun, names: tuple[str, ...]):
        self.run, self.names = run, names

    def __call__(self, a: Any, b: Any, d: Any, inputs: dict | None) -> Any:
        pins = tuple(inputs[n].data_ptr() for n in self.names) if inputs else ()
        return self.run(a.data_ptr(), b.data_ptr(), d.data_ptr(), pins)


class SliceRuns:
    """Planned per-group products by problem, run on addresses into slices of an output.

    Args:
        maxsize: the most planners kept (least recently used evicted), >= 1.
        plan_after: plan a problem at its ``plan_after``-th sighting (1: at once; the default 2 keeps
            counts that never repeat on the grouped launch, see the module notes).
        seen: the most problems remembered as seen (not planned yet).
    """

    def __reduce_ex__(self, protocol: Any) -> Any:
        raise TypeError(
            "SliceRuns objects hold planned Matmul objects of this process; they cannot be copied"
        )

    def __init__(self, maxsize: int = 256, *, plan_after: int = 2, seen: int = 4096):
        for name, v in (("maxsize", maxsize), ("plan_after", plan_after), ("seen", seen)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be an int >= 1; got {v!r}")
        self._plan_after = plan_after
        self._cache: PlanCache[list] = PlanCache(
            maxsize, name="nvmath.torch grouped slice runs", on_evict=self._evicted, pinning=True
        )
        # product key -> [(run, a offset, b offset, d offset, input offsets)]: a product's launches with
        # every address an offset from its operands' base addresses (see run_product)
        self._products: OrderedDict[tuple, list] = OrderedDict()
        self.enabled = True
        """``False`` runs every product as one grouped launch (the per-group path switched off)."""
        self._seen: OrderedDict[tuple, int] = OrderedDict()
        self._seen_max = seen
        self._lock = threading.RLock()
        self.planned = 0
        """How many problems were planned (a counter for tests and profiles)."""

    def __len__(self) -> int:
        return len(self._cache)

    @property
    def stats(self) -> Any:
        """The planner cache's counters (as every registered cache reports them)."""
        return self._cache.stats

    def clear(self) -> None:
        """Free every planner and forget the problems seen (not while a CUDA graph using one may replay)."""
        with self._lock:
            self._products.clear()
            self._cache.clear()
            self._seen.clear()

    def _evicted(self, entry: list) -> None:
        """Free an evicted planner; forget the product launch lists (one may hold its run)."""
        self._products.clear()
        if entry[0] is not None:
            entry[0].free()

    def run_product(self, kind: Hashable, bases: tuple, problems: Callable[[], list[Problem]]) -> list | None:
        """:meth:`run` of a product whose problems are views of ``bases`` = ``(A, B, D, bias or None)``
        (each problem's ``a``, ``b``, ``d`` and bias view the first, second, third and fourth), made by
        ``problems()`` only when needed.

        The hot path: a product seen before (``kind``, e.g. the counts, and the bases' shapes, strides,
        dtypes, devices and addresses modulo :data:`D_ALIGNMENT`, which fix every view's alignment as
        the problems' keys count it) replays its
        launches on the bases' addresses plus the offsets recorded when it was first run: no view,
        no per-group key.
        """
        if not self.enabled:
            return None
        ptrs = tuple(0 if t is None else t.data_ptr() for t in bases)
        low = D_ALIGNMENT - 1  # (an address modulo D_ALIGNMENT fixes its views' alignments up to it)
        key = (kind, *(None if t is None else (t.shape, t.stride(), t.dtype, t.device, p & low)
                       for t, p in zip(bases, ptrs)))  # fmt: skip
        with self._lock:
            items = self._products.get(key)
            if items is None or capturing(bases[0]):  # (a capture pins planners: the problems' path)
                if items is None and not self._seen_before([key]):
                    return None  # (new counts: no views, no per-group keys, nothing planned)
                return self._first_product_run(key, ptrs, problems())
            self._products.move_to_end(key)
            pa, pb, pd, pi = ptrs
            return [
                run(pa + oa, pb + ob, pd + od, (pi + oi[0],) if oi else ()) for run, oa, ob, od, oi in items
            ]

    def _first_product_run(self, key: tuple, ptrs: tuple, problems: list[Problem]) -> list | None:
        """Run a product by its problems (lock held) and, when it ran per group, record its launches
        (the product was seen often enough: its problems are planned at once)."""
        runs = self.runs(problems, seen=True)
        if runs is None:
            return None
        pa, pb, pd, pi = ptrs
        items = []
        for r, (a, b, d, _, inputs) in zip(runs, problems):
            offsets = tuple(inputs[n].data_ptr() - pi for n in r.names) if inputs else ()  # (the bias: one)
            items.append((r.run, a.data_ptr() - pa, b.data_ptr() - pb, d.data_ptr() - pd, offsets))
        made = [r(a, b, d, inputs) for r, (a, b, d, _, inputs) in zip(runs, problems)]
        self._products[key] = items
        while len(self._products) > self._cache.maxsize:
            self._products.popitem(last=False)
        return made

    def run(self, problems: Sequence[Problem]) -> list | None:
        """Run every problem into its ``d`` (planning those seen often enough): their aux outputs (a
        dict or ``None`` each), or ``None`` when one of them cannot run so now (then none ran): see
        :meth:`runs`."""
        if not self.enabled:
            return None
        with self._lock:  # (no other thread evicts a planner between the lookup and its run)
            runs = self.runs(problems)
            if runs is None:
                return None
            return [r(a, b, d, inputs) for r, (a, b, d, _, inputs) in zip(runs, problems)]

    def runs(self, problems: Sequence[Problem], *, seen: bool = False) -> list[_Run] | None:
        """The runs of every problem (planning those seen before), or ``None`` when they do not run so
        now: more than :data:`MAX_PER_GROUP_LAUNCHES`, less work than :data:`MIN_FLOPS_PER_GROUP` per
        group, one less aligned than :data:`D_ALIGNMENT`, seen for the first time, not plannable inside
        a CUDA graph capture, or not a plan that runs on addresses into its ``d`` (``seen``: the caller
        counted the sightings, plan what is missing)."""
        if not problems or len(problems) > min(MAX_PER_GROUP_LAUNCHES, self._cache.maxsize):
            return None  # (a product's planners must all fit: none evicts another of the same call)
        work = sum(a.shape[-2] * a.shape[-1] * b.shape[-1] for a, b, *_ in problems)
        if not work or 2 * work < MIN_FLOPS_PER_GROUP * len(problems):
            return None  # (an empty product (no features) has nothing to launch either way)
        keys = [self._key(p) for p in problems]
        if any(k is None for k in keys):
            return None
        with self._lock:
            entries = [self._cache.hit(k) for k in keys]
            missing = [i for i, e in enumerate(entries) if e is None]
            if missing and capturing(problems[0][0]):
                return None
            if missing and not (seen or self._seen_before([keys[i] for i in missing])):
                return None
            planned: dict[tuple, list] = {}  # (groups of equal problems share one planner)
            for i in missing:
                entry = planned.get(keys[i])
                if entry is None:
                    entry = planned[keys[i]] = self._plan(keys[i], problems[i])
                entries[i] = entry
            if any(e[1] is None for e in entries):
                return None
            if capturing(problems[0][0]):
                for k, e in zip(keys, entries):
                    if e[1].run.workspace_size and k not in self._cache.pinned:
                        self._cache.pin(k)  # (a graph replays the workspace)
            return [e[1] for e in entries]

    @staticmethod
    def _key(p: Problem) -> tuple | None:
        a, b, d, epilog, inputs = p
        if d.data_ptr() % D_ALIGNMENT:
            return None
        extra = tuple((n, _tkey(t)) for n, t in inputs.items()) if inputs else ()
        return (epilog, _tkey(a), _tkey(b), tuple(d.shape), d.stride(), d.dtype, *extra)

    def _seen_before(self, keys: list[tuple]) -> bool:
        """Whether every key has now been seen ``plan_after`` times (counting this one; lock held)."""
        seen, due = self._seen, self._plan_after
        ready = True
        for k in keys:
            n = seen.pop(k, 0) + 1
            seen[k] = n  # (most recent last)
            ready = ready and n >= due
        while len(seen) > self._seen_max:
            seen.popitem(last=False)
        if ready:
            for k in keys:
                seen.pop(k, None)
        return ready

    def _plan(self, key: tuple, p: Problem) -> list:
        """Plan ``p``, cache it: ``[planner, run or None]`` (``None``: it cannot run into ``d``)."""
        a, b, d, epilog, inputs = p
        small = min(a.shape[-2], b.shape[-1]) <= SMALL_PRODUCT_SIDE
        mm = Matmul(a, b, options={"memory_limit": SMALL_PRODUCT_WORKSPACE} if small else None)
        try:
            mm.plan(epilog=epilog, epilog_inputs=inputs)
            names = tuple(inputs) if inputs else ()
            run = None
            if address_run_possible(mm, names):
                made = AddressRun(mm, names)
                if made.result_layout and _same_layout(*made.result_layout[:2], d):
                    run = _Run(made, names)
            mm.release_operands()
        except BaseException:
            mm.free()
            raise
        self.planned += 1
        if run is None:  # (remembered as "runs the grouped launch"; the planner is of no use)
            mm.free()
            mm = None
        entry = [mm, run]
        self._cache.put(key, entry)
        return entry


default_runs = caches.register("nvmath.torch: grouped slice runs", SliceRuns())
"""The per-group planners of :class:`~nvmath.torch.GroupedLinear` (eager and custom-op paths)."""
