"""Every script in examples/linalg/advanced runs to completion (GPU-only ones are GPU tests)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = sorted((ROOT / "examples" / "linalg" / "advanced").glob("*.py"))


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
    """The examples folder is not empty."""
    assert len(EXAMPLES) >= 6


@pytest.mark.parametrize("path", list(_params()))
def test_example_runs(path):
    """The example exits 0 (77 means it skipped itself, e.g. numba cannot compile callbacks)."""
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
