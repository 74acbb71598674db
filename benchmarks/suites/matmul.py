"""Matmul suite: every Matmul row of TARGETS.md against torch, cupy and nvmath-python, plus an LLM sweep.

Each GEMM comes three times: ``<name>`` times the stateless ``matmul`` call, ``<name>-execute`` a
planned ``Matmul.execute()``, ``<name>-autotuned`` the same after ``autotune()``; torch and cupy
have one API and appear in all three, so each row compares against the best peer. The nvmath and
nvmath-python setups are the same code (in nvmath-python's own process ``import nvmath`` is
nvmath-python). Shapes are ``(M, N, K)``: ``a`` is ``M x K``, ``b`` is ``K x N``, row-major.

The epilog rows compare a fused epilog with torch's best path (``torch._addmm_activation`` where
it applies, else the unfused expression). The host rows (``mode="host"``) measure us per call of a
64^3 float32 product, and the cost of ``Matmul(...)`` + ``plan()``. The ``green-context-latency*``
rows (``benchmarks/suites/_green.py``) measure a small matmul's latency next to a long GEMM, with
and without a green-context partition of the SMs.

The LLM-shape sweep (M in 1..8192, (K, N) in {(4096, 14336), (14336, 4096)}, bf16/fp16/fp32/tf32;
``Matmul.execute`` vs torch) is registered only with ``NVMATH_BENCH_MATMUL_SWEEP=1``::

    NVMATH_BENCH_MATMUL_SWEEP=1 python -m benchmarks matmul --cases 'sweep-*'
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from typing import Any

from benchmarks.registry import Case, Prepared, Skip, register
from benchmarks.suites._data import cupy_on_ctx_stream, cupy_random, torch_on_ctx_stream, torch_random

SWEEP_ENV = "NVMATH_BENCH_MATMUL_SWEEP"
_ITEMSIZE = {"bfloat16": 2, "float16": 2, "float32": 4, "tf32": 4}


@dataclasses.dataclass(frozen=True)
class Gemm:
    """One problem: ``(M, K) @ (K, N)`` in ``dtype`` (``"tf32"``: float32 data, TF32 compute)."""

    m: int
    n: int
    k: int
    dtype: str = "bfloat16"

    @property
    def flops(self) -> float:
        return 2.0 * self.m * self.n * self.k

    @property
    def data_dtype(self) -> str:
        return "float32" if self.dtype == "tf32" else self.dtype


def _torch_operands(ctx: Any, g: Gemm) -> tuple[Any, Any, Any]:
    torch = torch_on_ctx_stream(ctx)
    dt = getattr(torch, g.data_dtype)
    torch.backends.cuda.matmul.allow_tf32 = g.dtype == "tf32"
    return torch, torch_random(torch, (g.m, g.k), dt), torch_random(torch, (g.k, g.n), dt)


def _options(g: Gemm) -> dict[str, Any] | None:
    return {"compute_type": 77} if g.dtype == "tf32" else None  # COMPUTE_32F_FAST_TF32


# --------------------------------------------------------------------------- GEMM setups
def _torch(g: Gemm):
    def setup(ctx: Any):
        torch, a, b = _torch_operands(ctx, g)
        return lambda: torch.matmul(a, b)

    return setup


def _cupy(g: Gemm):
    def setup(ctx: Any):
        if g.dtype in ("bfloat16", "tf32"):
            raise Skip(f"cupy.matmul has no {g.dtype} path")
        cupy = cupy_on_ctx_stream(ctx)
        a, b = cupy_random(cupy, (g.m, g.k), g.dtype), cupy_random(cupy, (g.k, g.n), g.dtype)
        return lambda: cupy.matmul(a, b)

    return setup


def _stateless(g: Gemm):
    def setup(ctx: Any):
        import nvmath.linalg.advanced as adv

        _, a, b = _torch_operands(ctx, g)
        options = _options(g)
        return lambda: adv.matmul(a, b, options=options)

    return setup


def _execute(g: Gemm, autotune: bool):
    def setup(ctx: Any):
        import nvmath.linalg.advanced as adv

        _, a, b = _torch_operands(ctx, g)
        mm = adv.Matmul(a, b, options=_options(g))
        first = mm.plan()[0]
        if autotune:
            mm.autotune(iterations=10)
        chosen = mm.algorithms[0]
        note = f"algorithm {_describe(chosen)}" + (f" (first choice {_describe(first)})" if autotune else "")
        return Prepared(fn=mm.execute, teardown=mm.free, note=note)

    return setup


def _describe(algorithm: Any) -> str:
    """The algorithm id and its configuration (the same id runs with different tiles, stages, ...)."""
    parts = [str(algorithm.algorithm_id)]
    for name in ("tile", "stages", "split_k", "cta_swizzling"):
        with contextlib.suppress(Exception):  # nvmath-python's Algorithm may lack a field
            parts.append(f"{name}={getattr(algorithm, name)}")
    return " ".join(parts)


def _register_gemm(name: str, g: Gemm, description: str, *, quick: bool = True, tuned: bool = True) -> None:
    peers = {"torch": _torch(g), "cupy": _cupy(g)}
    variants = [("", _stateless(g)), ("-execute", _execute(g, False))]
    if tuned:
        variants.append(("-autotuned", _execute(g, True)))
    for suffix, ours in variants:
        register(
            Case(
                suite="matmul",
                name=name + suffix,
                setups={"nvmath": ours, **peers, "nvmath-python": ours},
                flops=g.flops,
                quick=quick,
                description=f"{description} ({suffix[1:] or 'stateless'})",
            )
        )


_TARGETS = [
    ("bf16-8192", Gemm(8192, 8192, 8192), "bf16 8192^3"),
    ("fp16-4096", Gemm(4096, 4096, 4096, "float16"), "fp16 4096^3"),
    ("fp32-4096", Gemm(4096, 4096, 4096, "float32"), "fp32 4096^3"),
    ("bf16-smallm-16x8192x8192", Gemm(16, 8192, 8192), "bf16 small M: M=16, N=8192, K=8192"),
    ("bf16-smallm-64x14336x4096", Gemm(64, 14336, 4096), "bf16 small M: M=64, N=14336, K=4096"),
    ("bf16-smallm-8x4096x16384", Gemm(8, 4096, 16384), "bf16 small M: M=8, N=4096, K=16384"),
]
for _name, _g, _text in _TARGETS:
    _register_gemm(_name, _g, _text)

for _m, _n, _k in ((10777, 1352, 2407), (14320, 307, 7266), (11741, 543, 8863), (10277, 576, 20463)):
    _register_gemm(f"fp32-skinny-{_m}x{_n}x{_k}", Gemm(_m, _n, _k, "float32"), f"fp32 skinny {_m}x{_n}x{_k}")


# --------------------------------------------------------------------------- epilog rows
def _linear_setups(m: int, fin: int, fout: int):
    """x @ W.T + b then GELU(tanh): bias along N (torch.nn.Linear's layout)."""

    def data(ctx: Any):
        torch = torch_on_ctx_stream(ctx)
        x = torch_random(torch, (m, fin), torch.bfloat16)
        w = torch_random(torch, (fout, fin), torch.bfloat16) * 0.03
        b = torch_random(torch, (fout,), torch.bfloat16)
        return torch, x, w, b

    def torch_fused(ctx: Any):
        torch, x, w, b = data(ctx)
        return lambda: torch._addmm_activation(b, x, w.T, use_gelu=True)

    def ours(autotune: bool):
        def setup(ctx: Any):
            import nvmath.linalg.advanced as adv

            _, x, w, b = data(ctx)
            if not hasattr(adv, "plan_cache"):
                raise Skip("nvmath-python cannot fuse a bias along N")
            mm = adv.Matmul(x, w.T)
            mm.plan(epilog=adv.MatmulEpilog.GELU_BIAS, epilog_inputs={"bias": b})
            if autotune:
                mm.autotune(iterations=10)
            return Prepared(fn=mm.execute, teardown=mm.free)

        return setup

    return [{"torch": torch_fused, "nvmath": ours(t), "nvmath-python": ours(t)} for t in (False, True)]


def _rowbias_setups(g: Gemm, act: str):
    """act(a @ b + bias[:, None]) with a bias along M (nvmath-python's bias)."""

    def data(ctx: Any):
        torch, a, b = _torch_operands(ctx, g)
        return torch, a, b, torch_random(torch, (g.m, 1), a.dtype)

    def torch_unfused(ctx: Any):
        torch, a, b, bias = data(ctx)
        fn = torch.relu if act == "relu" else (lambda t: torch.nn.functional.gelu(t, approximate="tanh"))
        return lambda: fn(torch.addmm(bias, a, b))

    def ours(ctx: Any):
        import nvmath.linalg.advanced as adv

        _, a, b, bias = data(ctx)
        epilog = adv.MatmulEpilog.RELU_BIAS if act == "relu" else adv.MatmulEpilog.GELU_BIAS
        mm = adv.Matmul(a, b)
        mm.plan(epilog=epilog, epilog_inputs={"bias": bias})
        return Prepared(fn=mm.execute, teardown=mm.free)

    return {"torch": torch_unfused, "nvmath": ours, "nvmath-python": ours}


for _suffix, _setups in zip(("", "-autotuned"), _linear_setups(8192, 4096, 16384)):
    register(
        Case(
            suite="matmul",
            name="linear-bias-gelu-8192x16384x4096" + _suffix,
            setups=_setups,
            flops=2.0 * 8192 * 16384 * 4096,
            description="x (8192x4096) @ W.T (W 16384x4096) + b, GELU(tanh), bf16; torch: _addmm_activation",
        )
    )
register(
    Case(
        suite="matmul",
        name="rowbias-gelu-8192x16384x4096",
        setups=_rowbias_setups(Gemm(8192, 16384, 4096), "gelu"),
        flops=2.0 * 8192 * 16384 * 4096,
        description="GELU(a @ b + bias over rows), bf16; torch unfused (addmm + gelu)",
    )
)
register(
    Case(
        suite="matmul",
        name="rowbias-relu-4096x4096x1024",
        setups=_rowbias_setups(Gemm(4096, 4096, 1024), "relu"),
        flops=2.0 * 4096 * 4096 * 1024,
        description="ReLU(a @ b + bias over rows), bf16; torch unfused (addmm + relu)",
    )
)


# --------------------------------------------------------------------------- host overheads
SMALL = Gemm(64, 64, 64, "float32")


def _host_execute(reset: bool):
    def setup(ctx: Any):
        import nvmath.linalg.advanced as adv

        _, a, b = _torch_operands(ctx, SMALL)
        mm = adv.Matmul(a, b)
        mm.plan()
        fn = (lambda: (mm.reset_operands(a=a), mm.execute())) if reset else mm.execute
        return Prepared(fn=fn, teardown=mm.free)

    return setup


def _host_plan(ctx: Any):
    import nvmath.linalg.advanced as adv

    _, a, b = _torch_operands(ctx, SMALL)

    def create_and_plan():
        mm = adv.Matmul(a, b)
        mm.plan()
        mm.free()

    return create_and_plan


_HOST = [
    (
        "host-64-stateless",
        {"nvmath": _stateless(SMALL), "torch": _torch(SMALL), "cupy": _cupy(SMALL)},
        "stateless call",
    ),
    ("host-64-execute", {"nvmath": _host_execute(False)}, "Matmul.execute()"),
    ("host-64-reset-execute", {"nvmath": _host_execute(True)}, "reset_operands(a) + execute()"),
    ("host-64-create-plan", {"nvmath": _host_plan}, "Matmul(...) + plan() + free()"),
]
for _name, _setups, _text in _HOST:
    _setups.setdefault("nvmath-python", _setups["nvmath"])
    register(
        Case(
            suite="matmul",
            name=_name,
            mode="host",
            setups=_setups,
            description=f"host us per call, 64^3 float32: {_text}",
        )
    )


# --------------------------------------------------------------------------- LLM sweep
if os.environ.get(SWEEP_ENV):
    for _dtype in ("bfloat16", "float16", "float32", "tf32"):
        for _k, _n in ((4096, 14336), (14336, 4096)):
            for _m in (1, 8, 16, 64, 256, 1024, 4096, 8192):
                _g = Gemm(_m, _n, _k, _dtype)
                register(
                    Case(
                        suite="matmul",
                        name=f"sweep-{_dtype}-{_m}x{_n}x{_k}",
                        setups={
                            "nvmath": _execute(_g, False),
                            "torch": _torch(_g),
                            "nvmath-python": _execute(_g, False),
                        },
                        flops=_g.flops,
                        quick=False,
                        description=f"LLM shape M={_m}, N={_n}, K={_k}, {_dtype} (Matmul.execute)",
                    )
                )


# --------------------------------------------------------------------------- green contexts
# The green-context-latency* cases (a small matmul's latency next to a long GEMM) live in _green.
from benchmarks.suites import _green  # noqa: F401 - registers its cases in this suite
from benchmarks.suites import _fp8aux  # noqa: F401, E402 - registers the FP8 GELU aux rows in this suite
