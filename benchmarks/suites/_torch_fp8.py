"""Torch suite, FP8 training and mixture-of-experts rows (issue #23).

* ``mlp-step-fp8-{delayed,current}``: the MLP block step of ``mlp-step`` (4096 -> 16384 GELU(tanh)
  -> 4096, 8192 bf16 tokens, forward + backward with the input's and the four parameters' gradients)
  with ``nvmath.torch.MLP(fp8=DelayedScaling() / CurrentScaling())`` against torch bf16 eager;
  ``mlp-step-fp8-delayed-compile`` against ``torch.compile`` (default mode); ``mlp-step-fp8-torchao``:
  nvmath current scaling against torchao's ``convert_to_float8_training`` (tensorwise scaling, the
  same recipe; skipped where torchao is not installed); ``mlp-step-fp8-torchao-compile``: the same
  against torchao's block under ``torch.compile`` (default mode). The FP8 step includes the weights' FP8 copies
  (remade each step, as after an optimizer step: the weights' versions are bumped). The nvmath note
  says whether every fused GEMM ran fused (``fused: all``) or which cuBLASLt refused.
* ``mlp-step-fp8-delayed-unfused``: the same step with the block's fused epilogues off (bias, GELU,
  gelu_backward and fc2's input quantization as torch ops): the fusion's share, against the same
  baseline. ``mlp-step-fp8-delayed-compiled``: ``torch.compile(fullgraph=True)`` of the nvmath FP8
  block (its ``nvmath::fp8_mlp`` custom ops) against ``torch.compile`` of the bf16 block.
* ``fp8-cast-transpose``, ``fp8-dgelu-cast-transpose-dbias``: the FP8 layers' cast-transpose pass
  alone on the MLP's hidden tensor (8192 x 16384 bfloat16): nvmath's kernel against torch's ops for
  the same outputs (quantize, ``q.T.contiguous()``, amax; with ``gelu_backward`` and the column sum).
* ``fp8-amax``, ``fp8-dgelu-amax``: current scaling's amax-only pass on that tensor (with the dgelu
  values): nvmath's reduction against torch's ``abs().amax()`` (after ``gelu_backward``).
* ``moe-8x-uneven-{loop,grouped-mm}``: a ``GroupedLinear`` of 8 experts 4096 -> 2048 on 16384 bf16
  tokens spread 4096/3072/2560/2048/1792/1280/1024/512, forward + backward, against a torch loop of
  ``F.linear`` per expert and against ``torch._grouped_mm`` (skipped where torch lacks it or its
  backward). The counts repeat every step, so nvmath runs its per-group cuBLASLt GEMMs (planned at
  the counts' second sighting, during set-up).
* ``moe-8x-routed-loop``: the same layer with new token counts every step (a seeded draw of 1,024
  routings cycled, as a router would give; same sequence for both libraries): nvmath's first sighting
  of a routing runs one grouped launch per product, so this row measures that path against the loop.
* ``moe-8x-uneven-fp8-{delayed,current}-{loop,grouped-mm}``: the ``moe-8x-uneven`` layer as
  ``GroupedLinear(fp8=recipe)`` (one autograd function over the experts, each with its own scales in
  one stacked state; the weights' FP8 copies remade every step, as after an optimizer step) against
  the torch bf16 loop and ``torch._grouped_mm`` (torch has no FP8 grouped GEMM with a backward).
"""

from __future__ import annotations

from typing import Any

from benchmarks.registry import Case, Prepared, Skip, register
from benchmarks.suites._data import torch_on_ctx_stream, torch_random

TOKENS, D_MODEL, D_FF = 8192, 4096, 16384
MLP_FLOPS = 6 * 2.0 * TOKENS * D_MODEL * D_FF
MOE_COUNTS = (4096, 3072, 2560, 2048, 1792, 1280, 1024, 512)
MOE_IN, MOE_OUT = 4096, 2048
MOE_FLOPS = 3 * 2.0 * sum(MOE_COUNTS) * MOE_IN * MOE_OUT


def _fp8_torch(ctx: Any) -> Any:
    torch = torch_on_ctx_stream(ctx)
    if torch.cuda.get_device_capability(ctx.device_id) < (8, 9):
        raise Skip("FP8 needs compute capability 8.9")
    return torch


def _inputs(torch: Any) -> tuple[Any, Any]:
    x = torch_random(torch, (TOKENS, D_MODEL), torch.bfloat16).requires_grad_()
    return x, torch_random(torch, (TOKENS, D_MODEL), torch.bfloat16)


