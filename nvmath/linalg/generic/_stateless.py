"""The stateless :func:`matmul`: one planned :class:`~nvmath.linalg.generic.Matmul` per kind of call, cached.

A call builds a key with :func:`generic_key` from raw reads of the operands (type, shape, strides,
dtype, device and torch's conjugation bit; no adapters), the qualifiers, options and execution, and
goes through :func:`nvmath._internal.stateless.call_cached`: a hit runs the cached plan on the
call's operands (``Matmul.run_cached``), so a repeated call costs about what ``Matmul.execute()``
costs; a miss plans and caches. ``alpha``, ``beta`` and ``stream`` are per call, never in the key.

:data:`plan_cache` is a :class:`~nvmath._internal.plan_cache.PlanCache` (``stats``, ``resize(n)``,
``clear()``, ``enabled``). Cached GPU plans share one cuBLAS workspace and one scratch buffer per
(device, package), used under a lock, so the cache costs one workspace per device, not one per plan;
``plan_cache.clear()`` also frees them.
"""

from __future__ import annotations

import sys
from collections.abc import Hashable, Mapping
from typing import Any

import numpy as np

from nvmath._internal import caches, compiled_hits
from nvmath._internal.memory import SharedWorkspaces
from nvmath._internal.options import check_or_create_options
from nvmath._internal.state import freed_on_error
from nvmath._internal.stateless import (
    READERS,
    CachedPlan,
    LastCallCache,
    _read_cupy,
    _read_torch,
    adapter_head,
    call_cached,
    call_remembered,
    reader_for,
)
from nvmath._internal.tensors import wrap
from nvmath._internal.torch_bridge import route, wants_torch
from nvmath.linalg.generic import _matmul_hit
from nvmath.linalg.generic._options import MatmulOptions
from nvmath.linalg.generic._planner import Matmul, checked_beta

__all__ = ["GenericPlanCache", "generic_key", "matmul", "plan_cache", "product", "scratches", "workspaces"]

DEFAULT_CACHE_SIZE = 128
"""The default number of plans kept by :data:`plan_cache`."""

workspaces = caches.register(
    "nvmath.linalg.generic: shared workspaces", SharedWorkspaces("shared generic matmul workspace")
)
"""The cuBLAS workspaces the cached plans share (one per device and package); a plan using one runs
under its lock (the cache entry's lock)."""
scratches = caches.register(
    "nvmath.linalg.generic: shared scratch", SharedWorkspaces("shared generic matmul scratch")
)
"""The scratch buffers (expanded triangles, grouped pointer arrays) the cached plans share; used only
under the lock of the same device's and package's workspace."""


class GenericPlanCache(LastCallCache):
    """The plan cache of :func:`matmul`; :meth:`clear` also frees the shared workspaces. It remembers the
    last common call (two operands, see :func:`_pair_call`)."""

    @property
    def stats(self) -> Any:
        """:attr:`LastCallCache.stats <nvmath._internal.stateless.LastCallCache.stats>`, the calls the
        compiled hit served included (:mod:`._matmul_hit`)."""
        _HITS.fold(self)
        return super().stats

    def use(self, key: Any, factory: Any) -> Any:
        """:meth:`~nvmath._internal.plan_cache.PlanCache.use` (a miss: it may evict the least recently
        used plan, so the compiled hits are counted in the recency order first)."""
        _HITS.fold(self)
        return super().use(key, factory)

    def clear(self) -> None:
        """Forget the last call and the compiled hits; free every cached plan and their shared workspaces."""
        _HITS.clear()
        super().clear()
        workspaces.clear()
        scratches.clear()


_HITS = _matmul_hit.hits
_OFFER = compiled_hits.ENABLED  # plain hits give the compiled hit its entries (the compiled path is active)


plan_cache: GenericPlanCache = caches.register(
    "nvmath.linalg.generic: matmul plans",
    GenericPlanCache(DEFAULT_CACHE_SIZE, name="nvmath.linalg.matmul plan cache"),
)
"""The cache of :func:`matmul`: ``stats``, ``resize(n)``, ``clear()``, ``enabled``."""


# ---------------------------------------------------------------------------------------- keys
def _numpy_key(x: np.ndarray) -> tuple:
    return ("numpy", x.shape, x.strides, x.dtype)


def _shared_reader_key(x: Any) -> Hashable:
    """The head of ``x`` from :data:`nvmath._internal.stateless.READERS` (its adapter's when unreadable)."""
    tp = type(x)
    read = (READERS.get(tp) or reader_for(tp))(x)
    return read[0] if read is not None else adapter_head(wrap(x, "operand"))


def _operand_key(x: Any) -> Hashable:
    return _numpy_key(x) if type(x) is np.ndarray else _shared_reader_key(x)


def _operands_key(x: Any) -> Hashable:
    if isinstance(x, (list, tuple)):
        return ("seq",) + tuple(_operand_key(v) for v in x)
    return None if x is None else _operand_key(x)


