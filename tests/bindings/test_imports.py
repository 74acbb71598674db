"""Importing the bindings: every module imports, cheaply, without loading any library or numpy,
and each module's public surface is exactly its ``__all__``."""

from __future__ import annotations

import enum
import importlib
import subprocess
import sys
import types

import pytest

MATH = ("cublasLt", "cublas", "cufft", "cusolverDn", "cusolver")
DISTRIBUTED = ("nccl", "nvshmem", "cublasMp", "cufftMp")  # imported on first attribute access
MODULES = MATH + DISTRIBUTED


@pytest.mark.parametrize("name", MODULES)
def test_module_imports(name: str) -> None:
    """Each generated module imports and says it is generated, from which headers."""
    module = importlib.import_module(f"nvmath.bindings.{name}")
    assert module.__doc__ and "generated" in module.__doc__
    assert isinstance(module.HEADER_VERSION, str) and module.HEADER_VERSION.count(".") == 2


def test_package_imports_all_modules() -> None:
    """``nvmath.bindings`` exposes the five math modules and, on attribute access, the four
    distributed ones."""
    from nvmath import bindings

    assert sorted(bindings.__all__) == sorted(MODULES)
    for name in MODULES:
        assert isinstance(getattr(bindings, name), types.ModuleType)
    with pytest.raises(AttributeError, match="no_such_module"):
        bindings.no_such_module  # noqa: B018


def test_import_skips_distributed_modules() -> None:
    """A fresh ``import nvmath.bindings`` does not import the distributed engines' modules; touching
    ``nvmath.bindings.nccl`` imports it and still loads no library."""
    code = (
        "import sys, nvmath.bindings as b\n"
        f"assert not [m for m in {DISTRIBUTED!r} if 'nvmath.bindings.' + m in sys.modules]\n"
        "b.nccl, b.nvshmem, b.cublasMp, b.cufftMp\n"
        "from nvmath.bindings import _loader\n"
        "assert _loader.loaded_libraries() == {}, _loader.loaded_libraries()\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_import_loads_nothing() -> None:
    """A fresh ``import nvmath.bindings`` maps no CUDA library and imports neither pathfinder nor numpy."""
    code = (
        "import sys, nvmath\n"
        "before = set(sys.modules)\n"
        "import nvmath.bindings\n"
        "from nvmath.bindings import _loader\n"
        "assert _loader.loaded_libraries() == {}, _loader.loaded_libraries()\n"
        "new = set(sys.modules) - before\n"
        "bad = [m for m in ('numpy', 'cuda.pathfinder', 'cuda.bindings') if m in new]\n"
        "assert not bad, bad\n"
        "maps = open('/proc/self/maps').read() if sys.platform == 'linux' else ''\n"
        "assert not any(lib in maps for lib in ('libcublas', 'libcufft', 'libcusolver', 'libcuda.so')), maps\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_import_is_cheap() -> None:
    """Importing the five modules takes well under a second (about 40 ms with bytecode cached)."""
    code = "import time; t = time.perf_counter(); import nvmath.bindings; print(time.perf_counter() - t)"
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)  # warm the bytecode cache
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    assert float(out.stdout) < 1.0


@pytest.mark.parametrize("name", MODULES)
def test_all_matches_public_names(name: str) -> None:
    """``__all__`` is sorted, names only existing objects, and lists every public function and enum."""
    module = importlib.import_module(f"nvmath.bindings.{name}")
    assert module.__all__ == sorted(module.__all__)
    for attr in module.__all__:
        assert not attr.startswith("_")
        getattr(module, attr)
    public = {
        attr
        for attr, value in vars(module).items()
        if not attr.startswith("_")
        and (
            isinstance(value, types.FunctionType)
            or (isinstance(value, type) and issubclass(value, (enum.Enum, Exception)))
        )
    }
    public -= {"annotations"}
    assert public <= set(module.__all__), public - set(module.__all__)
