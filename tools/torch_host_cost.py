"""The Python cost of ``nvmath.torch``'s eager hot calls, measured on the CPU (no GPU needed).

torch CPU tensors pose as CUDA tensors of package ``"torch"`` on GPU 0 (the adapter of
``tests/torch/torch_fakes.py`` with the real package name, so the torch-only fast paths of the planner
run: torch's raw current stream, results by ``torch.empty_strided``); the first call of each problem
plans on the emulated cuBLASLt (``tests/linalg/advanced/matmul_fakes.py``), then ``cublasLtMatmul``
is a C no-op (``nvmath._fastcall``'s probe when the extension is built, installed before planning so
that the compiled paths call it as they call cuBLASLt on the GPU), so the timed loop is nvmath's host
work plus one C call. torch's current stream reads as the legacy default stream (0): no per-call stream
event (a non-default torch stream adds that cost, see ``nvmath._internal.streams``). Driver and cuBLASLt
calls on the GPU machine add about 0.3-1 us each.

Run from the repository root::

    PYTHONPATH=. python tools/torch_host_cost.py [--calls 20000] [--profile ROW]

Prints us per call (best of 5 rounds) for each row; ``--profile`` prints a cProfile of one row.
"""

from __future__ import annotations

import argparse
import cProfile
import ctypes
import importlib.util
import pathlib
import pstats
import statistics
import sys
import time
from typing import Any

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]


def _load(name: str, path: pathlib.Path) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def install(mp: Any) -> Any:
    """The fake GPU with torch CPU tensors posing as package-"torch" CUDA tensors; returns nvmath.torch."""
    import torch

    # outputs of the stubbed matmul hold whatever memory held: flush denormals so that the elementwise
    # work of the backward rows costs the same whatever that was
    torch.set_flush_denormal(True)
    fakes = _load("torch_fakes", ROOT / "tests" / "torch" / "torch_fakes.py")
    return fakes.install_as_torch(mp)


def rows(nt: Any) -> dict[str, Any]:
    """Row name -> a no-argument call (each planned by a first call before timing)."""
    import torch

    def aligned(*shape: int) -> Any:
        n = 1
        for e in shape:
            n *= e
        flat = torch.randn(n + 128, dtype=torch.float32)
        skip = (-flat.data_ptr() % 256) // 4
        return flat[skip : skip + n].view(*shape)

    x, x2, w, b = aligned(8, 256), aligned(8, 256), aligned(512, 256), aligned(512)
    xs = [x, x2]
    turn = [0]
    layer = nt.Linear(256, 512)
    layer.weight.data, layer.bias.data = w.clone(), b.clone()
    g = nt.Linear(256, 512, activation="gelu")

    def alternate() -> Any:
        turn[0] ^= 1
        return nt.linear(xs[turn[0]], w, b)

    def no_grad(fn: Any) -> Any:
        def run() -> Any:
            with torch.no_grad():
                return fn()

        return run

    mlp = nt.MLP(256, 512, 256)
    xg = x.clone().requires_grad_()
    gy = torch.ones(8, 512)

    def train_step(module: Any, g: Any) -> Any:
        def run() -> Any:
            module(xg).backward(g)

        return run

    return {
        "linear(x, w, b)": lambda: nt.linear(x, w, b),
        "linear, alternating x": alternate,
        "linear(x, w)": lambda: nt.linear(x, w),
        "Linear.forward no_grad": no_grad(lambda: layer(x)),
        "Linear gelu no_grad": no_grad(lambda: g(x)),
        "torch.ops.nvmath.linear": lambda: torch.ops.nvmath.linear(x, w, b, "", False),
        "Linear gelu fwd+bwd": train_step(g, gy),
        "MLP fwd+bwd": train_step(mlp, torch.ones(8, 256)),
        "F.linear (torch, CPU compute)": lambda: torch.nn.functional.linear(x, w, b),
    }


def c_no_op(nargs: int) -> Any:
    """A C function of ``nargs`` arguments returning 0 (``nvmath._fastcall``'s probe when the extension is
    built, so that the compiled callers call it as they call the library on the GPU; else a ctypes one)."""
    proto = ctypes.CFUNCTYPE(ctypes.c_int, *([ctypes.c_void_p] * nargs))
    try:
        from nvmath import _fastcall

        return proto(_fastcall._probe_address(nargs))
    except ImportError:
        return proto(lambda *args: 0)


def measure(fn: Any, calls: int) -> float:
    """Best us per call of 5 rounds of ``calls`` calls."""
    out = []
    for _ in range(5):
        t0 = time.perf_counter_ns()
        for _ in range(calls):
            fn()
        out.append((time.perf_counter_ns() - t0) / calls / 1e3)
    return min(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--profile", default=None, help="a row name (substring) to cProfile")
    args = parser.parse_args()
    from _pytest.monkeypatch import MonkeyPatch

    from nvmath.bindings import cublasLt as lt

    mp = MonkeyPatch()
    try:
        nt = install(mp)
        mp.setattr(lt, "_p_cublasLtMatmul", c_no_op(16))  # (before planning: the launches' caller calls it)
        table = rows(nt)
        for fn in table.values():
            fn()  # plan (emulated cuBLASLt)
            fn()
        for name, fn in table.items():
            if args.profile and args.profile in name:
                prof = cProfile.Profile()
                prof.enable()
                for _ in range(args.calls):
                    fn()
                prof.disable()
                pstats.Stats(prof).sort_stats("tottime").print_stats(25)
            print(f"{name:34s} {measure(fn, args.calls):7.2f} us/call")
    finally:
        mp.undo()


if __name__ == "__main__":
    main()
