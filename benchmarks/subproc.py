"""Running a peer that shares our import name (nvmath-python) in its own process.

The child must never see our source tree: it runs ``benchmarks/_child.py`` *by file path* from a
temporary copy of the harness, with ``PYTHONPATH`` = the peer's directory + that copy only (the
timing helpers travel as ``benchmarks/_timing.py``), in a temporary working directory. The child
also drops our repository root from ``sys.path`` and refuses to run if ``nvmath`` still resolves
into it. Results come back as JSON in a file.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = [
    "BENCH_DIR",
    "REPO_ROOT",
    "TIMING_FILE",
    "build_harness_copy",
    "child_command",
    "child_env",
    "run_peer",
]

BENCH_DIR = Path(__file__).resolve().parent
REPO_ROOT = BENCH_DIR.parent
TIMING_FILE = REPO_ROOT / "nvmath" / "_internal" / "timing.py"


def build_harness_copy(dest: Path, *, source: Path = BENCH_DIR, timing_file: Path = TIMING_FILE) -> Path:
    """Copy the harness's ``.py`` files (and the timing helpers) into ``dest/benchmarks``; return ``dest``."""
    pkg = Path(dest) / "benchmarks"
    for sub in ("", "suites"):
        (pkg / sub).mkdir(parents=True, exist_ok=True)
        for f in sorted((Path(source) / sub).glob("*.py")):
            shutil.copy2(f, pkg / sub / f.name)
    if not (pkg / "_timing.py").exists():
        shutil.copy2(timing_file, pkg / "_timing.py")
    return Path(dest)


def child_env(peer_path: Path, harness_root: Path, base: dict[str, str] | None = None) -> dict[str, str]:
    """The child's environment: ``PYTHONPATH`` holds only the peer's dir and the harness copy.

    Directories in ``$NVMATH_BENCH_CHILD_PATH`` (``os.pathsep``-separated) go first: e.g. a numpy that
    numba-cuda can compile callbacks with.
    """
    env = dict(os.environ if base is None else base)
    extra = [p for p in env.get("NVMATH_BENCH_CHILD_PATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join(
        [*extra, str(Path(peer_path).resolve()), str(Path(harness_root).resolve())]
    )
    env["PYTHONNOUSERSITE"] = "1"
    env["PYTHONUNBUFFERED"] = "1"
    env.pop("PYTHONSTARTUP", None)
    return env


def child_command(
    harness_root: Path,
    *,
    suite: str,
    lib: str,
    out_json: Path,
    forbid: Sequence[Path],
    quick: bool = False,
    pattern: str | None = None,
    device_id: int = 0,
    seed: int = 1234,
    probe: bool = False,
    python: str = sys.executable,
) -> list[str]:
    """The command line that runs the child runner by file path."""
    cmd = [
        python,
        str(Path(harness_root) / "benchmarks" / "_child.py"),
        "--suite",
        suite,
        "--lib",
        lib,
        "--out",
        str(out_json),
        "--device",
        str(device_id),
        "--seed",
        str(seed),
    ]
    for path in forbid:
        cmd += ["--forbid", str(Path(path).resolve())]
    if quick:
        cmd.append("--quick")
    if pattern:
        cmd += ["--cases", pattern]
    if probe:
        cmd.append("--probe")
    return cmd


def run_peer(
    suite: str,
    lib: str,
    peer_path: Path,
    *,
    quick: bool = False,
    pattern: str | None = None,
    device_id: int = 0,
    seed: int = 1234,
    probe: bool = False,
    timeout: float | None = None,
    forbid: Sequence[Path] = (REPO_ROOT,),
) -> dict[str, Any]:
    """Run ``suite`` for ``lib`` in a child process; return its JSON reply.

    ``timeout`` (seconds; None: none) kills the child; a reply it wrote before is still returned.

    Raises:
        RuntimeError: the child failed (its stderr tail is in the message), wrote no reply or did not
            reply within ``timeout``.
    """
    peer_path = Path(peer_path)
    if not peer_path.is_dir():
        raise RuntimeError(f"{lib}: --nvmath-python-path {peer_path} is not a directory")
    with tempfile.TemporaryDirectory(prefix="nvmath-bench-") as tmp:
        root = build_harness_copy(Path(tmp) / "harness")
        out_json = Path(tmp) / "reply.json"
        cmd = child_command(
            root,
            suite=suite,
            lib=lib,
            out_json=out_json,
            forbid=forbid,
            quick=quick,
            pattern=pattern,
            device_id=device_id,
            seed=seed,
            probe=probe,
        )
        try:
            proc = subprocess.run(
                cmd,
                check=False,
                env=child_env(peer_path, root),
                cwd=tmp,
                stdout=subprocess.PIPE,
                stderr=None if not probe else subprocess.PIPE,
                text=True,
                timeout=timeout,
            )
        except subprocess.TimeoutExpired:
            reply = _partial_reply(out_json, f"{lib}'s process was killed {timeout:g} s after it started")
            if reply is None:
                raise RuntimeError(f"{lib} child process did not reply within {timeout:g} s") from None
            return reply
        return _reply(proc, out_json, lib)


def _reply(proc: subprocess.CompletedProcess, out_json: Path, lib: str) -> dict[str, Any]:
    """The reply of a child that ended: whole, or what it wrote before it failed (else RuntimeError)."""
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout or "")[-2000:]
        failed = f"{lib}'s process exited with {proc.returncode} ({tail.strip()[-300:]})"
        reply = _partial_reply(out_json, failed)
        if reply is None:
            raise RuntimeError(f"{lib} child process failed (exit {proc.returncode}): {tail}")
        return reply
    if not out_json.exists():
        raise RuntimeError(f"{lib} child process wrote no reply (exit 0)")
    return json.loads(out_json.read_text())


def _partial_reply(out_json: Path, what: str) -> dict[str, Any] | None:
    """The reply a child wrote before it failed or hung (``note`` says what happened), or None."""
    try:
        reply = json.loads(out_json.read_text())
    except (OSError, ValueError):  # none, or cut short while being written
        return None
    when = "after it replied" if reply.get("complete") else f"after {len(reply.get('results', []))} row(s)"
    reply["note"] = f"{what} {when}"
    return reply
