"""Living beside nvmath-python (nvmath/_coexist.py): ``import nvmath`` refuses an installation that
shares its files with nvmath-python, and nvmath-python modules we do not provide raise an
ImportError that says so and names the page of differences."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import nvmath
from nvmath import _coexist

REPO = Path(__file__).resolve().parents[1]


def _site_with_nvmath_python(tmp_path: Path, version: str = "1.0.0") -> Path:
    """A site directory holding (a link to) this nvmath package and nvmath-python's metadata."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "nvmath").symlink_to(REPO / "nvmath", target_is_directory=True)
    info = site / f"nvmath_python-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: nvmath-python\nVersion: {version}\n")
    return site


def _import_nvmath(site: Path, **env: str) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "NVMATH_ALLOW_NVMATH_PYTHON")}
    environ.update(env, PYTHONPATH=str(site))
    code = "import nvmath; print('imported', nvmath.__file__)"
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=environ, timeout=120, cwd=site.parent
    )


def test_import_refused_beside_nvmath_python(tmp_path):
    """With nvmath-python's metadata beside the package, import nvmath raises an ImportError naming
    both distributions and the fix; NVMATH_ALLOW_NVMATH_PYTHON=1 imports anyway."""
    site = _site_with_nvmath_python(tmp_path)
    out = _import_nvmath(site)
    assert out.returncode != 0
    assert "ImportError" in out.stderr and "nvmath-python 1.0.0" in out.stderr and "nvmath-kit" in out.stderr
    assert "pip uninstall -y nvmath-python nvmath-kit" in out.stderr
    allowed = _import_nvmath(site, NVMATH_ALLOW_NVMATH_PYTHON="1")
    assert allowed.returncode == 0 and "imported" in allowed.stdout


def test_check_finds_only_the_shared_directory(tmp_path):
    """The check looks next to the package only: metadata elsewhere (another environment) is fine."""
    site = _site_with_nvmath_python(tmp_path, "1.0.1")
    with pytest.raises(ImportError, match=r"nvmath-python 1\.0\.1 and nvmath-kit"):
        _coexist.check_nvmath_python(site / "nvmath")
    other = tmp_path / "elsewhere" / "nvmath"
    other.mkdir(parents=True)
    _coexist.check_nvmath_python(other)  # no metadata there: nothing raised


@pytest.mark.parametrize(
    "module",
    ["nvmath.sparse", "nvmath.tensor", "nvmath.device", "nvmath.bindings.cudss", "nvmath.bindings.curand",
     "nvmath.bindings.cusparse", "nvmath.sparse.advanced"],
)  # fmt: skip
def test_modules_we_do_not_provide_say_so(module):
    """``import nvmath.sparse`` (and the other nvmath-python modules we lack) raises an ImportError
    (not a bare ModuleNotFoundError) that says we do not provide it and names the page of differences."""
    with pytest.raises(ImportError, match="does not provide.*differences") as info:
        __import__(module)
    assert not isinstance(info.value, ModuleNotFoundError) and module.startswith(info.value.name)


def test_from_import_and_attribute_access():
    """``from nvmath.bindings import cusparse`` raises the same ImportError; ``nvmath.sparse`` is an
    AttributeError with the explanation (hasattr stays False); provided modules import as before."""
    with pytest.raises(ImportError, match="does not provide"):
        from nvmath.bindings import cusparse  # noqa: F401
    with pytest.raises(AttributeError, match="does not provide nvmath.sparse"):
        _ = nvmath.sparse
    assert not hasattr(nvmath, "tensor")
    from nvmath.bindings import cufft
    from nvmath.linalg import advanced

    assert callable(cufft.create) and callable(advanced.matmul)


def test_modules_we_provide_are_never_called_missing():
    """nvmath.distributed and its engine bindings exist here: none is in the not-provided table, the
    attribute ``nvmath.distributed`` imports the package (loading no engine), and the bindings import."""
    import importlib

    provided = ["nvmath.distributed", "nvmath.bindings.cufftMp", "nvmath.bindings.cublasMp",
                "nvmath.bindings.nvshmem", "nvmath.bindings.nccl"]  # fmt: skip
    assert not set(provided) & set(_coexist.NOT_PROVIDED)
    assert nvmath.distributed.__name__ == "nvmath.distributed"
    for name in provided[1:]:
        assert importlib.import_module(name).__name__ == name
    code = "import sys, nvmath; nvmath.distributed; print(any(m.endswith(('cufftMp', 'cublasMp')) for m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
