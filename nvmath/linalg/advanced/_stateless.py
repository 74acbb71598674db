"""The stateless :func:`matmul`: one planned :class:`Matmul` per problem, kept in a bounded cache.

A call goes one way (:mod:`nvmath._internal.stateless`): :func:`matmul_key` builds the key from
everything that decides the plan (package, device, shapes, strides, dtypes, conjugation and pointer
alignment of every tensor; epilog; and, when given, epilog-input metadata, qualifiers, quantization
scales, options, preferences, algorithm; the cuBLASLt version), then ``call_cached`` looks it up in
:data:`plan_cache` and runs :meth:`Matmul.run_cached` on the cached plan, or on one planned by
:func:`_build` (with a heuristic limit of 1, as nvmath-python's ``matmul`` does). A call with operands
and at most an epilog reads its operands raw (:data:`nvmath._internal.stateless.READERS`: no adapter)
into the same key, so a repeated call costs little more than ``Matmul.execute()``.

Cached plans share one workspace per device and package (not one each), given to them at
construction; its lock is the cache entry's lock, so calls on plans sharing it take turns.
``plan_cache.clear()`` frees the plans and the shared workspaces; ``plan_cache.resize(n)`` bounds the
number of plans; ``plan_cache.enabled = False`` plans every call afresh.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np

from nvmath._errors import warn_at_caller
from nvmath._internal import caches, compiled_hits
from nvmath._internal.memory import SharedWorkspaces
from nvmath._internal.options import check_or_create_options, freeze_options
from nvmath._internal.state import freed_on_error
from nvmath._internal.stateless import (
    NO_LAST,
    READERS,
    CachedPlan,
    LastCallCache,
    Read,
    adapter_head,
    call_cached,
    reader_for,
)
from nvmath._internal.tensors import TensorAdapter, check_consistent, wrap
from nvmath._internal.torch_bridge import route, wants_torch
from nvmath.linalg.advanced import _handles, _matmul_hit
from nvmath.linalg.advanced._algorithm import Algorithm
from nvmath.linalg.advanced._options import MatmulOptions, MatmulPlanPreferences, MatmulQuantizationScales
from nvmath.linalg.advanced._planner import Matmul
from nvmath.linalg.advanced._validation import check_call

__all__ = ["MatmulPlanCache", "matmul", "matmul_key", "plan_cache", "stateless_key"]

DEFAULT_CACHE_SIZE = 128
"""The default number of plans kept by :data:`plan_cache`."""

workspaces = caches.register(
    "nvmath.linalg.advanced: shared workspaces", SharedWorkspaces("shared matmul workspace")
)
"""The workspaces the cached plans share (one per device and package)."""


class MatmulPlanCache(LastCallCache):
    """The plan cache of :func:`matmul`; :meth:`clear` also frees the shared workspaces.

    Its :attr:`~nvmath._internal.stateless.LastCallCache.last` is ``(probe, entry, run)`` of the last hot
    call served by a cache hit: a call whose probe (the key's operand heads and epilog, and the
    pointers' low bits) equals it runs on that entry with no key built and no lookup. Kept only while
    that entry is the cache's most recently used one: every other path of :func:`matmul` and
    :meth:`clear` drop it, and a freed (evicted) entry is never run (``live``)."""

    @property
    def stats(self) -> Any:
        """:attr:`LastCallCache.stats <nvmath._internal.stateless.LastCallCache.stats>`, the calls the
        compiled hit served included (:mod:`._matmul_hit`)."""
        _matmul_hit.hits.fold(self)
        return super().stats

    def use(self, key: Any, factory: Any) -> Any:
        """:meth:`~nvmath._internal.plan_cache.PlanCache.use` (a miss: it may evict the least recently
        used plan, so the compiled hits are counted in the recency order first)."""
        _matmul_hit.hits.fold(self)
        return super().use(key, factory)

    def clear(self) -> None:
        """Forget the last call and the compiled hits; free every cached plan and their shared workspaces."""
        _matmul_hit.hits.clear()
        super().clear()
        workspaces.clear()


plan_cache: MatmulPlanCache = caches.register(
    "nvmath.linalg.advanced: matmul plans",
    MatmulPlanCache(DEFAULT_CACHE_SIZE, name="nvmath.linalg.advanced.matmul plan cache"),
)
"""The cache of :func:`matmul` (a :class:`~nvmath._internal.plan_cache.PlanCache`): ``stats``,
``resize(n)``, ``clear()``, ``enabled``. Its entries hold no device memory of their own (the
workspaces are shared, see :data:`workspaces`)."""

_UNCACHEABLE = object()
_OFFER = compiled_hits.ENABLED  # plain hits give the compiled hit its entries (the compiled path is active)
_HITS = _matmul_hit.hits


def matmul_key(ra: Read, rb: Read, rc: Read | None, epilog: Any, rest: tuple | None = None) -> tuple | None:
    """The plan-cache key of one call (the one key builder of :func:`matmul`), or ``None`` when some
    argument cannot be part of a key.

    Args:
        ra, rb, rc: the operands as a reader of :mod:`nvmath._internal.stateless` gives them (from the
            raw tensor or from its adapter: the same key either way).
        epilog: the epilog as given.
        rest: :func:`_rest_key` of a call with more than operands and an epilog.
    """
    pa, pb = ra[1], rb[1]
    ha, hb = ra[0], rb[0]
    key: tuple = (
        _handles.cublaslt_version(), epilog,
        ha, 0 if ha[1] == "cpu" else min(pa & -pa, 256),  # alignment: see _device.pointer_alignment
        hb, 0 if hb[1] == "cpu" else min(pb & -pb, 256),
    )  # fmt: skip
    if rc is not None:
        hc, pc = rc[0], rc[1]
        key += (hc, 0 if hc[1] == "cpu" else min(pc & -pc, 256))
    if rest is not None:
        if _UNCACHEABLE in rest:
            return None
        key += rest
        try:
            hash(key)
        except TypeError:
            return None
    return key


def _adapter_read(op: TensorAdapter) -> Read:
    return adapter_head(op), op.data_ptr, None


def stateless_key(
    ops: Mapping[str, TensorAdapter], *, epilog: Any = None, epilog_inputs: Mapping[str, Any] | None = None,
    qualifiers: Any = None, quantization_scales: Any = None, options: Any = None, preferences: Any = None,
    algorithm: Any = None,
) -> tuple | None:  # fmt: skip
    """:func:`matmul_key` of a call with wrapped operands (``"a"``, ``"b"`` and maybe ``"c"``); the other
    arguments as given to :func:`matmul`. ``None`` when some argument cannot be part of a key."""
    extra = (epilog_inputs, qualifiers, quantization_scales, options, preferences, algorithm)
    short = all(x is None for x in extra) and (epilog is None or isinstance(epilog, int))
    c = ops.get("c")
    return matmul_key(
        _adapter_read(ops["a"]), _adapter_read(ops["b"]), None if c is None else _adapter_read(c), epilog,
        None if short else _rest_key(*extra),
    )  # fmt: skip


def _value_key(value: Any) -> Any:
    """A key for a scale or an epilog input: the number itself, or the tensor's head and alignment."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return ("number", float(value))
    op = wrap(value, "quantization scale")
    ptr = op.data_ptr
    return adapter_head(op), 0 if op.device != "cuda" else min(ptr & -ptr, 256)


def _options_key(cls: type, value: Any, name: str) -> Any:
    if value is None:
        return None
    value = check_or_create_options(cls, value, name)  # a frozen snapshot of a mutable object
    try:
        hash(value)
    except TypeError:
        return _UNCACHEABLE
    return value


def _rest_key(
    epilog_inputs: Mapping[str, Any] | None, qualifiers: Any, quantization_scales: Any, options: Any,
    preferences: Any, algorithm: Any,
) -> tuple:  # fmt: skip
    """The key parts of the arguments beyond operands and epilog (:data:`_UNCACHEABLE` marks one that
    cannot be part of a key)."""
    parts: list[Any] = ["rest"]
    if epilog_inputs is not None:
        if not isinstance(epilog_inputs, Mapping):
            return (_UNCACHEABLE,)
        parts.append(tuple(sorted((str(k), _value_key(v)) for k, v in epilog_inputs.items())))
    if qualifiers is not None:
        if not isinstance(qualifiers, np.ndarray) or "is_conjugate" not in (qualifiers.dtype.names or ()):
            return (_UNCACHEABLE,)
        parts.append(("qualifiers", tuple(bool(x) for x in qualifiers["is_conjugate"])))
    if quantization_scales is not None:
        scales = check_or_create_options(MatmulQuantizationScales, quantization_scales, "quantization_scales")
        parts.append(tuple((n, _value_key(getattr(scales, n))) for n in sorted(scales.given())))
    parts.append(_options_key(MatmulOptions, options, "matmul options"))
    parts.append(_options_key(MatmulPlanPreferences, preferences, "plan preferences"))
    if algorithm is not None:
        if not isinstance(algorithm, Algorithm):
            return (_UNCACHEABLE,)
        parts.append(algorithm.to_bytes())
    return tuple(parts)


def _build(
    ops: Mapping[str, TensorAdapter], alpha: Any, beta: Any, kw: dict[str, Any], stream: Any
) -> CachedPlan[Matmul]:
    """Build and plan the :class:`Matmul` of a cache miss (nothing is left behind if it fails)."""
    mm = Matmul(
        ops["a"], ops["b"], ops.get("c"), alpha=alpha, beta=beta, qualifiers=kw.get("qualifiers"),
        quantization_scales=kw.get("quantization_scales"), options=kw.get("options"), stream=stream,
        _workspaces=workspaces,
    )  # fmt: skip
    with freed_on_error(mm):
        prefs = check_or_create_options(MatmulPlanPreferences, kw.get("preferences"), "plan preferences")
        algorithm = kw.get("algorithm")
        algorithms = None
        if algorithm is not None:
            algorithms = [
                Algorithm.from_numpy(algorithm.as_numpy()) if isinstance(algorithm, Algorithm) else algorithm
            ]
        mm.plan(
            preferences=freeze_options(dataclasses.replace(prefs, limit=1)), algorithms=algorithms,
            epilog=kw.get("epilog"), epilog_inputs=kw.get("epilog_inputs"), stream=stream,
        )  # fmt: skip
    return CachedPlan(mm, mm.workspace_lock)


def _build_raw(
    a: Any, b: Any, c: Any, alpha: Any, beta: Any, epilog: Any, stream: Any
) -> CachedPlan[Matmul]:
    """:func:`_build` for raw operands (wrapped and checked here, on a miss only)."""
    check_call(epilog=epilog, stream=stream)  # before the planner loads the driver
    return _build(_wrap(a, b, c), alpha, beta, {"epilog": epilog}, stream)


def _offer(entry: Any, ra: Read, rb: Read, a: Any, b: Any, c: Any, alpha: Any, epilog: Any, stream: Any) -> None:
    """After a call that ``entry`` served on the Python path (the compiled path only): a plain call
    (no ``c``, ``alpha``, epilog or stream) gives the entry to the compiled hit, which serves the next."""
    if c is None and alpha is None and epilog is None and stream is None and _HITS.wanted(entry, a):
        _HITS.offer(matmul_key(ra, rb, None, None), entry, a, b)


def _short_call(
    probe: tuple, ra: Read, rb: Read, rc: Read | None, a: Any, b: Any, c: Any, alpha: Any, beta: Any,
    epilog: Any, stream: Any,
) -> Any:  # fmt: skip
    """A hot call (operands read raw, at most an epilog) that ``plan_cache.last`` did not serve: a hit
    becomes the new last call; a miss plans (:func:`_build_raw`)."""
    ptrs = (ra[1], rb[1], None if rc is None else rc[1])
    key = matmul_key(ra, rb, rc, epilog)
    entry = plan_cache.get(key, count_miss=False)
    if entry is not None:
        with entry.lock:
            if entry.live:  # not freed by an eviction since the lookup
                run = entry.planner.run_cached
                plan_cache.last = (probe, entry, run)
                out = run(a, b, c, ptrs, alpha, beta, stream)
                if _OFFER:
                    _offer(entry, ra, rb, a, b, c, alpha, epilog, stream)
                return out
    plan_cache.last = NO_LAST
    return call_cached(
        plan_cache, key, _build_raw, a, b, c, ptrs, alpha, beta, stream,
        build_args=(a, b, c, alpha, beta, epilog, stream),
    )  # fmt: skip


def matmul(
    a: Any, b: Any, /, c: Any = None, *, alpha: Any = None, beta: Any = None, epilog: Any = None,
    epilog_inputs: Mapping[str, Any] | None = None, qualifiers: Any = None, quantization_scales: Any = None,
    options: Any = None, preferences: Any = None, algorithm: Algorithm | None = None, stream: Any = None,
) -> Any:  # fmt: skip
    """Compute ``epilog(alpha * a @ b + beta * c)`` with cuBLASLt, reusing cached plans.

    Arguments as :class:`Matmul`, :meth:`Matmul.plan` (``epilog``, ``epilog_inputs``,
    ``preferences``; ``algorithm`` replaces the heuristic's choice) and :meth:`Matmul.execute`
    (``stream``). The plan is cached in :data:`plan_cache`.

    Returns:
        The result in the operands' package and on their device, or ``(result, aux_dict)`` when the
        epilog (or ``result_amax``) produces aux outputs.
    """
    # (the public function is public_entry's: the compiled hit of a plain call first, then this)
    if wants_torch(a, b, c, epilog_inputs):  # autograd or torch.compile: nvmath.torch builds the graph
        return route("advanced.matmul", a, b, c, alpha=alpha, beta=beta, epilog=epilog, epilog_inputs=epilog_inputs,
                     qualifiers=qualifiers, quantization_scales=quantization_scales, options=options,
                     preferences=preferences, algorithm=algorithm, stream=stream)  # fmt: skip
    if c is None and beta is not None:
        warn_at_caller(f"beta={beta!r} is ignored because c is not given")
        beta = None
    short = (
        options is None and epilog_inputs is None and qualifiers is None and quantization_scales is None
        and preferences is None and algorithm is None and (epilog is None or isinstance(epilog, int))
    )  # fmt: skip
    if short:  # operands and at most an epilog: read the operands raw (the hot path: no adapters)
        tp = type(a)
        read = READERS.get(tp) or reader_for(tp)
        ra = read(a)
        if ra is not None and type(b) is tp and (c is None or type(c) is tp):
            rb = read(b)
            rc = None if c is None else read(c)
            if rb is not None and (c is None or rc is not None):
                pa, pb, pc = ra[1], rb[1], None if rc is None else rc[1]
                probe = (  # what the key holds, and the pointers' low bits (exactly: their alignment)
                    ra[0], rb[0], None if rc is None else rc[0], epilog,
                    pa & 255 if pa else -1, pb & 255 if pb else -1, pc & 255 if pc else -1,
                )  # fmt: skip
                last = plan_cache.last
                if last[0] == probe:  # the entry of the last call: no key, no lookup
                    entry = last[1]
                    with entry.lock:
                        if entry.live:
                            plan_cache.memo_hits += 1  # (under the entry's lock, as LastCallCache counts)
                            out = last[2](a, b, c, (pa, pb, pc), alpha, beta, stream)
                            if _OFFER:
                                _offer(entry, ra, rb, a, b, c, alpha, epilog, stream)
                            return out
                return _short_call(probe, ra, rb, rc, a, b, c, alpha, beta, epilog, stream)
    return _keyed_call(a, b, c, alpha, beta, stream, dict(
        epilog=epilog, epilog_inputs=epilog_inputs, qualifiers=qualifiers,
        quantization_scales=quantization_scales, options=options, preferences=preferences,
        algorithm=algorithm,
    ))  # fmt: skip


matmul = compiled_hits.public_entry(matmul, _HITS)  # (the name the API exports: the table, then the above)


def _keyed_call(a: Any, b: Any, c: Any, alpha: Any, beta: Any, stream: Any, kw: dict) -> Any:
    """The checked call: operands wrapped, the full key built and looked up (or planned)."""
    plan_cache.last = NO_LAST  # (another key becomes the most recently used)
    check_call(epilog=kw["epilog"], stream=stream)  # before anything is wrapped or loaded
    ops = _wrap(a, b, c)
    extras = None
    if kw["quantization_scales"] is not None or kw["epilog_inputs"] is not None:
        extras = (kw["quantization_scales"], kw["epilog_inputs"])
    key = stateless_key(ops, **kw)
    return call_cached(
        plan_cache, key, _build, ops["a"], ops["b"], ops.get("c"), None, alpha, beta, stream, extras,
        build_args=(ops, alpha, beta, kw, stream),
    )  # fmt: skip


def _wrap(a: Any, b: Any, c: Any) -> dict[str, TensorAdapter]:
    wa, wb = wrap(a, "operand 'a'"), wrap(b, "operand 'b'")
    ops = {"a": wa, "b": wb}
    if c is not None:
        ops["c"] = wrap(c, "operand 'c'")
        check_consistent(ops)
    elif wa.package is not wb.package or wa.device_id != wb.device_id:
        check_consistent(ops)
    return ops
