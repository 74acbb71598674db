"""The compiled hit of the stateless :func:`~nvmath.linalg.advanced.matmul`: a plain ``matmul(a, b)`` of two
torch CUDA tensors checked against its cached plan and launched (``cublasLtMatmul``) in one C call.

:data:`hits` is the function's :class:`~nvmath._internal.compiled_hits.StatelessHits` (see there for
what a call checks and when the Python path runs); :func:`build` makes an entry from a cached plan that
just served a plain call on the Python path: the plan's launch (its compiled caller, algorithm,
workspace, operand swap), the result's allocation as the plan's result maker does it, and the host
alpha a plain call leaves (1). A plan whose launch is closed (evicted, freed) or whose algorithm
changed is never run by its entry.
"""

from __future__ import annotations

import ctypes
import functools
import logging
from typing import Any

import numpy as np

from nvmath._internal import compiled_hits
from nvmath.linalg.advanced._direct import address_run_possible
from nvmath.linalg.advanced._launch import twin_arguments

__all__ = ["build", "hits"]

logger = logging.getLogger(__name__)


def _runnable(made: Any) -> bool:
    launch = made.launch
    return not launch.closed and launch.algo is made.algo


def build(key: Any, entry: Any, a: Any, b: Any) -> Any:
    """The ``LinearHit`` of a plain call ``matmul(a, b)`` that the cached ``entry`` (plan-cache key
    ``key``) just served on the Python path, or ``None`` when its next call cannot be made in C (see
    :meth:`~nvmath.linalg.advanced._launch.MatmulLaunch.compiled_parts`; also operands other than two
    plain torch tensors of one dtype, a plan that cannot run on addresses)."""
    fields = compiled_hits.common_fields(key, entry, a, b)
    mm = entry.planner
    handle, result = mm.caller_stream.last, mm.result_maker
    if fields is None or handle is None or result is None or result.direct is None:
        return None
    if not address_run_possible(mm):
        return None
    launch = mm.launcher
    parts = launch.compiled_parts(handle)
    if parts is None or parts["scalar_dtype"] is None:
        return None
    one = np.ones(1, parts["scalar_dtype"]).tobytes()
    if ctypes.string_at(parts["alpha"], len(one)) != one:  # (a plain call just ran: alpha is 1)
        return None
    empty, shape, strides, dtype, device = result.direct
    template = empty((0,), (1,), dtype=dtype, device=device)  # (no memory: allocates as `empty` does)
    from nvmath import _fastcall

    return _fastcall.LinearHit(
        **fields, **twin_arguments(launch, parts, handle),
        alloc=functools.partial(template.new_empty_strided, shape, strides), scalars=((parts["alpha"], one),),
        **compiled_hits.context_fields(parts["device_id"], fields["get_device"], a),
    )  # fmt: skip


hits = compiled_hits.StatelessHits(build, _runnable)
"""The compiled hit of :func:`~nvmath.linalg.advanced.matmul` (its ``table`` is ``None`` until made)."""
