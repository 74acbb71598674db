"""The command line of ``python -m nvmath``: environment report, self-test, exit status."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, TextIO

from nvmath._diagnostics.selftest import Outcome

#: Exit statuses, as ``--help`` documents them.
EXIT_OK, EXIT_CHECK_FAILED, EXIT_USAGE = 0, 1, 2

_DESCRIPTION = """\
Print nvmath's environment report (versions of nvmath and of the packages it uses, the CUDA
driver and GPUs, which libcublasLt / libcufft / libcusolver files were loaded and from where),
then run a self-test: on the GPU when there is one, the CPU checks otherwise. A check whose
optional package (scipy, torch, ...) is missing is skipped with the install hint."""

_EPILOG = """\
exit status:
  0  every check passed or was skipped (or --no-selftest)
  1  a self-test check failed
  2  usage error (an unknown option, for one)

For a bug report, attach the output of: python -m nvmath --json"""


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``python -m nvmath``."""
    import nvmath

    parser = argparse.ArgumentParser(
        prog="python -m nvmath",
        description=_DESCRIPTION,
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        allow_abbrev=False,
    )
    parser.add_argument(
        "--json", action="store_true", help="print the whole report and self-test as one JSON document"
    )
    parser.add_argument("--no-selftest", action="store_true", help="print the environment report only")
    parser.add_argument("--version", action="version", version=f"nvmath {nvmath.__version__}")
    return parser


def _run_selftest(gpu: bool) -> list[Outcome]:
    from nvmath._diagnostics import checks, checks_fft, checks_matmul, checks_solvers  # noqa: F401  (registers the checks)
    from nvmath._diagnostics.selftest import Context, run_checks

    return list(run_checks(Context(gpu=gpu)))


def _counts(outcomes: list[Outcome]) -> dict[str, int]:
    counts = {"PASS": 0, "FAIL": 0, "SKIP": 0}
    for outcome in outcomes:
        counts[outcome.status] += 1
    return counts


def _write_text(out: TextIO, report: dict[str, Any], outcomes: list[Outcome] | None, gpu: bool) -> None:
    from nvmath._diagnostics.report import format_report

    for line in format_report(report):
        out.write(line + "\n")
    if outcomes is None:
        return
    out.write(f"\nself-test ({'GPU' if gpu else 'CPU only: no GPU found'}):\n")
    width = max((len(o.name) for o in outcomes), default=0)
    for o in outcomes:
        detail = f"  {o.detail}" if o.detail else ""
        out.write(f"  {o.status}  {o.name:<{width}} {o.seconds * 1e3:8.1f} ms{detail}\n")
    counts = _counts(outcomes)
    out.write(f"\n{counts['PASS']} passed, {counts['FAIL']} failed, {counts['SKIP']} skipped\n")


def _json_document(report: dict[str, Any], outcomes: list[Outcome] | None, gpu: bool, status: int) -> dict:
    selftest = None
    if outcomes is not None:
        selftest = {
            "mode": "gpu" if gpu else "cpu",
            "counts": _counts(outcomes),
            "checks": [
                {"name": o.name, "status": o.status, "detail": o.detail, "seconds": round(o.seconds, 6)}
                for o in outcomes
            ],
        }
    return {"report": report, "selftest": selftest, "exit_status": status}


def main(argv: list[str] | None = None, out: TextIO | None = None) -> int:
    """Run ``python -m nvmath`` with ``argv`` (``sys.argv[1:]`` by default); return the exit status."""
    from nvmath._diagnostics.report import collect

    out = sys.stdout if out is None else out
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:  # --help, --version (0) or a usage error (2)
        return EXIT_USAGE if exc.code not in (0, None) else EXIT_OK
    report = collect()
    gpu = bool(report["cuda"]["devices"])
    outcomes = None if args.no_selftest else _run_selftest(gpu)
    failed = outcomes is not None and any(o.status == "FAIL" for o in outcomes)
    status = EXIT_CHECK_FAILED if failed else EXIT_OK
    if args.json:
        json.dump(_json_document(report, outcomes, gpu, status), out, indent=2)
        out.write("\n")
    else:
        _write_text(out, report, outcomes, gpu)
    return status
