"""Time and profile the mixture-of-experts step of ``benchmarks/suites/_torch_fp8.py`` (issue #23).

``GroupedLinear`` of 8 experts 4096 -> 2048 on 16384 bf16 tokens in uneven groups, forward + backward
(input, weight and bias gradients), the weight's version bumped each step (as after an optimizer step):
bf16, FP8 delayed and FP8 current, beside torch's bf16 loop of ``F.linear``. Prints each row's median
step (CUDA events) and its host time per step (a back-to-back loop, one synchronisation: when it
reaches the step time the row is host-bound); with ``--profile`` the GPU kernels of three steps of
each FP8 row by total time, and the number of kernels one step launches.

Usage (on the GPU machine, from the repository root)::

    PYTHONPATH=. python3 tools/grouped_fp8_profile.py [--profile] [--rows bf16,delayed,current,loop]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

COUNTS = (4096, 3072, 2560, 2048, 1792, 1280, 1024, 512)
D_IN, D_OUT = 4096, 2048


def _inputs():
    torch.manual_seed(0)
    x = torch.randn(sum(COUNTS), D_IN, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    g = torch.randn(sum(COUNTS), D_OUT, device="cuda", dtype=torch.bfloat16)
    return x, g


def _nvmath_step(recipe_name: str | None):
    import nvmath.torch as nt
    from nvmath.torch import fp8

    recipe = {None: None, "delayed": fp8.DelayedScaling(), "current": fp8.CurrentScaling()}[recipe_name]
    layer = nt.GroupedLinear(len(COUNTS), D_IN, D_OUT, fp8=recipe, device="cuda", dtype=torch.bfloat16)
    x, g = _inputs()
    params = [x, *layer.parameters()]
    counts = list(COUNTS)

    def step():
        with torch.no_grad():
            layer.weight.mul_(1.0)
        return torch.autograd.grad(layer(x, counts), params, grad_outputs=g)

    return step


def _loop_step():
    import torch.nn.functional as F

    x, g = _inputs()
    w = (torch.randn(len(COUNTS), D_OUT, D_IN, device="cuda", dtype=torch.bfloat16) * 0.02).requires_grad_()
    b = torch.randn(len(COUNTS), D_OUT, device="cuda", dtype=torch.bfloat16).requires_grad_()

    def step():
        y = torch.cat([F.linear(xg, w[i], b[i]) for i, xg in enumerate(x.split(list(COUNTS)))])
        return torch.autograd.grad(y, [x, w, b], grad_outputs=g)

    return step


def _median_ms(fn, steps: int = 20) -> float:
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


def _host_ms(fn, steps: int = 20) -> float:
    """Wall time per step of a loop that synchronises once: the host's share when the GPU keeps up."""
    fn()
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(steps):
        fn()
    issued = (time.perf_counter() - t) / steps * 1e3
    torch.cuda.synchronize()
    return issued


def _profile(name: str, fn) -> None:
    from torch.profiler import ProfilerActivity, profile

    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA, ProfilerActivity.CPU]) as prof:
        for _ in range(3):
            fn()
        torch.cuda.synchronize()
    kernels = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    print(f"\n===== {name}: {len(kernels) / 3:.0f} GPU operations per step; kernels of 3 steps by time")
    print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=30, max_name_column_width=80))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--profile", action="store_true")
    p.add_argument("--rows", default="bf16,delayed,current,loop")
    args = p.parse_args()
    makers = {"bf16": lambda: _nvmath_step(None), "delayed": lambda: _nvmath_step("delayed"),
              "current": lambda: _nvmath_step("current"), "loop": _loop_step}  # fmt: skip
    base = None
    for row in args.rows.split(","):
        fn = makers[row]()
        ms, host = _median_ms(fn), _host_ms(fn)
        base = ms if row == "loop" else base
        print(f"{row:8s} step {ms:8.3f} ms   host issue {host:8.3f} ms per step")
        if args.profile and row in ("delayed", "current"):
            _profile(row, fn)
    if base:
        print(f"(torch bf16 loop {base:.3f} ms)")


if __name__ == "__main__":
    main()
