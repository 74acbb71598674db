"""Compiled hits of the stateless matmuls: the table of plain ``matmul(a, b)`` calls on torch CUDA tensors.

When the compiled path is active (:mod:`nvmath._internal.fastpath`), ``nvmath.linalg.advanced.matmul``
and ``nvmath.linalg.matmul`` each keep a :class:`StatelessHits`: on the first plain call of two
``torch.Tensor`` operands served by a cached plan it makes a table (``nvmath._fastcall.LinearHits``, the
machinery of :mod:`nvmath.torch._linear_hit`; see ``nvmath/_fastcall.d/linear_hits.c``), which
the stateless function calls first with all its arguments. The table compares the tensors with each
entry's key (exact type, shape, strides, dtype, device, pointer alignment, conjugate bit, the calling
thread and torch's current stream and device: what the plan-cache key holds, plus the stream), allocates
the result and makes the cached plan's library call, or returns ``None`` -- any other argument given,
a mismatch, grad needed, the plan's lock held by a Python-path call, a host scalar left other than a
plain call's by a call that gave one, the plan freed -- and the Python path runs as before, with every
check and error of its own.

:meth:`StatelessHits.offer` makes an entry (with the API's ``build``) after a Python-path hit of a plain
call, under the entry's lock, unless :meth:`~StatelessHits.wanted` says the entry made last time for
that plan and thread is still listed and runnable (the compiled call then missed for a reason a new
entry would not fix) or the plan was refused on the current stream. The table never plans, evicts or
frees anything: :meth:`~StatelessHits.clear` (the plan cache's ``clear()``, hence ``caches.clear_all()``
and ``enabled = False``) empties it; :meth:`~StatelessHits.fold` counts its hits in the plan cache's
statistics and recency order. On the pure-Python path no table is ever made.
"""

from __future__ import annotations

import functools
import inspect
import logging
import sys
import threading
from collections.abc import Callable
from typing import Any

from nvmath._internal import devices, fastpath, streams

__all__ = [
    "CAPACITY", "ENABLED", "StatelessHits", "alignment", "common_fields", "context_fields", "fold", "public_entry",
]  # fmt: skip

logger = logging.getLogger(__name__)

CAPACITY = 64
"""The most problems (per thread and stream) a table holds; beyond it the oldest entry goes."""

ENABLED: bool = fastpath.available()
"""Whether plain calls offer their plans to the tables (the compiled path is active)."""

_LOCK_TYPE = type(threading.Lock())


def alignment(ptr: int) -> int:
    """The alignment class of a device address, as the plan-cache keys compute it (capped at 256)."""
    return min(ptr & -ptr, 256)


def context_fields(device_id: int, get_device: Any, tensor: Any) -> dict[str, int]:
    """The ``ctx_get`` / ``ctx`` arguments of a ``LinearHit`` on device ``device_id``: the C call then
    checks that the device's primary context is current (one driver call, no Python) where it would ask
    ``get_device()``, torch's current device (a stricter test: the launch runs in the current context).
    Given only for real CUDA tensors (``tensor.is_cuda``: not a test's fake GPU) read with torch's own
    getter, where the driver answers; else ``{}`` (the getter is asked). Asked once per entry made."""
    torch_c = getattr(sys.modules.get("torch"), "_C", None)
    if (
        not getattr(tensor, "is_cuda", False)
        or get_device is None
        or get_device is not getattr(torch_c, "_cuda_getDevice", None)
    ):
        return {}
    try:
        return {
            "ctx_get": fastpath.driver_symbol_address("cuCtxGetCurrent"),
            "ctx": devices.primary_context(device_id),
        }
    except Exception:  # noqa: BLE001 - no driver, entry point or device: the getter is asked
        return {}


def _stream_now() -> int | None:
    """torch's current raw stream on its current device (``None`` when it cannot be read)."""
    raw, device = streams.torch_raw_stream(), streams.torch_device_getter()
    return None if raw is None or device is None else raw(device())


