"""PyTorch-pipeline suite: nvmath.torch layers against torch eager, torch.compile and CUDA graphs.

* ``mlp-step*``: one training step (forward + backward, gradients of the input and the four
  parameters) of the MLP block Linear 4096 -> 16384 + GELU(tanh) + Linear 16384 -> 4096 on 8192 bf16
  tokens. nvmath runs ``nvmath.torch.MLP`` (bias + GELU fused forward; DGELU_BGRAD and BGRADB
  backward); ``mlp-step-linear`` runs two ``nvmath.torch.Linear`` layers instead (the GELU
  derivative is then one elementwise pass), ``mlp-step-autotuned`` the MLP with autotuned GEMMs
  (``PlannerCache(autotune=True)``). torch runs the same block eagerly (``mlp-step``), under
  ``torch.compile`` (``mlp-step-compile``) and ``torch.compile(mode="max-autotune-no-cudagraphs")``
  (``mlp-step-max-autotune``; compiled in the setup, not timed).
* ``decode-m<M>-<K>x<N>[-graph]``: one bf16 Linear layer (with bias) on M = 1, 8, 64 tokens, one call
  at a time as an eager model issues them (``-graph``: the call captured in a CUDA graph, timed as a
  replay; ``-graph-autotuned``: the same with nvmath's GEMM autotuned once; nvmath's note names the
  planned algorithm); ``decode32-m<M>[-graph]``: 32 such layers back to back (4096 <-> 14336 alternating);
  ``decode32-m8-own-caches``: the same with one ``PlannerCache`` per layer (layers of one shape then
  keep their own planner, and only the input moves between calls). Eager rows alternate two inputs.
* ``host-linear-direct`` / ``host-linear-custom-op`` (us per call): ``nvmath.torch.linear`` eager
  (the direct path) and ``torch.ops.nvmath.linear`` (the dispatcher path that torch.compile emits),
  each against ``torch.nn.functional.linear`` on a 64x256 @ 256x256 fp32 problem;
  ``host-linear-direct-torch-stream``: the direct path with a stream torch owns as the current stream
  (as an eager model runs; the harness's stream is an external one).
"""

from __future__ import annotations

from typing import Any

from benchmarks.registry import Case, Prepared, Skip, register
from benchmarks.suites._data import torch_on_ctx_stream, torch_random

TOKENS, D_MODEL, D_FF = 8192, 4096, 16384
MLP_FLOPS = 6 * 2.0 * TOKENS * D_MODEL * D_FF  # forward + two backward GEMMs per layer, two layers


def _nt():
    try:
        import nvmath.torch as nt
    except ImportError as exc:  # pragma: no cover - the suite needs torch anyway
        raise Skip(f"nvmath.torch not importable: {exc}") from exc
    return nt


# ---------------------------------------------------------------- MLP block step
def _mlp_inputs(ctx: Any) -> tuple[Any, Any, Any]:
    torch = torch_on_ctx_stream(ctx)
    x = torch_random(torch, (TOKENS, D_MODEL), torch.bfloat16).requires_grad_()
    g = torch_random(torch, (TOKENS, D_MODEL), torch.bfloat16)
    return torch, x, g


def _step(torch: Any, module: Any, x: Any, g: Any):
    params = [x, *module.parameters()]
    return lambda: torch.autograd.grad(module(x), params, grad_outputs=g)


def _mlp_nvmath(ctx: Any) -> Any:
    torch, x, g = _mlp_inputs(ctx)
    nt = _nt()
    return _step(
        torch, nt.MLP(D_MODEL, D_FF, D_MODEL, activation="gelu", device="cuda", dtype=torch.bfloat16), x, g
    )


def _mlp_nvmath_autotuned(ctx: Any) -> Any:
    torch, x, g = _mlp_inputs(ctx)
    nt = _nt()
    cache = nt.PlannerCache(16, autotune=True)
    block = nt.MLP(
        D_MODEL, D_FF, D_MODEL, activation="gelu", device="cuda", dtype=torch.bfloat16, cache=cache
    )
    fn = _step(torch, block, x, g)
    fn()  # plans and autotunes the six GEMMs (not timed)
    return Prepared(fn, teardown=cache.clear, note="PlannerCache(autotune=True)")


def _mlp_nvmath_linear(ctx: Any) -> Any:
    torch, x, g = _mlp_inputs(ctx)
    nt = _nt()
    block = torch.nn.Sequential(
        nt.Linear(D_MODEL, D_FF, activation="gelu", device="cuda", dtype=torch.bfloat16),
        nt.Linear(D_FF, D_MODEL, device="cuda", dtype=torch.bfloat16),
    )
    return _step(torch, block, x, g)


def _torch_block(torch: Any) -> Any:
    return torch.nn.Sequential(
        torch.nn.Linear(D_MODEL, D_FF, device="cuda", dtype=torch.bfloat16),
        torch.nn.GELU(approximate="tanh"),
        torch.nn.Linear(D_FF, D_MODEL, device="cuda", dtype=torch.bfloat16),
    )


