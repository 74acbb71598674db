"""Per-call cost of the bindings' argument checks: raw ctypes vs unchecked vs checked (no GPU needed).

Four columns per binding, interleaved, best of many rounds, each call spelled out with its arguments
as a planner makes it (no ``*args``):

* ``raw``: the ctypes function ``_p_<symbol>`` itself (an output: a ``c_size_t`` made, passed by
  ``byref`` and read in the timed statement, as any caller must);
* ``unchecked``: ``nvmath.bindings._unchecked.<module>.<function>`` (the planners' execute path);
* ``checked``: ``nvmath.bindings.<module>.<function>`` of the working tree;
* ``checked@REV``: the checked wrapper of a git revision (default ``main``), exec'd from ``git show``.

By default (``--stub``) each C symbol is replaced by a ctypes function pointer with the binding's own
prototype to a C function that ignores its arguments and returns 0 (``PyGILState_Check``, called with
the GIL released as ctypes calls every binding), so the timing is the Python wrapper plus ctypes'
argument conversion: exactly the part the checks change, on the success path. ``--real`` calls the
real libraries (loaded by cuda.pathfinder; no GPU needed) with calls that answer at once: on the CPU
``cublasLtMatmul`` with a NULL handle returns ``CUBLAS_STATUS_NOT_INITIALIZED``, so its wrapper rows
include raising and catching ``cuBLASLtError`` (the raw row does not).

Usage::

    PYTHONPATH=. python tools/bench_binding_checks.py [--real] [--rev main] [--rounds 15]
"""

from __future__ import annotations

import argparse
import ctypes
import importlib
import subprocess
import sys
import timeit
import types
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
OUT = object()  # marks an output parameter in a raw argument list
P1, P2 = 0x7F0000001000, 0x7F0000002000

# The generic matmul's cuBLAS calls (19 and 23 arguments): float32 64^3, default algorithm.
GEMM = (P1, 0, 0, 64, 64, 64, P1, P2, 0, 64, P2, 0, 64, P1, P2, 0, 64, 68, -1)
GEMM_SB = (P1, 0, 0, 64, 64, 64, P1, P2, 0, 64, 4096, P2, 0, 64, 4096, P1, P2, 0, 64, 4096, 8, 68, -1)
# (module, function, C symbol, Python arguments, raw C arguments): one handle, four integers and an
# output, two handles, two FFT executions (the FFT plans call cufftXtExec), the 16-argument matmul,
# the generic matmul's GEMMs.
STUB_CASES = (
    ("cublasLt", "matmul_desc_destroy", "cublasLtMatmulDescDestroy", (P1,), (P1,)),
    ("cublasLt", "matrix_layout_create", "cublasLtMatrixLayoutCreate", (0, 64, 64, 64), (OUT, 0, 64, 64, 64)),
    ("cusolverDn", "set_stream", "cusolverDnSetStream", (P1, P2), (P1, P2)),
    ("cufft", "exec_c2c", "cufftExecC2C", (5, P1, P2, -1), (5, P1, P2, -1)),
    ("cufft", "xt_exec", "cufftXtExec", (5, P1, P2, -1), (5, P1, P2, -1)),
    ("cublasLt", "matmul", "cublasLtMatmul", (P1,) * 14 + (1 << 25, P2), (P1,) * 14 + (1 << 25, P2)),
    ("cublas", "gemm_ex", "cublasGemmEx", GEMM, GEMM),
    ("cublas", "gemm_strided_batched_ex", "cublasGemmStridedBatchedEx", GEMM_SB, GEMM_SB),
)
# Calls the real libraries answer without a GPU: a version query, reading ROWS (2, a uint64) of a
# layout created at start-up into a buffer of ours, and cublasLtMatmul with a NULL handle.
LAYOUT = object()
ROWS = ctypes.c_uint64()
REAL_CASES = (
    ("cublasLt", "get_property", "cublasLtGetProperty", (0,), (0, OUT)),
    ("cublasLt", "matrix_layout_get_attribute", "cublasLtMatrixLayoutGetAttribute",
     (LAYOUT, 2, ctypes.addressof(ROWS), 8), (LAYOUT, 2, ctypes.addressof(ROWS), 8, OUT)),
    ("cublasLt", "matmul", "cublasLtMatmul", (0,) * 16, (0,) * 16),
)  # fmt: skip


def _stub(restype, argtypes):
    """A function pointer with the binding's prototype (called like the real one: GIL released) to a
    C function that ignores its arguments and returns 0: ``PyGILState_Check`` without the GIL."""
    address = ctypes.cast(ctypes.pythonapi.PyGILState_Check, ctypes.c_void_p).value
    return ctypes.CFUNCTYPE(restype, *argtypes)(address)


