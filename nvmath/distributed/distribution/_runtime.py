"""The one place where distributions read the distributed runtime.

Distributions that need this process's rank or the number of processes (``Slab.shape``,
``ProcessGrid``, conversions to ``Box``) ask :func:`current_process`. It relies only on the public
contract of :func:`nvmath.distributed.get_context`: it returns ``None`` before
``nvmath.distributed.initialize`` (and after ``finalize``), otherwise a context whose
``process_group`` has integer ``rank`` and ``nranks`` attributes. The pure functions in
:mod:`._index` and :mod:`._plan` take ``nranks`` explicitly and never come here.
"""

from __future__ import annotations

import importlib

__all__ = ["current_process"]

NOT_INITIALIZED = (
    "nvmath.distributed is not initialized: call nvmath.distributed.initialize(device_id, process_group) "
    "before using distributions that need the number of processes"
)


def current_process() -> tuple[int, int]:
    """Return ``(rank, nranks)`` of this process in the initialized distributed runtime.

    Raises:
        RuntimeError: the runtime is not initialized (or not installed).
    """
    package = importlib.import_module("nvmath.distributed")
    get_context = getattr(package, "get_context", None)
    context = get_context() if get_context is not None else None
    if context is None:
        raise RuntimeError(NOT_INITIALIZED)
    group = context.process_group
    return int(group.rank), int(group.nranks)
