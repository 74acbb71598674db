"""The command line of ``python -m nvmath`` (:mod:`nvmath._diagnostics.cli`), run in-process."""

from __future__ import annotations

import io
import json

import pytest

from nvmath._diagnostics import cli
from nvmath._diagnostics.selftest import Outcome


def _fake_outcomes(*statuses: str) -> list[Outcome]:
    return [Outcome(f"check {i}", s, f"detail {i}", 0.001) for i, s in enumerate(statuses)]


@pytest.fixture
def no_selftest_run(monkeypatch):
    """Replace the real self-test by two passing checks, so these tests stay fast."""
    monkeypatch.setattr(cli, "_run_selftest", lambda gpu: _fake_outcomes("PASS", "SKIP"))


@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_help_documents_options_and_exit_codes_and_runs_nothing(flag, capsys, monkeypatch):
    """--help / -h print the usage with every option and the exit statuses, exit 0, run no report."""
    monkeypatch.setattr(cli, "_run_selftest", lambda gpu: pytest.fail("the self-test ran"))
    out = io.StringIO()
    assert cli.main([flag], out=out) == cli.EXIT_OK
    text = capsys.readouterr().out
    for needle in ("--json", "--no-selftest", "--version", "exit status", "1  a self-test check failed", "2  usage"):
        assert needle in text
    assert out.getvalue() == ""


@pytest.mark.parametrize("argv", [["--bogus"], ["positional"], ["--jso"]])
def test_unknown_arguments_are_usage_errors(argv, capsys):
    """Unknown flags, stray arguments and abbreviations exit 2 with the usage on stderr."""
    assert cli.main(argv, out=io.StringIO()) == cli.EXIT_USAGE
    err = capsys.readouterr().err
    assert "usage: python -m nvmath" in err and "error:" in err


def test_version_prints_the_version(capsys):
    """--version prints nvmath's version and exits 0."""
    import nvmath

    assert cli.main(["--version"], out=io.StringIO()) == cli.EXIT_OK
    assert capsys.readouterr().out.strip() == f"nvmath {nvmath.__version__}"


def test_no_selftest_prints_the_report_only(monkeypatch):
    """--no-selftest prints the environment report, runs no check and exits 0."""
    monkeypatch.setattr(cli, "_run_selftest", lambda gpu: pytest.fail("the self-test ran"))
    out = io.StringIO()
    assert cli.main(["--no-selftest"], out=out) == cli.EXIT_OK
    text = out.getvalue()
    assert text.startswith("nvmath environment") and "CUDA driver:" in text and "self-test" not in text


def test_json_holds_the_whole_report_and_selftest(no_selftest_run):
    """--json prints one JSON document: report (packages, driver, libraries), self-test and exit status."""
    out = io.StringIO()
    assert cli.main(["--json"], out=out) == cli.EXIT_OK
    doc = json.loads(out.getvalue())
    assert set(doc) == {"report", "selftest", "exit_status"} and doc["exit_status"] == 0
    report = doc["report"]
    assert {"python", "nvmath", "packages", "cuda", "libraries"} <= set(report)
    assert report["packages"]["numpy"] != "not installed"
    assert set(report["libraries"]) == {"cublasLt", "cublas", "cufft", "cusolver"}
    assert doc["selftest"]["counts"] == {"PASS": 1, "FAIL": 0, "SKIP": 1}
    assert [c["status"] for c in doc["selftest"]["checks"]] == ["PASS", "SKIP"]


def test_json_without_selftest_has_null_selftest(monkeypatch):
    """--json --no-selftest keeps the document's shape, with ``selftest`` null."""
    monkeypatch.setattr(cli, "_run_selftest", lambda gpu: pytest.fail("the self-test ran"))
    out = io.StringIO()
    assert cli.main(["--json", "--no-selftest"], out=out) == cli.EXIT_OK
    assert json.loads(out.getvalue())["selftest"] is None


@pytest.mark.parametrize("as_json", [False, True])
def test_a_failed_check_exits_1(as_json, monkeypatch):
    """One FAIL among the checks makes the exit status 1, in text and JSON mode alike."""
    monkeypatch.setattr(cli, "_run_selftest", lambda gpu: _fake_outcomes("PASS", "FAIL", "SKIP"))
    out = io.StringIO()
    assert cli.main(["--json"] if as_json else [], out=out) == cli.EXIT_CHECK_FAILED
    if as_json:
        assert json.loads(out.getvalue())["exit_status"] == 1
    else:
        assert out.getvalue().splitlines()[-1] == "1 passed, 1 failed, 1 skipped"


def test_text_report_aligns_names_and_shows_details(no_selftest_run):
    """Every self-test line shows the status, the check's name padded to one width, and its detail."""
    out = io.StringIO()
    cli.main([], out=out)
    lines = [line for line in out.getvalue().splitlines() if line.startswith(("  PASS", "  SKIP"))]
    assert len(lines) == 2 and all("detail" in line for line in lines)
    assert len({line.index(" ms") for line in lines}) == 1