def _bump(torch: Any, params: list) -> None:
    """Move the parameters' versions as an optimizer step does (values unchanged), with no GPU work:
    the FP8 layers then remake their weights' FP8 copies, as after a real step, and the step's time
    is not charged with a read and a write of every weight (``p.mul_(1.0)``, ~0.13 ms of the MLP
    step on the H200) that the peers' steps do not run."""
    bump = getattr(getattr(torch.autograd, "graph", None), "increment_version", None)
    if bump is not None:
        bump(list(params))
        return
    with torch.no_grad():
        for p in params:
            p.mul_(1.0)


def _nvmath_fp8(recipe_name: str, variant: str = "fused"):
    """nvmath's FP8 MLP step: ``"fused"`` (the block's fused epilogues, eager), ``"unfused"`` (every
    fused stage off: the two-layer form, for the fusion's share) or ``"compiled"`` (``torch.compile``
    of the block: its fused custom ops)."""

    def setup(ctx: Any) -> Any:
        torch = _fp8_torch(ctx)
        import nvmath.torch as nt
        from nvmath.torch import _fp8_mlp, fp8

        recipe = {"delayed": fp8.DelayedScaling(), "current": fp8.CurrentScaling()}[recipe_name]
        block = nt.MLP(D_MODEL, D_FF, D_MODEL, fp8=recipe, device="cuda", dtype=torch.bfloat16)
        x, g = _inputs(torch)
        weights = [block.fc1.weight, block.fc2.weight]
        params = [x, *block.parameters()]
        f1, f2 = block.fc1, block.fc2
        model = {
            "fused": block,
            "compiled": torch.compile(block, fullgraph=True),
            "unfused": lambda t: _fp8_mlp.fp8_mlp(
                t,
                f1.weight,
                f1.bias,
                f2.weight,
                f2.bias,
                f1.fp8_state,
                f2.fp8_state,
                fused=_fp8_mlp.NO_FUSION,
            ),
        }[variant]

        def step() -> Any:
            _bump(torch, weights)
            return torch.autograd.grad(model(x), params, grad_outputs=g)

        step()  # plans the FP8 GEMMs (not timed)
        refused = fp8.fused_gemm_report()
        fusion = "" if variant != "fused" else ("; fused: all" if not refused else f"; REFUSED: {refused}")
        return Prepared(step, note=f"nvmath.torch.MLP(fp8={type(recipe).__name__}()) {variant}{fusion}")

    return setup


def _torch_bf16(mode: str | None):
    def setup(ctx: Any) -> Any:
        torch = torch_on_ctx_stream(ctx)
        block = torch.nn.Sequential(
            torch.nn.Linear(D_MODEL, D_FF, device="cuda", dtype=torch.bfloat16), torch.nn.GELU(approximate="tanh"),
            torch.nn.Linear(D_FF, D_MODEL, device="cuda", dtype=torch.bfloat16),
        )  # fmt: skip
        model = block if mode is None else torch.compile(block)
        x, g = _inputs(torch)
        params = [x, *block.parameters()]
        fn = lambda: torch.autograd.grad(model(x), params, grad_outputs=g)
        fn()
        return Prepared(fn, note="bf16 " + ("eager" if mode is None else "torch.compile"))

    return setup


def _torchao(mode: str | None):
    def setup(ctx: Any) -> Any:
        torch = _fp8_torch(ctx)
        try:
            from torchao.float8 import convert_to_float8_training
        except ImportError as exc:
            raise Skip(f"torchao is not installed: {exc}") from exc
        block = torch.nn.Sequential(
            torch.nn.Linear(D_MODEL, D_FF, device="cuda", dtype=torch.bfloat16), torch.nn.GELU(approximate="tanh"),
            torch.nn.Linear(D_FF, D_MODEL, device="cuda", dtype=torch.bfloat16),
        )  # fmt: skip
        convert_to_float8_training(block)
        model = block if mode is None else torch.compile(block)
        x, g = _inputs(torch)
        params = [x, *block.parameters()]
        fn = lambda: torch.autograd.grad(model(x), params, grad_outputs=g)
        fn()
        return Prepared(fn, note="torchao float8 tensorwise, " + ("eager" if mode is None else "torch.compile"))

    return setup


