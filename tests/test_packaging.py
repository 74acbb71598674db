"""pyproject.toml's dependency ranges: the CUDA library wheels and the torch / cupy extras are capped.

Installing an extra must not move the NVIDIA wheels to a version the project did not test: every
``nvidia-*`` dependency and the torch and cupy extras carry a lower and an upper bound.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

PYPROJECT = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())
_REQ = re.compile(r"^(?P<name>[A-Za-z0-9_.-]+)(?P<spec>[^;]*)")


def _spec(requirement: str) -> tuple[str, str]:
    m = _REQ.match(requirement.strip())
    return m["name"], m["spec"].replace(" ", "")


def _capped(requirements: list[str], prefix: str) -> list[tuple[str, str]]:
    return [_spec(r) for r in requirements if _spec(r)[0].startswith(prefix)]


@pytest.mark.parametrize(
    ("group", "prefix"),
    [("dependencies", "nvidia-"), ("torch", "torch"), ("cupy", "cupy")],
)
def test_dependency_ranges_have_both_bounds(group, prefix):
    """Each CUDA wheel and the torch / cupy extras have a >= and a < bound (a tested range)."""
    project = PYPROJECT["project"]
    reqs = project["dependencies"] if group == "dependencies" else project["optional-dependencies"][group]
    found = _capped(reqs, prefix)
    assert found, f"no {prefix}* requirement in {group}"
    for name, spec in found:
        assert ">=" in spec and "<" in spec.replace("<=", ""), f"{name}{spec} in {group} needs a tested range"


def test_the_tested_versions_are_inside_the_ranges():
    """The versions of the GPU machine (cuBLAS 13.1, cuFFT 12.0, cuSOLVER 12.0, torch 2.11) and CI's torch
    2.13 satisfy the ranges."""
    packaging = pytest.importorskip("packaging.requirements")
    project = PYPROJECT["project"]
    reqs = {
        r.name: r
        for r in map(packaging.Requirement, project["dependencies"] + project["optional-dependencies"]["torch"])
    }
    tested = {"nvidia-cublas": "13.1.0.3", "nvidia-cufft": "12.0.0.61", "nvidia-cusolver": "12.0.4.66",
              "torch": "2.11.0", "cuda-bindings": "13.3.1"}  # fmt: skip
    for name, version in tested.items():
        assert reqs[name].specifier.contains(version), f"{name} {version} is outside {reqs[name].specifier}"
    assert reqs["torch"].specifier.contains("2.13.0")


def test_make_venv_shows_its_install():
    """``make run`` / ``make test`` create the venv with pip's own output (no ``-q``) and announce each step."""
    import subprocess

    root = Path(__file__).resolve().parents[1]
    proc = subprocess.run(
        ["make", "-n", "venv", "VENV=/nonexistent-venv-for-dry-run"], cwd=root, capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stderr
    installs = [line for line in proc.stdout.splitlines() if "pip install" in line]
    assert installs and not any(" -q" in line for line in installs), installs
    assert "[3/3] installing this checkout" in proc.stdout
