"""The compiled hit of the stateless :func:`~nvmath.linalg.advanced.matmul`: a plain ``matmul(a, b)`` of two
torch CUDA tensors checked against its planned problem and launched in one C call.

When the compiled path is active (:mod:`nvmath._internal.fastpath`), :data:`hits` becomes, on the first
plain call of two ``torch.Tensor`` operands served by a cached plan, a table of such problems
(``nvmath._fastcall.LinearHits``, the machinery of :mod:`nvmath.torch._linear_hit`, whose entries carry
the stateless checks below). ``matmul`` calls it first with its arguments; the table compares the
tensors with each entry's key (exact type, shape, strides, dtype, device, pointer alignment, the calling
thread and torch's current stream: what the plan-cache key holds, plus the stream), allocates the result
and calls ``cublasLtMatmul`` with the cached plan's fixed arguments, or returns ``None`` -- any other
argument given (``c``, ``alpha``, an epilog, options, a stream, ...), a mismatch, grad needed, a
conjugate view, the plan's lock held by a Python-path call, alpha left other than 1 by a call that gave
one, the plan freed (its launch closed) -- and the Python path runs as before, with every check and
error of its own.

:func:`offer` makes an entry after a Python-path hit of a plain call (under the entry's lock), unless
the entry made last time for that plan and thread is still listed and runnable (then the compiled call
missed for a reason a new entry would not fix). The table never plans, evicts or frees anything:
:func:`clear` (``plan_cache.clear()``, hence ``caches.clear_all()`` and ``plan_cache.enabled = False``)
empties it, and an evicted plan's closed launch is never run. :func:`fold` counts the table's hits in the
plan cache's statistics and recency order. On the pure-Python path :data:`hits` stays ``None``.
"""

from __future__ import annotations

import ctypes
import functools
import logging
import sys
import threading
from typing import Any

import numpy as np

from nvmath._internal import fastpath, streams
from nvmath.linalg.advanced import _handles
from nvmath.linalg.advanced._direct import address_run_possible

__all__ = ["CAPACITY", "ENABLED", "clear", "fold", "hits", "offer", "wanted"]

logger = logging.getLogger(__name__)

CAPACITY = 64
"""The most problems (per thread and stream) the table holds; beyond it the oldest entry goes."""

ENABLED: bool = fastpath.available()
"""Whether plain calls offer their plans to the table (the compiled path is active)."""

hits: Any = None
"""The table (``hits(a, b, c, None, *other arguments)`` -> the result, or ``None``), made on first use."""

is_compiling: Any = None
"""``torch.compiler.is_compiling`` once the table exists (a traced call never runs the table)."""

_LOCK_TYPE = type(threading.Lock())
_twins: dict[tuple[Any, int], Any] = {}
"""(cache entry, thread) -> the entry made last for them, or :class:`_Refused` (see :func:`offer`)."""


def _table() -> Any:
    """:data:`hits`, made now if needed; ``None`` when it cannot be (torch without CUDA getters)."""
    global hits, is_compiling
    if hits is None:
        torch = sys.modules.get("torch")
        if torch is None or streams.torch_raw_stream() is None or streams.torch_device_getter() is None:
            return None
        from nvmath import _fastcall

        is_compiling = torch.compiler.is_compiling
        hits = _fastcall.LinearHits(CAPACITY, torch.is_grad_enabled)
    return hits


class _Refused:
    """What :data:`_twins` holds for a plan whose call could not be made in C: the stream it ran on."""

    __slots__ = ("handle",)

    def __init__(self, handle: Any):
        self.handle = handle


def wanted(entry: Any, a: Any) -> bool:
    """Whether :func:`offer` should try to make an entry for ``entry`` (a plan-cache entry) after a plain
    call with operand ``a`` on this thread: a ``torch.Tensor`` operand, and no entry made for them yet,
    or it left the table, its launch closed or its stream is no longer current; a plan refused before is
    tried again only on another stream."""
    torch = sys.modules.get("torch")
    if torch is None or type(a) is not torch.Tensor:
        return False
    twin = _twins.get((entry, threading.get_ident()))
    if twin is None:
        return True
    if type(twin) is _Refused:
        return twin.handle is not entry.planner.caller_stream.last
    if not twin.listed:
        return True
    launch = twin.launch
    if launch.closed or launch.algo is not twin.algo:
        return True
    raw = streams.torch_raw_stream()
    return raw is None or raw(launch.device_id) != twin.stream


