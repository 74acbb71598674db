"""Host overheads of nvmath's data plane against the torch (and cupy) equivalents, in us per call.

Our side uses the internal data-plane API, imported lazily in each setup so that the harness runs
even while it is missing: ``nvmath._internal.tensors.wrap``, ``nvmath._internal.streams.get_stream``,
``nvmath._internal.memory.allocate``, the planner guard of ``nvmath._internal.state``, a bound call of
``nvmath.bindings`` and the import of ``nvmath.bindings`` in a fresh interpreter. The
nvmath-python rows use its private helpers where they exist (skipped otherwise).
"""

from __future__ import annotations

from typing import Any

from benchmarks.registry import Case, Skip, register
from benchmarks.suites._data import cupy_on_ctx_stream, torch_on_ctx_stream, torch_random

SHAPE = (1024, 1024)


def _torch_tensor(ctx: Any) -> tuple[Any, Any]:
    torch = torch_on_ctx_stream(ctx)
    return torch, torch_random(torch, SHAPE, torch.float32)


def _peer_utils() -> tuple[Any, Any]:
    """nvmath-python's private tensor_wrapper and utils modules (in its own process)."""
    try:
        from nvmath.internal import tensor_wrapper, utils
    except ImportError as exc:
        raise Skip(f"nvmath-python internals not found: {exc}") from exc
    return tensor_wrapper, utils


# --------------------------------------------------------------------------- tensor wrap
def _wrap_nvmath(ctx):
    from nvmath._internal.tensors import wrap

    _, t = _torch_tensor(ctx)
    return lambda: wrap(t, name="operand")


def _wrap_torch(ctx):
    _, t = _torch_tensor(ctx)
    return lambda: (t.data_ptr(), t.shape, t.stride(), t.dtype, t.device)


def _wrap_peer(ctx):
    tensor_wrapper, _ = _peer_utils()
    _, t = _torch_tensor(ctx)
    return lambda: tensor_wrapper.wrap_operand(t)


register(
    Case(
        suite="overhead",
        name="wrap-torch-tensor",
        mode="host",
        setups={"nvmath": _wrap_nvmath, "torch": _wrap_torch, "nvmath-python": _wrap_peer},
        description="wrap a torch CUDA tensor (torch: read data_ptr, shape, stride, dtype, device)",
    )
)


def _cpu_tensor() -> Any:
    try:
        import torch
    except ImportError as exc:
        raise Skip(f"torch is not installed: {exc}") from exc
    return torch.ones(SHAPE, dtype=torch.float32)


def _wrap_cpu_nvmath(ctx):
    from nvmath._internal.tensors import wrap

    t = _cpu_tensor()
    return lambda: wrap(t, name="operand")


def _wrap_cpu_torch(ctx):
    t = _cpu_tensor()
    return lambda: (t.data_ptr(), t.shape, t.stride(), t.dtype, t.device)


register(
    Case(
        suite="overhead",
        name="wrap-torch-cpu-tensor",
        mode="host",
        needs_gpu=False,
        setups={"nvmath": _wrap_cpu_nvmath, "torch": _wrap_cpu_torch},
        description="wrap a torch CPU tensor (torch: read data_ptr, shape, stride, dtype, device)",
    )
)


# --------------------------------------------------------------------------- streams
def _stream_none_nvmath(ctx):
    from nvmath._internal.streams import get_stream

    torch_on_ctx_stream(ctx)
    return lambda: get_stream(None, device_id=ctx.device_id, package="torch")


def _stream_none_torch(ctx):
    torch = torch_on_ctx_stream(ctx)
    return lambda: torch.cuda.current_stream()


def _stream_none_peer(ctx):
    _, utils = _peer_utils()
    torch_on_ctx_stream(ctx)
    return lambda: utils.get_or_create_stream(ctx.device_id, None, "torch")


def _stream_obj_nvmath(ctx):
    from nvmath._internal.streams import get_stream

    s = torch_on_ctx_stream(ctx).cuda.current_stream()
    return lambda: get_stream(s, device_id=ctx.device_id, package="torch")


def _stream_obj_torch(ctx):
    s = torch_on_ctx_stream(ctx).cuda.current_stream()
    return lambda: s.cuda_stream


def _stream_obj_peer(ctx):
    _, utils = _peer_utils()
    s = torch_on_ctx_stream(ctx).cuda.current_stream()
    return lambda: utils.get_or_create_stream(ctx.device_id, s, "torch")


register(
    Case(
        suite="overhead",
        name="stream-none",
        mode="host",
        setups={
            "nvmath": _stream_none_nvmath,
            "torch": _stream_none_torch,
            "nvmath-python": _stream_none_peer,
        },
        description="stream=None -> the package's current stream (torch: torch.cuda.current_stream())",
    )
)
register(
    Case(
        suite="overhead",
        name="stream-torch-object",
        mode="host",
        setups={"nvmath": _stream_obj_nvmath, "torch": _stream_obj_torch, "nvmath-python": _stream_obj_peer},
        description="normalize a torch.cuda.Stream (torch: read .cuda_stream)",
    )
)


