"""Where an eager decode Linear call's time goes, nvmath against torch (issue #21).

For each shape of ``benchmarks/suites/torch.py``'s ``decode-m<M>-<K>x<N>`` rows (one bf16 Linear with
bias on M tokens, under ``no_grad``) prints, for ``nvmath.torch.Linear`` and ``torch.nn.Linear``:

* ``event``: the median of single calls timed with CUDA events (what the benchmark row measures: the
  host work between the two events delays the kernel);
* ``gpu``: the kernels one call runs (torch.profiler, 50 calls) with their mean durations: when
  ``event`` is well above the kernels' sum, the host's launch path is the difference;
* ``host``: the host time per call of a back-to-back loop (one synchronisation).

Usage (on the GPU machine, from the repository root)::

    PYTHONPATH=. python3 tools/decode_profile.py [--shapes 1x4096x14336,1x14336x4096,...]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections import defaultdict

import torch

SHAPES = "1x4096x14336,1x14336x4096,8x4096x14336,8x14336x4096,64x4096x14336,64x14336x4096"


def _layers(k: int, n: int):
    import nvmath.torch as nt

    torch.manual_seed(0)
    ours = nt.Linear(k, n, device="cuda", dtype=torch.bfloat16)
    theirs = torch.nn.Linear(k, n, device="cuda", dtype=torch.bfloat16)
    with torch.no_grad():
        theirs.weight.copy_(ours.weight)
        theirs.bias.copy_(ours.bias)
    return {"nvmath": ours, "torch": theirs}


def _event_us(fn, calls: int = 200) -> float:
    times = []
    for _ in range(calls):
        torch.cuda.synchronize()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1e3)
    return statistics.median(times)


def _host_us(fn, calls: int = 500) -> float:
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(calls):
        fn()
    us = (time.perf_counter() - t) / calls * 1e6
    torch.cuda.synchronize()
    return us


def _kernels(fn, calls: int = 50) -> list[tuple[str, float]]:
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    total: dict[str, float] = defaultdict(float)
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            total[e.name] += e.device_time / calls
    return sorted(total.items(), key=lambda kv: -kv[1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--shapes", default=SHAPES)
    args = p.parse_args()
    for shape in args.shapes.split(","):
        m, k, n = (int(v) for v in shape.split("x"))
        x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        for lib, layer in _layers(k, n).items():
            def fn(layer=layer):
                with torch.no_grad():
                    return layer(x)

            for _ in range(20):
                fn()
            ev, host = _event_us(fn), _host_us(fn)
            ks = _kernels(fn)
            names = "; ".join(f"{name[:70]} {us:.2f}" for name, us in ks)
            print(f"m={m} {k}->{n} {lib:7s} event {ev:7.2f} us  host {host:6.2f} us  "
                  f"kernels {sum(us for _, us in ks):6.2f} us: {names}")  # fmt: skip


if __name__ == "__main__":
    main()
