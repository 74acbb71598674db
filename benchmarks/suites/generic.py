"""Generic matmul suite (``nvmath.linalg.matmul`` on cuBLAS / the CPU BLAS): the TARGETS.md rows.

GPU rows (ms, CUDA events on the harness stream) against torch, cupy and nvmath-python's generic
matmul (in its own process; the nvmath and nvmath-python setups are the same code):

* ``f32-4096``, ``f64-2048``, ``c64-2048``, ``f32-batch-256x128``: plain and batched GEMMs, each as a
  stateless call and (``-execute``) as a planned ``Matmul.execute()``;
* ``symm-4096x1024-f32``, ``trmm-4096x1024-f32``, ``dgmm-8192-f32``: structured operands; torch and
  cupy have no such routines and do the same product with the full matrix (symm, trmm) or a
  broadcast multiply (dgmm);
* ``seq64-k512-f32``: 64 problems of mixed shapes (M, N in [64, 1024], K = 512) in one call (one
  grouped GEMM) against a loop of ``torch.matmul``.

Host rows (``mode="host"``, us per call): ``host-64-stateless`` / ``host-64-execute`` (64^3 float32
on the GPU); ``cpu-*`` (numpy operands on the CPU against ``numpy.matmul`` on the same BLAS threads;
no GPU needed).
"""

from __future__ import annotations

from typing import Any

from benchmarks.registry import Case, Prepared, Skip, register
from benchmarks.suites._data import cupy_on_ctx_stream, cupy_random, rotate, torch_on_ctx_stream, torch_random

SUITE = "generic"


def _qualifiers(nv: Any, which: str, kind: str) -> Any:
    import numpy as np

    make = {
        "sy": lambda: nv.linalg.SymmetricMatrixQualifier.create(uplo=nv.linalg.FillMode.LOWER),
        "tr": lambda: nv.linalg.TriangularMatrixQualifier.create(uplo=nv.linalg.FillMode.LOWER),
        "dg": lambda: nv.linalg.DiagonalMatrixQualifier.create(),
    }[kind]
    q = np.full(2, nv.linalg.GeneralMatrixQualifier.create(), dtype=nv.linalg.matrix_qualifiers_dtype)
    q[0 if which == "a" else 1] = make()
    return q


# --------------------------------------------------------------------------- plain and batched GEMMs
def _gemm_data(ctx: Any, shape_a: tuple[int, ...], shape_b: tuple[int, ...], dtype: str) -> tuple[Any, list]:
    torch = torch_on_ctx_stream(ctx)
    dt = getattr(torch, dtype)
    nbytes = (_prod(shape_a) + _prod(shape_b)) * dt.itemsize
    return torch, [
        (torch_random(torch, shape_a, dt), torch_random(torch, shape_b, dt))
        for _ in range(ctx.rotation(nbytes, max_sets=4))
    ]


def _prod(shape: tuple[int, ...]) -> int:
    out = 1
    for d in shape:
        out *= d
    return out


def _gemm_setups(shape_a: tuple[int, ...], shape_b: tuple[int, ...], dtype: str, execute: bool) -> dict:
    def torch_(ctx):
        torch, sets = _gemm_data(ctx, shape_a, shape_b, dtype)
        return rotate([lambda a=a, b=b: torch.matmul(a, b) for a, b in sets])

    def cupy_(ctx):
        cupy = cupy_on_ctx_stream(ctx)
        a, b = cupy_random(cupy, shape_a, dtype), cupy_random(cupy, shape_b, dtype)
        return lambda: cupy.matmul(a, b)

    def ours(ctx):
        import nvmath

        _, sets = _gemm_data(ctx, shape_a, shape_b, dtype)
        if not execute:
            return rotate([lambda a=a, b=b: nvmath.linalg.matmul(a, b) for a, b in sets])
        mms = [nvmath.linalg.Matmul(a, b) for a, b in sets]
        for mm in mms:
            mm.plan()
        return Prepared(fn=rotate([mm.execute for mm in mms]), teardown=lambda: [mm.free() for mm in mms])

    return {"nvmath": ours, "torch": torch_, "cupy": cupy_, "nvmath-python": ours}


_GEMMS = [
    ("f32-4096", (4096, 4096), (4096, 4096), "float32", "float32 4096^3"),
    ("f64-2048", (2048, 2048), (2048, 2048), "float64", "float64 2048^3"),
    ("c64-2048", (2048, 2048), (2048, 2048), "complex64", "complex64 2048^3"),
    ("f32-batch-256x128", (256, 128, 128), (256, 128, 128), "float32", "float32 batch of 256 128^3"),
]
for _name, _sa, _sb, _dt, _text in _GEMMS:
    _flops = 2.0 * _prod(_sa) * _sb[-1] * (4 if _dt.startswith("complex") else 1)
    for _suffix, _execute in (("", False), ("-execute", True)):
        register(
            Case(
                suite=SUITE,
                name=_name + _suffix,
                setups=_gemm_setups(_sa, _sb, _dt, _execute),
                flops=_flops,
                description=f"{_text} ({'Matmul.execute' if _execute else 'stateless'})",
            )
        )