def _alignment(ptr: int) -> int:
    return min(ptr & -ptr, 256)


def offer(key: Any, entry: Any, a: Any, b: Any) -> None:
    """Give the table the entry of a plain call ``matmul(a, b)`` that the cached ``entry`` (its plan-cache
    key ``key``) just served on the Python path, when the next such call can be made in C (the caller
    holds the entry's lock; see the module notes). Nothing happens otherwise."""
    made = _build(key, entry, a, b)
    if len(_twins) > 4 * CAPACITY:  # (entries the table dropped, plans refused)
        for k in [k for k, t in _twins.items() if type(t) is _Refused or not t.listed]:
            del _twins[k]
    if made is None:
        _twins[(entry, threading.get_ident())] = _Refused(entry.planner.caller_stream.last)
        return
    _twins[(entry, threading.get_ident())] = made
    hits.add(made)


def _build(key: Any, entry: Any, a: Any, b: Any) -> Any:
    """The ``LinearHit`` of :func:`offer`, or ``None``."""
    torch = sys.modules.get("torch")
    if torch is None or type(a) is not torch.Tensor or type(b) is not torch.Tensor or a.dtype is not b.dtype:
        return None
    pa, pb, lock, mm = a.data_ptr(), b.data_ptr(), entry.lock, entry.planner
    if not pa or not pb or a.is_conj() or b.is_conj() or type(lock) is not _LOCK_TYPE:
        return None
    handle, result = mm.caller_stream.last, mm.result_maker
    if handle is None or result is None or result.direct is None or not address_run_possible(mm):
        return None
    launch = mm.launcher
    parts = launch.compiled_parts(handle)
    if parts is None or parts["scalar_dtype"] is None or _table() is None:
        return None
    one = np.ones(1, parts["scalar_dtype"]).tobytes()
    if ctypes.string_at(parts["alpha"], len(one)) != one:  # (a plain call just ran: alpha is 1)
        return None
    empty, shape, strides, dtype, device = result.direct
    template = empty((0,), (1,), dtype=dtype, device=device)  # (no memory: allocates like `empty`)
    from nvmath import _fastcall

    return _fastcall.LinearHit(
        key=key, act=None, xtype=torch.Tensor, wtype=torch.Tensor, btype=None, dtype=a.dtype, device=a.device,
        xshape=tuple(a.shape), xstrides=a.stride(), xalign=_alignment(pa), wshape=tuple(b.shape),
        wstrides=b.stride(), walign=_alignment(pb), bshape=(), bstrides=(), balign=0,
        thread=threading.get_ident(), device_id=parts["device_id"], stream=handle.ptr,
        raw_stream=streams.torch_raw_stream(), get_device=streams.torch_device_getter(), capturing=None,
        alloc=functools.partial(template.new_empty_strided, shape, strides), launch=launch,
        algo=parts["algo"], call=parts["call"], x_first=True, swap=parts["swap"], c_is_d=parts["c_is_d"],
        bound=parts["bound"], handle=handle, space=parts["space"], lt_handle=parts["lt_handle"],
        handles_local=_handles.handles_here, handles_module=_handles, pool_get=_handles.POOL_GET,
        after=streams.done_recorder(handle) if parts["done"] else None, attrs=(), set_attr=0,
        lock=lock, alpha=parts["alpha"], alpha_bytes=one, conj=a.is_complex(),
    )  # fmt: skip


def fold(cache: Any) -> None:
    """Count the table's hits in ``cache`` (the plan cache): its hit count and recency order."""
    table = hits
    if table is None or not len(table):
        return
    for made in table.entries():
        n = made.hits
        if n:
            made.hits = 0
            cache.touch(made.key, n)


def clear() -> None:
    """Empty the table (the plan cache was cleared: nothing of it may run)."""
    _twins.clear()
    if hits is not None:
        hits.clear()
