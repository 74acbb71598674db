"""The compiled and the pure-Python call paths give bit-identical results on the GPU: the advanced
matmul (four dtypes, execute() twice, an epilog), the generic matmul (gemm, alpha/beta, batched,
grouped) and FFT (C2C both directions, R2C), each run once per path in a subprocess
(``NVMATH_PURE_PYTHON=1`` vs the default), and ``python -m nvmath`` reports the compiled path.

Needs the extension built in place first (``python3 setup.py build_ext --inplace``); without it the
compiled cases skip with a reason.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from fastcall_probes import needs_extension

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[2]
PROGRAM = Path(__file__).with_name("call_paths_program.py")


def _env(pure: bool) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.pop("NVMATH_PURE_PYTHON", None)
    if pure:
        env["NVMATH_PURE_PYTHON"] = "1"
    return env


def _results(tmp_path: Path, pure: bool) -> dict:
    torch = pytest.importorskip("torch")
    path = tmp_path / ("pure.pt" if pure else "compiled.pt")
    done = subprocess.run(
        [sys.executable, str(PROGRAM), str(path)], env=_env(pure), cwd=ROOT, capture_output=True, text=True,
        timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return torch.load(path)


@needs_extension
def test_both_paths_give_bit_identical_results(tmp_path, torch_cuda):
    """Every result of the program is torch.equal on the two paths (same library calls, same
    arguments), and each subprocess ran on the path it was asked for."""
    torch = torch_cuda
    pure, compiled = _results(tmp_path, True), _results(tmp_path, False)
    assert pure.pop("compiled") is False and compiled.pop("compiled") is True
    assert pure.keys() == compiled.keys()
    for name in pure:
        p, c = pure[name], compiled[name]
        ps, cs = (p, c) if isinstance(p, list) else ([p], [c])
        assert len(ps) == len(cs), name
        for x, y in zip(ps, cs):
            assert x.dtype == y.dtype and x.shape == y.shape, name
            assert torch.equal(x, y), f"{name}: the compiled path's result differs from the pure path's"


def _report(pure: bool) -> dict:
    done = subprocess.run(
        [sys.executable, "-m", "nvmath", "--json"], env=_env(pure), cwd=ROOT, capture_output=True, text=True,
        timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout)["report"]["call_path"]


@needs_extension
def test_python_m_nvmath_reports_the_compiled_path(torch_cuda):
    """With the extension built, `python -m nvmath` says the compiled path is active; with
    NVMATH_PURE_PYTHON=1 it says the pure path, forced by the variable."""
    compiled, pure = _report(False), _report(True)
    assert compiled["compiled"] is True and "compiled" in compiled["detail"]
    assert pure["compiled"] is False and "NVMATH_PURE_PYTHON" in pure["detail"]