class _Refused:
    """What a twin slot holds for a plan whose call could not be made in C: the stream it ran on."""

    __slots__ = ("stream",)

    def __init__(self, stream: int | None):
        self.stream = stream


class StatelessHits:
    """The compiled table of one stateless matmul, and the entries it was given.

    Args:
        build: ``build(key, entry, a, b) -> LinearHit or None``: the entry of a plain call that the cached
            ``entry`` (plan-cache key ``key``) just served on the Python path.
        runnable: ``runnable(made) -> bool``: whether a listed entry's plan still runs as it was made
            (its launch not closed, its algorithm unchanged, its plan live).
    """

    def __init__(self, build: Callable[..., Any], runnable: Callable[[Any], bool]):
        self.table: Any = None
        """The table (``table(a, b, c, None, *other arguments)`` -> the result, or ``None``), made on
        first use; ``None`` before (and always on the pure-Python path)."""
        self.is_compiling: Any = None
        """``torch.compiler.is_dynamo_compiling`` once the table exists: a call torch.compile traces never
        runs the table (the tracer takes the function for ``True``), and eagerly it is a bare ``return
        False``, where ``is_compiling`` asks ``torch.jit`` first. (A non-strict export runs eagerly on fake
        tensors, whose type no entry has.)"""
        self._build, self._runnable = build, runnable
        # (cache entry, thread) -> (its entry, its device), or _Refused
        self._twins: dict[tuple[Any, int], Any] = {}

    def table_now(self) -> Any:
        """:attr:`table`, made now if needed; ``None`` when it cannot be (torch without CUDA getters)."""
        if self.table is None:
            torch = sys.modules.get("torch")
            if torch is None or streams.torch_raw_stream() is None or streams.torch_device_getter() is None:
                return None
            from nvmath import _fastcall

            self.is_compiling = torch.compiler.is_dynamo_compiling
            # (operands_first: a plain call's tensors seldom require grad; then grad mode is not asked)
            self.table = _fastcall.LinearHits(CAPACITY, torch.is_grad_enabled, operands_first=True)
        return self.table

    def wanted(self, entry: Any, a: Any) -> bool:
        """Whether :meth:`offer` should try to make an entry for ``entry`` (a plan-cache entry) after a
        plain call with operand ``a`` on this thread: a ``torch.Tensor`` operand, and no entry made for
        them yet, or it left the table, no longer runs as made or its stream is no longer current; a
        plan refused before is tried again only on another stream."""
        torch = sys.modules.get("torch")
        if torch is None or type(a) is not torch.Tensor:
            return False
        twin = self._twins.get((entry, threading.get_ident()))
        if twin is None:
            return True
        if type(twin) is _Refused:
            return twin.stream != _stream_now()
        made, device_id = twin  # (the device, read once: the entry's own getter makes an int per read)
        if not made.listed or not self._runnable(made):
            return True
        raw = streams.torch_raw_stream()
        return raw is None or raw(device_id) != made.stream

    def offer(self, key: Any, entry: Any, a: Any, b: Any) -> None:
        """Give the table the entry of a plain call ``(a, b)`` that the cached ``entry`` (plan-cache key
        ``key``) just served on the Python path (the caller holds the entry's lock), or remember that it
        cannot be made in C on this stream."""
        twins = self._twins
        made = None
        if type(entry.lock) is _LOCK_TYPE and self.table_now() is not None:
            made = self._build(key, entry, a, b)
        if len(twins) > CAPACITY:  # (plans freed, entries the table dropped, plans refused)
            for k in [k for k, t in twins.items() if not k[0].live or type(t) is _Refused or not t[0].listed]:
                del twins[k]
        if made is None:
            twins[(entry, threading.get_ident())] = _Refused(_stream_now())
            return
        twins[(entry, threading.get_ident())] = (made, made.device_id)
        self.table.add(made)

    def fold(self, cache: Any) -> None:
        """Count the table's hits in ``cache`` (the plan cache): its hit count and recency order."""
        fold(self.table, cache)

    def clear(self) -> None:
        """Empty the table (the plan cache was cleared: nothing of it may run)."""
        self._twins.clear()
        if self.table is not None:
            self.table.clear()


