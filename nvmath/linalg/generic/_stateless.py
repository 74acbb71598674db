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
import threading
import warnings
from collections.abc import Hashable, Mapping
from typing import Any

import numpy as np

from nvmath._internal.memory import Workspace
from nvmath._internal.options import check_or_create_options
from nvmath._internal.plan_cache import PlanCache
from nvmath._internal.stateless import CachedPlan, call_cached
from nvmath._internal.tensors import wrap
from nvmath._internal.torch_bridge import route, wants_torch
from nvmath.linalg.generic._options import MatmulOptions
from nvmath.linalg.generic._planner import Matmul

__all__ = ["GenericPlanCache", "generic_key", "matmul", "plan_cache"]

DEFAULT_CACHE_SIZE = 128
"""The default number of plans kept by :data:`plan_cache`."""

_SHARED: dict[tuple[int, str], tuple[Workspace, Workspace, threading.Lock]] = {}
_SHARED_LOCK = threading.Lock()


class GenericPlanCache(PlanCache):
    """The plan cache of :func:`matmul`; :meth:`clear` also frees the shared workspaces."""

    def clear(self) -> None:
        """Free every cached plan and the workspaces they share."""
        super().clear()
        with _SHARED_LOCK:
            shared = list(_SHARED.values())
            _SHARED.clear()
        for workspace, scratch, lock in shared:
            with lock:
                workspace.release()
                scratch.release()


plan_cache: GenericPlanCache = GenericPlanCache(DEFAULT_CACHE_SIZE, name="nvmath.linalg.matmul plan cache")
"""The cache of :func:`matmul`: ``stats``, ``resize(n)``, ``clear()``, ``enabled``."""


def shared_workspaces(device_id: int, package: str) -> tuple[Workspace, Workspace, threading.Lock]:
    """The workspace, scratch and lock shared by the cached plans of ``(device_id, package)``."""
    key = (device_id, package)
    with _SHARED_LOCK:
        entry = _SHARED.get(key)
        if entry is None:
            entry = _SHARED[key] = (
                Workspace(device_id=device_id, package=package, name="shared generic matmul workspace"),
                Workspace(device_id=device_id, package=package, name="shared generic matmul scratch"),
                threading.Lock(),
            )
    return entry


# ---------------------------------------------------------------------------------------- keys
def _torch_key(t: Any) -> tuple:
    return (t.shape, t.stride(), t.dtype, t.is_conj(), t.get_device())


def _array_key(x: Any) -> tuple:
    return ("numpy", x.shape, x.strides, x.dtype)


def _cupy_key(x: Any) -> tuple:
    return ("cupy", x.shape, x.strides, x.dtype, x.device.id)


_RAW: dict[type, Any] = {np.ndarray: _array_key}
"""Exact tensor type -> a key from cheap attribute reads (filled as torch / cupy tensors show up)."""


def _operand_key(x: Any) -> Hashable:
    tp = type(x)
    keyer = _RAW.get(tp)
    if keyer is None:
        keyer = _register(tp)
    if keyer is not None:
        return keyer(x)
    op = wrap(x, "operand")  # another producer: the adapter's metadata
    return op.package, tuple(op.shape), tuple(op.strides), op.dtype, op.is_conjugate, op.device_id


def _register(tp: type) -> Any:
    torch, cupy = sys.modules.get("torch"), sys.modules.get("cupy")
    if torch is not None and tp is torch.Tensor:
        _RAW[tp] = _torch_key
    elif cupy is not None and tp is cupy.ndarray:
        _RAW[tp] = _cupy_key
    return _RAW.get(tp)


def _operands_key(x: Any) -> Hashable:
    if isinstance(x, (list, tuple)):
        return ("seq",) + tuple(_operand_key(v) for v in x)
    return None if x is None else _operand_key(x)


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

    A call with operands only has the key ``(key(a), key(b), key(c) or None)``, which :func:`matmul`
    builds inline for registered tensor types.
    """
    try:
        key: tuple = (_operands_key(a), _operands_key(b), _operands_key(c))
        if qualifiers is not None or options is not None or execution is not None:
            key += (_qualifiers_key(qualifiers), _options_key(options), _execution_key(execution))
        hash(key)
    except TypeError:
        return None
    return key


# ---------------------------------------------------------------------------------------- the call
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
    if c is None:
        if beta is not None:
            warnings.warn(f"beta={beta!r} is ignored because c is not given", UserWarning, stacklevel=2)
            beta = None
    elif beta is None:
        raise ValueError("beta must be given when c is (alpha * a @ b + beta * c)")
    if wants_torch(a, b, c):  # autograd or torch.compile: nvmath.torch builds the graph
        return route("generic.matmul", a, b, c, alpha=alpha, beta=beta, qualifiers=qualifiers, options=options,
                     execution=execution, stream=stream)  # fmt: skip
    keyer = _RAW.get(type(a)) if qualifiers is None and options is None and execution is None else None
    if keyer is not None and type(b) is type(a) and (c is None or type(c) is type(a)):
        key: Hashable | None = (keyer(a), keyer(b), None if c is None else keyer(c))  # the common call
    else:
        key = generic_key(a, b, c, qualifiers, options, execution)

    def build() -> CachedPlan:
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
        try:
            mm.plan(stream=stream)
            if key is not None:
                mm.share_workspaces(shared_workspaces)
        except BaseException:
            mm.free()
            raise
        return CachedPlan(mm)

    return call_cached(plan_cache, key, build, a, b, c, alpha, beta, stream)
