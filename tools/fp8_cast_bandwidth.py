"""GPU bandwidth of the FP8 layers' cast kernels (issue #23): each kernel variant on each shape, GB/s.

The 64 x 64 kernels alone (``tiled``: ``NVMATH_FP8_VECTOR_CAST=0 NVMATH_FP8_VECTOR_AMAX=0``) beside
the vectorized ones (``vector``, the default): the cast-transpose plain (an FP8 Linear's
or GroupedLinear's delayed-scaling pass), with column sums (the gradient's pass with a bias) and
amax-only (current scaling's first pass: the tiled kernel without outputs, the plain reduction
``nvmath_amax``, the grouped reduction ``nvmath_amax_grouped``). Shapes: the MoE step of
``tools/grouped_fp8_profile.py`` -- x 16384 x 4096 and g 16384 x 2048 bf16 in the 8 uneven groups,
the weight 8 x 2048 x 4096 as 8 groups of 2048 rows -- and an FP8 Linear's 8192 x 4096.
Bytes counted: x read once, plus q and q.T written (1 byte each) for a quantizing pass. Time: the
GPU time of the ``nvmath_`` kernels per call, by torch's profiler over a loop of calls after a warm-up
(the GPU kept busy a second first, so its clocks are up; the median of several loops): the kernels
alone, not the host's Python between them nor the amax's zeros and the sums' final torch sum.

Usage (on the GPU machine, from the repository root)::

    PYTHONPATH=. python3 tools/fp8_cast_bandwidth.py [--reps 50] [--loops 5]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from nvmath.torch import _fp8_cast as C
from nvmath.torch import _grouped_fp8_kernels as K

COUNTS = (4096, 3072, 2560, 2048, 1792, 1280, 1024, 512)
E4, E5 = torch.float8_e4m3fn, torch.float8_e5m2


def _time_ms(fn, reps: int, loops: int) -> float:
    """Milliseconds of GPU time per call of ``fn`` in the ``nvmath_`` kernels (torch's profiler: the
    kernels alone, whatever the host costs between them; the median of ``loops`` loops)."""
    from torch.profiler import ProfilerActivity, profile

    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(loops):
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(reps):
                fn()
            torch.cuda.synchronize()
        us = sum(_device_us(e) for e in prof.key_averages() if "nvmath_" in e.key)
        times.append(us / reps / 1e3)
    return statistics.median(times)


def _device_us(event) -> float:
    """An averaged profiler event's total GPU microseconds (the attribute's name differs by torch)."""
    total = getattr(event, "device_time_total", None)
    return float(event.cuda_time_total if total is None else total)


def _switch(on: bool) -> None:
    """The vectorized kernels (cast-transposes and amax reductions) on, or the 64 x 64 kernels alone."""
    C.VECTOR_CAST = C.VECTOR_AMAX = on


def _cases():
    """``(shape label, pass, bytes, fn)``: every kernel call the table times."""
    x = torch.randn(sum(COUNTS), 4096, device="cuda").to(torch.bfloat16)
    g = torch.randn(sum(COUNTS), 2048, device="cuda").to(torch.bfloat16)
    w = (torch.randn(8 * 2048, 4096, device="cuda") * 0.02).to(torch.bfloat16)
    lin = torch.randn(8192, 4096, device="cuda").to(torch.bfloat16)
    s1 = torch.tensor(2.0, device="cuda")
    s8 = torch.full((8,), 2.0, device="cuda")
    out = []
    for label, t in (("linear 8192x4096", lin),):
        n = t.numel() * t.element_size()
        out.append((label, "cast", n + 2 * t.numel(), lambda t=t: C.cast_transpose(t, s1, E4)))
        out.append((label, "cast+colsum", n + 2 * t.numel(),
                    lambda t=t: C.cast_transpose(t, s1, E5, colsum=True)))  # fmt: skip
        out.append((label, "amax-only", n, lambda t=t: C.cast_transpose(t, None, E4)))
    for label, t, counts, dtype, colsum in (
        ("grouped x 16384x4096", x, COUNTS, E4, False),
        ("grouped w 8x2048x4096", w, (2048,) * 8, E4, False),
        ("grouped g 16384x2048", g, COUNTS, E5, True),
    ):
        bounds, n = K.bounds_of(counts), t.numel() * t.element_size()
        out.append((label, "cast+colsum" if colsum else "cast", n + 2 * t.numel(),
                    lambda t=t, b=bounds, d=dtype, c=colsum: K._kernel_run(t, b, 8, d, s8, c)))  # fmt: skip
        out.append((label, "amax-only", n,
                    lambda t=t, b=bounds, d=dtype: K._kernel_run(t, b, 8, d, None, False)))  # fmt: skip
    return out


def _warm_clocks(seconds: float = 1.0) -> None:
    """Keep the GPU busy for ``seconds`` so that its clocks are up before the first timing."""
    a = torch.randn(4096, 4096, device="cuda")
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        for _ in range(10):
            a = torch.tanh(a @ a)
        torch.cuda.synchronize()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--reps", type=int, default=50)
    p.add_argument("--loops", type=int, default=5)
    args = p.parse_args()
    _warm_clocks()
    print(f"{torch.cuda.get_device_name()}; GB/s = bytes read + written / time (1e9 bytes)")
    print(f"{'shape':24s} {'pass':12s} {'kernel':7s} {'us':>9s} {'GB/s':>8s} {'speedup':>8s}")
    for label, what, nbytes, fn in _cases():
        base = None
        for name, on in (("tiled", False), ("vector", True)):
            _switch(on)
            ms = _time_ms(fn, args.reps, args.loops)
            base = ms if base is None else base
            gbs = nbytes / (ms * 1e-3) / 1e9
            print(f"{label:24s} {what:12s} {name:7s} {ms * 1e3:9.1f} {gbs:8.0f} {base / ms:7.2f}x")
    assert not C.broken(), "the kernels failed on this GPU (see the log)"


if __name__ == "__main__":
    main()
