"""Shared helpers for the ``test_*_examples.py`` modules: run each example script in a subprocess.

An example states what it needs once, in code, before importing it:
``require("gpu", "torch")`` (:func:`nvmath._diagnostics.requirements.require`) exits with code 77
and a message where a need is not met. An example needing ``gpu`` is parametrized with
``pytest.mark.gpu`` (a ``# requires: gpu`` line among its first lines is read too); an example that
exits with code 77 skipped itself (e.g. numba cannot compile callbacks).
:func:`example_tests` makes the two tests of one examples folder.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: Exit code with which an example reports that it skipped itself.
SKIP_EXIT_CODE = 77


def example_paths(*folder: str) -> list[Path]:
    """The example scripts under ``examples/<folder...>``, sorted; helper modules the examples
    import (a leading underscore, e.g. ``_launch.py``) are not examples."""
    return sorted(p for p in ROOT.joinpath("examples", *folder).glob("*.py") if not p.name.startswith("_"))


def require_calls(path: Path) -> list[tuple[int, set[str]]]:
    """``(line, needs)`` of each top-level ``require(...)`` call of the example at ``path``."""
    calls = []
    for node in ast.parse(path.read_text()).body:
        call = node.value if isinstance(node, ast.Expr) else None
        if isinstance(call, ast.Call) and getattr(call.func, "id", None) == "require":
            calls.append((node.lineno, {a.value for a in call.args if isinstance(a, ast.Constant)}))
    return calls


def requires(path: Path) -> set[str]:
    """What the example needs: the arguments of its ``require(...)`` calls and any ``# requires:`` line."""
    needs = set().union(*(n for _, n in require_calls(path)))
    for line in path.read_text().splitlines()[:12]:
        if line.strip().startswith("# requires:"):
            needs |= {w.strip() for w in line.split(":", 1)[1].split(",")}
    return needs


def example_params(paths: list[Path]) -> list:
    """One ``pytest.param`` per example, id'd by its stem and marked ``gpu`` where it requires one."""
    params = []
    for path in paths:
        marks = [pytest.mark.gpu] if "gpu" in requires(path) else []
        params.append(pytest.param(path, id=path.stem, marks=marks))
    return params


def run_script(path: Path, **env_overrides: str) -> subprocess.CompletedProcess:
    """Run the example in a fresh interpreter from the repository root, the checkout on PYTHONPATH."""
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    )
    env.update(env_overrides)
    return subprocess.run(
        [sys.executable, str(path)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def run_example(path: Path) -> None:
    """Run the example; skip the test on exit code 77, fail it on any other non-zero exit."""
    proc = run_script(path)
    if proc.returncode == SKIP_EXIT_CODE:
        pytest.skip(proc.stdout.strip()[-500:])
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]


def example_tests(*folder: str, minimum: int) -> tuple[Callable[[], None], Callable[[Path], None]]:
    """The tests of ``examples/<folder...>``: it holds at least ``minimum`` scripts; each one runs.

    Assign them to ``test_*`` names in a test module for pytest to collect them there.
    """
    paths = example_paths(*folder)

    def test_there_are_examples() -> None:
        """The examples folder holds at least ``minimum`` examples."""
        assert len(paths) >= minimum, f"examples/{'/'.join(folder)} holds {len(paths)} scripts"

    @pytest.mark.parametrize("path", example_params(paths))
    def test_example_runs(path: Path) -> None:
        """The example exits 0 (77 means it skipped itself, e.g. numba cannot compile callbacks)."""
        run_example(path)

    return test_there_are_examples, test_example_runs