# --------------------------------------------------------------------------- structured operands
def _structured(kind: str, n: int, other: int, native: bool = False):
    """``kind`` operand ``a`` (n x n, or a length-n vector for dgmm) times ``b`` (n x other), float32;
    ``native``: force cuBLAS symm / trmm (planned, ``execute()``) instead of the size rule's GEMM route."""

    def data(ctx):
        torch = torch_on_ctx_stream(ctx)
        a = torch_random(torch, (n,) if kind == "dg" else (n, n), torch.float32)
        if kind == "tr":
            a = torch.tril(a)
        elif kind == "sy":
            a = torch.tril(a) + torch.tril(a, -1).T
        return torch, a, torch_random(torch, (n, other), torch.float32)

    def torch_(ctx):
        torch, a, b = data(ctx)
        if kind == "dg":
            return lambda: a[:, None] * b
        return lambda: torch.matmul(a, b)

    def cupy_(ctx):
        cupy = cupy_on_ctx_stream(ctx)
        a = cupy_random(cupy, (n,) if kind == "dg" else (n, n), "float32")
        b = cupy_random(cupy, (n, other), "float32")
        if kind == "dg":
            return lambda: a[:, None] * b
        return lambda: cupy.matmul(a, b)

    def ours(ctx):
        import nvmath

        _, a, b = data(ctx)
        q = _qualifiers(nvmath, "a", kind)
        if native:  # the cuBLAS routine itself, not the size rule's GEMM route
            try:
                from nvmath.linalg.generic import _cublas
            except ImportError as exc:
                raise Skip("nvmath-python has no size rule") from exc
            saved = (_cublas.MIRROR_MIN, _cublas.TRMM_GEMM_MIN)
            _cublas.MIRROR_MIN = _cublas.TRMM_GEMM_MIN = 1 << 40  # read when the program is built
            try:
                mm = nvmath.linalg.Matmul(a, b, qualifiers=q)
                mm.plan()
            finally:
                _cublas.MIRROR_MIN, _cublas.TRMM_GEMM_MIN = saved
            return Prepared(fn=mm.execute, teardown=mm.free)
        return lambda: nvmath.linalg.matmul(a, b, qualifiers=q)

    if native:
        return {"nvmath": ours, "torch": torch_}
    return {"nvmath": ours, "torch": torch_, "cupy": cupy_, "nvmath-python": ours}


for _kind, _name, _n, _o, _text, _native in (
    (
        "sy",
        "symm-4096x1024-f32",
        4096,
        1024,
        "symmetric 4096 x 4096 @ 4096 x 1024 (torch/cupy: full matrix)",
        0,
    ),
    (
        "tr",
        "trmm-4096x1024-f32",
        4096,
        1024,
        "lower-triangular 4096 x 4096 @ 4096 x 1024 (torch/cupy: full)",
        0,
    ),
    ("dg", "dgmm-8192-f32", 8192, 8192, "diag(v) @ B, 8192 x 8192 (torch/cupy: broadcast multiply)", 0),
    ("sy", "symm-4096x1024-f32-native", 4096, 1024, "as symm-4096x1024-f32, cuBLAS ssymm forced", 1),
    ("tr", "trmm-4096x1024-f32-native", 4096, 1024, "as trmm-4096x1024-f32, cuBLAS strmm forced", 1),
):
    register(
        Case(
            suite=SUITE,
            name=_name,
            setups=_structured(_kind, _n, _o, bool(_native)),
            flops=None if _kind == "dg" else 2.0 * _n * _n * _o,
            bytes=2.0 * 4 * _n * _o if _kind == "dg" else None,
            description=f"float32 {_text}",
        )
    )


# --------------------------------------------------------------------------- sequences
def _sequence_shapes() -> list[tuple[int, int]]:
    import numpy as np

    g = np.random.default_rng(2026)
    return [(int(m), int(n)) for m, n in g.integers(64, 1025, (64, 2))]


def _sequence_data(ctx):
    torch = torch_on_ctx_stream(ctx)
    shapes = _sequence_shapes()
    a = [torch_random(torch, (m, 512), torch.float32) for m, _ in shapes]
    b = [torch_random(torch, (512, n), torch.float32) for _, n in shapes]
    return torch, a, b


def _sequence_torch(ctx):
    torch, a, b = _sequence_data(ctx)
    return lambda: [torch.matmul(x, y) for x, y in zip(a, b)]


