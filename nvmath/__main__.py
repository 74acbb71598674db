"""``python -m nvmath``: print the environment report, then run the self-test.

Exit status is 0 when every check passed (or was skipped for lack of a GPU), 1 otherwise.
"""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    from nvmath._diagnostics import checks, checks_fft, checks_matmul, checks_solvers  # noqa: F401  (registers the checks)
    from nvmath._diagnostics.report import driver_and_devices, report_lines
    from nvmath._diagnostics.selftest import Context, run_checks

    out = sys.stdout
    for line in report_lines():
        out.write(line + "\n")
    _, devices = driver_and_devices()
    ctx = Context(gpu=bool(devices))
    out.write(f"\nself-test ({'GPU' if ctx.gpu else 'CPU only: no GPU found'}):\n")
    failed = 0
    counts = {"PASS": 0, "FAIL": 0, "SKIP": 0}
    for outcome in run_checks(ctx):
        counts[outcome.status] += 1
        failed += outcome.status == "FAIL"
        detail = f"  {outcome.detail}" if outcome.detail else ""
        out.write(f"  {outcome.status}  {outcome.name:<60} {outcome.seconds * 1e3:8.1f} ms{detail}\n")
    out.write(f"\n{counts['PASS']} passed, {counts['FAIL']} failed, {counts['SKIP']} skipped\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