def _pair_key(a: Any, b: Any) -> tuple | None:
    """The operands' key of the common call (two numpy arrays, or two torch / cupy tensors that read raw,
    no ``c``), as :func:`_operands_key` makes it, with fewer calls; ``None`` for any other call."""
    tp = type(a)
    if tp is not type(b):
        return None
    if tp is np.ndarray:
        return ("numpy", a.shape, a.strides, a.dtype), ("numpy", b.shape, b.strides, b.dtype), None
    read = READERS.get(tp)
    if read is not _read_torch and read is not _read_cupy:  # unseen, adapter-read, or never raw
        return None
    ra, rb = read(a), read(b)
    if ra is None or rb is None:
        return None
    return ra[0], rb[0], None


def _qualifiers_key(q: Any) -> Hashable:
    if q is None:
        return None
    if isinstance(q, np.ndarray):
        return (q.dtype.str, q.shape, q.tobytes())
    if isinstance(q, (list, tuple)):
        return tuple(_qualifiers_key(v) for v in q)
    raise TypeError  # not keyable: planned, run and freed


def _options_key(options: Any) -> Hashable:
    if options is None:
        return None
    options = check_or_create_options(MatmulOptions, options, "matmul options")
    hash(options)
    return options


def _execution_key(execution: Any) -> Hashable:
    if execution is None or isinstance(execution, str):
        return execution.lower() if isinstance(execution, str) else None
    if isinstance(execution, Mapping):
        return tuple(sorted((str(k), v) for k, v in execution.items()))
    hash(execution)
    return execution


def generic_key(
    a: Any, b: Any, c: Any = None, qualifiers: Any = None, options: Any = None, execution: Any = None
) -> Hashable | None:
    """The plan-cache key of one :func:`matmul` call, or ``None`` when some argument cannot be part of one.

    A call with operands only has the key ``(key(a), key(b), key(c) or None)``: numpy arrays by their
    shape, strides and dtype, other tensors by their head from :data:`nvmath._internal.stateless.READERS`
    (torch and cupy read raw, others through their adapter); a sequence by its elements' keys.
    """
    try:
        key: tuple | None = _pair_key(a, b) if c is None else None
        if key is None:
            key = (_operands_key(a), _operands_key(b), _operands_key(c))  # hashable by construction
        if qualifiers is not None or options is not None or execution is not None:
            extra = (_qualifiers_key(qualifiers), _options_key(options), _execution_key(execution))
            hash(extra)
            key += extra
    except TypeError:
        return None
    return key


# ---------------------------------------------------------------------------------------- the call
_OTHER = object()
"""What :func:`_pair_call` returns for a call it does not serve."""
_torch_tensor: Any = None
"""``torch.Tensor`` once a call of two of them was keyed by raw reads (:func:`_pair_call`)."""


def _pair_call(a: Any, b: Any, alpha: Any, beta: Any, stream: Any) -> Any:
    """The common call of two operands (no ``c``, qualifiers, options or execution), or :data:`_OTHER`
    when they do not read raw (:func:`_pair_key` is ``None``).

    The cache's last call runs again without a lookup when this call equals it: two ``torch.Tensor``
    operands are compared by their raw attributes (shape, strides, dtype, device, conjugation: what
    decides their key, read without making it); other operands by their key. Any other call goes through
    the cache and becomes the last one.
    """
    global _torch_tensor
    tp = type(a)
    call: Any = None
    if tp is _torch_tensor and type(b) is tp and READERS.get(tp) is _read_torch:  # (as _pair_key reads it)
        call = (a.shape, a.stride(), a.dtype, a.get_device(), a.is_conj(),
                b.shape, b.stride(), b.dtype, b.get_device(), b.is_conj())  # fmt: skip
    last, entry, run = plan_cache.last
    if call is not None and call == last:
        lock = entry.lock  # (acquire / release: half the cost of `with` on a lock)
        lock.acquire()
        try:
            if entry.live:  # not freed by an eviction or a clear since it was the last call
                plan_cache.memo_hits += 1
                out = run(a, b, None, alpha, beta, stream)
                if _OFFER and alpha is None and beta is None and stream is None and _HITS.wanted(entry, a):
                    _HITS.offer(_pair_key(a, b), entry, a, b)  # (the compiled hit serves the next ones)
                return out
        finally:
            lock.release()
    key = _pair_key(a, b)
    if key is None:
        return _OTHER
    if call is None:
        if key == last:
            lock = entry.lock
            lock.acquire()
            try:
                if entry.live:
                    plan_cache.memo_hits += 1
                    return run(a, b, None, alpha, beta, stream)
            finally:
                lock.release()
        call = key
        if _torch_tensor is None and READERS.get(tp) is _read_torch:
            _torch_tensor = tp  # (the next call of two of them is compared raw)
    args = (a, b, None, alpha, beta, None, None, None, stream)
    return call_remembered(
        plan_cache, call, key, _build, a, b, None, alpha, beta, stream, build_args=args, entry_of=_pair_entry
    )


def _pair_entry(planner: Matmul) -> Any:
    return planner.pair_entry()


