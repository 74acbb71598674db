"""What a self-test check or an example needs, and how to get what is missing.

A *need* is ``"gpu"`` (an NVIDIA driver and at least one device), the import name of an optional
package (``"scipy"``, ``"torch"``, ``"cupy"``, ``"numba"``, ``"ml_dtypes"``), or an NVIDIA library of
the ``distributed`` extra (``"cufftMp"``, ``"cublasmp"``, ``"nvshmem_host"``, ``"nccl"``: loaded to
find out). :func:`unmet` says why
a list of needs is not met, with the install hint, without importing the packages (except torch or
cupy on a machine with a GPU, to ask them whether they can use it). Examples call :func:`require`,
which exits with status 77 (the "skipped" status of the examples runner) and a message.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Iterable

#: Optional packages by import name: (distribution to install, the ``nvmath-kit`` extra that has it).
OPTIONAL: dict[str, tuple[str, str]] = {
    "scipy": ("scipy", "cpu"),
    "torch": ("torch", "torch"),
    "cupy": ("cupy-cuda13x", "cupy"),
    "numba": ("numba-cuda", "callbacks"),
    "ml_dtypes": ("ml-dtypes", "dtypes"),
}

#: NVIDIA libraries a need may name (the loader's names): the ``distributed`` extra's wheels.
LIBRARIES = frozenset({"cufftMp", "cublasmp", "nvshmem_host", "nccl"})

#: The exit status with which an example says it skipped itself.
SKIP_EXIT_CODE = 77


def install_hint(module: str) -> str:
    """How to install the optional package imported as ``module``."""
    dist, extra = OPTIONAL.get(module, (module, None))
    if extra is None:
        return f"pip install {dist}"
    return f"pip install {dist}, or the '{extra}' extra: pip install -e '.[{extra}]' in a checkout"


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def _gpu() -> bool:
    from nvmath._internal import devices

    return devices.gpu_available()


def _package_sees_gpu(module: str) -> str | None:
    """Why ``module`` (torch or cupy, installed) cannot use the GPU, or ``None`` when it can."""
    try:
        mod = importlib.import_module(module)
        if module == "torch" and not mod.cuda.is_available():
            return "this torch has no CUDA support (a CPU build?): install a CUDA build of torch"
        if module == "cupy":
            mod.cuda.runtime.getDeviceCount()
    except Exception as exc:  # noqa: BLE001 - any failure means "cannot use the GPU"
        return f"{module} cannot use the GPU: {type(exc).__name__}: {exc}"
    return None


def _library_missing(name: str) -> str | None:
    """Why the NVIDIA library ``name`` cannot be loaded (the loader's message), or ``None``."""
    from nvmath._errors import LibraryNotFoundError
    from nvmath.bindings import _loader

    try:
        _loader.library_info(name)
    except LibraryNotFoundError as exc:
        return f"needs {name}, which cannot be loaded ({exc})"
    return None


def unmet(needs: Iterable[str]) -> str | None:
    """Why ``needs`` are not met on this machine (the first unmet one), or ``None`` when they all are."""
    needs = tuple(needs)
    for need in needs:
        if need == "gpu":
            if not _gpu():
                return "needs an NVIDIA GPU and driver, and this machine has none"
        elif need in LIBRARIES:
            if why := _library_missing(need):
                return why
        elif not _installed(need):
            return f"needs {need}, which is not installed ({install_hint(need)})"
    if "gpu" in needs:
        for module in ("torch", "cupy"):
            if module in needs and (why := _package_sees_gpu(module)):
                return why
    return None


def require(*needs: str) -> None:
    """Exit with status 77 and a message saying what is missing unless every need is met.

    For the examples: ``require("gpu", "torch")`` before ``import torch`` makes a GPU example skip
    cleanly on a machine without a GPU (or without torch) instead of failing half-way.
    """
    why = unmet(needs)
    if why is not None:
        print(f"skipped: this example {why}")
        sys.exit(SKIP_EXIT_CODE)
