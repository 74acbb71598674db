"""Per-call cost of the generated bindings' argument checks, before and after (no GPU needed).

Each binding's C symbol is replaced by a ctypes function pointer to a C function that ignores its
arguments and returns 0 (``PyGILState_Check`` of the running interpreter, called with the GIL
released as ctypes calls every binding, with the binding's own argtypes), so the timing is the Python wrapper plus ctypes' argument conversion: exactly the part the
checks change. "Before" runs the wrappers of a git revision (default ``main``) exec'd from
``git show``, "after" those of the working tree, interleaved, best of many rounds.

Usage::

    PYTHONPATH=. python tools/bench_binding_checks.py [--rev main] [--rounds 15]
"""

from __future__ import annotations

import argparse
import ctypes
import subprocess
import sys
import timeit
import types
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

# (module, function, arguments): a cheap one-handle call, four integers, and the 16-argument matmul.
CASES = (
    ("cublasLt", "matmul_desc_destroy", (0x7F0000001000,)),
    ("cublasLt", "matrix_layout_create", (0, 64, 64, 64)),
    ("cusolverDn", "set_stream", (0x7F0000001000, 0x7F0000002000)),
    ("cublasLt", "matmul", (0x7F0000001000,) * 14 + (1 << 25, 0x7F0000002000)),
)


def _stub(restype, argtypes):
    """A function pointer with the binding's prototype (called like the real one: GIL released) to a
    C function that ignores its arguments and returns 0: ``PyGILState_Check`` without the GIL."""
    address = ctypes.cast(ctypes.pythonapi.PyGILState_Check, ctypes.c_void_p).value
    return ctypes.CFUNCTYPE(restype, *argtypes)(address)


def _load(module: str, source: str | None) -> types.ModuleType:
    """The generated module (``source``: the text of another revision, exec'd in the package)."""
    import importlib

    current = importlib.import_module(f"nvmath.bindings.{module}")
    if source is None:
        return current
    old = types.ModuleType(f"nvmath.bindings.{module}", current.__doc__)
    old.__package__ = "nvmath.bindings"
    exec(compile(source, f"<{module} before>", "exec"), old.__dict__)  # noqa: S102 - our own generated module
    return old


def _install_stubs(module: types.ModuleType) -> None:
    """Replace every ``_p_<symbol>`` of ``module`` by a do-nothing C function of the same prototype."""
    for name, value in list(vars(module).items()):
        if name.startswith("_p_"):
            setattr(module, name, _stub(ctypes.c_int, _argtypes(value)))


def _argtypes(stub):
    """The argtypes of a binder stub (read from its closure) or of an already made ctypes function."""
    if isinstance(stub, ctypes._CFuncPtr):
        return stub.argtypes
    for cell in stub.__closure__ or ():
        value = cell.cell_contents
        if isinstance(value, tuple) and all(isinstance(t, type) for t in value):
            return value
    raise LookupError(stub.__name__)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rev", default="main", help="the revision to compare with (default: main)")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--number", type=int, default=50_000)
    args = parser.parse_args(argv)
    sys.path.insert(0, str(REPO))
    functions = {}
    for module, name, call_args in CASES:
        text = subprocess.run(
            ["git", "show", f"{args.rev}:nvmath/bindings/{module}.py"],
            cwd=REPO, capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip
        for label, source in (("before", text), ("after", None)):
            mod = _load(module, source)
            _install_stubs(mod)
            functions[(module, name, label)] = (getattr(mod, name), call_args)
    best = dict.fromkeys(functions, float("inf"))
    for _ in range(args.rounds):
        for key, (fn, call_args) in functions.items():
            t = timeit.timeit(lambda fn=fn, a=call_args: fn(*a), number=args.number) / args.number
            best[key] = min(best[key], t)
    print(f"{'binding':36s} {'before':>9s} {'after':>9s} {'delta':>9s}")
    for module, name, _ in CASES:
        before, after = best[(module, name, "before")], best[(module, name, "after")]
        print(
            f"{module + '.' + name:36s} {before * 1e9:7.0f}ns {after * 1e9:7.0f}ns {(after - before) * 1e9:+7.0f}ns"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