def matmul(
    a: Any,
    b: Any,
    /,
    c: Any = None,
    *,
    alpha: Any = None,
    beta: Any = None,
    qualifiers: Any = None,
    options: Any = None,
    execution: Any = None,
    stream: Any = None,
) -> Any:
    """Compute ``alpha * op(a) @ op(b) + beta * c`` (see :class:`~nvmath.linalg.generic.Matmul`), reusing
    cached plans.

    Returns:
        The result in the operands' package and memory space (a list of results for explicit batches;
        ``c`` itself with ``MatmulOptions(inplace=True)``).
    """
    # (the public function is public_entry's: the compiled hit of a plain call first, then this)
    if beta is not None or c is not None:
        beta = checked_beta(c, beta)
    if wants_torch(a, b, c):  # autograd or torch.compile: nvmath.torch builds the graph
        if (
            c is None and alpha is None and beta is None and qualifiers is None and options is None
            and execution is None and stream is None
        ):  # fmt: skip
            return _product_with_grad(a, b)
        return route("generic.matmul", a, b, c, alpha=alpha, beta=beta, qualifiers=qualifiers, options=options,
                     execution=execution, stream=stream)  # fmt: skip
    if c is None and qualifiers is None and options is None and execution is None:
        out = _pair_call(a, b, alpha, beta, stream)  # the common call: two operands read raw
        if out is not _OTHER:
            return out
        key = generic_key(a, b)
    else:
        key = generic_key(a, b, c, qualifiers, options, execution)
    args = (a, b, c, alpha, beta, qualifiers, options, execution, stream)
    return call_cached(plan_cache, key, _build, a, b, c, alpha, beta, stream, build_args=args)


matmul = compiled_hits.public_entry(matmul, _HITS)  # (the name the API exports: the table, then the above)


_CPU_GRAD = caches.memo("nvmath.linalg.generic: CPU products with grad", 256)
"""The CPU calls of two torch tensors of one dtype (by shapes, strides and dtypes) that nvmath.torch ran
once: torch's own ``matmul`` differentiates the next ones (see :func:`_product_with_grad`)."""
_TENSORS: frozenset = frozenset()
_DTYPES: frozenset = frozenset()
"""The dtypes torch's CPU matmul computes as nvmath's CPU matmul does (not float16 / bfloat16, which
nvmath computes in float32 and rounds once)."""


def _product_with_grad(a: Any, b: Any) -> Any:
    """A call of two operands (nothing else) that nvmath.torch differentiates.

    On the CPU, the generic matmul multiplies torch tensors of one dtype with ``torch.matmul``
    (:func:`~._fast.torch_cpu_gemm`), so torch's own differentiable ``matmul`` computes the same product
    and gradients without a Python autograd node (about 3x cheaper on a 64^3 call). It runs a call of
    two plain torch CPU tensors outside ``torch.compile`` once nvmath.torch has run (and so checked) a
    call of the same shapes, strides and dtype (float32, float64, complex64, complex128); every other
    call is routed to nvmath.torch.
    """
    global _TENSORS, _DTYPES
    torch = sys.modules["torch"]
    if not _TENSORS:
        _TENSORS = frozenset((torch.Tensor, torch.nn.Parameter))
        _DTYPES = frozenset((torch.float32, torch.float64, torch.complex64, torch.complex128))
    key = None
    if (
        type(a) in _TENSORS and type(b) in _TENSORS and a.is_cpu and b.is_cpu and a.dtype is b.dtype
        and a.dtype in _DTYPES
    ):  # fmt: skip
        key = (a.shape, a.stride(), b.shape, b.stride(), a.dtype)
        if _CPU_GRAD.get(key) is not None and not torch.compiler.is_compiling():
            return torch.matmul(a, b)
    result = route("generic.matmul", a, b)
    if key is not None and not torch.compiler.is_compiling():
        _CPU_GRAD.put(key, True)
    return result


def product(a: Any, b: Any) -> Any:
    """:func:`matmul` of two operands and nothing else, without the routing check: for
    ``nvmath.torch``'s autograd function, which calls it with grad mode off (the same plan cache)."""
    hits = _HITS.table
    if hits is not None and not _HITS.is_compiling():
        out = hits(a, b, None, None)
        if out is not None:
            return out
    out = _pair_call(a, b, None, None, None)
    if out is not _OTHER:
        return out
    return call_cached(plan_cache, generic_key(a, b), _build, a, b, None, None, None, None,
                       build_args=(a, b, None, None, None, None, None, None, None))  # fmt: skip


def _build(
    a: Any, b: Any, c: Any, alpha: Any, beta: Any, qualifiers: Any, options: Any, execution: Any, stream: Any
) -> CachedPlan:
    """Plan a :class:`Matmul` for a cache miss on the shared workspaces; nothing is left if it fails."""
    mm = Matmul(
        a,
        b,
        c,
        alpha=alpha,
        beta=beta,
        qualifiers=qualifiers,
        options=options,
        execution=execution,
        stream=stream,
    )
    with freed_on_error(mm):
        mm.plan(stream=stream)
        mm.share_workspaces(workspaces, scratches)
    return CachedPlan(mm, mm.workspace_lock)
