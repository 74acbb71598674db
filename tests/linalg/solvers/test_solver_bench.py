"""The `solvers` benchmark suite covers the TARGETS.md solver table (registration only; runs on the GPU machine)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def test_suite_registers_the_target_table():
    """Every op x size x dtype cell is a case, with torch, cupy and ours; LU solve also nvmath-python."""
    code = (
        "import sys; from benchmarks.registry import load_suite;"
        "cases = load_suite('solvers');"
        "print(len(cases));"
        "print(sorted({c.name.split('-')[0] for c in cases}));"
        "print(all({'nvmath','torch','cupy'} <= set(c.setups) for c in cases));"
        "print(all(('nvmath-python' in c.setups) == c.name.startswith('lu_solve') for c in cases));"
        "print([m for m in ('torch', 'cupy', 'nvmath') if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    lines = out.stdout.strip().splitlines()
    assert lines[0] == "40"
    assert lines[1] == "['cholesky', 'eigh', 'lu_solve', 'qr', 'svd']"
    assert lines[2] == "True" and lines[3] == "True"
    assert lines[4] == "[]", "setups must import their libraries lazily"
