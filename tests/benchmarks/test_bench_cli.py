"""Tests of benchmarks.cli: argument parsing, listing and a CPU-only end-to-end run."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from benchmarks import cli

ROOT = Path(__file__).resolve().parents[2]


def test_defaults():
    """Defaults: every peer library, no output dir, not quick, nvmath-python path from the environment."""
    args = cli.parse_args(["overhead"])
    assert args.suite == "overhead" and args.libs == list(cli.DEFAULT_LIBS)
    assert args.out is None and not args.quick and args.device == 0


def test_options_parse():
    """--libs, --out, --quick, --nvmath-python-path and --cases are parsed."""
    args = cli.parse_args(
        [
            "ceilings",
            "--libs",
            "torch, cupy",
            "--out",
            "/tmp/x",
            "--quick",
            "--nvmath-python-path",
            "/opt/peer",
            "--cases",
            "copy-*",
        ]
    )
    assert args.libs == ["torch", "cupy"] and args.out == Path("/tmp/x") and args.quick
    assert args.nvmath_python_path == Path("/opt/peer") and args.cases == "copy-*"


def test_peer_path_from_environment(monkeypatch):
    """$NVMATH_PYTHON_PATH supplies the default nvmath-python directory."""
    monkeypatch.setenv("NVMATH_PYTHON_PATH", "/opt/np")
    assert cli.parse_args(["overhead"]).nvmath_python_path == Path("/opt/np")


@pytest.mark.parametrize(
    "argv", [["nope"], ["overhead", "--libs", "tensorflow"], ["overhead", "--libs", ","]]
)
def test_bad_arguments_exit_2(argv, capsys):
    """Unknown suites and libraries are usage errors naming the choices."""
    with pytest.raises(SystemExit) as info:
        cli.parse_args(argv)
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "choose from" in err or "invalid choice" in err


def test_help_runs_as_module():
    """`python -m benchmarks --help` works from the repository root."""
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks", "--help"], check=False, cwd=ROOT, capture_output=True, text=True
    )
    assert out.returncode == 0 and "--nvmath-python-path" in out.stdout and "overhead" in out.stdout


def test_list(capsys):
    """--list prints the suite's cases with their libraries."""
    assert cli.main(["overhead", "--list"]) == 0
    out = capsys.readouterr().out
    assert "planner-guard" in out and "nvmath,python" in out


def test_no_matching_cases(capsys):
    """A --cases pattern matching nothing exits with status 2."""
    assert cli.main(["overhead", "--cases", "zzz*"]) == 2


def test_end_to_end_cpu_case(tmp_path, capsys, monkeypatch):
    """A CPU-only case runs end to end and writes a valid JSON document and the Markdown table."""
    monkeypatch.delenv("NVMATH_PYTHON_PATH", raising=False)
    rc = cli.main(
        [
            "overhead",
            "--quick",
            "--cases",
            "planner-guard,wrap-*",
            "--out",
            str(tmp_path),
            "--plain",
            "--no-plots",
        ]
    )
    assert rc == 0
    doc = json.loads((tmp_path / "overhead.json").read_text())
    rows = {(r["case"], r["lib"]): r for r in doc["results"]}
    assert rows[("planner-guard", "nvmath")]["status"] == "ok"
    assert rows[("planner-guard", "python")]["status"] == "ok"
    assert rows[("wrap-torch-tensor", "nvmath-python")]["status"] == "skipped"
    note = rows[("wrap-torch-tensor", "nvmath-python")]["note"]
    assert "no --nvmath-python-path" in note or note == "no GPU on this machine"
    assert "| planner-guard | us/call |" in capsys.readouterr().out
    assert (tmp_path / "overhead.md").exists()


class _StubStream:
    """Stands in for the run's stream: the CLI takes the machine for a GPU one (the peer never uses it)."""

    def sync(self):
        pass

    def close(self):
        pass


def test_peer_failure_becomes_error_rows(tmp_path, monkeypatch):
    """A peer directory that does not exist turns its rows into errors, not a crash."""
    from benchmarks.context import Context

    monkeypatch.setattr(cli, "make_context", lambda settings, device_id=0: Context(
        settings=settings, stream=_StubStream(), gpu_name="stub GPU"))  # fmt: skip
    rc = cli.main(
        [
            "overhead",
            "--quick",
            "--cases",
            "stream-none",
            "--libs",
            "nvmath-python",
            "--out",
            str(tmp_path),
            "--plain",
            "--no-plots",
            "--nvmath-python-path",
            str(tmp_path / "missing"),
        ]
    )
    assert rc == 0
    (row,) = json.loads((tmp_path / "overhead.json").read_text())["results"]
    assert row["status"] == "error" and "is not a directory" in row["note"]


