"""A bounded cache of planned :class:`~nvmath.linalg.advanced.Matmul` objects for training loops.

A training or decode loop multiplies the same few shapes again and again (each layer's forward,
weight-gradient and input-gradient products). :class:`PlannerCache` keeps one planned ``Matmul`` per
problem (shapes, strides, dtype, device, pointer alignment, epilog): no re-planning, no heuristic
query. The key vouches for every check of the first call, so a later call of a problem of GPU
tensors runs the plan on the tensors' addresses (:class:`~nvmath.linalg.advanced._direct.AddressRun`:
nothing wrapped, re-validated or kept); the others (host tensors, staged operand copies) run as
``reset_operands_unchecked`` + ``execute``. Layers of equal shapes share planners.

Planners used while a CUDA graph was captured are pinned: a graph replays their workspace pointer,
so they are never evicted (only :meth:`PlannerCache.clear` frees them, which must not happen while
such a graph may still be replayed). A planner that runs on addresses without a workspace leaves
nothing of its own in a graph (cuBLASLt's kernel arguments are captured by value), so its calls skip
the capture check.
"""

from __future__ import annotations

import threading
from collections.abc import Hashable, Mapping
from typing import Any, NamedTuple

import torch

from nvmath._internal import caches, compiled_hits, streams
from nvmath._internal.plan_cache import PlanCache
from nvmath.linalg.advanced import Matmul
from nvmath.linalg.advanced import MatmulEpilog as E
from nvmath.linalg.advanced._direct import AddressRun, address_run_possible
from nvmath.torch import _capture, _linear_hit
from nvmath.torch._capture import capturing, refuse_planning

__all__ = ["PRODUCT", "CacheStats", "PlannerCache", "compiled_cache", "default_cache"]

PRODUCT = _linear_hit.PRODUCT
"""The activation name of a plain product ``a @ b`` of :meth:`PlannerCache.run` in
:attr:`PlannerCache.linear_hits`."""


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


_ROW_MAJOR = (None, E.RELU, E.GELU)
"""Linear-layer epilogs that leave D's layout free: the product is formed as ``x @ w.T`` (row-major
result); the others need D column-major, so it is formed as ``w @ x.T`` (whose column-major D is ``y``)."""


class _LinearRun:
    """How a planned Linear-layer problem runs on addresses (:meth:`PlannerCache.linear` does it): the
    :class:`AddressRun`, whether x is its A operand, and how ``y`` is allocated (the caller's shape,
    contiguous)."""

    __slots__ = ("bias", "pinned", "run", "shape", "strides", "template", "twin", "x_first")

    def __init__(self, run: AddressRun, x_first: bool, bias: bool, y: Any):
        self.run, self.x_first, self.bias = run, x_first, bias
        self.pinned = False  # (set when a hit pins the key: a pinned key stays pinned while cached)
        self.twin: Any = None  # the compiled table's entry last made for this problem (see _compile)
        self.shape, self.strides = tuple(y.shape), y.stride()
        self.template = y.new_empty((0,))  # y's dtype and device, no memory: new_empty_strided's source


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


class _ProductRun:
    """How a planned product of :meth:`PlannerCache.run` runs on addresses: the :class:`AddressRun` and
    how its result is allocated (as the planner allocates it)."""

    __slots__ = ("pinned", "run", "shape", "strides", "template", "transposed", "twin")

    x_first = True  # (a is the product's A operand: for the compiled table, as _LinearRun's)

    def __init__(self, run: AddressRun, result: Any):
        self.run, self.template = run, result.new_empty((0,))  # the result's dtype and device, no memory
        self.pinned = False  # (set when this path pins the key: a pinned key stays pinned while cached)
        self.twin: Any = None  # the compiled table's entry last made for this product (see _compile)
        self.shape, self.strides = run.result_layout[:2]
        shape, strides = self.shape[::-1], self.strides[::-1]
        dense = len(shape) == 2 and (shape[1] <= 1 or strides[1] == 1)
        dense = dense and (shape[0] <= 1 or strides[0] == shape[1])
        self.transposed = (shape, strides) if dense else None
        """The layout of the result's transpose (its memory), when that is a contiguous matrix."""

    @classmethod
    def of(cls, entry: list, names: tuple[str, ...], out: Any) -> _ProductRun | None:
        """The run of a newly planned, executed product (``out``: what it returned), or ``None`` when it
        cannot run on addresses (then nothing changes); the planner, released, then holds no tensor."""
        mm = entry[0]
        result = out[0] if isinstance(out, tuple) else out
        if not isinstance(result, torch.Tensor) or not result.numel() or not address_run_possible(mm, names):
            return None
        run = AddressRun(mm, names)
        if tuple(result.shape) != run.result_layout[0] or result.stride() != run.result_layout[1]:
            return None
        mm.release_operands()
        entry[1] = None
        return cls(run, result)


