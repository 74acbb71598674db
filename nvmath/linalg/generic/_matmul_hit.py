"""The compiled hit of the stateless :func:`~nvmath.linalg.matmul`: a plain ``matmul(a, b)`` of two torch
CUDA tensors checked against its cached plan and launched (``cublasGemmEx`` or
``cublasGemmStridedBatchedEx``) in one C call.

:data:`hits` is the function's :class:`~nvmath._internal.compiled_hits.StatelessHits` (see there for
what a call checks and when the Python path runs); :func:`build` makes an entry (``LinearHit`` of kind
1) from a cached plan that just served a plain call on the Python path, when the plan's fast entry
(:func:`~._fast.torch_gemm`) is one GEMM launch at the tensors' addresses: its compiled caller and
operand swap, the result's allocation, the host alpha and beta a plain call leaves (1 and 0), and the
shared workspace. A call runs only while the plan is live, the workspace is bound to the call's stream
and large enough, and the thread's cuBLAS handle is bound to that stream and workspace already (as
:data:`~._cublas.bindings` records; the Python path binds it otherwise).
"""

from __future__ import annotations

import ctypes
import logging
from typing import Any

import numpy as np

from nvmath._internal import compiled_hits, fastpath

__all__ = ["build", "hits"]

logger = logging.getLogger(__name__)


def _runnable(made: Any) -> bool:
    return bool(made.launch.live)


def build(key: Any, entry: Any, a: Any, b: Any) -> Any:
    """The ``LinearHit`` of a plain call ``matmul(a, b)`` that the cached ``entry`` (plan-cache key
    ``key``) just served on the Python path, or ``None`` when its next call cannot be made in C (not one
    GEMM launch at the addresses, a pure-Python caller, a stream of another context, operands other than
    two plain torch tensors of one dtype, host scalars not as a plain call leaves them)."""
    fields = compiled_hits.common_fields(key, entry, a, b)
    parts = getattr(entry.planner.pair_entry(), "compiled_parts", None)
    if fields is None or parts is None or not fastpath.is_compiled(parts["call"]):
        logger.debug("no compiled hit: operands %s, parts %s", fields is not None, parts is not None)
        return None
    handle = parts["caller_stream"].last
    if handle is None or handle.ctx is not None:
        logger.debug("no compiled hit: the stream %r is not one of the primary context", handle)
        return None
    buf, _, p_alpha, p_beta = parts["scalars"]
    one, zero = np.ones(1, buf.dtype).tobytes(), np.zeros(1, buf.dtype).tobytes()
    if ctypes.string_at(p_alpha, len(one)) != one or ctypes.string_at(p_beta, len(zero)) != zero:
        logger.debug("no compiled hit: the host alpha and beta are not 1 and 0")
        return None
    space = parts["workspace"]()[0]
    from nvmath import _fastcall
    from nvmath.linalg.generic import _cublas  # (here: importing nvmath loads no cuBLAS bindings)

    return _fastcall.LinearHit(
        **fields, device_id=parts["device_id"], stream=handle.ptr, alloc=parts["alloc"], launch=entry,
        algo=(0, parts["workspace_bytes"]), call=parts["call"], swap=parts["swap"], c_is_d=False, bound=None,
        handle=handle, space=space, lt_handle=0, handles_local=_cublas.handles_here, handles_module=_cublas,
        pool_get=_cublas.POOL_GET, after=None, scalars=((p_alpha, one), (p_beta, zero)), kind=1,
        bind_memo=_cublas.bindings, **compiled_hits.context_fields(parts["device_id"], fields["get_device"], a),
    )  # fmt: skip


hits = compiled_hits.StatelessHits(build, _runnable)
"""The compiled hit of :func:`~nvmath.linalg.matmul` (its ``table`` is ``None`` until made)."""
