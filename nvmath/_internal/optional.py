"""Optional packages of the CPU paths: one import helper whose error names the extra to install.

scipy runs the CPU FFTs, the CPU dense solvers and the CPU structured kinds (symm / hemm) of the
generic matmul; it comes with the ``cpu`` extra. A missing package is reported where it is first
needed, by :func:`import_scipy`, with the install command and the GPU alternative.
"""

from __future__ import annotations

import importlib
from types import ModuleType

__all__ = ["import_scipy", "scipy_missing_message"]


def scipy_missing_message(purpose: str) -> str:
    """The message for a missing scipy: what needs it, how to install it, what else to do."""
    return (
        f"{purpose} needs scipy, which is not installed: pip install scipy, or nvmath-kit's 'cpu' extra "
        "(pip install -e '.[cpu]' in a checkout); or run it on the GPU with execution='cuda'"
    )


def import_scipy(submodule: str, purpose: str, error: type[Exception] = ImportError) -> ModuleType:
    """Import ``scipy.<submodule>``; without scipy raise ``error`` (an ``ImportError`` by default) with
    :func:`scipy_missing_message`.

    Args:
        submodule: e.g. ``"fft"``, ``"linalg.blas"``.
        purpose: what needs it, e.g. ``"CPU execution of FFTs"`` (starts the message).
        error: the exception type to raise (the callers keep the types they documented).
    """
    try:
        return importlib.import_module(f"scipy.{submodule}")
    except ImportError as exc:
        raise error(scipy_missing_message(purpose)) from exc
