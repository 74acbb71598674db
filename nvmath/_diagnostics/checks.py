"""The self-test checks, one small function per feature; each area appends its own."""

from __future__ import annotations

import importlib

import numpy as np

from nvmath._diagnostics.selftest import Context, check

PUBLIC_MODULES = ("nvmath", "nvmath.memory", "nvmath.bindings", "nvmath.linalg", "nvmath.linalg.advanced", "nvmath.fft")


@check("import public modules")
def _imports(ctx: Context) -> str:
    for name in PUBLIC_MODULES:
        importlib.import_module(name)
    return f"{len(PUBLIC_MODULES)} modules"
