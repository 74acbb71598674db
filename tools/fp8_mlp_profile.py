"""Time (and optionally profile) the FP8 MLP training step against torch bf16 eager (issue #23).

The step of ``benchmarks/suites/_torch_fp8.py`` (``mlp-step-fp8-*``): ``nvmath.torch.MLP(4096, 16384,
4096, fp8=recipe)`` in bfloat16 on 8192 tokens, forward + backward with the input's and the four
parameters' gradients, the weights' versions bumped each step (as after an optimizer step: their FP8
copies are remade). Prints the median step time of each recipe, of torch's bf16 block, and the ratio;
with ``--profile`` the GPU kernels of three steps by total time (torch.profiler); with ``--host`` the
same steps on a tiny block (256 -> 1024 -> 256, 256 tokens: the GPU work is negligible, so the time
per step is the host's: the Python and launch cost the full-size step must stay under).

Usage (on the GPU machine, from the repository root)::

    PYTHONPATH=. python3 tools/fp8_mlp_profile.py [--profile] [--host] [--recipes delayed,current]
"""

from __future__ import annotations

import argparse
import statistics

import torch

TOKENS, D_MODEL, D_FF = 8192, 4096, 16384


def _median_ms(fn, steps: int) -> float:
    for _ in range(3):
        fn()
    times = []
    for _ in range(steps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)


def _nvmath_step(recipe_name: str, tokens: int = TOKENS, d_model: int = D_MODEL, d_ff: int = D_FF):
    import nvmath.torch as nt
    from nvmath.torch import fp8

    recipe = {"delayed": fp8.DelayedScaling(), "current": fp8.CurrentScaling()}[recipe_name]
    block = nt.MLP(d_model, d_ff, d_model, fp8=recipe, device="cuda", dtype=torch.bfloat16)
    x = torch.randn(tokens, d_model, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    g = torch.randn(tokens, d_model, device="cuda", dtype=torch.bfloat16)
    params = [x, *block.parameters()]

    def step():
        with torch.no_grad():
            block.fc1.weight.mul_(1.0)
            block.fc2.weight.mul_(1.0)
        return torch.autograd.grad(block(x), params, grad_outputs=g)

    return step


def _torch_step(tokens: int = TOKENS, d_model: int = D_MODEL, d_ff: int = D_FF):
    block = torch.nn.Sequential(
        torch.nn.Linear(d_model, d_ff, device="cuda", dtype=torch.bfloat16),
        torch.nn.GELU(approximate="tanh"),
        torch.nn.Linear(d_ff, d_model, device="cuda", dtype=torch.bfloat16),
    )
    x = torch.randn(tokens, d_model, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    g = torch.randn(tokens, d_model, device="cuda", dtype=torch.bfloat16)
    params = [x, *block.parameters()]
    return lambda: torch.autograd.grad(block(x), params, grad_outputs=g)


def _profile(name: str, fn) -> None:
    from torch.profiler import ProfilerActivity, profile

    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(3):
            fn()
        torch.cuda.synchronize()
    print(f"\n===== {name}: kernels of 3 steps")
    print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=25, max_name_column_width=90))


def _host(args: argparse.Namespace) -> None:
    """Steps of a tiny block timed on the host (synchronised once per 50 steps)."""
    import time

    def per_step_us(fn) -> float:
        for _ in range(5):
            fn()
        torch.cuda.synchronize()
        t = time.perf_counter()
        for _ in range(50):
            fn()
        torch.cuda.synchronize()
        return (time.perf_counter() - t) / 50 * 1e6

    print(f"host, torch bf16 tiny step: {per_step_us(_torch_step(256, 256, 1024)):.0f} us")
    for name in args.recipes.split(","):
        print(f"host, nvmath FP8 {name} tiny step: {per_step_us(_nvmath_step(name, 256, 256, 1024)):.0f} us")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--recipes", default="delayed,current")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--profile", action="store_true")
    p.add_argument("--host", action="store_true")
    args = p.parse_args()
    if args.host:
        _host(args)
        return
    from nvmath.torch import _fp8_cast, fp8

    base = _median_ms(_torch_step(), args.steps)
    print(f"torch bf16 eager: {base:.3f} ms")
    for name in args.recipes.split(","):
        fn = _nvmath_step(name)
        ms = _median_ms(fn, args.steps)
        print(
            f"nvmath FP8 {name}: {ms:.3f} ms  speedup vs torch bf16 {base / ms:.2f}x  "
            f"(cast kernels in use: {_fp8_cast.in_use()}, failed to build: {_fp8_cast.broken()}; "
            f"refused fused GEMMs: {fp8.fused_gemm_report()})"
        )
        if args.profile:
            _profile(f"nvmath FP8 {name}", fn)
    if args.profile:
        _profile("torch bf16", _torch_step())


if __name__ == "__main__":
    main()