def test_benchmarks_are_never_collected():
    """pytest collects only tests/, and nothing under benchmarks/ is named like a test."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert config["tool"]["pytest"]["ini_options"]["testpaths"] == ["tests"]
    offenders = [
        p
        for p in (ROOT / "benchmarks").rglob("*.py")
        if p.name.startswith("test_") or p.name.endswith("_test.py")
    ]
    assert offenders == []


def _row(case, lib, status="ok", median=1.0, note=""):
    return {"case": case, "lib": lib, "status": status, "median": median, "note": note}


def test_best_of_rounds_keeps_fastest_ok_row():
    """Per (case, lib) the fastest ok round wins, failures never beat a success, first-round order kept."""
    r1 = [_row("a", "nvmath", median=2.0), _row("a", "torch", median=1.0), _row("b", "torch", "error", None)]
    r2 = [_row("b", "torch", median=3.0), _row("a", "torch", median=1.5), _row("a", "nvmath", "error", None)]
    merged = cli.best_of_rounds([r1, r2])
    assert [(r["case"], r["lib"]) for r in merged] == [("a", "nvmath"), ("a", "torch"), ("b", "torch")]
    assert [r["median"] for r in merged] == [2.0, 1.0, 3.0]
    assert all(r["status"] == "ok" and "best of 2 rounds" in r["note"] for r in merged)


def test_best_of_one_round_is_identity():
    """One round is returned unchanged (no note added)."""
    rows = [_row("a", "nvmath")]
    assert cli.best_of_rounds([rows]) is rows


def test_rounds_must_be_positive():
    """--rounds 0 is rejected by the parser."""
    with pytest.raises(SystemExit):
        cli.parse_args(["matmul", "--rounds", "0"])


@pytest.fixture
def no_gpu(monkeypatch):
    """The CLI sees a machine without a GPU (whatever this one has)."""
    from benchmarks.context import Context

    monkeypatch.setattr(cli, "make_context", lambda settings, device_id=0: Context(
        settings=settings, no_gpu_reason="no CUDA device: (test)"))  # fmt: skip
    monkeypatch.delenv("NVMATH_PYTHON_PATH", raising=False)


def test_no_gpu_skips_the_gpu_rows_in_one_line(tmp_path, capsys, no_gpu):
    """Without a GPU the GPU measurements are announced as skipped in one line (no per-row lines) and
    still appear as skipped rows of the document; the CPU cases run."""
    argv = ["overhead", "--quick", "--cases", "planner-guard,wrap-*", "--out", str(tmp_path), "--plain"]
    assert cli.main(argv + ["--no-plots"]) == 0
    err = capsys.readouterr().err
    assert sum("skipped" in line for line in err.splitlines()) == 1
    assert "no GPU here, so 1 GPU case(s) (3 measurements) are skipped" in err
    doc = json.loads((tmp_path / "overhead.json").read_text())
    rows = {(r["case"], r["lib"]): r for r in doc["results"]}
    assert rows[("wrap-torch-tensor", "nvmath")]["status"] == "skipped"
    assert rows[("planner-guard", "nvmath")]["status"] == "ok"


def test_no_gpu_without_out_writes_no_results_folder(tmp_path, capsys, monkeypatch, no_gpu):
    """A CPU-only run without --out prints the table and writes nothing under benchmarks/results."""
    monkeypatch.setattr(cli, "RESULTS_BASE", tmp_path / "results")
    assert cli.main(["overhead", "--quick", "--cases", "planner-guard", "--plain"]) == 0
    captured = capsys.readouterr()
    assert "| planner-guard | us/call |" in captured.out
    assert "pass --out DIR to keep them" in captured.err
    assert not (tmp_path / "results").exists()


def test_a_run_without_matplotlib_says_plots_were_skipped(tmp_path, capsys, monkeypatch, no_gpu):
    """Without matplotlib the run says the plots were skipped and how to get them; no PNG is written."""
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    assert cli.main(["overhead", "--quick", "--cases", "planner-guard", "--plain", "--out", str(tmp_path)]) == 0
    err = capsys.readouterr().err
    assert "plots skipped: matplotlib is not installed" in err and "[bench]" in err
    assert not (tmp_path / "overhead.png").exists()


def test_suites_are_all_listed_in_the_readme_and_the_docs():
    """benchmarks/README.md and docs/benchmarks.rst name every suite the CLI offers."""
    from benchmarks import registry

    for page in (ROOT / "benchmarks" / "README.md", ROOT / "docs" / "benchmarks.rst"):
        text = page.read_text()
        missing = [s for s in registry.available_suites() if f"``{s}``" not in text and f"`{s}`" not in text]
        assert not missing, f"{page.name} does not list the suites {missing}"


def test_make_bench_runs_the_cli():
    """``make bench`` is a target that runs ``python -m benchmarks`` (dry run: make -n)."""
    proc = subprocess.run(
        ["make", "-n", "bench", "VENV=/nonexistent-venv"], cwd=ROOT, capture_output=True, text=True, check=False
    )
    if proc.returncode != 0 and "No rule" in proc.stderr:
        pytest.fail("the Makefile has no bench target")
    assert "-m benchmarks" in proc.stdout


@pytest.mark.parametrize(("text", "expected"), [(None, None), ("", None), ("90", 90.0), ("2.5", 2.5)])
def test_peer_timeout_from_environment(monkeypatch, text, expected):
    """$NVMATH_BENCH_PEER_TIMEOUT sets the seconds after which a peer's process is killed."""
    monkeypatch.delenv(cli.DEADLINE_ENV, raising=False)
    if text is None:
        monkeypatch.delenv(cli.PEER_TIMEOUT_ENV, raising=False)
    else:
        monkeypatch.setenv(cli.PEER_TIMEOUT_ENV, text)
    assert cli.peer_timeout() == expected


