"""Time (and optionally profile) the FP8 MLP training step against torch bf16 eager (issue #23).

The step of ``benchmarks/suites/_torch_fp8.py`` (``mlp-step-fp8-*``): ``nvmath.torch.MLP(4096, 16384,
4096, fp8=recipe)`` in bfloat16 on 8192 tokens, forward + backward with the input's and the four
parameters' gradients, the weights' versions bumped each step (as after an optimizer step: their FP8
copies are remade). Prints the median step time of each recipe, of torch's bf16 block, and the ratio;
with ``--profile`` the GPU kernels of three steps by total time (torch.profiler); with ``--host`` the
same steps on a tiny block (256 -> 1024 -> 256, 256 tokens: the GPU work is negligible, so the time
per step is the host's: the Python and launch cost the full-size step must stay under).

Each nvmath row runs twice in one process: ``lean`` (the default: the lean scaling-state update,
``nvmath.torch._fp8.LEAN_SCALING``, and unchecked planner resets, ``_fp8_linear.UNCHECKED_RESET``) and
``former`` (both off: what ``NVMATH_FP8_LEAN_SCALING=0 NVMATH_FP8_UNCHECKED_RESET=0`` gives). ``--host``
also prints the device operations one tiny step dispatches (torch ops, counted) and the top functions
of the lean tiny step by own time (cProfile). ``--sync-check`` runs two full-size steps per recipe
with torch's sync debug mode and nvmath's ``streams.synchronize`` trapped and prints every host
synchronisation inside the step (there should be none).

Usage (on the GPU machine, from the repository root)::

    PYTHONPATH=. python3 tools/fp8_mlp_profile.py [--profile] [--host] [--sync-check]
        [--recipes delayed,current] [--device cuda|cpu]
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import warnings
from collections.abc import Iterator

import torch

TOKENS, D_MODEL, D_FF = 8192, 4096, 16384
DEVICE = "cuda"
"""``--device cpu``: a smoke run of ``--host`` / ``--sync-check`` on a machine without a GPU."""


def _sync() -> None:
    if DEVICE == "cuda":
        torch.cuda.synchronize()


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


@contextlib.contextmanager
def _mode(lean: bool) -> Iterator[None]:
    """The lean host path (scaling update and planner resets) on or off inside the block."""
    from nvmath.torch import _fp8, _fp8_linear

    saved = _fp8.LEAN_SCALING, _fp8_linear.UNCHECKED_RESET
    _fp8.LEAN_SCALING = _fp8_linear.UNCHECKED_RESET = lean
    try:
        yield
    finally:
        _fp8.LEAN_SCALING, _fp8_linear.UNCHECKED_RESET = saved


def _with_mode(fn, lean: bool):
    def run():
        with _mode(lean):
            return fn()

    return run


def _nvmath_step(recipe_name: str, tokens: int = TOKENS, d_model: int = D_MODEL, d_ff: int = D_FF):
    import nvmath.torch as nt
    from nvmath.torch import fp8

    recipe = {"delayed": fp8.DelayedScaling(), "current": fp8.CurrentScaling()}[recipe_name]
    block = nt.MLP(d_model, d_ff, d_model, fp8=recipe, device=DEVICE, dtype=torch.bfloat16)
    x = torch.randn(tokens, d_model, device=DEVICE, dtype=torch.bfloat16, requires_grad=True)
    g = torch.randn(tokens, d_model, device=DEVICE, dtype=torch.bfloat16)
    params = [x, *block.parameters()]

    def step():
        with torch.no_grad():
            block.fc1.weight.mul_(1.0)
            block.fc2.weight.mul_(1.0)
        return torch.autograd.grad(block(x), params, grad_outputs=g)

    return step


def _torch_step(tokens: int = TOKENS, d_model: int = D_MODEL, d_ff: int = D_FF):
    block = torch.nn.Sequential(
        torch.nn.Linear(d_model, d_ff, device=DEVICE, dtype=torch.bfloat16),
        torch.nn.GELU(approximate="tanh"),
        torch.nn.Linear(d_ff, d_model, device=DEVICE, dtype=torch.bfloat16),
    )
    x = torch.randn(tokens, d_model, device=DEVICE, dtype=torch.bfloat16, requires_grad=True)
    g = torch.randn(tokens, d_model, device=DEVICE, dtype=torch.bfloat16)
    params = [x, *block.parameters()]
    return lambda: torch.autograd.grad(block(x), params, grad_outputs=g)


def _profile(name: str, fn) -> None:
    from torch.profiler import ProfilerActivity, profile

    fn()
    _sync()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(3):
            fn()
        _sync()
    print(f"\n===== {name}: kernels of 3 steps")
    print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=25, max_name_column_width=90))


def _host(args: argparse.Namespace) -> None:
    """Steps of a tiny block timed on the host (synchronised once per 50 steps), lean and former; the
    device operations of one step; the lean step's top functions."""
    import time

    def per_step_us(fn) -> float:
        for _ in range(5):
            fn()
        _sync()
        best = float("inf")
        for _ in range(3):
            t = time.perf_counter()
            for _ in range(50):
                fn()
            _sync()
            best = min(best, (time.perf_counter() - t) / 50 * 1e6)
        return best

    print(f"host, torch bf16 tiny step: {per_step_us(_torch_step(256, 256, 1024)):.0f} us")
    for name in args.recipes.split(","):
        fn = _nvmath_step(name, 256, 256, 1024)
        for lean in (True, False):
            us = per_step_us(_with_mode(fn, lean))
            ops = _count_ops(_with_mode(fn, lean))
            print(f"host, nvmath FP8 {name} tiny step, {'lean' if lean else 'former'}: {us:.0f} us, "
                  f"{ops} torch operations dispatched")  # fmt: skip
    _top_functions(_nvmath_step(args.recipes.split(",")[0], 256, 256, 1024))


