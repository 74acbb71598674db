"""No user stream's lifetime may crash the library (nvmath-python accepts any live stream per call).

Each case runs in a child process (a use of a destroyed stream handle is a segmentation fault, which
must fail one test, not end the run): FFTs and matmuls on cupy, torch, torch external and cuda.core
streams, blocking and non-blocking, with the streams destroyed between calls while cached plans and
planner objects are still bound to them.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu

SCRIPT = Path(__file__).with_name("_stream_lifetime_script.py")
ROOT = Path(__file__).resolve().parents[2]


def _needs(module: str) -> None:
    pytest.importorskip(module)


@pytest.mark.parametrize("mode", ["blocking", "nonblocking"])
@pytest.mark.parametrize("kind", ["cupy", "torch", "torch-external", "core"])
def test_streams_destroyed_around_cached_plans_do_not_crash(kind, mode):
    """FFT / matmul plans bound to a stream that is then destroyed rebind safely and stay correct."""
    _needs("cupy" if kind == "cupy" else "torch")
    if kind == "core":
        _needs("cuda.core")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), kind, mode],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, f"rc={proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    assert "ok" in proc.stdout