for _name, _recipe, _variant, _baseline, _desc in (
    ("mlp-step-fp8-delayed", "delayed", "fused", _torch_bf16(None), "torch bf16 eager"),
    ("mlp-step-fp8-current", "current", "fused", _torch_bf16(None), "torch bf16 eager"),
    ("mlp-step-fp8-delayed-unfused", "delayed", "unfused", _torch_bf16(None), "torch bf16 eager"),
    ("mlp-step-fp8-delayed-compile", "delayed", "fused", _torch_bf16("default"), "torch bf16 torch.compile"),
    (
        "mlp-step-fp8-delayed-compiled",
        "delayed",
        "compiled",
        _torch_bf16("default"),
        "torch bf16 torch.compile",
    ),
    ("mlp-step-fp8-torchao", "current", "fused", _torchao(None), "torchao float8 (tensorwise)"),
    (
        "mlp-step-fp8-torchao-compile",
        "current",
        "fused",
        _torchao("default"),
        "torchao float8 (tensorwise) under torch.compile",
    ),
):
    register(
        Case(
            suite="torch",
            name=_name,
            setups={"nvmath": _nvmath_fp8(_recipe, _variant), "torch": _baseline},
            flops=MLP_FLOPS,
            quick=_name == "mlp-step-fp8-delayed",
            description=(
                f"MLP 4096->16384 GELU->4096 step, 8192 tokens: nvmath FP8 ({_recipe} scaling, {_variant}) vs {_desc}"
            ),
        )
    )


# ---------------------------------------------------------------- FP8 cast-transpose kernels
def _cast_inputs(ctx: Any) -> tuple[Any, Any, Any]:
    torch = _fp8_torch(ctx)
    x = torch_random(torch, (TOKENS, D_FF), torch.bfloat16)
    return torch, x, torch.ones((), dtype=torch.float32, device=x.device)


def _cast_nvmath(dgelu: bool):
    def setup(ctx: Any) -> Any:
        torch, x, s = _cast_inputs(ctx)
        from nvmath.torch import _fp8_cast

        z = torch_random(torch, (TOKENS, D_FF), torch.bfloat16) if dgelu else None
        fp8 = torch.float8_e5m2 if dgelu else torch.float8_e4m3fn
        fn = lambda: _fp8_cast.cast_transpose(x, s, fp8, aux=z, colsum=dgelu)
        fn()
        broken = "" if _fp8_cast.in_use() else " (kernels NOT IN USE: torch ops)"
        return Prepared(fn, note=f"nvmath.torch._fp8_cast.cast_transpose{broken}")

    return setup


def _cast_torch(dgelu: bool):
    def setup(ctx: Any) -> Any:
        torch, x, s = _cast_inputs(ctx)
        z = torch_random(torch, (TOKENS, D_FF), torch.bfloat16) if dgelu else None
        fp8 = torch.float8_e5m2 if dgelu else torch.float8_e4m3fn
        f = 57344.0 if dgelu else 448.0

        def fn() -> Any:
            v = torch.ops.aten.gelu_backward(x, z, approximate="tanh") if dgelu else x
            q = (v.float() * s).clamp(-f, f).to(fp8)
            return q, q.T.contiguous(), v.abs().amax(), (v.float().sum(0) if dgelu else None)

        fn()
        return Prepared(fn, note="torch: (gelu_backward,) quantize, q.T.contiguous(), amax(, sum)")

    return setup


for _name, _dgelu, _desc in (
    ("fp8-cast-transpose", False, "bf16 (8192, 16384) -> e4m3 in both orders + amax"),
    (
        "fp8-dgelu-cast-transpose-dbias",
        True,
        "dh * gelu'(z) bf16 (8192, 16384) -> e5m2 both orders + amax + dbias",
    ),
):
    register(
        Case(
            suite="torch",
            name=_name,
            setups={"nvmath": _cast_nvmath(_dgelu), "torch": _cast_torch(_dgelu)},
            bytes=TOKENS * D_FF * ((4 if _dgelu else 2) + 2),
            quick=False,
            description=f"FP8 layers' cast-transpose pass: {_desc} (issue #23)",
        )
    )


def _amax_nvmath(dgelu: bool):
    def setup(ctx: Any) -> Any:
        torch, x, _ = _cast_inputs(ctx)
        from nvmath.torch import _fp8_cast

        z = torch_random(torch, (TOKENS, D_FF), torch.bfloat16) if dgelu else None
        fn = lambda: _fp8_cast.cast_transpose(x, None, torch.float8_e5m2, aux=z).amax
        fn()
        how = "vectorized reduction" if _fp8_cast.vector_amax_applies(x, z) else "cast-transpose pass"
        broken = "" if _fp8_cast.in_use() else " (kernels NOT IN USE: torch ops)"
        return Prepared(fn, note=f"nvmath.torch._fp8_cast amax-only pass: {how}{broken}")

    return setup


