"""Per-call host cost of the compiled caller (nvmath._fastcall) against the pure caller and the bindings.

No GPU needed: each call goes to a C probe built into the extension (``_probe_address(n)``: records
its arguments, returns 0), so the timing is the call machinery alone. Two shapes, as the planners
make them: cublasLtMatmul (16 arguments, 4 per call: A, B, D pointers and the stream) and
cublasGemmStridedBatchedEx (23 arguments, 4 per call: A, B, C and the workspace-free stream handle
set on the handle, here a fourth pointer). Rows, best of ``--rounds`` interleaved rounds, ns of thread
CPU time per call:

* ``FastCall``: the compiled caller, GIL kept (the default); ``FastCall(release_gil)``: GIL released;
* ``pure``: the pure-Python caller (ctypes, ``NVMATH_PURE_PYTHON=1``);
* ``unchecked``: ``nvmath.bindings._unchecked.<module>.<function>`` with all arguments spelled out,
  its ctypes symbol pointed at the probe with the binding's own prototype (today's execute path);
* ``raw ctypes``: that ctypes function called directly.

Usage::

    python setup.py build_ext --inplace && PYTHONPATH=. python tools/bench_fastcall.py [--rounds 15]
"""

from __future__ import annotations

import argparse
import ctypes
import time
import timeit

from nvmath import _fastcall
from nvmath._internal.fastpath import pure_caller
from nvmath.bindings import cublas, cublasLt
from nvmath.bindings._unchecked import cublas as cublas_unchecked
from nvmath.bindings._unchecked import cublasLt as lt_unchecked

P = 0x7F0000001000
SHAPES = {
    # name: (binding module, unchecked function, C symbol, arity, slot positions)
    "cublasLtMatmul": (cublasLt, lt_unchecked.matmul, "cublasLtMatmul", 16, (3, 5, 10, 15)),
    "cublasGemmStridedBatchedEx": (
        cublas,
        cublas_unchecked.gemm_strided_batched_ex,
        "cublasGemmStridedBatchedEx",
        23,
        (7, 11, 16, 0),
    ),
}


def _point_binding_at_probe(module, symbol: str, address: int):
    """Install a ctypes function with the binding's prototype that calls the probe; returns it."""
    restype, argtypes = module._bind.prototypes[symbol]  # a tool: reads the generated module's binder
    function = ctypes.CFUNCTYPE(restype, *argtypes)(address)
    setattr(module, "_p_" + symbol, function)
    return function


def _statements(name: str) -> dict[str, tuple[str, dict]]:
    module, unchecked, symbol, n, slots = SHAPES[name]
    address = _fastcall._probe_address(n)
    raw = _point_binding_at_probe(module, symbol, address)
    fixed = [P + 8 * i for i in range(n)]
    spelled = ", ".join(f"a{i}" for i in range(n))
    per_call = ", ".join(f"a{i}" for i in slots)
    env = {f"a{i}": v for i, v in enumerate(fixed)}
    return {
        "FastCall": (f"f({per_call})", env | {"f": _fastcall.FastCall(address, fixed, slots)}),
        "FastCall(release_gil)": (
            f"f({per_call})",
            env | {"f": _fastcall.FastCall(address, fixed, slots, release_gil=True)},
        ),
        "pure": (f"f({per_call})", env | {"f": pure_caller(address, fixed, slots)}),
        "unchecked": (f"f({spelled})", env | {"f": unchecked}),
        "raw ctypes": (f"f({spelled})", env | {"f": raw}),
    }


def measure(name: str, rounds: int, number: int) -> dict[str, float]:
    """Best ns per call of each row, rounds interleaved."""
    rows = _statements(name)
    best = {row: float("inf") for row in rows}
    for _ in range(rounds):
        for row, (stmt, env) in rows.items():
            # this thread's CPU time: robust on a shared machine (a descheduled thread is not charged)
            seconds = timeit.Timer(stmt, globals=env, timer=time.thread_time).timeit(number=number)
            best[row] = min(best[row], seconds / number * 1e9)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--number", type=int, default=5000)
    args = parser.parse_args()
    for name in SHAPES:
        best = measure(name, args.rounds, args.number)
        print(f"{name} ({SHAPES[name][3]} arguments, 4 per call), ns per call, best of {args.rounds}:")
        for row, ns in best.items():
            print(f"  {row:<24} {ns:8.0f}")


if __name__ == "__main__":
    main()
