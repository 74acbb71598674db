"""The examples of examples/distributed: each runs as one process (GPU lane; exit 77 = skipped, e.g.
without the [distributed] wheels), and under ``torchrun`` / ``mpirun`` with as many processes as
there are GPUs (at most 2; ``NVMATH_TEST_NPROC`` overrides; NCCL and cuBLASMp need one GPU per
process, so a one-GPU machine runs one)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from example_runner import ROOT, SKIP_EXIT_CODE, example_params, example_paths, example_tests

test_there_are_examples, test_example_runs = example_tests("distributed", minimum=3)

ENV = {"NVSHMEM_REMOTE_TRANSPORT": "none", "NVSHMEM_DISABLE_NVLS": "1", "NCCL_NVLS_ENABLE": "0",
       "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1"}  # fmt: skip


def _nproc() -> int:
    if "NVMATH_TEST_NPROC" in os.environ:
        return int(os.environ["NVMATH_TEST_NPROC"])
    import torch

    return max(1, min(2, torch.cuda.device_count()))


def _launch(command: list[str]) -> None:
    env = {
        **os.environ,
        **ENV,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    proc = subprocess.run(
        command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False
    )
    if proc.returncode == SKIP_EXIT_CODE or "skipped:" in proc.stdout:
        pytest.skip(proc.stdout.strip()[-500:])
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert ": ok" in proc.stdout, proc.stdout[-2000:] + proc.stderr[-3000:]


def test_helper_modules_are_not_examples():
    """``_launch.py`` (the shared start-up the examples import) is neither run as an example nor
    launched: it prints nothing and would fail the launcher test's ": ok" check."""
    names = [p.name for p in example_paths("distributed")]
    assert "_launch.py" not in names and len(names) >= 3, names


@pytest.mark.parametrize("path", example_paths("distributed"), ids=lambda p: p.stem)
def test_every_example_reports_ok(path: Path):
    """Each example's rank 0 prints a line ending in ": ok" (what the launcher test looks for; the
    DTensor example's "...: forward and gradients ok" failed it under torchrun and mpirun)."""
    source = path.read_text()
    assert ': ok")' in source, f"{path.name} prints no line ending in ': ok'"


@pytest.mark.gpu
@pytest.mark.parametrize("path", example_params(example_paths("distributed")))
@pytest.mark.parametrize("launcher", ["torchrun", "mpirun"])
def test_example_under_launcher(path: Path, launcher: str):
    """The example passes under torchrun / mpirun with one process per GPU (skipped without mpirun)."""
    n = _nproc()
    if launcher == "torchrun":
        command = [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            f"--nproc-per-node={n}",
            str(path),
        ]
    else:
        mpirun = shutil.which("mpirun")
        if mpirun is None:
            pytest.skip("mpirun is not installed here (apt-get install openmpi-bin; pip install mpi4py)")
        command = [mpirun, "--allow-run-as-root", "--oversubscribe", "-n", str(n), sys.executable, str(path)]
    _launch(command)