def _amax_torch(dgelu: bool):
    def setup(ctx: Any) -> Any:
        torch, x, _ = _cast_inputs(ctx)
        z = torch_random(torch, (TOKENS, D_FF), torch.bfloat16) if dgelu else None
        if dgelu:
            fn = lambda: torch.ops.aten.gelu_backward(x, z, approximate="tanh").abs().amax()
        else:
            fn = lambda: x.abs().amax()
        fn()
        return Prepared(fn, note="torch: " + ("gelu_backward, " if dgelu else "") + "abs().amax()")

    return setup


for _name, _dgelu, _desc in (
    ("fp8-amax", False, "amax of bf16 (8192, 16384)"),
    ("fp8-dgelu-amax", True, "amax of dh * gelu'(z), bf16 (8192, 16384)"),
):
    register(
        Case(
            suite="torch",
            name=_name,
            setups={"nvmath": _amax_nvmath(_dgelu), "torch": _amax_torch(_dgelu)},
            bytes=TOKENS * D_FF * (4 if _dgelu else 2),
            quick=False,
            description=f"FP8 current scaling's amax-only pass: {_desc} (issue #23)",
        )
    )


# ---------------------------------------------------------------- mixture of experts
def _moe_inputs(ctx: Any) -> tuple[Any, Any, Any, Any]:
    torch = torch_on_ctx_stream(ctx)
    x = torch_random(torch, (sum(MOE_COUNTS), MOE_IN), torch.bfloat16).requires_grad_()
    g = torch_random(torch, (sum(MOE_COUNTS), MOE_OUT), torch.bfloat16)
    w = (torch_random(torch, (len(MOE_COUNTS), MOE_OUT, MOE_IN), torch.bfloat16) * 0.02).requires_grad_()
    b = torch_random(torch, (len(MOE_COUNTS), MOE_OUT), torch.bfloat16).requires_grad_()
    return torch, x, g, (w, b)


def _moe_nvmath(ctx: Any) -> Any:
    torch, x, g, (w, b) = _moe_inputs(ctx)
    import nvmath.torch as nt
    from nvmath.torch import _grouped_runs

    counts = list(MOE_COUNTS)
    fn = lambda: torch.autograd.grad(nt.grouped_linear(x, w, b, counts), [x, w, b], grad_outputs=g)
    fn()
    fn()  # (the second sighting of these counts plans the per-group GEMMs)
    planned = _grouped_runs.default_runs.planned
    how = "per-group cuBLASLt GEMMs" if planned else "one grouped launch per product"
    return Prepared(fn, note=f"GroupedLinear: {how}")


ROUTINGS = 1024


def _routings() -> list[list[int]]:
    """``ROUTINGS`` seeded draws of 8 expert counts summing to the token count (uneven, like a router)."""
    import numpy as np

    rng = np.random.default_rng(23)
    tokens = sum(MOE_COUNTS)
    return [rng.multinomial(tokens, rng.dirichlet(np.full(8, 2.0))).tolist() for _ in range(ROUTINGS)]


def _cycle(items: list) -> Any:
    state = {"i": 0}

    def next_item() -> Any:
        state["i"] = (state["i"] + 1) % len(items)
        return items[state["i"]]

    return next_item


def _moe_routed_nvmath(ctx: Any) -> Any:
    torch, x, g, (w, b) = _moe_inputs(ctx)
    import nvmath.torch as nt

    routing = _cycle(_routings())
    fn = lambda: torch.autograd.grad(nt.grouped_linear(x, w, b, routing()), [x, w, b], grad_outputs=g)
    fn()
    return Prepared(fn, note="GroupedLinear, new counts every step: one grouped launch per product")


def _moe_routed_loop(ctx: Any) -> Any:
    torch, x, g, (w, b) = _moe_inputs(ctx)
    F = torch.nn.functional
    routing = _cycle(_routings())

    def fwd() -> Any:
        return torch.cat([F.linear(xg, w[i], b[i]) for i, xg in enumerate(x.split(routing()))])

    fn = lambda: torch.autograd.grad(fwd(), [x, w, b], grad_outputs=g)
    fn()
    return Prepared(fn, note="torch loop of F.linear")


