"""The plan cache behind the stateless solver functions (``cholesky``, ``eigh``, ``solve``, ...).

A stateless call looks its plan up in :data:`solver_plan_cache` by everything that decides a plan --
the planner class, its arguments, each operand's package, device, dtype and shape (not its strides:
operands are always copied into the plan's own column-major buffers), the options and the execution
space -- supplies the operands, executes, and releases the operands again, so a cached plan never
keeps a caller's tensor alive. A plan is used by one thread at a time (each planner has a lock).

The cache is an explicit :class:`~nvmath._internal.plan_cache.PlanCache`: ``solver_plan_cache.stats``,
``.resize(n)``, ``.clear()``, ``.enabled = False``. Calls whose options cannot be hashed (an
unhashable allocator, say) plan and free every time.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from nvmath._internal import caches
from nvmath._internal.execution import resolve_execution
from nvmath._internal.options import check_or_create_options
from nvmath._internal.plan_cache import PlanCache
from nvmath._internal.state import freed_on_error
from nvmath._internal.stateless import CachedPlan, call_cached
from nvmath._internal.tensors import wrap

__all__ = ["run_cached", "solver_key", "solver_plan_cache"]

solver_plan_cache: PlanCache[CachedPlan[Any]] = caches.register(
    "nvmath.linalg: solver plans", PlanCache(maxsize=16, name="dense-solver plans")
)
"""The plans of the stateless solver functions (bounded LRU; see the module docstring). Each entry holds
its plan's device buffers and workspaces until evicted."""


def _operand_key(obj: Any) -> Hashable:
    if isinstance(obj, (list, tuple)):
        return ("seq", tuple(_operand_key(o) for o in obj))
    adapter = wrap(obj)
    return (adapter.package, adapter.device_id, adapter.dtype, tuple(adapter.shape))


def solver_key(
    cls: type, operands: dict[str, Any], kwargs: dict[str, Any], options: Any, execution: Any
) -> Hashable | None:
    """The plan-cache key of one stateless solver call (the one key builder), or ``None`` when some
    argument cannot be part of a key."""
    first = next(iter(operands.values()))
    if isinstance(first, (list, tuple)):
        first = first[0] if first else None
    try:
        adapter = wrap(first)
        device = None if adapter.device == "cpu" else adapter.device_id
        resolved = resolve_execution(execution, device)
        opts = check_or_create_options(cls._OPTIONS, options, f"{cls._NAME} options")
        key = (
            cls,
            tuple(sorted(kwargs.items())),
            tuple((name, _operand_key(obj)) for name, obj in operands.items()),
            opts,
            resolved,
        )
        hash(key)
    except (TypeError, ValueError):
        return None  # unhashable or invalid: the planner itself reports invalid input
    return key


def run_cached(
    cls: type,
    operands: dict[str, Any],
    kwargs: dict[str, Any],
    *,
    options: Any,
    execution: Any,
    stream: Any,
    method: str = "execute",
) -> Any:
    """Plan (or reuse a cached plan of) ``cls(**operands, **kwargs, ...)`` and call ``method``.

    Args:
        cls: the planner class.
        operands: the operands by keyword.
        kwargs: the planner's other (hashable) arguments.
        options, execution, stream: as for the planner.
        method: the planner method that computes the result.
    """

    def build() -> CachedPlan[Any]:
        planner = cls(**operands, **kwargs, options=options, execution=execution, stream=stream)
        with freed_on_error(planner):
            planner.plan(stream=stream)
        return CachedPlan(planner)

    key = solver_key(cls, operands, kwargs, options, execution) if solver_plan_cache.enabled else None
    return call_cached(solver_plan_cache, key, build, operands, method, stream)