def _mlp_torch(mode: str | None):
    def setup(ctx: Any) -> Any:
        torch, x, g = _mlp_inputs(ctx)
        block = _torch_block(torch)
        model = block if mode is None else torch.compile(block, mode=None if mode == "default" else mode)
        params = [x, *block.parameters()]
        fn = lambda: torch.autograd.grad(model(x), params, grad_outputs=g)
        fn()  # compile (not timed)
        return Prepared(fn, note=f"torch.compile mode={mode}" if mode else "eager")

    return setup


for _name, _torch_mode, _desc in (
    ("mlp-step", None, "torch eager"),
    ("mlp-step-compile", "default", "torch.compile (default)"),
    ("mlp-step-max-autotune", "max-autotune-no-cudagraphs", "torch.compile max-autotune"),
):
    register(
        Case(
            suite="torch",
            name=_name,
            setups={"nvmath": _mlp_nvmath, "torch": _mlp_torch(_torch_mode)},
            flops=MLP_FLOPS,
            quick=_torch_mode is None,
            description=f"MLP 4096->16384 GELU(tanh) ->4096, 8192 bf16 tokens, fwd+bwd: nvmath.torch.MLP vs {_desc}",
        )
    )
register(
    Case(
        suite="torch",
        name="mlp-step-autotuned",
        setups={"nvmath": _mlp_nvmath_autotuned, "torch": _mlp_torch(None)},
        flops=MLP_FLOPS,
        quick=False,
        description="the MLP step with every GEMM autotuned once (PlannerCache(autotune=True)) vs torch eager",
    )
)
register(
    Case(
        suite="torch",
        name="mlp-step-linear",
        setups={"nvmath": _mlp_nvmath_linear, "torch": _mlp_torch(None)},
        flops=MLP_FLOPS,
        description="the MLP step with two nvmath.torch.Linear layers (GELU derivative elementwise) vs torch eager",
    )
)


