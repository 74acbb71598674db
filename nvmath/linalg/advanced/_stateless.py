"""The stateless :func:`matmul`: one planned :class:`Matmul` per problem, kept in a bounded cache.

A call wraps the operands, builds a key from everything that decides the plan (package, device,
shapes, strides, dtypes, conjugation and pointer alignment of every tensor; epilog and epilog-input
metadata; qualifiers; quantization scales; options; preferences; algorithm; cuBLASLt version) and
looks it up in :data:`plan_cache`. A hit swaps the operand pointers into the cached plan and
executes it, so a repeated call costs little more than ``Matmul.execute()``; a miss plans (with a
heuristic limit of 1, as nvmath-python's ``matmul`` does) and caches the plan.

Cached plans share one workspace per device and package (not one each), guarded by a lock that
also makes concurrent calls on one plan safe. ``plan_cache.clear()`` frees the plans and the shared
workspaces; ``plan_cache.resize(n)`` bounds the number of plans; ``plan_cache.enabled = False``
plans every call afresh.
"""

from __future__ import annotations

import dataclasses
import sys
import threading
import warnings
from collections.abc import Hashable, Mapping
from typing import Any

import numpy as np

from nvmath._internal.memory import Workspace
from nvmath._internal.options import check_or_create_options
from nvmath._internal.plan_cache import PlanCache
from nvmath._internal.state import PlannerState
from nvmath._internal.tensors import TensorAdapter, check_consistent, wrap
from nvmath.linalg.advanced import _handles
from nvmath.linalg.advanced._algorithm import Algorithm
from nvmath.linalg.advanced._options import MatmulOptions, MatmulPlanPreferences, MatmulQuantizationScales
from nvmath.linalg.advanced._planner import Matmul
from nvmath.linalg.advanced._validation import check_call

__all__ = ["MatmulPlanCache", "matmul", "plan_cache", "stateless_key"]

DEFAULT_CACHE_SIZE = 128
"""The default number of plans kept by :data:`plan_cache`."""


class MatmulPlanCache(PlanCache):
    """The plan cache of :func:`matmul`; :meth:`clear` also frees the shared workspaces."""

    def hit(self, key: Hashable) -> Any:
        """The plan cached under ``key`` (marked most recently used, counted as a hit), else ``None``.

        The hot path of :func:`matmul`: one locked lookup; a plan evicted meanwhile is detected by its
        ``_usable()``. A miss is not counted here (the slow path's lookup counts it).
        """
        return self.get(key, count_miss=False)

    def clear(self) -> None:
        """Free every cached plan and the workspaces they share."""
        super().clear()
        with _SHARED_LOCK:
            shared = list(_SHARED.values())
            _SHARED.clear()
        for workspace, lock in shared:
            with lock:
                workspace.release()


plan_cache: MatmulPlanCache = MatmulPlanCache(
    DEFAULT_CACHE_SIZE, name="nvmath.linalg.advanced.matmul plan cache"
)
"""The cache of :func:`matmul` (a :class:`~nvmath._internal.plan_cache.PlanCache`): ``stats``,
``resize(n)``, ``clear()``, ``enabled``."""

_SHARED: dict[tuple[int, str], tuple[Workspace, Any]] = {}
_SHARED_LOCK = threading.Lock()
_PLANNER: Any = Matmul  # replaced by a fake in CPU tests
_UNCACHEABLE = object()
_PLANNED = PlannerState.PLANNED.value
_RAW = "raw"


def _torch_key(t: Any) -> tuple[tuple, int]:
    """The key part and the address of a ``torch.Tensor``, read without an adapter."""
    ptr = t.data_ptr()
    cuda = t.is_cuda
    return (t.shape, t.stride(), t.dtype, t.is_conj(), t.device, min(ptr & -ptr, 256) if cuda else 0), ptr


_RAW_KEYS: dict[type, Any] = {}
"""Exact tensor type -> a function giving ``(key part, address)`` from cheap reads of the raw tensor
(filled when the first such tensor is wrapped); the key parts say everything the adapter-built key
says (package by the type; device, shape, strides, dtype, conjugation, alignment)."""


def _raw_key(keyer: Any, a: Any, b: Any, c: Any, epilog: Any) -> tuple[tuple, tuple] | None:
    """``(cache key, (addresses of a, b, c))`` from the raw tensors, or ``None`` when a read fails."""
    try:
        ka, pa = keyer(a)
        kb, pb = keyer(b)
        if c is None:
            return (_RAW, _handles.cublaslt_version(), epilog, ka, kb), (pa, pb, None)
        kc, pc = keyer(c)
        return (_RAW, _handles.cublaslt_version(), epilog, ka, kb, kc), (pa, pb, pc)
    except Exception:  # noqa: BLE001 - an unusual tensor: the adapters will judge it
        return None


def _register_raw_key(obj: Any) -> None:
    torch = sys.modules.get("torch")
    if torch is not None and type(obj) is torch.Tensor:
        _RAW_KEYS[torch.Tensor] = _torch_key