class PlannerCache:
    """Planned ``Matmul`` objects by problem, least recently used evicted beyond ``maxsize``.

    Args:
        maxsize: the most planners kept (each may hold a cuBLASLt workspace), >= 1.
        autotune: time the candidate algorithms of each new problem (``Matmul.autotune``) before its
            first use; ``True`` for 10 iterations per candidate, or an int. Off by default.
        keep_operands: let a planner that cannot run on addresses keep its last operands between calls
            (so a call whose weight did not move swaps in the input only; planners that run on
            addresses keep none). ``False`` drops them after every call
            (``release_operands``) and takes the workspaces from cuda.core's memory pool instead of
            torch's allocator: what ``torch.compile(mode="reduce-overhead")`` needs, whose CUDA graph
            pools must hold nothing but tracked tensors (:data:`compiled_cache`).

    ``stats`` reports hits, misses and evictions; :meth:`clear` frees every planner;
    :meth:`resize` changes the bound; :meth:`planners` lists them.
    """

    def __reduce_ex__(self, protocol: Any) -> Any:
        raise TypeError(
            "PlannerCache objects cannot be pickled or copied: they hold planned Matmul objects (GPU "
            "handles and memory of this process); create a new PlannerCache where it is needed"
        )

    def __init__(self, maxsize: int = 64, *, autotune: bool | int = False, keep_operands: bool = True):
        self._check_size(maxsize)
        self._keep = bool(keep_operands)
        if isinstance(autotune, bool):
            self._autotune = 10 if autotune else 0
        elif isinstance(autotune, int) and autotune >= 1:
            self._autotune = autotune
        else:
            raise ValueError(f"autotune must be a bool or an int >= 1 (iterations); got {autotune!r}")
        # key -> [planner, last pointers (None: it holds no operand), its _LinearRun / _ProductRun or None
        # (None: swap the operands in)]; run_general()'s entries have no third item. The PlanCache keeps
        # the LRU order, hits and evictions; a key is pinned while a CUDA graph may replay its planner.
        self._cache: PlanCache[list] = PlanCache(
            maxsize, name="nvmath.torch planner cache", on_evict=_free_entry, pinning=True
        )
        self._lock = threading.RLock()
        self._misses = 0
        self.linear_hits: Any = _linear_hit.table()
        """The compiled Linear hits (``nvmath._fastcall.LinearHits``: ``hits(x, weight, bias, activation)``
        -> the result, or ``None`` to take the Python path), or ``None`` on the pure-Python path; see
        :mod:`nvmath.torch._linear_hit`. Its hits are folded into :attr:`stats` and the LRU order."""

    @staticmethod
    def _check_size(maxsize: Any) -> None:
        if isinstance(maxsize, bool) or not isinstance(maxsize, int) or maxsize < 1:
            raise ValueError(f"maxsize must be an int >= 1; got {maxsize!r}")

    @property
    def stats(self) -> CacheStats:
        """The cache's counters and size."""
        with self._lock:
            self._fold_hits()
        base, pinned = self._cache.stats, len(self._cache.pinned)
        return CacheStats(base.hits, self._misses, base.evictions, base.size, base.maxsize, pinned)

    def __len__(self) -> int:
        return len(self._cache)

    def planners(self) -> tuple[Matmul, ...]:
        """The cached planners, least recently used first (to inspect, e.g. ``.algorithms[0]`` or
        ``.view.epilog``; do not execute or free them)."""
        with self._lock:
            self._fold_hits()
            cache = self._cache
            return tuple(cache.peek(key)[0] for key in cache.keys())  # type: ignore[index]

    def resize(self, maxsize: int) -> None:
        """Change the bound (evicting least recently used unpinned planners beyond it)."""
        self._check_size(maxsize)
        with self._lock:
            self._fold_hits()
            self._cache.resize(maxsize)

    def clear(self) -> None:
        """Free every planner (do not call while a CUDA graph that used one may still be replayed)."""
        with self._lock:
            self._fold_hits()
            if self.linear_hits is not None:
                self.linear_hits.clear()
            self._cache.clear()

    def run(
        self, a: Any, b: Any, *, epilog: Any = None, epilog_inputs: Mapping[str, Any] | None = None,
        compile_hit: bool = False,
    ) -> Any:  # fmt: skip
        """``epilog(a @ b)`` on the cached planner of this problem (planned on first use).

        Returns what :meth:`Matmul.execute` returns: the result, or ``(result, aux_dict)``.
        ``compile_hit``: the caller tries :attr:`linear_hits` with ``(a, b, None, PRODUCT)`` first, so a
        plain product's hit on addresses gives it this problem's entry.

        Raises:
            CaptureError: the problem is not planned yet and a CUDA graph is being captured.
        """
        pa, pb = a.data_ptr(), b.data_ptr()
        qa, qb = pa | 256, pb | 256  # the pointer alignment, capped at 256: the lowest set bit
        key: tuple = (
            epilog, a.shape, a.stride(), a.dtype, a.device, qa & -qa,
            b.shape, b.stride(), b.dtype, b.device, qb & -qb,
        )  # fmt: skip
        pins: tuple = ()
        if epilog_inputs:
            pins = tuple(t.data_ptr() for t in epilog_inputs.values())
            key += tuple((n, _tkey(t, p)) for (n, t), p in zip(epilog_inputs.items(), pins))
        with self._lock:
            entry = self._cache.hit(key)  # (under self._lock)
            if entry is None:
                out, entry = self._plan_and_run(key, a, b, epilog, epilog_inputs, (pa, pb, pins))
                entry.append(_ProductRun.of(entry, tuple(epilog_inputs or ()), out))
                return out
            pr = entry[2]
            if pr is None:
                return self._hit(key, entry, a, b, epilog_inputs, (pa, pb, pins))
            run = pr.run
            if not pr.pinned and run.workspace_size and _capture.capturing_now():  # (no key hash)
                self._cache.pin(key)  # (a graph replays the workspace: nothing else of the planner's)
                pr.pinned = True
            y = pr.template.new_empty_strided(pr.shape, pr.strides)  # (as the planner allocates it)
            extras = run(pa, pb, y.data_ptr(), pins)
            if compile_hit and epilog is None and not pins and self.linear_hits is not None:
                self._compile(key, PRODUCT, pr, a, b, None)
            return y if extras is None else (y, extras)

    def weight_grad(self, x: Any, dz: Any, bias: bool, *, compile_hit: bool = False) -> tuple[Any, Any]:
        """A Linear layer's weight gradient ``dz.T @ x`` ((N, K), contiguous) from 2-D ``x`` (M, K) and
        ``dz`` (M, N), and with ``bias`` its bias gradient ``dz.sum(0)`` (else ``None``).

        Run as the product ``x.T @ dz`` (with BGRADB for the bias gradient: the orientation cuBLASLt
        fuses), whose column-major result is the gradient's memory: a hit allocates the gradient itself
        and runs on the addresses, making no view of ``x`` or of the result. ``compile_hit``: the caller
        tries :attr:`linear_hits` with ``(x, dz, None, WEIGHT_GRAD or WEIGHT_BIAS_GRAD)`` first, so a hit
        on addresses gives it this problem's entry.
        """
        epilog = E.BGRADB if bias else None
        px, pd = x.data_ptr(), dz.data_ptr()
        qx, qd = px | 256, pd | 256  # the pointer alignment, capped at 256: the lowest set bit
        key = (
            "x.T @ dz", epilog, x.shape, x.stride(), x.dtype, x.device, qx & -qx,
            dz.shape, dz.stride(), dz.dtype, dz.device, qd & -qd,
        )  # fmt: skip
        with self._lock:
            entry = self._cache.hit(key)  # (under self._lock)
            if entry is None:
                out, entry = self._plan_and_run(key, x.mT, dz, epilog, None, (px, pd, ()))
                entry.append(_ProductRun.of(entry, (), out))
            elif entry[2] is None or entry[2].transposed is None:
                out = self._hit(key, entry, x.mT, dz, None, (px, pd, ()))
            else:
                pr = entry[2]
                run = pr.run
                if not pr.pinned and run.workspace_size and _capture.capturing_now():  # (no key hash)
                    self._cache.pin(key)  # (a graph replays the workspace: nothing else of the planner's)
                    pr.pinned = True
                dw = pr.template.new_empty_strided(*pr.transposed)
                extras = run(px, pd, dw.data_ptr())
                if compile_hit and self.linear_hits is not None:
                    name = _linear_hit.WEIGHT_BIAS_GRAD if bias else _linear_hit.WEIGHT_GRAD
                    self._compile(key, name, pr, x, dz, None)
                return dw, extras["bgradb"] if extras else None
        result, extras = out if isinstance(out, tuple) else (out, None)
        return result.mT.contiguous(), extras["bgradb"] if extras else None

    def linear(
        self, x: Any, w: Any, b: Any, epilog: Any, *, plan: bool = True, compile_hit: bool = False
    ) -> tuple[Any, Any] | None:
        """A Linear layer's product ``epilog(x @ w.T + b)``: ``(y, aux_dict or None)``, ``y`` of shape
        ``(*x.shape[:-1], N)``, contiguous.

        The key is built from cheap reads of ``x``, ``w`` and ``b`` (shapes, strides, dtypes, devices,
        pointer alignments) and vouches for every check of the first call: a hit runs the planned
        problem on the tensors' addresses (no operand is wrapped, validated or kept), into a ``y``
        allocated here in the caller's shape. The caller checked the operands (dtypes, devices,
        shapes, ``b`` of shape ``(N,)``) before a first call; with ``plan=False`` a problem that is
        not planned yet returns ``None`` (nothing checked, nothing done). ``compile_hit``: the caller
        tries :attr:`linear_hits` first, so a hit on addresses gives it this problem's entry.

        Raises:
            CaptureError: the problem is not planned yet and a CUDA graph is being captured.
        """
        px, pw = x.data_ptr(), w.data_ptr()
        qx, qw = px | 256, pw | 256  # the pointer alignment, capped at 256: the lowest set bit
        if b is None:
            pb = 0
            key: tuple = (
                epilog, x.shape, x.stride(), x.dtype, x.device, qx & -qx,
                w.shape, w.stride(), w.dtype, w.device, qw & -qw,
            )  # fmt: skip
        else:
            pb = b.data_ptr()
            qb = pb | 256
            key = (
                epilog, x.shape, x.stride(), x.dtype, x.device, qx & -qx,
                w.shape, w.stride(), w.dtype, w.device, qw & -qw,
                b.shape, b.stride(), b.dtype, b.device, qb & -qb,
            )  # fmt: skip
        with self._lock:
            entry = self._cache.hit(key)  # (under self._lock)
            if entry is None:
                return self._plan_linear(key, x, w, b, epilog) if plan else None
            lr = entry[2]
            if lr is None:
                self._pin_if_capturing(key, x)
                return self._linear_by_views(entry, x, w, b, epilog)
            run = lr.run
            if not lr.pinned and run.workspace_size and _capture.capturing_now():  # (no key hash)
                self._cache.pin(key)  # (a graph replays the workspace: nothing else of the planner's)
                lr.pinned = True
            y = lr.template.new_empty_strided(lr.shape, lr.strides)  # (no dtype/device keywords to parse)
            if lr.x_first:
                extras = run(px, pw, y.data_ptr())
            else:
                extras = run(pw, px, y.data_ptr(), (pb,) if lr.bias else ())
            if compile_hit and self.linear_hits is not None and epilog in _linear_hit.ACTIVATION_OF:
                self._compile(key, _linear_hit.ACTIVATION_OF[epilog], lr, x, w, b)
            return y, extras

    def infer(self, x: Any, w: Any, b: Any, epilog: Any) -> Any:
        """``y`` of :meth:`linear` for an epilog without aux outputs (inference), or ``None`` when the
        problem is not planned yet (nothing checked, nothing done): the hot path of an eager
        ``nvmath.torch.linear`` / ``Linear`` call without grad (no result tuple, no keyword)."""
        px, pw = x.data_ptr(), w.data_ptr()
        qx, qw = px | 256, pw | 256  # the pointer alignment, capped at 256: the lowest set bit
        if b is None:
            pb = 0
            key: tuple = (
                epilog, x.shape, x.stride(), x.dtype, x.device, qx & -qx,
                w.shape, w.stride(), w.dtype, w.device, qw & -qw,
            )  # fmt: skip
        else:
            pb = b.data_ptr()
            qb = pb | 256
            key = (
                epilog, x.shape, x.stride(), x.dtype, x.device, qx & -qx,
                w.shape, w.stride(), w.dtype, w.device, qw & -qw,
                b.shape, b.stride(), b.dtype, b.device, qb & -qb,
            )  # fmt: skip
        with self._lock:
            entry = self._cache.hit(key)  # (under self._lock)
            if entry is None:
                return None
            lr = entry[2]
            if lr is None:
                self._pin_if_capturing(key, x)
                return self._linear_by_views(entry, x, w, b, epilog)[0]
            run = lr.run
            if not lr.pinned and run.workspace_size and _capture.capturing_now():  # (no key hash)
                self._cache.pin(key)  # (a graph replays the workspace: nothing else of the planner's)
                lr.pinned = True
            y = lr.template.new_empty_strided(lr.shape, lr.strides)
            if lr.x_first:
                run(px, pw, y.data_ptr())
            else:
                run(pw, px, y.data_ptr(), (pb,) if lr.bias else ())
            if self.linear_hits is not None and epilog in _linear_hit.ACTIVATION_OF:
                self._compile(key, _linear_hit.ACTIVATION_OF[epilog], lr, x, w, b)
            return y

    def _compile(self, key: Hashable, act: Any, lr: Any, x: Any, w: Any, b: Any) -> None:
        """Give :attr:`linear_hits` this problem's entry (``act``: the activation, or :data:`PRODUCT`;
        ``lr``: its ``_LinearRun`` / ``_ProductRun``) after a Python hit on addresses (lock held),
        unless the entry made last time is still listed and made for the same thread, stream, launch,
        algorithm and pinning (then the compiled call missed for a reason a new entry would not fix,
        another current device, say: the Python path keeps running it)."""
        twin = lr.twin
        if twin is not None and twin.listed and twin.thread == threading.get_ident():
            launch = twin.launch
            if not launch.closed and launch.algo is twin.algo and (twin.capture_free or not lr.pinned):
                raw = streams.torch_raw_stream()
                if raw is not None and raw(launch.device_id) == twin.stream:
                    return
        made = _linear_hit.build(key, act, lr, x, w, b)
        if made is not None:
            self._fold_hits()  # (an entry the table drops takes its count with it)
            self.linear_hits.add(made)
            lr.twin = made

    def _fold_hits(self) -> None:
        """Count the compiled table's hits in the cache's counters and LRU order (lock held)."""
        compiled_hits.fold(self.linear_hits, self._cache)

    def _pin_if_capturing(self, key: Hashable, t: Any) -> None:
        """Pin ``key``'s planner when a CUDA graph is being captured (a graph replays its workspace)."""
        if capturing(t) and key not in self._cache.pinned:
            self._cache.pin(key)

    def _linear_views(self, x: Any, w: Any, b: Any, epilog: Any) -> tuple[Any, Any, Any, Any]:
        """``(x2, A, B, epilog_inputs)`` of a Linear layer's product (``x2``: ``x`` as 2-D rows)."""
        x2 = x if x.dim() == 2 else x.reshape(-1, x.shape[-1])
        if epilog in _ROW_MAJOR:  # no bias, no aux: x @ w.T comes out row-major as it is
            return x2, x2, w.mT, None
        return x2, w, x2.mT, None if b is None else {"bias": b.view(-1, 1)}

    def _plan_linear(self, key: Hashable, x: Any, w: Any, b: Any, epilog: Any) -> tuple[Any, Any]:
        """Plan a Linear layer's problem, run it, and cache it (lock held): on addresses from then on
        when the planner can (GPU tensors, ``x`` viewed as rows without a copy, ``y``'s layout)."""
        x2, a, bb, inputs = self._linear_views(x, w, b, epilog)
        pins = () if inputs is None else (b.data_ptr(),)
        out, entry = self._plan_and_run(key, a, bb, epilog, inputs, (a.data_ptr(), bb.data_ptr(), pins))
        y, extras = self._as_output(out, x, w, epilog)
        entry.append(self._address_run(entry, x, x2, y, epilog, bool(pins)))
        return y, extras

    @staticmethod
    def _address_run(entry: list, x: Any, x2: Any, y: Any, epilog: Any, bias: bool) -> _LinearRun | None:
        """The :class:`_LinearRun` of a newly planned Linear-layer problem, or ``None`` when it cannot
        run on addresses (then the planner, released, holds no tensor)."""
        mm = entry[0]
        names = ("bias",) if bias else ()
        if x2.data_ptr() != x.data_ptr() or not y.numel() or not x2.numel():
            return None  # (a reshape that copied; an empty product)
        if not address_run_possible(mm, names):
            return None
        run = AddressRun(mm, names)
        rows, n = x2.shape[0], y.shape[-1]
        shape, strides, _ = run.result_layout
        # D must be y's memory: (M, N) row-major, or its transpose (N, M) column-major
        expected = ((rows, n), (n, 1)) if epilog in _ROW_MAJOR else ((n, rows), (1, n))
        if shape != expected[0] or any(s != e for s, e, d in zip(strides, expected[1], shape) if d > 1):
            return None
        mm.release_operands()
        entry[1] = None
        return _LinearRun(run, epilog in _ROW_MAJOR, bias, y)

    def _linear_by_views(self, entry: list, x: Any, w: Any, b: Any, epilog: Any) -> Any:
        """A hit on a Linear-layer problem that cannot run on addresses: swap the views in (lock held)."""
        _, a, bb, inputs = self._linear_views(x, w, b, epilog)
        pins = () if inputs is None else (b.data_ptr(),)
        if inputs is not None and entry[1] is not None and entry[1][2] == pins:
            inputs = None
        out = self._swap_and_run(entry, a, bb, inputs, (a.data_ptr(), bb.data_ptr(), pins))
        return self._as_output(out, x, w, epilog)

    @staticmethod
    def _as_output(out: Any, x: Any, w: Any, epilog: Any) -> tuple[Any, Any]:
        """``(y, extras)`` from a planner's result (``y.T`` for the column-major orientation)."""
        y, extras = out if isinstance(out, tuple) else (out, None)
        if epilog not in _ROW_MAJOR:
            y = y.mT
        y = y if y.is_contiguous() else y.contiguous()
        return (y if x.dim() == 2 else y.view(*x.shape[:-1], w.shape[0])), extras

    def _hit(self, key: Hashable, entry: list, a: Any, b: Any, epilog_inputs: Any, ptrs: tuple) -> Any:
        """Run on a cached planner (the caller holds the lock), swapping in only the operands that moved."""
        self._pin_if_capturing(key, a)
        return self._swap_and_run(entry, a, b, epilog_inputs, ptrs)

    def _swap_and_run(self, entry: list, a: Any, b: Any, epilog_inputs: Any, ptrs: tuple) -> Any:
        mm, last = entry[0], entry[1]
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
            entry = self._cache.hit(key)  # (under self._lock)
            if entry is None:
                made = self._plan_and_run(key, a, b, epilog, epilog_inputs, (), c=c, alpha=alpha, beta=beta)
                return made[0]
            self._pin_if_capturing(key, a)
            mm = entry[0]
            mm.reset_operands_unchecked(a=a, b=b, c=c, alpha=alpha, beta=beta, epilog_inputs=epilog_inputs)
            return self._execute(entry, mm, ())

    def _plan_and_run(
        self, key: Hashable, a: Any, b: Any, epilog: Any, epilog_inputs: Any, ptrs: tuple, *, c: Any = None,
        alpha: Any = None, beta: Any = None,
    ) -> tuple[Any, list]:  # fmt: skip
        """Plan (and autotune, if asked) the planner of a new problem, run it and cache it (lock held):
        ``(what it returned, its cache entry)``."""
        refuse_planning("nvmath.torch would plan a new matmul (first use of these shapes)", a)
        self._fold_hits()  # (the LRU order the eviction below follows)
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
        self._cache.put(key, entry)  # (evicts the least recently used unpinned planners beyond the bound)
        return out, entry


def _free_entry(entry: list) -> None:
    """Free an evicted or cleared entry's planner."""
    entry[0].free()


default_cache = caches.register("nvmath.torch: default planner cache", PlannerCache())
"""The planner cache that :class:`~nvmath.torch.Linear`, :class:`~nvmath.torch.MLP` and their backward
passes use in eager mode unless given another."""

compiled_cache = caches.register("nvmath.torch: compiled planner cache", PlannerCache(keep_operands=False))
"""The planner cache of the ``torch.ops.nvmath.*`` custom operators (what ``torch.compile`` runs): its
planners keep no operand between calls, as CUDA graph trees (``mode="reduce-overhead"``) require."""
