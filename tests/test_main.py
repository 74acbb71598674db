"""``python -m nvmath`` end to end, in a subprocess as a user would run it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_main_runs_report_and_selftest_and_passes():
    """The main job prints the report and the self-test summary and exits 0 on this machine."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-m", "nvmath"], capture_output=True, text=True, env=env, timeout=300)
    assert "nvmath environment" in proc.stdout
    assert "self-test" in proc.stdout
    assert " failed, " in proc.stdout.splitlines()[-1]
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]


def test_main_rejects_an_unknown_flag_with_status_2():
    """``python -m nvmath --bogus`` is a usage error (exit 2, message on stderr), not a report run."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run(
        [sys.executable, "-m", "nvmath", "--bogus"], capture_output=True, text=True, env=env, timeout=120
    )
    assert proc.returncode == 2 and proc.stdout == ""
    assert "unrecognized arguments: --bogus" in proc.stderr


def test_import_makes_no_driver_call():
    """Importing nvmath and every public subpackage never initializes the CUDA driver."""
    code = (
        "import cuda.bindings.driver as d\n"
        "def boom(*a, **k): raise SystemExit('driver touched at import')\n"
        "d.cuInit = boom\n"
        "import nvmath, nvmath.bindings, nvmath.linalg, nvmath.linalg.advanced, nvmath.fft, nvmath.memory\n"
        "import sys; assert 'torch' not in sys.modules and 'cupy' not in sys.modules, 'heavy import'\n"
        "print('ok')\n"
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert proc.stdout.strip() == "ok", proc.stderr


def test_top_level_names_of_nvmath_python_exist():
    """nvmath exports the top-level names nvmath-python 1.0 code uses (enums and memory protocols)."""
    import nvmath

    for name in ("ComputeType", "CudaDataType", "LibraryPropertyType", "BaseCUDAMemoryManager",
                 "BaseCUDAMemoryManagerAsync", "MemoryPointer", "bindings", "fft", "linalg", "memory"):
        assert hasattr(nvmath, name), name
    assert nvmath.CudaDataType.CUDA_R_32F == 0 and nvmath.CudaDataType.CUDA_R_16BF == 14 and nvmath.ComputeType.COMPUTE_32F == 68