def public_entry(checked: Callable[..., Any], hits: StatelessHits) -> Callable[..., Any]:
    """The public function of a stateless matmul: ``hits``' table first, then ``checked``.

    ``checked(a, b, /, c=None, *, ...)`` is the function with every check (its keyword-only arguments
    all default to ``None``). A call of CPython to a function with keyword-only defaults fills each
    missing one from a dict (about a tenth of a microsecond for ten of them), so the entry takes
    ``**kwargs`` instead and shows ``checked``'s signature (``__signature__``: ``help()``, ``inspect``
    and the docs read it). A call with no keyword argument, or only ``None`` ones ``checked`` takes,
    asks the table; anything else (a miss, a traced call, the pure path's ``None`` table) runs
    ``checked``, which binds the arguments and raises as it always did. On the pure-Python path (no
    table is ever made) this returns ``checked`` itself.
    """
    if not ENABLED:
        return checked
    signature = inspect.signature(checked)
    names = frozenset(
        p.name for p in signature.parameters.values() if p.kind is inspect.Parameter.KEYWORD_ONLY
    )

    def entry(a: Any, b: Any, /, c: Any = None, **kwargs: Any) -> Any:
        table = hits.table
        if (
            table is not None and (not kwargs or (kwargs.keys() <= names and all(v is None for v in kwargs.values())))
            and not hits.is_compiling()
        ):  # fmt: skip
            out = table(a, b, c, None)
            if out is not None:
                return out
        return checked(a, b, c, **kwargs)

    functools.update_wrapper(entry, checked)
    entry.__signature__ = signature  # type: ignore[attr-defined]
    return entry


def fold(table: Any, cache: Any) -> None:
    """Count the hits of ``table`` (a ``LinearHits``, or ``None``) in ``cache`` (a
    :class:`~nvmath._internal.plan_cache.PlanCache` holding its entries' keys): its hit count and
    recency order; the entries' counts start again from 0."""
    if table is None or not len(table):
        return
    for made in table.entries():
        n = made.hits
        if n:
            made.hits = 0
            cache.touch(made.key, n)


def common_fields(key: Any, entry: Any, a: Any, b: Any) -> dict[str, Any] | None:
    """The ``LinearHit`` fields every stateless entry shares (the key of ``a @ b`` on torch's current
    stream, its checks and the thread's handle getters are the API's), or ``None`` when ``a`` and ``b``
    cannot be served (not both plain ``torch.Tensor`` of one dtype, an address 0, a conjugate view)."""
    torch = sys.modules.get("torch")
    if torch is None or type(a) is not torch.Tensor or type(b) is not torch.Tensor or a.dtype is not b.dtype:
        return None
    pa, pb = a.data_ptr(), b.data_ptr()
    if not pa or not pb or a.is_conj() or b.is_conj():
        return None
    return {
        "key": key, "act": None, "xtype": torch.Tensor, "wtype": torch.Tensor, "btype": None,
        "dtype": a.dtype, "device": a.device, "xshape": tuple(a.shape), "xstrides": a.stride(),
        "xalign": alignment(pa), "wshape": tuple(b.shape), "wstrides": b.stride(), "walign": alignment(pb),
        "bshape": (), "bstrides": (), "balign": 0, "thread": threading.get_ident(), "raw_stream": streams.torch_raw_stream(),
        "get_device": streams.torch_device_getter(), "capturing": None, "x_first": True, "attrs": (),
        "set_attr": 0, "lock": entry.lock, "conj": a.is_complex(),
    }  # fmt: skip
