"""Fast entries of a planned single GEMM for the stateless hit path: no adapters, no dictionaries.

The plan-cache key already guarantees that a call's operands are of the planned kind (type, shape,
strides, dtype, device, conjugation bit), so a cached plan of the common kinds runs the call straight
from raw attribute reads:

* :func:`cpu_gemm` -- numpy (or torch CPU) operands on the CPU: ``numpy.matmul`` into a new array;
* :func:`torch_gemm` -- torch CUDA operands, torch's current stream: ``torch.empty`` for the result
  and the precomputed cuBLAS program.

Everything else (structured kinds, copies, sequences, a user stream, in place, other packages) goes
through :meth:`Matmul.execute`'s general path. :func:`fast_entry` picks the entry for a planner.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import numpy as np

from nvmath._internal import devices, streams

__all__ = ["cpu_gemm", "fast_entry", "torch_gemm"]

_REAL = (int, float)


def _checked(alpha: Any, beta: Any, check: Callable[[Any, Any], tuple[Any, Any]]) -> tuple[Any, Any]:
    if (alpha is None or type(alpha) in _REAL) and (beta is None or type(beta) in _REAL):
        return (1 if alpha is None else alpha), (0 if beta is None else beta)
    return check(alpha, beta)


def cpu_gemm(problem: Any, check: Callable[[Any, Any], tuple[Any, Any]]) -> Callable[..., Any]:
    """The entry of a CPU GEMM on numpy / torch-CPU operands (no copies, no threads limit, not in place)."""
    t = problem.traits
    shape, dtype = t.result_shape, np.dtype(t.dtype)
    conj_a, conj_b = problem.kernel_quals[0].conjugate, problem.kernel_quals[1].conjugate
    torch_out = problem.package == "torch"

    def run(a: Any, b: Any, c: Any, alpha: Any, beta: Any, stream: Any) -> Any:
        alpha, beta = _checked(alpha, beta, check)
        if torch_out:
            a, b = a.numpy(), b.numpy()
            c = None if c is None else c.numpy()
        a = np.conj(a) if conj_a else a
        b = np.conj(b) if conj_b else b
        out = np.empty(shape, dtype)
        np.matmul(a, b, out=out)
        if alpha != 1:
            out *= alpha
        if c is not None and beta != 0:
            out += beta * c if beta != 1 else c
        return sys.modules["torch"].from_numpy(out) if torch_out else out

    return run


def torch_gemm(problem: Any, program: Any, device_id: int, blocking: bool,
               workspace: Callable[[], tuple[Any, Any]], check: Callable[[Any, Any], tuple[Any, Any]]
               ) -> Callable[..., Any]:  # fmt: skip
    """The entry of a GPU GEMM on torch CUDA operands (not in place).

    ``workspace()`` gives the planner's current ``(Workspace, lock or None)``.
    """
    from nvmath.linalg.generic._cublas import WORKSPACE_BYTES, bind, get_handle

    torch = sys.modules["torch"]
    t = problem.traits
    dev = device_id
    device = torch.device("cuda", dev)
    tdt = getattr(torch, t.dtype)
    shape, strides = tuple(t.result_shape), tuple(t.result_strides)
    dense_c = t.order == "row"
    has_c = problem.has_c
    launch = program.launch

    def run(a: Any, b: Any, c: Any, alpha: Any, beta: Any, stream: Any) -> Any:
        alpha, beta = _checked(alpha, beta, check)
        if stream is None:
            sh = streams.current_stream(dev, "torch")
            d = torch.empty(shape, dtype=tdt, device=device) if dense_c else torch.empty_strided(
                shape, strides, dtype=tdt, device=device)  # fmt: skip
            if has_c:
                d.copy_(c)
        else:
            sh = streams.get_stream(stream, device_id=dev, package="torch")
            with torch.cuda.stream(streams.native_stream(sh, "torch")):
                d = torch.empty_strided(shape, strides, dtype=tdt, device=device)
                if has_c:
                    d.copy_(c)
        ptrs = {"a": a.data_ptr(), "b": b.data_ptr(), "d": d.data_ptr()}
        with devices.device_ctx(dev):
            ws, lock = workspace()
            if lock is not None:
                lock.acquire()
            try:
                handle = get_handle(dev)
                bind(handle, sh, ws.ensure(WORKSPACE_BYTES, sh), WORKSPACE_BYTES)
                launch(handle, sh, ptrs, alpha, beta, has_c, 0)
            finally:
                if lock is not None:
                    lock.release()
            if blocking:
                streams.synchronize(sh)
        return d

    return run


def fast_entry(
    problems: list[Any], programs: list[Any], *, cpu: bool, inplace: bool, device_id: Any, num_threads: Any,
    blocking: bool, workspace: Callable[[], tuple[Any, Any]], check: Callable[[Any, Any], tuple[Any, Any]],
) -> Callable[..., Any] | None:  # fmt: skip
    """The fast entry of a planned object, or ``None`` when its calls need the general path."""
    if len(problems) != 1 or inplace:
        return None
    p = problems[0]
    if p.prep or p.traits.kind != "gemm" or p.ops is None:
        return None
    if cpu:
        if p.package not in ("numpy", "torch") or num_threads is not None or p.traits.order != "row":
            return None
        if any(op.is_conjugate for op in p.ops.values()):
            return None
        return cpu_gemm(p, check)
    if p.package == "torch" and all(op.device == "cuda" for op in p.ops.values()):
        return torch_gemm(p, programs[0], device_id, blocking, workspace, check)
    return None