def _moe_loop(ctx: Any) -> Any:
    torch, x, g, (w, b) = _moe_inputs(ctx)
    F = torch.nn.functional

    def fwd() -> Any:
        return torch.cat([F.linear(xg, w[i], b[i]) for i, xg in enumerate(x.split(MOE_COUNTS))])

    fn = lambda: torch.autograd.grad(fwd(), [x, w, b], grad_outputs=g)
    fn()
    return Prepared(fn, note="torch loop of F.linear")


def _moe_grouped_mm(ctx: Any) -> Any:
    torch, x, g, (w, b) = _moe_inputs(ctx)
    gm = getattr(torch, "_grouped_mm", None)
    if gm is None:
        raise Skip("this torch has no torch._grouped_mm")
    offs = torch.tensor(MOE_COUNTS, device="cuda").cumsum(0).int()
    rows = torch.repeat_interleave(
        torch.arange(len(MOE_COUNTS), device="cuda"), torch.tensor(MOE_COUNTS, device="cuda")
    )

    def fwd() -> Any:
        return gm(x, w.transpose(-2, -1), offs=offs) + b[rows]

    fn = lambda: torch.autograd.grad(fwd(), [x, w, b], grad_outputs=g)
    try:
        fn()
    except RuntimeError as exc:
        raise Skip(f"torch._grouped_mm (with its backward) does not run here: {exc}") from exc
    return Prepared(fn, note="torch._grouped_mm + bias")


for _name, _baseline, _desc in (
    ("moe-8x-uneven-loop", _moe_loop, "a torch loop of F.linear"),
    ("moe-8x-uneven-grouped-mm", _moe_grouped_mm, "torch._grouped_mm"),
):
    register(
        Case(
            suite="torch",
            name=_name,
            setups={"nvmath": _moe_nvmath, "torch": _baseline},
            flops=MOE_FLOPS,
            description=f"8 experts 4096->2048, 16384 uneven bf16 tokens, fwd+bwd: nvmath GroupedLinear vs {_desc}",
        )
    )
register(
    Case(
        suite="torch",
        name="moe-8x-routed-loop",
        setups={"nvmath": _moe_routed_nvmath, "torch": _moe_routed_loop},
        flops=MOE_FLOPS,
        description="8 experts 4096->2048, 16384 bf16 tokens routed anew every step, fwd+bwd: nvmath "
        "GroupedLinear vs a torch loop of F.linear",
    )
)


def _moe_fp8_nvmath(recipe_name: str):
    def setup(ctx: Any) -> Any:
        torch = _fp8_torch(ctx)
        import nvmath.torch as nt
        from nvmath.torch import fp8

        recipe = {"delayed": fp8.DelayedScaling(), "current": fp8.CurrentScaling()}[recipe_name]
        _, x, g, _ = _moe_inputs(ctx)
        layer = nt.GroupedLinear(
            len(MOE_COUNTS), MOE_IN, MOE_OUT, device="cuda", dtype=torch.bfloat16, fp8=recipe
        )
        params = [x, layer.weight, layer.bias]
        counts = list(MOE_COUNTS)

        def step() -> Any:
            _bump(torch, [layer.weight])
            return torch.autograd.grad(layer(x, counts), params, grad_outputs=g)

        step()  # plans the FP8 GEMMs (not timed)
        from nvmath.torch import _fp8_cast
        from nvmath.torch._grouped_fp8_gemms import grouped_fp8_gemms

        how = "grouped planners" if grouped_fp8_gemms.enabled else "FP8 Linear caches (grouped planners off)"
        cast = "cast kernels" if _fp8_cast.in_use() else "torch quantization (cast kernels off)"
        note = f"GroupedLinear(fp8={type(recipe).__name__}()): per-expert FP8 GEMMs on {how}, {cast}"
        return Prepared(step, note=note)

    return setup


for _recipe in ("delayed", "current"):
    for _suffix, _baseline, _desc in (
        ("loop", _moe_loop, "a torch bf16 loop of F.linear"),
        ("grouped-mm", _moe_grouped_mm, "torch._grouped_mm (bf16)"),
    ):
        register(
            Case(
                suite="torch",
                name=f"moe-8x-uneven-fp8-{_recipe}-{_suffix}",
                setups={"nvmath": _moe_fp8_nvmath(_recipe), "torch": _baseline},
                flops=MOE_FLOPS,
                description=f"8 experts 4096->2048, 16384 uneven tokens, fwd+bwd: nvmath FP8 GroupedLinear "
                f"({_recipe} scaling) vs {_desc}",
            )
        )