def _sequence_ours(ctx):
    import nvmath

    _, a, b = _sequence_data(ctx)
    return lambda: nvmath.linalg.matmul(a, b)


register(
    Case(
        suite=SUITE,
        name="seq64-k512-f32",
        setups={"nvmath": _sequence_ours, "torch": _sequence_torch, "nvmath-python": _sequence_ours},
        flops=sum(2.0 * m * n * 512 for m, n in _sequence_shapes()),
        description="64 float32 problems (M, N in [64, 1024], K = 512): one call vs a torch loop",
    )
)


# --------------------------------------------------------------------------- host costs
def _host_stateless(ctx):
    import nvmath

    _, sets = _gemm_data(ctx, (64, 64), (64, 64), "float32")
    a, b = sets[0]
    return lambda: nvmath.linalg.matmul(a, b)


def _host_execute(ctx):
    import nvmath

    _, sets = _gemm_data(ctx, (64, 64), (64, 64), "float32")
    mm = nvmath.linalg.Matmul(*sets[0])
    mm.plan()
    return Prepared(fn=mm.execute, teardown=mm.free)


def _host_torch(ctx):
    torch, sets = _gemm_data(ctx, (64, 64), (64, 64), "float32")
    a, b = sets[0]
    return lambda: torch.matmul(a, b)


def _host_cupy(ctx):
    cupy = cupy_on_ctx_stream(ctx)
    a, b = cupy_random(cupy, (64, 64), "float32"), cupy_random(cupy, (64, 64), "float32")
    return lambda: cupy.matmul(a, b)


register(
    Case(
        suite=SUITE,
        name="host-64-stateless",
        mode="host",
        setups={
            "nvmath": _host_stateless,
            "torch": _host_torch,
            "cupy": _host_cupy,
            "nvmath-python": _host_stateless,
        },
        description="host us per call, 64^3 float32 on the GPU: stateless matmul vs torch.matmul",
    )
)
register(
    Case(
        suite=SUITE,
        name="host-64-execute",
        mode="host",
        setups={"nvmath": _host_execute, "torch": _host_torch, "nvmath-python": _host_execute},
        description="host us per call, 64^3 float32 on the GPU: Matmul.execute() vs torch.matmul",
    )
)


# --------------------------------------------------------------------------- CPU execution
def _cpu_setups(shape_a: tuple[int, ...], shape_b: tuple[int, ...], dtype: str) -> dict:
    def data():
        import numpy as np

        g = np.random.default_rng(7)
        a = (g.uniform(0.5, 1.5, shape_a) * g.choice([-1, 1], shape_a)).astype(dtype)
        b = (g.uniform(0.5, 1.5, shape_b) * g.choice([-1, 1], shape_b)).astype(dtype)
        return np, a, b

    def numpy_(ctx):
        np, a, b = data()
        return lambda: np.matmul(a, b)

    def ours(ctx):
        _np, a, b = data()
        import nvmath

        if not hasattr(nvmath.linalg, "ExecutionCPU"):
            raise Skip("no CPU execution")
        return lambda: nvmath.linalg.matmul(a, b, execution="cpu")

    return {"nvmath": ours, "numpy": numpy_, "nvmath-python": ours}


for _name, _sa, _sb, _dt in (
    ("cpu-f32-256", (256, 256), (256, 256), "float32"),
    ("cpu-f64-batch-8x128", (8, 128, 128), (8, 128, 128), "float64"),
    ("cpu-c64-128", (128, 128), (128, 128), "complex64"),
):
    register(
        Case(
            suite=SUITE,
            name=_name,
            mode="host",
            needs_gpu=False,
            setups=_cpu_setups(_sa, _sb, _dt),
            description=f"CPU us per call, {_dt} {_sa} @ {_sb} vs numpy.matmul (same BLAS threads)",
        )
    )


def _cpu_grad_setups(n: int) -> dict:
    """torch CPU tensors that require grad (the forward alone; the graph is dropped each call)."""

    def data():
        import torch

        g = torch.Generator().manual_seed(7)
        a = torch.randn(n, n, generator=g).requires_grad_()
        b = torch.randn(n, n, generator=g).requires_grad_()
        return torch, a, b

    def torch_(ctx):
        torch, a, b = data()
        return lambda: torch.matmul(a, b)

    def ours(ctx):
        _torch, a, b = data()
        import nvmath

        return lambda: nvmath.linalg.matmul(a, b)

    return {"nvmath": ours, "torch": torch_}


register(
    Case(
        suite=SUITE,
        name="cpu-grad-64",
        mode="host",
        needs_gpu=False,
        setups=_cpu_grad_setups(64),
        description="CPU us per call, float32 64^3 on torch tensors that require grad vs torch.matmul",
    )
)
