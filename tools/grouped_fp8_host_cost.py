"""The host cost of an FP8 ``GroupedLinear`` training step, measured on the CPU (no GPU needed).

The step of ``tools/grouped_fp8_profile.py`` (8 groups of uneven token counts, forward + backward with
the input, weight and bias gradients, the weight's version bumped every step as after an optimizer
step) at small sizes, through the GPU code paths: torch CPU tensors pose as CUDA tensors for the
planner (the fake GPU of ``tools/torch_host_cost.py``), the grouped FP8 GEMM planners run CPU tensors
(``cpu_planned``) and, once planned, ``cublasLtMatmul`` is a no-op; the FP8 cast kernels take CPU
tensors and their launches are counted, not run (the outputs hold whatever memory held). So the
timed loop is nvmath's Python and torch's dispatch on tiny tensors: what the host spends per step
beside the driver's launch calls (about 2-5 us each on the GPU machine, counted in the table). The
kernels' launches are counted at ``launch_grid`` and the state updates, above the launch mechanism:
the cost of a launch itself (the compiled launcher, ``nvmath._internal.kernel_launch``, or cuda.core's
launch on the pure path) shows on the GPU machine only (``tools/grouped_fp8_profile.py``).

Run from the repository root::

    PYTHONPATH=. python tools/grouped_fp8_host_cost.py [--steps 200] [--profile delayed|current]

Prints, per recipe: us of CPU time per step (best of 5 rounds), our kernels' launches (cast-transposes,
scaling-state updates and scales), GEMM executions and torch operations (aten calls that are not views) per
step.
"""

from __future__ import annotations

import argparse
import cProfile
import ctypes
import collections
import pathlib
import pstats
import sys
import time
from typing import Any

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tools")]

COUNTS = [64, 48, 48, 32, 32, 16, 16, 16]
D_IN, D_OUT = 64, 32


def install(mp: Any) -> Any:
    """The fake GPU (``torch_host_cost.install``), the grouped planners on CPU tensors and the cast
    kernels' launches counted instead of run; returns the launch counter (a one-element list)."""
    import torch

    import torch_host_cost
    from nvmath.torch import _fp8_cast
    from nvmath.torch import _grouped_fp8_gemms
    from nvmath.torch._grouped_fp8_gemms import grouped_fp8_gemms

    torch_host_cost.install(mp)
    torch.set_num_threads(1)  # (the host's work, not torch's CPU thread pool on tiny tensors)
    # (CUDA's caching allocator gives every block 512-byte alignment; the CPU allocator's varies, which
    # would re-plan the grouped GEMMs, keyed by their operands' alignments, now and then)
    mp.setattr(_grouped_fp8_gemms, "_align", lambda t: 256)
    # (and the CPU's 64-byte allocations would fail the results' alignment: the products in place)
    mp.setattr(_grouped_fp8_gemms, "D_ALIGNMENT", 16, raising=False)
    # (and the counts signatures of the grouped products hold the bases' addresses modulo 256, which the
    # CPU allocator varies from step to step: each would meet a new signature, the GEMMs looked up again)
    from nvmath.torch import _grouped_fp8_kernels

    def signature(counts: Any, *tensors: Any) -> tuple:
        layouts = (None if t is None else (t.shape, t.stride(), t.dtype, t.device) for t in tensors)
        return (tuple(counts), *layouts)

    mp.setattr(_grouped_fp8_kernels, "signature", signature)
    grouped_fp8_gemms.clear()
    mp.setattr(grouped_fp8_gemms, "cpu_planned", True)
    launched = [0]

    def available(x: Any, aux: Any = None) -> bool:
        return aux is None and x.dtype in (torch.bfloat16, torch.float16, torch.float32) and x.dim() == 2

    def launch(device: Any, key: Any, shape: tuple, args: tuple) -> bool:
        launched[0] += 1
        return True

    def launch_tiles(device: Any, key: Any, launches: list) -> bool:  # (the former one launch per group)
        launched[0] += len(launches)
        return True

    def record(amax: Any, *args: Any, out: Any = None) -> Any:  # (the grouped state update's one launch)
        launched[0] += 1
        return torch.empty(amax.shape) if out is None else out

    def scale(amax: Any, *args: Any, out: Any = None) -> Any:  # (current scaling's scales: one launch)
        launched[0] += 1
        return torch.empty(amax.shape) if out is None else out

    mp.setattr(_fp8_cast, "grouped_record", record, raising=False)
    mp.setattr(_fp8_cast, "grouped_scale", scale, raising=False)
    mp.setattr(_fp8_cast, "available", available)
    mp.setattr(_fp8_cast, "launch_grid", launch, raising=False)
    mp.setattr(_fp8_cast, "launch_tiles", launch_tiles, raising=False)
    return launched


