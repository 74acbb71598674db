"""Shared helpers for the ``test_*_examples.py`` modules: run each example script in a subprocess.

An example whose first lines hold ``# requires: gpu`` is parametrized with ``pytest.mark.gpu``;
other names on that line are packages (``# requires: torch``): without them the example is skipped
with the reason. An example that exits with code 77 skipped itself (e.g. numba cannot compile
callbacks).
:func:`example_tests` makes the two tests of one examples folder.
"""

from __future__ import annotations

import importlib.util
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
    """The example scripts under ``examples/<folder...>``, sorted."""
    return sorted(ROOT.joinpath("examples", *folder).glob("*.py"))


def _requires(path: Path) -> set[str]:
    for line in path.read_text().splitlines()[:12]:
        if line.strip().startswith("# requires:"):
            return {w.strip() for w in line.split(":", 1)[1].split(",")}
    return set()


def example_params(paths: list[Path]) -> list:
    """One ``pytest.param`` per example, id'd by its stem, marked ``gpu`` where it requires one and
    skipped (with the reason) where a package it requires (``# requires: torch``) is not installed."""
    params = []
    for path in paths:
        requires = _requires(path)
        marks = [pytest.mark.gpu] if "gpu" in requires else []
        for module in sorted(requires - {"gpu"}):
            if importlib.util.find_spec(module) is None:
                marks.append(pytest.mark.skip(reason=f"{path.name} needs {module}, which is not installed"))
        params.append(pytest.param(path, id=path.stem, marks=marks))
    return params


def run_example(path: Path) -> None:
    """Run the example; skip the test on exit code 77, fail it on any other non-zero exit."""
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    )
    proc = subprocess.run(
        [sys.executable, str(path)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
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
