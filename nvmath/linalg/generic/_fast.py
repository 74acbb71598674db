"""Fast entries of a planned single GEMM for the stateless hit path: no adapters, no dictionaries.

The plan-cache key already guarantees that a call's operands are of the planned kind (type, shape,
strides, dtype, device, conjugation bit), so a cached plan of the common kinds runs the call straight
from raw attribute reads:

* :func:`cpu_gemm` -- numpy (or torch CPU) operands on the CPU: ``numpy.matmul`` into a new array;
* :func:`torch_gemm` -- torch CUDA operands: torch's allocator for the result and the precomputed
  cuBLAS program;
* :func:`torch_grouped` -- an explicit batch of torch CUDA GEMMs: the results, the pointer arrays and
  one grouped launch.

Everything else (structured kinds, copies, looped sequences, in place, other packages) goes
through :meth:`Matmul.execute`'s general path. :func:`fast_entry` picks the entry for a planner.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any

import numpy as np

from nvmath._internal import devices, streams
from nvmath.bindings import cublas

__all__ = ["GroupedRefused", "cpu_gemm", "fast_entry", "torch_gemm", "torch_grouped"]

_REAL = (int, float)


def _checked(alpha: Any, beta: Any, check: Callable[[Any, Any], tuple[Any, Any]]) -> tuple[Any, Any]:
    if (alpha is None or type(alpha) in _REAL) and (beta is None or type(beta) in _REAL):
        return (1 if alpha is None else alpha), (0 if beta is None else beta)
    return check(alpha, beta)


def cpu_gemm(problem: Any, check: Callable[[Any, Any], tuple[Any, Any]]) -> Callable[..., Any]:
    """The entry of a CPU GEMM on numpy / torch-CPU operands (no copies, no threads limit, not in place).

    torch operands of the computation's dtype are multiplied by ``torch.matmul`` (torch's CPU BLAS, no
    conversion to numpy and back; :func:`torch_cpu_gemm`), numpy ones by ``numpy.matmul``.
    """
    t = problem.traits
    if problem.package == "torch" and all(op.dtype == t.dtype for op in problem.ops.values()):
        return torch_cpu_gemm(problem, check)
    shape, dtype = t.result_shape, np.dtype(t.dtype)
    conj_a, conj_b = problem.kernel_quals[0].conjugate, problem.kernel_quals[1].conjugate
    torch_out = problem.package == "torch"

    def run(a: Any, b: Any, c: Any, alpha: Any, beta: Any, stream: Any) -> Any:
        if alpha is not None or beta is not None:
            alpha, beta = _checked(alpha, beta, check)
        if torch_out:
            a, b = a.detach().numpy(), b.detach().numpy()
            c = None if c is None else c.detach().numpy()
        a = np.conj(a) if conj_a else a
        b = np.conj(b) if conj_b else b
        out = np.empty(shape, dtype)
        np.matmul(a, b, out=out)
        if alpha is not None and alpha != 1:
            out *= alpha
        if c is not None and beta != 0:
            out += beta * c if beta != 1 else c
        return sys.modules["torch"].from_numpy(out) if torch_out else out

    return run


def torch_cpu_gemm(problem: Any, check: Callable[[Any, Any], tuple[Any, Any]]) -> Callable[..., Any]:
    """The entry of a CPU GEMM on torch CPU tensors of the computation's dtype: ``torch.matmul`` of the
    detached operands (the result tracks no graph, as a product computed by numpy would not), then
    ``alpha`` and ``beta * c`` in place (``beta == 0`` never reads ``c``)."""
    torch = sys.modules["torch"]
    matmul = torch.matmul
    conj_a, conj_b = problem.kernel_quals[0].conjugate, problem.kernel_quals[1].conjugate

    def run(a: Any, b: Any, c: Any, alpha: Any, beta: Any, stream: Any) -> Any:
        a, b = a.detach(), b.detach()
        if conj_a or conj_b:
            a, b = (a.conj() if conj_a else a), (b.conj() if conj_b else b)
        out = matmul(a, b)
        if alpha is None and beta is None:
            return out
        alpha, beta = _checked(alpha, beta, check)
        if alpha != 1:
            out.mul_(alpha)
        if c is not None and beta != 0:
            out.add_(c.detach(), alpha=beta)
        return out

    return run


def torch_gemm(
    problem: Any,
    program: Any,
    device_id: int,
    blocking: bool,
    workspace: Callable[[], tuple[Any, Any]],
    check: Callable[[Any, Any], tuple[Any, Any]],
) -> Callable[..., Any]:
    """The entry of a GPU GEMM on torch CUDA operands (not in place).

    ``workspace()`` gives the planner's current ``(workspace, scratch)`` (a cached plan's caller holds
    the lock of shared ones). torch's current stream (``stream=None``) is memoised (one raw read per
    call, through the planners' :class:`~nvmath._internal.streams.CallerStream`); the result comes from
    ``new_empty_strided`` of an empty template tensor of its dtype and device; the launch is
    :func:`_launcher`'s.
    """
    torch = sys.modules["torch"]
    t = problem.traits
    dev = device_id
    device = torch.device("cuda", dev)
    tdt = getattr(torch, t.dtype)
    shape, strides = tuple(t.result_shape), tuple(t.result_strides)
    has_c = problem.has_c
    # the result: new_empty_strided of an empty template of its dtype and device (no memory), bound to
    # its shape and strides: no dtype, device or keyword to parse per call (torch.empty's overloads and
    # keywords cost about 1.5 us more per call on a CPU)
    result = functools.partial(torch.empty(0, dtype=tdt, device=device).new_empty_strided, shape, strides)
    launch, single = _launcher(program, dev, has_c, blocking, workspace)
    # the planners' stream resolver: its memo of the current stream is compared inline (no call)
    caller_stream = streams.CallerStream(dev, "torch")
    raw = caller_stream.current or _no_stream  # (without torch's getter: resolved every call)
    # torch keeps its current device's primary context current: on a stream of that context the
    # launch needs no context switch, nor the driver query that checks for one
    current_device = streams.torch_device_getter() or _no_device

    on_stream = _on_stream(torch, caller_stream, (shape, strides, tdt, device), has_c)
    def run(a: Any, b: Any, c: Any, alpha: Any, beta: Any, stream: Any) -> Any:
        if alpha is None and beta is None:
            alpha, beta = 1, 0
        else:
            alpha, beta = _checked(alpha, beta, check)
        if stream is None:
            sh = caller_stream.last
            if sh is None or sh.ptr != raw(dev):
                sh = caller_stream(None)
            d = result()
            if has_c:
                d.copy_(c.detach())
        else:
            sh, d = on_stream(stream, c)
        if sh.ctx is None and current_device() == dev:
            launch(sh, a.data_ptr(), b.data_ptr(), d.data_ptr(), alpha, beta)
        else:
            with devices.device_ctx(dev):
                launch(sh, a.data_ptr(), b.data_ptr(), d.data_ptr(), alpha, beta)
        return d

    # (the generic matmul's compiled hit, _matmul_hit, reads them: None where it cannot run this entry)
    parts = None if single is None or has_c else _parts(single, workspace, result, dev, caller_stream)
    run.compiled_parts = parts  # type: ignore[attr-defined]
    return run


def _parts(single: tuple, workspace: Callable, result: Callable, dev: int, caller_stream: Any) -> dict:
    """:func:`torch_gemm`'s fixed launch parts of a single GEMM launch (``single`` as :func:`_launcher`
    gives it), for a compiled twin of its ``run``."""
    call, swap, scalars, wsb = single
    return {
        "call": call, "swap": swap, "scalars": scalars, "workspace_bytes": wsb, "workspace": workspace,
        "alloc": result, "device_id": dev, "caller_stream": caller_stream,
    }  # fmt: skip


def _no_stream(device_id: int) -> None:
    """The raw current stream when it cannot be read (never a stream's address)."""
    return None


def _no_device() -> int:
    """torch's current device when it cannot be read (never a device)."""
    return -1


def _on_stream(torch: Any, caller_stream: Any, layout: tuple, has_c: bool) -> Callable[[Any, Any], tuple]:
    """``on_stream(stream, c)``: ``(handle, result)`` for an explicit ``stream``; the result (``layout``:
    shape, strides, dtype, device) is allocated, and ``c`` copied into it, on that stream."""
    shape, strides, tdt, device = layout

    def on_stream(stream: Any, c: Any) -> tuple[Any, Any]:
        sh = caller_stream(stream)
        with torch.cuda.stream(streams.native_stream(sh, "torch")):
            d = torch.empty_strided(shape, strides, dtype=tdt, device=device)
            if has_c:
                d.copy_(c.detach())
        return sh, d

    return on_stream


def _launcher(
    program: Any, dev: int, has_c: bool, blocking: bool, workspace: Callable[[], tuple[Any, Any]]
) -> tuple[Callable[[Any, int, int, int, Any, Any], None], tuple | None]:
    """``(launch, single)``: ``launch(stream, pa, pb, pd, alpha, beta)`` runs ``program``'s GEMM on
    ``stream`` (in the device's context): the handle bound to the stream and the planner's workspace,
    then the cuBLAS call (one function for the common single launch at the tensors' addresses).
    ``single``: that launch's ``(call, swap, host scalars (buf, held, alpha address, beta address),
    workspace bytes)`` for a compiled twin (``None`` for other programs)."""
    from nvmath.linalg.generic._cublas import bind, get_handle

    wsb = program.workspace_bytes
    single = None if blocking else _single_launch(program)
    if single is not None:
        call, swap, (buf, held, p_alpha, p_beta) = single

        def launch_one(sh: Any, pa: int, pb: int, pd: int, alpha: Any, beta: Any) -> None:
            handle = get_handle(dev)
            bind(handle, sh, workspace()[0].ensure(wsb, sh), wsb)
            if alpha != held[0] or beta != held[1]:
                buf[0] = held[0] = alpha
                buf[1] = held[1] = beta
            if swap:
                pa, pb = pb, pa
            call(handle, p_alpha, pa, pb, p_beta, pd)

        return launch_one, (call, swap, (buf, held, p_alpha, p_beta), wsb)
    gemm = _gemm_runner(program)
    synchronize = streams.synchronize

    def launch(sh: Any, pa: int, pb: int, pd: int, alpha: Any, beta: Any) -> None:
        handle = get_handle(dev)
        bind(handle, sh, workspace()[0].ensure(wsb, sh), wsb)
        if gemm is not None:
            gemm(handle, pa, pb, pd, alpha, beta)
        else:  # pragma: no cover - a GemmProgram subclass keeps its own launch
            program.launch(handle, sh, {"a": pa, "b": pb, "d": pd}, alpha, beta, has_c, 0)
        if blocking:
            synchronize(sh)

    return launch, None


def _host_scalars(program: Any) -> tuple[Any, list, int, int]:
    """``(buf, held, alpha address, beta address)``: host alpha / beta of a launch's own, holding 1 and 0;
    ``held`` is what ``buf`` holds (a launch rewrites them only when the call's values change; cuBLAS
    reads host scalars when the launch is made)."""
    from nvmath.linalg.generic._cublas import Scalars

    scalars = Scalars(program.types.scale)
    scalars.buf[0], scalars.buf[1] = 1, 0
    return scalars.buf, [1, 0], scalars.alpha, scalars.beta


def _single_launch(program: Any) -> tuple[Any, bool, tuple] | None:
    """``(call, swap, host scalars)`` of a :class:`GemmProgram` made of one launch at the tensors'
    addresses (``call(handle, alpha, x1, x2, beta, d)``; ``swap``: x1 is ``b``), else ``None``."""
    from nvmath.linalg.generic._cublas import GemmProgram

    if type(program) is not GemmProgram or program.empty:
        return None
    launcher = program.launcher
    if len(launcher.offsets) != 1 or any(launcher.offsets[0]):
        return None
    return launcher.call, program.traits.x1 != "a", _host_scalars(program)


def _gemm_runner(program: Any) -> Callable[..., None] | None:
    """``run(handle, pa, pb, pd, alpha, beta)`` for a :class:`GemmProgram`: its launches without the
    pointer dictionary, on host scalars of its own (:func:`_host_scalars`); ``None`` for another program
    (its own :meth:`launch` is used)."""
    from nvmath.linalg.generic._cublas import GemmProgram

    if type(program) is not GemmProgram:  # pragma: no cover - subclasses keep their own launch
        return None
    if program.empty:
        return lambda *args: None
    buf, held, p_alpha, p_beta = _host_scalars(program)
    gemm_run, x1_is_a = program.launcher.run, program.traits.x1 == "a"

    def run(handle, pa, pb, pd, alpha, beta):
        if alpha != held[0] or beta != held[1]:
            buf[0] = held[0] = alpha
            buf[1] = held[1] = beta
        if x1_is_a:
            gemm_run(handle, pa, pb, pd, p_alpha, p_beta)
        else:
            gemm_run(handle, pb, pa, pd, p_alpha, p_beta)

    return run


class GroupedRefused(Exception):
    """cuBLAS refused the grouped form for these types: the caller runs the general path (a loop)."""


def _spread(value: Any, count: int) -> list[Any]:
    """A call's operand or scalar argument as one entry per problem (length-1 sequences repeat)."""
    if isinstance(value, (list, tuple)):
        return list(value) * count if len(value) == 1 else list(value)
    return [value] * count


def torch_grouped(
    problems: list[Any],
    grouped: Any,
    device_id: int,
    blocking: bool,
    workspace: Callable[[], tuple[Any, Any]],
    check: Callable[[Any, Any], tuple[Any, Any]],
) -> Callable[..., Any]:
    """The entry of an explicit batch of torch CUDA GEMMs run as one grouped launch (not in place)."""
    from nvmath.linalg.generic._cublas import bind, get_handle, workspace_bytes

    torch = sys.modules["torch"]
    dev = device_id
    wsb = max(workspace_bytes(p.traits) for p in problems)
    device = torch.device("cuda", dev)
    tdt = getattr(torch, problems[0].traits.dtype)
    layouts = [(tuple(p.traits.result_shape), tuple(p.traits.result_strides)) for p in problems]
    count, has_c, need = len(problems), problems[0].has_c, grouped.scratch_bytes
    launch = grouped.launch

    def run(a: Any, b: Any, c: Any, alpha: Any, beta: Any, stream: Any) -> Any:
        scalars = [_checked(x, y, check) for x, y in zip(_spread(alpha, count), _spread(beta, count))]
        sh = streams.current_stream(dev, "torch") if stream is None else streams.get_stream(
            stream, device_id=dev, package="torch")  # fmt: skip
        with torch.cuda.stream(streams.native_stream(sh, "torch")) if stream is not None else _NULL:
            ds = [torch.empty_strided(shape, strides, dtype=tdt, device=device) for shape, strides in layouts]
            if has_c:
                for d, z in zip(ds, _spread(c, count)):
                    d.copy_(z.detach())
        ptrs = [
            {"a": x.data_ptr(), "b": y.data_ptr(), "d": d.data_ptr()}
            for x, y, d in zip(_spread(a, count), _spread(b, count), ds)
        ]
        with devices.device_ctx(dev):
            ws, scratch = workspace()
            handle = get_handle(dev)
            bind(handle, sh, ws.ensure(wsb, sh), wsb)
            alphas, betas = [x for x, _ in scalars], [y for _, y in scalars]
            try:
                launch(handle, sh, ptrs, alphas, betas, has_c, scratch.ensure(need, sh))
            except cublas.cuBLASError as exc:
                if exc.status in (cublas.Status.NOT_SUPPORTED, cublas.Status.INVALID_VALUE):
                    raise GroupedRefused(str(exc)) from exc
                raise
            if blocking:
                streams.synchronize(sh)
        return ds

    return run


class _Null:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


_NULL = _Null()


def fast_entry(
    problems: list[Any],
    programs: list[Any],
    grouped: Any,
    *,
    sequence: bool,
    cpu: bool,
    inplace: bool,
    device_id: Any,
    num_threads: Any,
    blocking: bool,
    workspace: Callable[[], tuple[Any, Any]],
    check: Callable[[Any, Any], tuple[Any, Any]],
) -> Callable[..., Any] | None:
    """The fast entry of a planned object, or ``None`` when its calls need the general path."""
    if inplace or any(p.prep for p in problems) or any(p.ops is None for p in problems):
        return None
    if sequence:
        torch_gpu = all(
            p.package == "torch" and op.device == "cuda" for p in problems for op in p.ops.values()
        )
        if grouped is None or cpu or not torch_gpu:
            return None
        return torch_grouped(problems, grouped, device_id, blocking, workspace, check)
    p = problems[0]
    if p.prep or p.traits.kind != "gemm" or p.ops is None:
        return None
    if cpu:
        if p.narrow or p.package not in ("numpy", "torch") or num_threads is not None or p.traits.order != "row":
            return None
        if any(op.is_conjugate for op in p.ops.values()):
            return None
        return cpu_gemm(p, check)
    if p.package == "torch" and all(op.device == "cuda" for op in p.ops.values()):
        return torch_gemm(p, programs[0], device_id, blocking, workspace, check)
    return None
