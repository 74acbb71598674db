"""Helpers of the stateless matmuls' compiled-hit tests (``tests/linalg/*/test__matmul_hit.py``,
``tests/_internal/test_compiled_hits_gpu.py``, ``tests/torch/test__linear_hit*.py``): a recording C function in front of an emulated library
entry point, and the views of a ``StatelessHits`` table the tests compare."""

from __future__ import annotations

import ctypes
import sys
from collections.abc import Callable
from typing import Any


def recording_c_function(nargs: int, emulation: Callable[..., Any], calls: list, status: list | None = None):
    """A real C function ``int f(uint64_t x0, ..., x{nargs-1})`` (a ctypes callback, so the launches'
    callers are compiled) that appends its arguments to ``calls`` and returns ``status[0]`` when that is
    nonzero, else runs ``emulation`` and returns 0 (or the status it returns). Keep it alive while set."""

    def record(*args: int) -> int:
        calls.append(args)
        if status and status[0]:
            return status[0]
        return emulation(*args) or 0

    return ctypes.CFUNCTYPE(ctypes.c_int, *([ctypes.c_uint64] * nargs))(record)


def force_compiled_path(module: Any, hits: Any, monkeypatch: Any) -> Any:
    """The compiled path of the stateless matmul of ``module`` (its ``_stateless``) with table ``hits``,
    also under ``NVMATH_PURE_PYTHON=1`` (these tests test the compiled hit): the compiled caller, offers
    on, a new table, and the public entry that asks it in every nvmath module exporting the function (the
    pure path exports the checked function itself, see ``compiled_hits.public_entry``). Returns the
    public function."""
    from fastcall_probes import FastCall

    from nvmath._internal import compiled_hits, fastpath

    monkeypatch.setattr(fastpath, "_COMPILED", FastCall)
    monkeypatch.setattr(module, "_OFFER", True)
    monkeypatch.setattr(hits, "table", None)
    public = module.matmul
    if getattr(public, "__wrapped__", None) is not None:
        return public
    monkeypatch.setattr(compiled_hits, "ENABLED", True)
    entry = compiled_hits.public_entry(public, hits)
    for name, mod in list(sys.modules.items()):
        if (name == "nvmath" or name.startswith("nvmath.")) and getattr(mod, "matmul", None) is public:
            monkeypatch.setattr(mod, "matmul", entry)
    return entry


def served(hits: Any) -> int:
    """Calls the table of ``hits`` (a ``StatelessHits``) served since its counts were last folded (no
    ``stats`` read, no plan-cache miss in between)."""
    table = hits.table
    return 0 if table is None else sum(e.hits for e in table.entries())


def on_python_path(hits: Any, call: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``call(*args, **kwargs)`` with the table of ``hits`` switched off (the Python path)."""
    table, hits.table = hits.table, None
    try:
        return call(*args, **kwargs)
    finally:
        hits.table = table


def spy_python(module: Any, monkeypatch: Any) -> list:
    """A list that gets one item per call of ``module``'s ``wants_torch`` (the first step of its stateless
    ``matmul`` after the table: the calls that reach the Python path)."""
    seen: list = []
    wants = module.wants_torch
    monkeypatch.setattr(module, "wants_torch", lambda *args: seen.append(1) or wants(*args))
    return seen


def install_linear_hit_fake(torch_fakes: Any, monkeypatch: Any, status: list) -> tuple[Any, list]:
    """``(nvmath.torch, calls)`` of the compiled Linear hit's tests (``tests/torch/test__linear_hit*.py``):
    the fake GPU as package "torch" with the compiled path on; ``calls`` lists the emulated
    cublasLtMatmul's calls, each reached through a C function returning ``status[0]`` when nonzero."""
    from fastcall_probes import FastCall

    from nvmath._internal import fastpath
    from nvmath.bindings import cublasLt

    monkeypatch.setattr(fastpath, "_COMPILED", FastCall)
    nt = torch_fakes.install_as_torch(monkeypatch)
    calls: list = []
    cfunc = recording_c_function(16, cublasLt._p_cublasLtMatmul, calls, status)
    monkeypatch.setattr(cublasLt, "_p_cublasLtMatmul", cfunc)
    return nt, calls


def aligned_tensor(torch: Any, *shape: int, dtype: Any = None, offset: int = 0) -> Any:
    """A random tensor whose data pointer is 256-byte aligned (plus ``offset`` elements)."""
    dtype = dtype or torch.float32
    n = 1
    for e in shape:
        n *= e
    flat = torch.randn(n + 256 + offset, dtype=dtype)
    skip = (-flat.data_ptr() % 256) // flat.element_size() + offset
    return flat[skip : skip + n].view(*shape)
