"""Tests of benchmarks.subproc: the peer runs in its own process and never sees our source tree."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from benchmarks import subproc


@pytest.fixture
def fake_peer(tmp_path: Path) -> Path:
    """A directory holding a fake 'nvmath' package, standing in for nvmath-python."""
    pkg = tmp_path / "peer" / "nvmath"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("__version__ = 'fake-1.0'\nFAKE = True\n")
    return tmp_path / "peer"


def test_harness_copy_contains_runner_and_timing(tmp_path):
    """The copy holds the harness modules, the suites and the timing helpers as _timing.py."""
    root = subproc.build_harness_copy(tmp_path / "h")
    pkg = root / "benchmarks"
    assert (pkg / "_child.py").is_file() and (pkg / "measure.py").is_file()
    assert (pkg / "suites" / "overhead.py").is_file()
    assert (pkg / "_timing.py").read_text() == subproc.TIMING_FILE.read_text()
    assert not (root / "nvmath").exists()


def test_child_env_replaces_pythonpath(tmp_path):
    """The child's PYTHONPATH holds only the peer's dir and the harness copy, whatever the parent had."""
    base = {"PYTHONPATH": str(subproc.REPO_ROOT), "PATH": os.environ.get("PATH", ""), "PYTHONSTARTUP": "x.py"}
    env = subproc.child_env(tmp_path / "peer", tmp_path / "h", base)
    assert env["PYTHONPATH"].split(os.pathsep) == [
        str((tmp_path / "peer").resolve()),
        str((tmp_path / "h").resolve()),
    ]
    assert env["PYTHONNOUSERSITE"] == "1" and "PYTHONSTARTUP" not in env


def test_child_command_runs_by_file_path(tmp_path):
    """The child is a script path (not -m), with the repository root as a forbidden path."""
    cmd = subproc.child_command(
        tmp_path,
        suite="overhead",
        lib="nvmath-python",
        out_json=tmp_path / "r.json",
        forbid=[subproc.REPO_ROOT],
        quick=True,
        pattern="stream-*",
    )
    assert cmd[0] == sys.executable and cmd[1].endswith(os.path.join("benchmarks", "_child.py"))
    assert "-m" not in cmd and str(subproc.REPO_ROOT) in cmd and "--quick" in cmd and "stream-*" in cmd


def test_probe_imports_the_peer_not_ours(fake_peer, monkeypatch):
    """In the child, 'import nvmath' finds the peer's package and our tree is not on sys.path."""
    monkeypatch.setenv("PYTHONPATH", str(subproc.REPO_ROOT))  # must not leak into the child
    reply = subproc.run_peer("overhead", "nvmath-python", fake_peer, probe=True, timeout=120)
    assert Path(reply["nvmath_file"]).is_relative_to(fake_peer.resolve())
    resolved = {Path(p or ".").resolve() for p in reply["sys_path"]}
    assert subproc.REPO_ROOT not in resolved


def test_child_refuses_when_nvmath_is_forbidden(fake_peer):
    """If nvmath resolves inside a forbidden directory the child refuses to run."""
    with pytest.raises(RuntimeError, match="refusing to run"):
        subproc.run_peer(
            "overhead", "nvmath-python", fake_peer, probe=True, forbid=[fake_peer.parent], timeout=120
        )


def test_full_child_run_returns_results(fake_peer):
    """A real child run returns one JSON result per case for the peer (skipped here: fake peer)."""
    reply = subproc.run_peer(
        "overhead", "nvmath-python", fake_peer, quick=True, pattern="stream-*", timeout=300
    )
    assert reply["versions"] == {"nvmath-python": "fake-1.0"} and reply["complete"] is True
    assert [(r["case"], r["lib"], r["status"]) for r in reply["results"]] == [
        ("stream-none", "nvmath-python", "skipped"),
        ("stream-torch-object", "nvmath-python", "skipped"),
    ]


def test_missing_peer_dir(tmp_path):
    """A peer path that is not a directory is reported before starting a process."""
    with pytest.raises(RuntimeError, match="is not a directory"):
        subproc.run_peer("overhead", "nvmath-python", tmp_path / "missing")


def test_child_env_extra_path_goes_first(tmp_path):
    """$NVMATH_BENCH_CHILD_PATH entries are prepended to the child's PYTHONPATH, in order."""
    base = {"NVMATH_BENCH_CHILD_PATH": os.pathsep.join(["/np235", "", "/x"])}
    env = subproc.child_env(tmp_path / "peer", tmp_path / "h", base)
    parts = env["PYTHONPATH"].split(os.pathsep)
    assert parts[:2] == ["/np235", "/x"] and parts[2] == str((tmp_path / "peer").resolve())


def _fake_run(write_reply: bool, complete: bool = False, returncode: int | None = None):
    """A subprocess.run that writes the child's reply (or not, or a partial one) and then times out,
    or exits with ``returncode``."""
    import json
    import subprocess

    def run(cmd, **kwargs):
        if write_reply:
            out = Path(cmd[cmd.index("--out") + 1])
            out.write_text(json.dumps({"results": [{"case": "c"}], "versions": {}, "complete": complete}))
        if returncode is None:
            raise subprocess.TimeoutExpired(cmd, kwargs["timeout"])
        return subprocess.CompletedProcess(cmd, returncode, stdout="Segmentation fault", stderr=None)

    return run


@pytest.mark.parametrize(("complete", "when"), [(True, "after it replied"), (False, "after 1 row(s)")])
def test_a_child_that_crashed_keeps_its_rows(fake_peer, monkeypatch, complete, when):
    """A child that exits non-zero (a crash in an engine's finalize at exit, or in a later row)
    returns the rows it wrote; the note says how it ended and when."""
    monkeypatch.setattr(subproc.subprocess, "run", _fake_run(True, complete, returncode=-11))
    reply = subproc.run_peer("overhead", "nvmath-python", fake_peer)
    assert reply["results"] == [{"case": "c"}]
    assert reply["note"] == f"nvmath-python's process exited with -11 (Segmentation fault) {when}"


def test_a_child_that_crashed_before_any_row_fails(fake_peer, monkeypatch):
    """No reply file and a non-zero exit: RuntimeError with the output's tail."""
    monkeypatch.setattr(subproc.subprocess, "run", _fake_run(False, returncode=1))
    with pytest.raises(RuntimeError, match="failed \\(exit 1\\): Segmentation fault"):
        subproc.run_peer("overhead", "nvmath-python", fake_peer)


def test_a_child_that_replied_then_hung_still_counts(fake_peer, monkeypatch):
    """A child killed at the timeout after writing its reply (hung in a finalize on its way out)
    returns that reply, with a note saying it was killed."""
    monkeypatch.setattr(subproc.subprocess, "run", _fake_run(write_reply=True))
    reply = subproc.run_peer("overhead", "nvmath-python", fake_peer, timeout=5)
    assert reply["results"] == [{"case": "c"}] and "killed 5 s after it started" in reply["note"]


def test_a_child_that_never_replied_times_out(fake_peer, monkeypatch):
    """A child killed at the timeout without a reply raises RuntimeError saying so."""
    monkeypatch.setattr(subproc.subprocess, "run", _fake_run(write_reply=False))
    with pytest.raises(RuntimeError, match="did not reply within 5 s"):
        subproc.run_peer("overhead", "nvmath-python", fake_peer, timeout=5)