def _load_rev(module: str, rev: str) -> types.ModuleType:
    """The checked module of revision ``rev``, exec'd in the package (its own ``_p_`` stubs)."""
    show = ["git", "show", f"{rev}:nvmath/bindings/{module}.py"]
    text = subprocess.run(show, cwd=REPO, capture_output=True, text=True, check=True).stdout
    current = importlib.import_module(f"nvmath.bindings.{module}")
    old = types.ModuleType(f"nvmath.bindings.{module}", current.__doc__)
    old.__package__ = "nvmath.bindings"
    exec(compile(text, f"<{module}@{rev}>", "exec"), old.__dict__)  # noqa: S102 - our own generated module
    return old


def _install_stubs(module: types.ModuleType) -> None:
    """Replace every ``_p_<symbol>`` of ``module`` by a do-nothing C function of the same prototype."""
    for symbol, (_, argtypes) in module._bind.prototypes.items():
        setattr(module, "_p_" + symbol, _stub(ctypes.c_int, argtypes))


def _install_real(module: types.ModuleType, symbols: set[str]) -> None:
    """Load the library and resolve ``symbols`` into ``module`` (no stub left on the timed path)."""
    for symbol in symbols:
        module._bind.resolve(symbol)


def _timer(fn, args) -> timeit.Timer:
    """A timer of ``fn(a0, a1, ...)`` with the arguments as locals, spelled out (the planners' call
    shape); an ``OUT`` argument is a ``c_size_t`` made, passed by ``byref`` and read per call, as the
    wrappers do; a call that raises is timed with its ``except``."""
    names = [f"a{i}" for i in range(len(args))]
    outs = [n for n, a in zip(names, args) if a is OUT]
    call = f"f({', '.join('byref(' + n + ')' if n in outs else n for n in names)})"
    lines = [f"{n} = size_t()" for n in outs] + [call] + [f"{n}.value" for n in outs]
    stmt = "try:\n" + "".join(f"    {line}\n" for line in lines) + "except Exception:\n    pass"
    setup = f"{', '.join(names)}{',' if len(names) == 1 else ''} = ARGS; f = FN" if names else "f = FN"
    env = {"ARGS": tuple(args), "FN": fn, "byref": ctypes.byref, "size_t": ctypes.c_size_t}
    return timeit.Timer(stmt, setup, globals=env)


def _functions(cases, real: bool, rev: str) -> dict:
    """``{(case index, column): timer}``."""
    timers = {}
    revs = {}
    layout = None
    for module, _, symbol, _, _ in cases:
        mod = importlib.import_module(f"nvmath.bindings.{module}")
        if real:
            _install_real(mod, {c[2] for c in cases if c[0] == module})
        else:
            _install_stubs(mod)
        if rev and module not in revs:
            revs[module] = _load_rev(module, rev)
            if real:
                _install_real(revs[module], {c[2] for c in cases if c[0] == module})
            else:
                _install_stubs(revs[module])
    if any(LAYOUT in c[3] for c in cases):
        from nvmath.bindings import cublasLt

        layout = cublasLt.matrix_layout_create(0, 64, 64, 64)
    for i, (module, name, symbol, args, raw_args) in enumerate(cases):
        args = tuple(layout if a is LAYOUT else a for a in args)
        raw_args = tuple(layout if a is LAYOUT else a for a in raw_args)
        checked = importlib.import_module(f"nvmath.bindings.{module}")
        unchecked = importlib.import_module(f"nvmath.bindings._unchecked.{module}")
        timers[(i, "raw")] = _timer(getattr(checked, "_p_" + symbol), raw_args)
        timers[(i, "unchecked")] = _timer(getattr(unchecked, name), args)
        timers[(i, "checked")] = _timer(getattr(checked, name), args)
        if rev:
            timers[(i, f"checked@{rev}")] = _timer(getattr(revs[module], name), args)
    return timers


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--real", action="store_true", help="call the real libraries (default: C stubs)")
    parser.add_argument("--rev", default="main", help="the revision of the 'before' column ('' for none)")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--number", type=int, default=50_000)
    args = parser.parse_args(argv)
    sys.path.insert(0, str(REPO))
    cases = REAL_CASES if args.real else STUB_CASES
    timers = _functions(cases, args.real, args.rev)
    best = dict.fromkeys(timers, float("inf"))
    for _ in range(args.rounds):
        for key, timer in timers.items():
            best[key] = min(best[key], timer.timeit(args.number) / args.number)
    columns = ["raw", "unchecked", "checked"] + ([f"checked@{args.rev}"] if args.rev else [])
    print(f"{'ns per call (' + ('real libraries' if args.real else 'C stubs') + ')':36s}", end="")
    print("".join(f"{c:>14s}" for c in columns), f"{'unchecked-raw':>14s}{'checked-raw':>12s}")
    for i, (module, name, *_) in enumerate(cases):
        ns = {c: best[(i, c)] * 1e9 for c in columns}
        print(f"{module + '.' + name:36s}" + "".join(f"{ns[c]:14.0f}" for c in columns), end="")
        print(f"{ns['unchecked'] - ns['raw']:+14.0f}{ns['checked'] - ns['raw']:+12.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