def _count_ops(fn) -> int:
    """How many torch operations (views excluded) one call of ``fn`` dispatches."""
    from torch.utils._python_dispatch import TorchDispatchMode

    views = {"detach", "alias", "view", "select", "slice", "reshape", "expand", "as_strided", "t",
             "transpose"}  # fmt: skip

    class Count(TorchDispatchMode):
        n = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if str(func).split(".")[1] not in views:
                Count.n += 1
            return func(*args, **(kwargs or {}))

    fn()
    with Count():
        fn()
    return Count.n


def _top_functions(fn, rows: int = 30) -> None:
    import cProfile
    import pstats

    for _ in range(5):
        fn()
    _sync()
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(50):
        fn()
    _sync()
    prof.disable()
    print("\n===== lean tiny step x50: top functions by own time (cProfile; autograd-thread time included)")
    pstats.Stats(prof).sort_stats("tottime").print_stats(rows)


def _sync_check(args: argparse.Namespace) -> None:
    """Two full-size steps per recipe with every host synchronisation reported."""
    from nvmath._internal import streams

    seen: list[str] = []
    original = streams.synchronize

    def trapped(handle):
        import traceback

        seen.append("nvmath streams.synchronize at " + "".join(traceback.format_stack(limit=6)))
        return original(handle)

    streams.synchronize = trapped
    try:
        for name in args.recipes.split(","):
            fn = _nvmath_step(name)
            fn()
            _sync()
            seen.clear()
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                if DEVICE == "cuda":
                    torch.cuda.set_sync_debug_mode("warn")
                try:
                    fn()
                    fn()
                finally:
                    if DEVICE == "cuda":
                        torch.cuda.set_sync_debug_mode("default")
            found = seen + [str(w.message) for w in caught if "synchroniz" in str(w.message).lower()]
            print(f"sync check, nvmath FP8 {name}: {len(found)} host synchronisations in 2 steps")
            for f in found:
                print("   ", f)
    finally:
        streams.synchronize = original


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--recipes", default="delayed,current")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--profile", action="store_true")
    p.add_argument("--host", action="store_true")
    p.add_argument("--sync-check", action="store_true")
    p.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    args = p.parse_args()
    global DEVICE
    DEVICE = args.device
    if args.host:
        _host(args)
        return
    if args.sync_check:
        _sync_check(args)
        return
    from nvmath.torch import _fp8_cast, fp8

    base = _median_ms(_torch_step(), args.steps)
    print(f"torch bf16 eager: {base:.3f} ms")
    for name in args.recipes.split(","):
        fn = _nvmath_step(name)
        for lean in (True, False):
            ms = _median_ms(_with_mode(fn, lean), args.steps)
            print(
                f"nvmath FP8 {name} ({'lean' if lean else 'former'} host path): {ms:.3f} ms  speedup vs "
                f"torch bf16 {base / ms:.2f}x  (cast kernels in use: {_fp8_cast.in_use()}, failed to build: "
                f"{_fp8_cast.broken()}; refused fused GEMMs: {fp8.fused_gemm_report()})"
            )
        if args.profile:
            _profile(f"nvmath FP8 {name} (lean)", _with_mode(fn, True))
    if args.profile:
        _profile("torch bf16", _torch_step())


if __name__ == "__main__":
    main()