# --------------------------------------------------------------------------- allocation
def _empty_nvmath(ctx):
    from nvmath._internal.streams import get_stream
    from nvmath._internal.tensors import wrap

    _, t = _torch_tensor(ctx)
    adapter = wrap(t, name="operand")
    stream = get_stream(None, device_id=ctx.device_id, package="torch")
    return lambda: adapter.empty(SHAPE, "float32", stream=stream)


def _empty_torch(ctx):
    torch = torch_on_ctx_stream(ctx)
    return lambda: torch.empty(SHAPE, device="cuda", dtype=torch.float32)


def _empty_cupy(ctx):
    cupy = cupy_on_ctx_stream(ctx)
    return lambda: cupy.empty(SHAPE, dtype=cupy.float32)


def _alloc_nvmath(ctx):
    from nvmath._internal.memory import allocate
    from nvmath._internal.streams import get_stream

    torch_on_ctx_stream(ctx)
    stream = get_stream(None, device_id=ctx.device_id, package="torch")
    return lambda: allocate(1 << 20, device_id=ctx.device_id, stream=stream, package="torch")


def _alloc_torch(ctx):
    torch = torch_on_ctx_stream(ctx)
    s = torch.cuda.current_stream()

    def call():
        torch.cuda.caching_allocator_delete(torch.cuda.caching_allocator_alloc(1 << 20, ctx.device_id, s))

    return call


def _alloc_cupy(ctx):
    cupy = cupy_on_ctx_stream(ctx)
    return lambda: cupy.cuda.alloc(1 << 20)


register(
    Case(
        suite="overhead",
        name="empty-1024x1024-f32",
        mode="host",
        setups={"nvmath": _empty_nvmath, "torch": _empty_torch, "cupy": _empty_cupy},
        description="allocate a result tensor in the operands' package (torch.empty / cupy.empty)",
    )
)
register(
    Case(
        suite="overhead",
        name="allocate-1MiB",
        mode="host",
        setups={"nvmath": _alloc_nvmath, "torch": _alloc_torch, "cupy": _alloc_cupy},
        description="allocate and free 1 MiB through the package allocator",
    )
)


# --------------------------------------------------------------------------- planner guard
def _guard_objects():
    from nvmath._internal.state import Lifecycle, PlannerState, requires

    class Planner:
        def __init__(self):
            self._lifecycle = Lifecycle("Planner")
            self._lifecycle.mark_planned()

        def bare(self, *, algorithm=None, release_workspace=False, stream=None):
            return stream

        @requires(PlannerState.PLANNED, operands=True)
        def guarded(self, *, algorithm=None, release_workspace=False, stream=None):
            return stream

    return Planner()


def _guard_nvmath(ctx):
    p = _guard_objects()
    return lambda: p.guarded(stream=1)


def _guard_python(ctx):
    p = _guard_objects()
    return lambda: p.bare(stream=1)


register(
    Case(
        suite="overhead",
        name="planner-guard",
        mode="host",
        needs_gpu=False,
        setups={"nvmath": _guard_nvmath, "python": _guard_python},
        description="execute()-like method with the @requires guard (python: the same method unguarded)",
    )
)


# --------------------------------------------------------------------------- bindings
def _binding_call(ctx):
    """``cublasLt.get_version`` through the package's bindings (ours, or nvmath-python's in its process)."""
    from nvmath.bindings import cublasLt

    cublasLt.get_version()  # loads the library and resolves the symbol
    return cublasLt.get_version


register(
    Case(
        suite="overhead",
        name="binding-call",
        mode="host",
        setups={"nvmath": _binding_call, "nvmath-python": _binding_call},
        description="a bound C call after the first (cublasLtGetVersion through nvmath.bindings.cublasLt)",
    )
)


def _interpreter(code: str) -> Any:
    """A callable that runs ``python -c code`` in a fresh interpreter with this checkout importable."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)}
    argv = [sys.executable, "-c", code]
    return lambda: subprocess.run(argv, env=env, check=True)


register(
    Case(
        suite="overhead",
        name="import-nvmath-bindings",
        mode="host",
        needs_gpu=False,
        host_calls=3,
        setups={
            "nvmath": lambda ctx: _interpreter("import nvmath.bindings"),
            "python": lambda ctx: _interpreter("pass"),
        },
        description="a fresh interpreter importing nvmath.bindings (python: one importing nothing)",
    )
)


# --------------------------------------------------------------------------- a tiny op's host cost
def _add_torch(ctx):
    torch = torch_on_ctx_stream(ctx)
    a, b = (torch_random(torch, (64,), torch.float32) for _ in range(2))
    c = torch.empty_like(a)
    return lambda: torch.add(a, b, out=c)


def _add_cupy(ctx):
    cupy = cupy_on_ctx_stream(ctx)
    a, b = (cupy.random.random_sample(64, dtype=cupy.float32) + 0.5 for _ in range(2))
    c = cupy.empty_like(a)
    return lambda: cupy.add(a, b, out=c)


register(
    Case(
        suite="overhead",
        name="tiny-op-host-cost",
        mode="host",
        setups={"torch": _add_torch, "cupy": _add_cupy},
        description="host cost of a 64-element add (reference for what a launch costs in each package)",
    )
)