@pytest.mark.parametrize(
    ("timeout", "deadline", "now", "expected"),
    [(None, "1000", 940.0, 60.0), ("30", "1000", 940.0, 30.0), ("90", "1000", 940.0, 60.0),
     ("90", "1000", 1200.0, 1.0)],
)  # fmt: skip
def test_peer_timeout_is_cut_to_the_deadline(monkeypatch, timeout, deadline, now, expected):
    """$NVMATH_BENCH_DEADLINE (a Unix time) cuts the peer's timeout to the time left, at least 1 s:
    a run under a hard limit still gets to write what the peer measured."""
    monkeypatch.delenv(cli.PEER_TIMEOUT_ENV, raising=False)
    if timeout is not None:
        monkeypatch.setenv(cli.PEER_TIMEOUT_ENV, timeout)
    monkeypatch.setenv(cli.DEADLINE_ENV, deadline)
    assert cli.peer_timeout(now=now) == expected


@pytest.mark.parametrize("text", ["0", "-1", "soon"])
def test_bad_peer_timeout(monkeypatch, text):
    """A timeout that is not a positive number raises ValueError naming the variable."""
    monkeypatch.setenv(cli.PEER_TIMEOUT_ENV, text)
    with pytest.raises(ValueError):
        cli.peer_timeout()


def test_the_document_records_the_job_size(tmp_path, monkeypatch):
    """The settings record the launched job's size (WORLD_SIZE, else Open MPI's, else 1): the
    efficiency lines divide by it."""
    from types import SimpleNamespace

    from benchmarks.context import Settings

    ctx = SimpleNamespace(gpu_name="GPU", has_gpu=True, settings=Settings())
    monkeypatch.setattr(cli, "_run", lambda args, cases, checkpoint=None: ([], ctx, {}))
    monkeypatch.delenv("RANK", raising=False)
    monkeypatch.setenv("WORLD_SIZE", "1")
    assert cli.main(["overhead", "--cases", "stream-none", "--out", str(tmp_path), "--no-plots"]) == 0
    assert json.loads((tmp_path / "overhead.json").read_text())["settings"]["nranks"] == 1
    monkeypatch.delenv("WORLD_SIZE")
    monkeypatch.setenv("OMPI_COMM_WORLD_SIZE", "4")
    assert cli.job_size() == 4


def test_rows_a_crashed_peer_did_not_reach_become_errors(monkeypatch):
    """A peer that crashed after some rows: its rows are kept with the note, the cases it never
    reached become error rows with the same note."""
    import argparse

    from benchmarks import registry

    cases = [registry.Case(suite="s", name=n, setups={"nvmath-python": lambda ctx: None}) for n in ("a", "b")]
    runs = [(c, "nvmath-python") for c in cases]
    reply = {"results": [{"case": "a", "lib": "nvmath-python", "status": "ok", "note": ""}], "versions": {},
             "note": "nvmath-python's process exited with -11 after 1 row(s)"}  # fmt: skip
    monkeypatch.setattr(cli.subproc, "run_peer", lambda *a, **k: reply)
    args = argparse.Namespace(nvmath_python_path=Path("/x"), suite="s", quick=True, cases=None, device=0, seed=1)
    rows, _ = cli._peer_results(args, runs, "nvmath-python")
    assert [(r["case"], r["status"]) for r in rows] == [("a", "ok"), ("b", "error")]
    assert all("exited with -11" in r["note"] for r in rows)


def test_rows_are_written_as_they_come(tmp_path, monkeypatch):
    """With --out, the JSON and Markdown hold every row measured so far after each row: a crash of
    an engine later in the run keeps them."""
    from benchmarks.context import Context

    seen = []
    real_write = cli.report.write_outputs

    def spy(doc, out_dir, *, plots=True):
        seen.append(([r["case"] for r in doc["results"]], plots))
        return real_write(doc, out_dir, plots=plots)

    monkeypatch.setattr(cli.report, "write_outputs", spy)
    monkeypatch.setattr(cli, "make_context", lambda settings, device_id=0: Context(
        settings=settings, stream=_StubStream(), gpu_name="stub GPU"))  # fmt: skip
    monkeypatch.delenv("RANK", raising=False)
    argv = ["overhead", "--quick", "--cases", "stream-none,stream-torch-object", "--libs", "torch", "--out",
            str(tmp_path), "--plain", "--no-plots"]  # fmt: skip
    assert cli.main(argv) == 0
    assert seen[0] == (["stream-none"], False) and seen[-1][0] == ["stream-none", "stream-torch-object"]
    assert len(seen) == 3  # after each of the two rows, then the final document
