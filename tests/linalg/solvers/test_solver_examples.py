"""Every script in examples/linalg/solvers runs to completion (GPU ones are GPU tests; exit 77 = skip)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = sorted((ROOT / "examples" / "linalg" / "solvers").glob("*.py"))



def _requires(path: Path) -> set[str]:
    for line in path.read_text().splitlines()[:12]:
        if line.strip().startswith("# requires:"):
            return {w.strip() for w in line.split(":", 1)[1].split(",")}
    return set()


def _params():
    for path in EXAMPLES:
        marks = [pytest.mark.gpu] if "gpu" in _requires(path) else []
        yield pytest.param(path, id=path.stem, marks=marks)


def test_there_are_examples():
    """The solver examples folder holds the five examples."""
    assert len(EXAMPLES) >= 5


@pytest.mark.parametrize("path", list(_params()))
def test_solver_example_runs(path):
    """The example exits 0 (77 means it skipped itself)."""
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
    if proc.returncode == 77:
        pytest.skip(proc.stdout.strip()[-500:])
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