def make_step(recipe_name: str) -> Any:
    """A no-argument training step of an FP8 ``GroupedLinear`` under ``recipe_name``."""
    import torch

    import nvmath.torch as nt
    from nvmath.torch import fp8

    recipe = {"delayed": fp8.DelayedScaling(), "current": fp8.CurrentScaling()}[recipe_name]
    torch.manual_seed(0)
    layer = nt.GroupedLinear(len(COUNTS), D_IN, D_OUT, fp8=recipe, dtype=torch.bfloat16)
    x = torch.randn(sum(COUNTS), D_IN, dtype=torch.bfloat16, requires_grad=True)
    g = torch.randn(sum(COUNTS), D_OUT, dtype=torch.bfloat16)
    params = [x, *layer.parameters()]
    counts = list(COUNTS)

    def step() -> Any:
        torch.autograd.graph.increment_version([layer.weight])
        return torch.autograd.grad(layer(x, counts), params, grad_outputs=g)

    return step


def count_ops(fn: Any) -> collections.Counter:
    """The aten operations one call of ``fn`` dispatches, by name (views left out)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    seen: collections.Counter = collections.Counter()

    class Counting(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if not func.is_view:
                seen[func.overloadpacket.__name__] += 1
            return func(*args, **(kwargs or {}))

    with Counting():
        fn()
    return seen


def group_calls(runner: Any) -> int:
    """The calls the grouped runner's compiled groups (``nvmath._fastcall.MatmulGroup``) served so far."""
    return sum(m.group.group.calls for m in runner._memo.values() if getattr(m, "group", None))


def measure(fn: Any, steps: int) -> float:
    """Best us per step of 5 rounds of ``steps`` steps, in this process's CPU time (the machine's other
    work, when its cores are shared, is not counted)."""
    out = []
    for _ in range(5):
        t0 = time.process_time_ns()
        for _ in range(steps):
            fn()
        out.append((time.process_time_ns() - t0) / steps / 1e3)
    return min(out)


def _report(name: str, args: argparse.Namespace, launched: list, target: list) -> None:
    """Measure and print recipe ``name``'s step: its host us, our kernel launches, its GEMMs, torch
    operations and compiled group calls (``target[0]``: what the cublasLtMatmul C function calls)."""
    from nvmath.torch._grouped_fp8_gemms import grouped_fp8_gemms

    step = make_step(name)
    for _ in range(3):
        step()  # (plans on the emulated cuBLASLt)
    emulation = target[0]
    try:
        executed = [0]

        def count(*args: Any) -> int:
            executed[0] += 1
            return 0

        target[0] = count
        before, served = launched[0], group_calls(grouped_fp8_gemms)
        ops = count_ops(step)
        casts, gemms = launched[0] - before, executed[0]
        grouped = group_calls(grouped_fp8_gemms) - served
        target[0] = lambda *a: 0
        if args.profile == name:
            prof = cProfile.Profile()
            prof.enable()
            for _ in range(args.steps):
                step()
            prof.disable()
            pstats.Stats(prof).sort_stats(args.sort).print_stats(30)
        us = measure(step, args.steps)
    finally:
        target[0] = emulation
    assert grouped_fp8_gemms.enabled, "the grouped planners switched off"
    print(f"{name:8s} {us:8.1f} us/step   kernel launches {casts:3d}   GEMMs {gemms:3d}   "
          f"torch ops {sum(ops.values()):4d}   compiled group calls {grouped:2d}")  # fmt: skip
    if args.ops:
        print("   ", dict(ops.most_common()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--profile", default=None, help="a recipe (delayed or current) to cProfile")
    parser.add_argument("--sort", default="tottime", help="the cProfile order (tottime, cumulative)")
    parser.add_argument("--ops", action="store_true", help="list the torch operations of one step")
    parser.add_argument("--no-group", action="store_true",
                        help="launch the per-group GEMMs one by one (no compiled group call), for comparison")
    args = parser.parse_args()
    from _pytest.monkeypatch import MonkeyPatch

    from nvmath.bindings import cublasLt as lt

    mp = MonkeyPatch()
    try:
        launched = install(mp)
        if args.no_group:
            from nvmath.torch import _grouped_fp8_gemms

            mp.setattr(_grouped_fp8_gemms, "build_group", lambda runs: None)
        # cublasLtMatmul behind a C function (a ctypes callback into ``target``: the emulation while
        # planning, then a counter or a no-op), so that the launches' callers are the compiled ones where
        # the extension is built (NVMATH_PURE_PYTHON=1: the pure ones), as on the GPU
        target = [lt._p_cublasLtMatmul]
        cfunc = ctypes.CFUNCTYPE(ctypes.c_int, *([ctypes.c_uint64] * 16))(lambda *a: target[0](*a))
        mp.setattr(lt, "_p_cublasLtMatmul", cfunc)
        for name in ("delayed", "current"):
            _report(name, args, launched, target)
    finally:
        mp.undo()


if __name__ == "__main__":
    main()
