"""Living beside nvmath-python: the import-name clash and the modules we do not provide.

Both this package (distribution ``nvmath-kit``) and NVIDIA's ``nvmath-python`` install the import
package ``nvmath``. Installed into the same environment they overwrite each other's files, and
uninstalling one deletes the other's. :func:`check_nvmath_python` runs when ``import nvmath``
starts: it looks for nvmath-python's distribution metadata next to this package (one directory,
through :mod:`importlib.metadata`) and raises an ImportError naming both distributions and the fix.
``NVMATH_ALLOW_NVMATH_PYTHON=1`` skips the check.

nvmath-python 1.0 modules this package does not provide (``nvmath.sparse``, ``nvmath.tensor``,
``nvmath.device``, bindings such as ``nvmath.bindings.cusparse``) raise :class:`NotProvidedError`, an
``ImportError`` that says so and names the documentation page listing every difference
(``docs/differences.rst``). The finder doing it sits at the end of ``sys.meta_path``: a module that
exists on disk is always found first.
"""

from __future__ import annotations

import importlib.metadata
import os
import sys
from pathlib import Path
from typing import Any

__all__ = ["NOT_PROVIDED", "NotProvidedError", "check_nvmath_python", "install_finder"]

DISTRIBUTION = "nvmath-kit"
DIFFERENCES_PAGE = "'Differences from nvmath-python' (docs/differences.rst)"

NOT_PROVIDED: dict[str, str] = {
    "nvmath.sparse": "sparse matmul and the cuDSS direct solver",
    "nvmath.tensor": "cuTENSOR contractions",
    "nvmath.device": "device-side APIs (cuBLASDx, cuFFTDx, cuSOLVERDx, cuRAND device)",
    "nvmath.bindings.cudss": "cuDSS bindings",
    "nvmath.bindings.curand": "cuRAND bindings",
    "nvmath.bindings.cusparse": "cuSPARSE bindings",
    "nvmath.bindings.cusparseLt": "cuSPARSELt bindings",
    "nvmath.bindings.cutensor": "cuTENSOR bindings",
    "nvmath.bindings.cusolverSp": "cuSOLVER sparse bindings",
    "nvmath.bindings.cusolverMp": "cuSOLVERMp bindings",
    "nvmath.bindings.nvpl": "NVPL bindings",
    "nvmath.bindings.mathdx": "libmathdx bindings",
}
"""nvmath-python 1.0 modules this package does not provide -> what they hold."""


class NotProvidedError(ImportError):
    """An nvmath-python module this package does not provide.

    An ImportError, deliberately not a ``ModuleNotFoundError``: ``from nvmath.bindings import
    cusparse`` would otherwise turn it into a bare "cannot import name" without the explanation.
    """


def _not_provided_message(fullname: str, top: str) -> str:
    return (
        f"{fullname}: {DISTRIBUTION} does not provide {top} ({NOT_PROVIDED[top]}), a module of "
        f"nvmath-python 1.0; see the documentation page {DIFFERENCES_PAGE} for every difference. "
        "Use nvmath-python itself (in another environment: the two cannot be installed together) "
        "for this functionality."
    )


class _NotProvidedFinder:
    """A meta-path finder, last in ``sys.meta_path``: raises :class:`NotProvidedError` for
    :data:`NOT_PROVIDED` modules (and their submodules) that no other finder found."""

    @staticmethod
    def find_spec(fullname: str, path: Any = None, target: Any = None) -> None:
        if not fullname.startswith("nvmath."):
            return None
        for top in NOT_PROVIDED:
            if fullname == top or fullname.startswith(top + "."):
                raise NotProvidedError(_not_provided_message(fullname, top), name=fullname)
        return None


def install_finder() -> None:
    """Append the finder of :data:`NOT_PROVIDED` modules to ``sys.meta_path`` (once)."""
    if not any(isinstance(f, _NotProvidedFinder) for f in sys.meta_path):
        sys.meta_path.append(_NotProvidedFinder())


def attribute_error(name: str) -> AttributeError:
    """The error for ``nvmath.<name>`` when ``name`` is a module of nvmath-python we do not provide."""
    top = f"nvmath.{name}"
    if top in NOT_PROVIDED:
        return AttributeError(_not_provided_message(top, top))
    return AttributeError(f"module 'nvmath' has no attribute {name!r}")


def check_nvmath_python(package_dir: str | os.PathLike[str]) -> None:
    """Refuse to import when nvmath-python is installed into the same ``nvmath`` directory.

    Args:
        package_dir: the directory of this ``nvmath`` package; nvmath-python's metadata is looked
            for in its parent (the site-packages both would share).

    Raises:
        ImportError: nvmath-python's distribution metadata is there (the message names both
            distributions and the fix).
    """
    if os.environ.get("NVMATH_ALLOW_NVMATH_PYTHON"):
        return
    site = Path(package_dir).absolute().parent
    try:
        other = next(iter(importlib.metadata.distributions(name="nvmath-python", path=[str(site)])), None)
    except Exception:  # noqa: BLE001 - unreadable metadata: nothing to report
        return
    if other is None:
        return
    version = other.metadata.get("Version", "?") if other.metadata is not None else "?"
    raise ImportError(
        f"nvmath-python {version} and {DISTRIBUTION} are both installed in {site}: both install the "
        f"import package 'nvmath' into {Path(package_dir).absolute()}, so each overwrites the other's "
        f"files (and uninstalling one deletes the other's). Fix: pip uninstall -y nvmath-python "
        f"{DISTRIBUTION} && pip install {DISTRIBUTION} (or use nvmath-python alone, in another "
        "environment). Set NVMATH_ALLOW_NVMATH_PYTHON=1 to import anyway."
    )
