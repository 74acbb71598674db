"""Time and profile the mixture-of-experts step of ``benchmarks/suites/_torch_fp8.py`` (issue #23).

``GroupedLinear`` of 8 experts 4096 -> 2048 on 16384 bf16 tokens in uneven groups, forward + backward
(input, weight and bias gradients), the weight's version bumped each step as after an optimizer step
(``torch.autograd.graph.increment_version``, as the harness does: no GPU work): bf16, FP8 delayed and
FP8 current, beside torch's bf16 loop of ``F.linear``. Each row prints:

* ``step``: the median of single steps timed with CUDA events (a synchronisation between steps);
* ``back-to-back``: the mean step of 20 steps issued without synchronising (what the harness times);
* ``host``: the median wall time to issue one step on an idle GPU (nothing queued: the host's own
  cost, with no launch waiting for a full queue);
* ``kernels``: the GPU time of the step's kernels (torch.profiler, the mean of three steps).

When ``host`` exceeds ``kernels`` the back-to-back step is host-bound (the GPU waits for launches).
``--profile`` also prints each FP8 row's kernels by total time.

Usage (on the GPU machine, from the repository root)::

    PYTHONPATH=. python3 tools/grouped_fp8_profile.py [--profile] [--rows loop,bf16,delayed,current]
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


def _bump(weight) -> None:
    """Move the weight's version as an optimizer step does, values unchanged (the FP8 layer remakes
    its FP8 weight copy); ``mul_(1.0)`` where torch has no ``increment_version``."""
    bump = getattr(getattr(torch.autograd, "graph", None), "increment_version", None)
    if bump is not None:
        bump([weight])
        return
    with torch.no_grad():
        weight.mul_(1.0)


def _nvmath_step(recipe_name: str | None):
    import nvmath.torch as nt
    from nvmath.torch import fp8

    recipe = {None: None, "delayed": fp8.DelayedScaling(), "current": fp8.CurrentScaling()}[recipe_name]
    layer = nt.GroupedLinear(len(COUNTS), D_IN, D_OUT, fp8=recipe, device="cuda", dtype=torch.bfloat16)
    x, g = _inputs()
    params = [x, *layer.parameters()]
    counts = list(COUNTS)

    def step():
        _bump(layer.weight)
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


def _host_us(fn, steps: int = 15) -> float:
    """Median wall time (us) to issue one step on an idle GPU: the host's own cost per step."""
    fn()
    times = []
    for _ in range(steps):
        torch.cuda.synchronize()
        time.sleep(0.002)  # (the GPU drains: no launch of this step waits on a full queue)
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1e6)
    torch.cuda.synchronize()
    return statistics.median(times)


def _back_to_back_ms(fn, steps: int = 20) -> float:
    """Mean step (ms) of ``steps`` steps issued without synchronising, timed with CUDA events."""
    fn()
    torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(steps):
        fn()
    b.record()
    torch.cuda.synchronize()
    return a.elapsed_time(b) / steps


def _kernels_ms(fn, steps: int = 3) -> float:
    """GPU time (ms) of one step's kernels and copies (torch.profiler, the mean of ``steps`` steps)."""
    from torch.profiler import ProfilerActivity, profile

    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            fn()
        torch.cuda.synchronize()
    gpu = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    return sum(e.device_time for e in gpu) / steps / 1e3


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
    p.add_argument("--rows", default="loop,bf16,delayed,current")
    args = p.parse_args()
    makers = {"bf16": lambda: _nvmath_step(None), "delayed": lambda: _nvmath_step("delayed"),
              "current": lambda: _nvmath_step("current"), "loop": _loop_step}  # fmt: skip
    base = None
    for row in args.rows.split(","):
        fn = makers[row]()
        ms, b2b, host, kern = _median_ms(fn), _back_to_back_ms(fn), _host_us(fn), _kernels_ms(fn)
        base = b2b if row == "loop" else base
        print(
            f"{row:8s} step {ms:7.3f} ms   back-to-back {b2b:7.3f} ms   host {host / 1e3:7.3f} ms   "
            f"kernels {kern:7.3f} ms" + (f"   ({base / b2b:.2f}x the loop)" if base else "")
        )
        if args.profile and row in ("delayed", "current"):
            _profile(row, fn)
    if base:
        print(f"(torch bf16 loop, back-to-back: {base:.3f} ms)")


if __name__ == "__main__":
    main()