# ---------------------------------------------------------------- decode-shaped layers
def _graphed(torch: Any, fn: Any) -> Any:
    """``fn`` captured in a CUDA graph (after a warm-up that plans everything); returns ``replay``."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn()
        fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return graph.replay


def _layers(torch: Any, nt: Any, shapes: list[tuple[int, int]], own: bool, tuned: bool = False) -> list[Any]:
    if nt is None:
        return [torch.nn.Linear(k, n, device="cuda", dtype=torch.bfloat16) for k, n in shapes]
    shared = nt.PlannerCache(4, autotune=True) if tuned else None
    return [
        nt.Linear(k, n, device="cuda", dtype=torch.bfloat16, cache=nt.PlannerCache(4) if own else shared)
        for k, n in shapes
    ]


def _algorithms(layers: list[Any], nt: Any) -> str:
    """The planned epilog and first algorithm of the planners the nvmath layers used (the row's note)."""
    caches = {id(c): c for c in (layer.cache or nt.default_cache for layer in layers)}
    recent = len({(layer.in_features, layer.out_features) for layer in layers})  # this row's: the newest
    notes = []
    for cache in caches.values():
        for mm in cache.planners()[-recent:]:
            best = mm.algorithms[0]
            notes.append(
                f"{mm.view.epilog.name}: id {best.algorithm_id}, tile {best.tile}, stages {best.stages}, "
                f"split-K {best.split_k}, cluster {best.cluster_shape}, ws {best.workspace_size} B "
                f"({len(mm.algorithms)} candidates)"
            )
    return "; ".join(notes)


def _decode(
    lib: str, m: int, shapes: list[tuple[int, int]], graph: bool, own: bool = False, tuned: bool = False
):
    """Setup of a decode row; eager rows alternate two inputs (a new x every call, as in a model)."""

    def setup(ctx: Any) -> Any:
        torch = torch_on_ctx_stream(ctx)
        nt = _nt() if lib == "nvmath" else None
        layers = _layers(torch, nt, shapes, own, tuned)
        xs = [torch_random(torch, (m, shapes[0][0]), torch.bfloat16) for _ in range(2)]
        turn = [0]

        def run() -> Any:
            turn[0] ^= 1
            h = xs[0 if graph else turn[0]]
            for layer in layers:
                h = layer(h)
            return h

        with torch.no_grad():
            run()
            run()
            fn = _graphed(torch, run) if graph else run
        note = _algorithms(layers, nt) if nt is not None and len(shapes) <= 2 else ""
        return Prepared(lambda: fn() if graph else _no_grad(torch, fn), note=note)

    return setup


def _no_grad(torch: Any, fn: Any) -> Any:
    with torch.no_grad():
        return fn()


for _m in (1, 8, 64):
    for _k, _n in ((4096, 14336), (14336, 4096)):
        for _graph in (False, True):
            register(
                Case(
                    suite="torch",
                    name=f"decode-m{_m}-{_k}x{_n}{'-graph' if _graph else ''}",
                    setups={
                        "nvmath": _decode("nvmath", _m, [(_k, _n)], _graph),
                        "torch": _decode("torch", _m, [(_k, _n)], _graph),
                    },
                    flops=2.0 * _m * _k * _n,
                    description=f"Linear {_k}->{_n} bf16 on {_m} tokens, one call"
                    + (" in a CUDA graph" if _graph else " at a time (eager)"),
                )
            )
        register(
            Case(
                suite="torch",
                name=f"decode-m{_m}-{_k}x{_n}-graph-autotuned",
                setups={
                    "nvmath": _decode("nvmath", _m, [(_k, _n)], True, tuned=True),
                    "torch": _decode("torch", _m, [(_k, _n)], True),
                },
                flops=2.0 * _m * _k * _n,
                quick=False,
                description=f"Linear {_k}->{_n} bf16 on {_m} tokens in a CUDA graph, nvmath's GEMM "
                "autotuned once (PlannerCache(autotune=True))",
            )
        )
    for _graph in (False, True):
        _shapes = [(4096, 14336), (14336, 4096)] * 16
        register(
            Case(
                suite="torch",
                name=f"decode32-m{_m}{'-graph' if _graph else ''}",
                setups={
                    "nvmath": _decode("nvmath", _m, _shapes, _graph),
                    "torch": _decode("torch", _m, _shapes, _graph),
                },
                flops=2.0 * _m * 4096 * 14336 * 32,
                quick=_m == 8,
                description=f"32 Linear layers 4096<->14336 bf16 on {_m} tokens back to back"
                + (" in a CUDA graph" if _graph else " (eager)"),
            )
        )


register(
    Case(
        suite="torch",
        name="decode32-m8-own-caches",
        setups={
            "nvmath": _decode("nvmath", 8, [(4096, 14336), (14336, 4096)] * 16, False, own=True),
            "torch": _decode("torch", 8, [(4096, 14336), (14336, 4096)] * 16, False),
        },
        flops=2.0 * 8 * 4096 * 14336 * 32,
        quick=False,
        description="decode32-m8 with a PlannerCache per layer (only the input moves between calls)",
    )
)


# ---------------------------------------------------------------- host cost: direct call vs custom op
def _host_inputs(ctx: Any) -> tuple[Any, Any, Any, Any]:
    torch = torch_on_ctx_stream(ctx)
    x = torch_random(torch, (64, 256), torch.float32)
    w = torch_random(torch, (256, 256), torch.float32)
    b = torch_random(torch, (256,), torch.float32)
    return torch, x, w, b


def _host_direct(ctx: Any) -> Any:
    _, x, w, b = _host_inputs(ctx)
    nt = _nt()
    nt.linear(x, w, b)
    return lambda: nt.linear(x, w, b)


def _host_op(ctx: Any) -> Any:
    torch, x, w, b = _host_inputs(ctx)
    _nt()
    op = torch.ops.nvmath.linear
    op(x, w, b, "", False)
    return lambda: op(x, w, b, "", False)


def _host_torch(ctx: Any) -> Any:
    torch, x, w, b = _host_inputs(ctx)
    return lambda: torch.nn.functional.linear(x, w, b)


def _on_torch_stream(setup: Any) -> Any:
    """``setup`` run with a stream torch owns (``torch.cuda.Stream()``) as the current stream, as an eager
    model runs (the harness's own stream is an external one, whose users may record done events)."""

    def wrapped(ctx: Any) -> Any:
        fn = setup(ctx)
        torch = torch_on_ctx_stream(ctx)
        previous = torch.cuda.current_stream()
        stream = torch.cuda.Stream()
        stream.wait_stream(previous)
        torch.cuda.set_stream(stream)
        fn()

        def teardown() -> None:
            stream.synchronize()
            torch.cuda.set_stream(previous)

        return Prepared(fn, teardown=teardown, note="on a torch.cuda.Stream()")

    return wrapped


for _name, _setup, _what in (
    ("host-linear-direct", _host_direct, "nvmath.torch.linear (eager, direct)"),
    ("host-linear-direct-torch-stream", _on_torch_stream(_host_direct), "nvmath.torch.linear, torch stream"),
    ("host-linear-custom-op", _host_op, "torch.ops.nvmath.linear (through the dispatcher)"),
):
    register(
        Case(
            suite="torch",
            name=_name,
            mode="host",
            setups={
                "nvmath": _setup,
                "torch": _on_torch_stream(_host_torch) if _name.endswith("torch-stream") else _host_torch,
            },
            description=f"{_what} vs torch.nn.functional.linear, 64x256 @ 256x256 + bias fp32, us/call",
        )
    )

# ---------------------------------------------------------------- FP8 training and mixture of experts
from benchmarks.suites import _torch_fp8  # noqa: F401 - registers the FP8 MLP and MoE rows in this suite
