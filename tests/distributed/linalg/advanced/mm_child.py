"""Runs a GPU check in a fresh Python process, hang-proof and diagnosable (imported as ``gpu_child`` by its tests; named apart from tests/distributed/gpu_child.py).

The child runs unbuffered with its output in files (nothing is lost to a full pipe or a kill) and a
``faulthandler`` watchdog that dumps every thread's stack and exits ``WATCHDOG_S`` seconds in, below
the parent's ``TIMEOUT_S``: a hang inside a library call fails the test with the stacks and whatever
the child printed, well inside the GPU lane's limit. A failure shows the diagnostic lines first
(cuBLASMp's log -- ``CUBLASMP_LOG_LEVEL`` is set -- NCCL warnings, errors), then the output's tail.
A child printing ``SKIP: reason`` skips the test.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[4]
TIMEOUT_S = 90
WATCHDOG_S = 75
ENV = {
    "NVSHMEM_REMOTE_TRANSPORT": "none",
    "NVSHMEM_DISABLE_NVLS": "1",
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NCCL_DEBUG": "WARN",
    "CUBLASMP_LOG_LEVEL": "5",  # errors, hints and the API trace (each call's arguments and descriptors)
}
"""The children's environment (NVLink multicast off: the GPU hosts disable it); the caller's own
values of these win, so ``CUBLASMP_LOG_LEVEL=1`` quiets the trace."""

_MARKS = ("Invalid", "invalid", "rror", "WARN", "NOT_SUPPORTED", "not supported", "Traceback", "Timeout",
          "Fatal", "ok ", "step ")  # fmt: skip
_TAIL = 6000


def _watchdog(seconds: float) -> str:
    return f"import faulthandler, sys\nfaulthandler.dump_traceback_later({seconds}, exit=True)\n"


def _report(rc: object, out: str, err: str) -> str:
    marked = [line for line in (out + "\n" + err).splitlines() if any(m in line for m in _MARKS)]
    return (
        f"child exit status {rc}\n--- diagnostic lines ({len(marked)}, last 60) ---\n"
        + "\n".join(line[:400] for line in marked[-60:])
        + f"\n--- stdout (tail) ---\n{out[-_TAIL:]}\n--- stderr (tail) ---\n{err[-_TAIL:]}"
    )


def run(
    code: str, *, timeout: float = TIMEOUT_S, watchdog: float = WATCHDOG_S, env: dict | None = None
) -> str:
    """Run ``code`` in ``python -u -c`` with :data:`ENV` (and ``env``) and the repository first on
    ``PYTHONPATH``; return its stdout. Fails the test on a nonzero exit or a timeout (with the
    diagnostics), skips it when the child printed ``SKIP:``."""
    full = {**ENV, **os.environ, **(env or {})}
    full["PYTHONPATH"] = os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])
    command = [sys.executable, "-u", "-c", _watchdog(watchdog) + code]
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        child = subprocess.Popen(command, env=full, stdout=out, stderr=err, text=True, start_new_session=True)
        try:
            rc: object = child.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, signal.SIGKILL)  # the child's own session: its helpers go too
            child.wait()
            rc = f"killed after the {timeout} s timeout (the watchdog did not fire)"
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    if "SKIP:" in stdout:
        pytest.skip(stdout.split("SKIP:", 1)[1].strip()[:500])
    if rc != 0:
        pytest.fail(_report(rc, stdout, stderr), pytrace=False)
    return stdout