def _shared_workspace(device_id: int, package: str) -> tuple[Workspace, Any]:
    key = (device_id, package)
    with _SHARED_LOCK:
        entry = _SHARED.get(key)
        if entry is None:
            entry = _SHARED[key] = (
                Workspace(device_id=device_id, package=package, name="shared matmul workspace"),
                threading.Lock(),
            )
    return entry


def _tensor_key(op: TensorAdapter) -> tuple:
    ptr = op.data_ptr
    align = min(ptr & -ptr, 256) if op.device == "cuda" else 0  # see _handles.pointer_alignment
    return (op.shape, op.strides, op.dtype, op.is_conjugate, align)


def _value_key(value: Any) -> Any:
    """A key for a scale: the number itself, or the tensor's metadata."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return ("number", float(value))
    return _tensor_key(wrap(value, "quantization scale"))


def _options_key(cls: type, value: Any, name: str) -> Any:
    if value is None:
        return None
    if not isinstance(value, cls):
        value = check_or_create_options(cls, value, name)
    try:
        hash(value)
    except TypeError:
        return _UNCACHEABLE
    return value


def stateless_key(
    ops: Mapping[str, TensorAdapter], *, epilog: Any = None, epilog_inputs: Mapping[str, Any] | None = None,
    qualifiers: Any = None, quantization_scales: Any = None, options: Any = None, preferences: Any = None,
    algorithm: Any = None,
) -> Hashable | None:  # fmt: skip
    """The plan-cache key of one call, or ``None`` when some argument cannot be part of a key.

    Args:
        ops: the wrapped operands (``"a"``, ``"b"`` and maybe ``"c"``); the rest as given to :func:`matmul`.
    """
    first = ops["a"]
    parts: list[Any] = [_handles.cublaslt_version(), first.package, first.device_id]
    parts += [(n, _tensor_key(op)) for n, op in ops.items()]
    parts.append(epilog)
    if epilog_inputs is not None:
        if not isinstance(epilog_inputs, Mapping):
            return None
        parts.append(tuple(sorted((str(k), _value_key(v)) for k, v in epilog_inputs.items())))
    if qualifiers is not None:
        if not isinstance(qualifiers, np.ndarray) or "is_conjugate" not in (qualifiers.dtype.names or ()):
            return None
        parts.append(("qualifiers", tuple(bool(x) for x in qualifiers["is_conjugate"])))
    if quantization_scales is not None:
        scales = check_or_create_options(MatmulQuantizationScales, quantization_scales, "quantization_scales")
        parts.append(tuple((n, _value_key(getattr(scales, n))) for n in sorted(scales.given())))
    parts.append(_options_key(MatmulOptions, options, "matmul options"))
    parts.append(_options_key(MatmulPlanPreferences, preferences, "plan preferences"))
    if algorithm is not None:
        if not isinstance(algorithm, Algorithm):
            return None
        parts.append(algorithm.to_bytes())
    if any(p is _UNCACHEABLE for p in parts):
        return None
    key = tuple(parts)
    try:
        hash(key)
    except TypeError:
        return None
    return key


def _new_plan(
    ops: Mapping[str, TensorAdapter], alpha: Any, beta: Any, kw: dict[str, Any], stream: Any
) -> Any:
    """Build and plan the :class:`Matmul` for a cache miss (nothing is left behind if it fails)."""
    mm = _PLANNER(
        ops["a"], ops["b"], ops.get("c"), alpha=alpha, beta=beta, qualifiers=kw["qualifiers"],
        quantization_scales=kw["quantization_scales"], options=kw["options"], stream=stream,
    )  # fmt: skip
    try:
        prefs = check_or_create_options(MatmulPlanPreferences, kw["preferences"], "plan preferences")
        algorithm = kw["algorithm"]
        algorithms = None
        if algorithm is not None:
            algorithms = [
                Algorithm.from_numpy(algorithm.as_numpy()) if isinstance(algorithm, Algorithm) else algorithm
            ]
        mm.plan(
            preferences=dataclasses.replace(prefs, limit=1), algorithms=algorithms, epilog=kw["epilog"],
            epilog_inputs=kw["epilog_inputs"], stream=stream,
        )  # fmt: skip
        if mm._options.allocator is None:
            mm._share_workspace(*_shared_workspace(mm._spec.device_id, mm._slots["a"].device.package))
    except BaseException:
        mm.free()
        raise
    return mm


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
    if c is None and beta is not None:
        warnings.warn(f"beta={beta!r} is ignored because c is not given", UserWarning, stacklevel=2)
        beta = None
    raw_key = None
    if _short_call(options, epilog_inputs, qualifiers, quantization_scales, preferences, algorithm, epilog):
        keyer = _RAW_KEYS.get(type(a))
        if keyer is None and not _RAW_KEYS:  # first call: register before the lookup, so the first
            _register_raw_key(a)  # plan is cached under the key later calls look up
            keyer = _RAW_KEYS.get(type(a))
        if keyer is not None and type(b) is type(a) and (c is None or type(c) is type(a)):
            raw_key = _raw_key(keyer, a, b, c, epilog)
            if raw_key is not None:  # the hot path: no adapters, one lookup, one lock
                mm = plan_cache.hit(raw_key[0])
                if mm is not None:
                    with mm._lock:
                        if mm._lifecycle.bits & _PLANNED:
                            if mm._pointer_ok:
                                return mm._run_pointers(*raw_key[1], alpha, beta, stream)
                            ops = _wrap(a, b, c)
                            return mm._run_stateless(ops, alpha, beta, stream, None)
    check_call(epilog=epilog, stream=stream)  # before anything is wrapped or loaded
    ops = _wrap(a, b, c)
    if raw_key is not None:  # a miss: plan under the raw key (the operands are checked while planning)
        kw = _keywords(epilog, None, None, None, None, None, None)
        with plan_cache.use(raw_key[0], lambda: _new_plan(ops, alpha, beta, kw, stream)) as mm, mm._lock:
            return mm._run_stateless(ops, alpha, beta, stream, None)
    return _matmul_slow(
        ops, alpha, beta, epilog, epilog_inputs, qualifiers, quantization_scales, options, preferences,
        algorithm, stream,
    )  # fmt: skip


def _short_call(
    options: Any,
    epilog_inputs: Any,
    qualifiers: Any,
    scales: Any,
    preferences: Any,
    algorithm: Any,
    epilog: Any,
) -> bool:
    """Whether a call has operands and at most an epilog (no inputs, options or preferences)."""
    return (
        options is None
        and epilog_inputs is None
        and qualifiers is None
        and scales is None
        and preferences is None
        and algorithm is None
        and (epilog is None or isinstance(epilog, int))
    )


def _wrap(a: Any, b: Any, c: Any) -> dict[str, TensorAdapter]:
    wa, wb = wrap(a, "operand 'a'"), wrap(b, "operand 'b'")
    ops = {"a": wa, "b": wb}
    if c is not None:
        ops["c"] = wrap(c, "operand 'c'")
        check_consistent(ops)
    elif wa.package is not wb.package or wa.device_id != wb.device_id:
        check_consistent(ops)
    return ops


def _matmul_slow(
    ops: dict[str, TensorAdapter], alpha: Any, beta: Any, epilog: Any, epilog_inputs: Any, qualifiers: Any,
    quantization_scales: Any, options: Any, preferences: Any, algorithm: Any, stream: Any,
) -> Any:  # fmt: skip
    """:func:`matmul` with wrapped operands (keys built from the adapters)."""
    extras = None
    if _short_call(
        options, epilog_inputs, qualifiers, quantization_scales, preferences, algorithm, epilog
    ):  # the common case: a short key
        key: Any = _short_key(ops, epilog)
    else:
        kw = _keywords(
            epilog, epilog_inputs, qualifiers, quantization_scales, options, preferences, algorithm
        )
        key = ("full", stateless_key(ops, **kw))
        if quantization_scales is not None or epilog_inputs is not None:
            extras = (quantization_scales, epilog_inputs)
    if key[-1] is not None:  # a hit costs one lookup and one lock
        mm = plan_cache.hit(key)
        if mm is not None:
            with mm._lock:
                if mm._usable():
                    return mm._run_stateless(ops, alpha, beta, stream, extras)
    kw = _keywords(epilog, epilog_inputs, qualifiers, quantization_scales, options, preferences, algorithm)
    if key[-1] is None:  # some argument cannot be part of a key: plan, run, free
        mm = _new_plan(ops, alpha, beta, kw, stream)
        try:
            with mm._lock:
                return mm._run_stateless(ops, alpha, beta, stream, extras)
        finally:
            mm.free()
    with plan_cache.use(key, lambda: _new_plan(ops, alpha, beta, kw, stream)) as mm, mm._lock:
        return mm._run_stateless(ops, alpha, beta, stream, extras)


def _short_key(ops: Mapping[str, TensorAdapter], epilog: Any) -> tuple:
    """The key of a call with operands and at most an epilog (no inputs, options or preferences)."""
    a = ops["a"]
    key = (_handles.cublaslt_version(), epilog, a.package, a.device_id, _tensor_key(a), _tensor_key(ops["b"]))
    c = ops.get("c")
    return key if c is None else key + (_tensor_key(c),)


def _keywords(
    epilog: Any, epilog_inputs: Any, qualifiers: Any, quantization_scales: Any, options: Any, preferences: Any,
    algorithm: Any,
) -> dict[str, Any]:  # fmt: skip
    return {
        "epilog": epilog,
        "epilog_inputs": epilog_inputs,
        "qualifiers": qualifiers,
        "quantization_scales": quantization_scales,
        "options": options,
        "preferences": preferences,
        "algorithm": algorithm,
    }
