"""The Python cost of the generic matmul's stateless hit (``nvmath.linalg.matmul``), measured on the CPU.

torch CPU tensors pose as CUDA tensors of package ``"torch"`` on GPU 0 (``tools/torch_host_cost.py``'s
adapter, and ``tools/fft_host_cost.py``'s raw reader, which reads them as on GPU 0), so a call takes the
GPU route of the generic matmul: the stateless key from raw reads, the plan cache's last call, the
torch GEMM entry (``nvmath.linalg.generic._fast.torch_gemm``: the result by torch, the stream memo, the
launch). The cuBLAS calls are C functions that do nothing (``nvmath._fastcall``'s probes when the
extension is built, so the compiled caller calls them as on the GPU; else ctypes no-ops), and the
entry's "CUDA" result is a CPU tensor. Planning runs on the fake cuBLAS of
``tests/linalg/generic/cublas_fakes.py``. On the GPU machine the cuBLAS call and torch's CUDA
allocation add a few us.

Run from the repository root::

    PYTHONPATH=. python tools/generic_host_cost.py [--calls 20000] [--rounds 5] [--profile ROW]

``tools/host_profile.py --fake`` shows the same rows split into steps.
"""

from __future__ import annotations

import argparse
import ctypes
import pathlib
import sys
import time
import types
from collections.abc import Callable
from typing import Any

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path[:0] = [
    str(ROOT), str(ROOT / "tests"), str(ROOT / "tools"), str(ROOT / "tests" / "linalg" / "generic"),
]  # fmt: skip

# cuBLAS entry point -> its number of (integer-class) parameters
_NO_OPS = {
    "_p_cublasGemmEx": 19,
    "_p_cublasGemmStridedBatchedEx": 23,
    "_p_cublasSetStream_v2": 2,
    "_p_cublasSetWorkspace_v2": 3,
}


def _no_op(nargs: int) -> Any:
    """A C function of ``nargs`` 64-bit arguments returning 0."""
    proto = ctypes.CFUNCTYPE(ctypes.c_int, *([ctypes.c_uint64] * nargs))
    try:
        from nvmath import _fastcall

        return proto(_fastcall._probe_address(nargs))
    except ImportError:
        return proto(lambda *args: 0)


def install(mp: Any) -> None:
    """The fake GPU of the generic rows (undone by ``mp.undo()``); needs ``torch_host_cost.install`` and
    ``fft_host_cost.install`` first (torch's adapter and raw reader as on GPU 0)."""
    import cublas_fakes
    import torch

    from nvmath._internal import stateless
    from nvmath._internal.tensors import dispatch
    from nvmath.bindings import cublas
    from nvmath.linalg.generic import _fast
    from nvmath.linalg.generic import _stateless as generic_stateless

    as_torch, reader = dispatch._CLASSES[torch.Tensor], stateless.READERS[torch.Tensor]
    cublas_fakes.install(mp)
    mp.setitem(dispatch._CLASSES, torch.Tensor, as_torch)  # (the fake cuBLAS' install resets it)
    for name, nargs in _NO_OPS.items():
        mp.setattr(cublas, name, _no_op(nargs))
    mp.setitem(stateless.READERS, torch.Tensor, reader)  # (undone with the rest: no fake reader outlives it)
    mp.setattr(generic_stateless, "_read_torch", reader)  # the reader of the two-operand key
    # the torch GEMM entry makes its "CUDA" results with a torch whose CUDA device is the CPU
    stub = types.ModuleType("torch")
    stub.__dict__.update({k: getattr(torch, k) for k in dir(torch) if not k.startswith("__")})
    stub.device = lambda *args: torch.device("cpu")
    mp.setattr(_fast, "sys", types.SimpleNamespace(modules={**sys.modules, "torch": stub}))


def rows(size: int = 64) -> dict[str, Callable[[], Any]]:
    """Row name -> a no-argument call (planned by a first call before timing)."""
    import torch

    import nvmath

    a, b = torch.randn(size, size), torch.randn(size, size)
    xa, xb = torch.randn(8, 32, 32), torch.randn(8, 32, 32)
    return {
        "generic matmul (hit)": lambda: nvmath.linalg.matmul(a, b),
        "generic matmul batched (hit)": lambda: nvmath.linalg.matmul(xa, xb),
    }


def measure(fn: Callable[[], Any], calls: int, rounds: int = 5) -> float:
    """Best us per call of ``rounds`` rounds of ``calls`` calls, in this thread's CPU time (the machine
    is shared: time spent descheduled is not counted)."""
    best = float("inf")
    for _ in range(rounds):
        t0 = time.thread_time_ns()
        for _ in range(calls):
            fn()
        best = min(best, (time.thread_time_ns() - t0) / calls / 1e3)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--size", type=int, default=64)
    parser.add_argument("--profile", default=None, help="a row name (substring) to cProfile")
    args = parser.parse_args()
    import fft_host_cost
    import torch_host_cost
    from _pytest.monkeypatch import MonkeyPatch

    from nvmath._internal import caches

    mp = MonkeyPatch()
    try:
        torch_host_cost.install(mp)
        fft_host_cost.install(mp)
        install(mp)
        fft_host_cost.print_table(rows(args.size), args, measure)
    finally:
        caches.clear_all()
        mp.undo()


if __name__ == "__main__":
    main()
