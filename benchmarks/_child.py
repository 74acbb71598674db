"""Child runner for a peer sharing our import name; run by file path from a copy of the harness.

Usage (built by :mod:`benchmarks.subproc`)::

    python <copy>/benchmarks/_child.py --suite S --lib nvmath-python --out reply.json --forbid <repo>

It writes ``{"results": [...], "versions": {...}, "nvmath_file": ..., "complete": ...}`` to ``--out``,
again after every row (``complete`` false until the last): a process that crashes or hangs later
(e.g. in an engine's finalize at exit) keeps the rows it measured.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path


def _strip_forbidden(forbid: list[Path]) -> None:
    """Remove our repository root (and the cwd if it is that root) from ``sys.path``."""
    keep = []
    for entry in sys.path:
        resolved = Path(entry or os.getcwd()).resolve()
        if resolved not in forbid:
            keep.append(entry)
    sys.path[:] = keep


def _check_nvmath(forbid: list[Path]) -> str:
    """Import the peer's ``nvmath`` and make sure it is not ours; return its file."""
    import nvmath

    location = Path(getattr(nvmath, "__file__", None) or next(iter(nvmath.__path__))).resolve()
    for root in forbid:
        if location.is_relative_to(root):
            raise SystemExit(f"refusing to run: nvmath resolves to {location}, inside {root}")
    return str(location)


def _parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="_child.py")
    p.add_argument("--suite", required=True)
    p.add_argument("--lib", required=True)
    p.add_argument("--out", required=True, type=Path)
    p.add_argument("--forbid", action="append", default=[], type=lambda s: Path(s).resolve())
    p.add_argument("--quick", action="store_true")
    p.add_argument("--cases", default=None)
    p.add_argument("--device", type=int, default=0)
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--probe", action="store_true", help="only report where nvmath comes from")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    _strip_forbidden(args.forbid)
    nvmath_file = _check_nvmath(args.forbid)
    reply: dict = {"nvmath_file": nvmath_file, "sys_path": list(sys.path)}
    if not args.probe:
        from benchmarks.context import Settings, make_context
        from benchmarks.progress import Progress
        from benchmarks.registry import REGISTRY, load_suite
        from benchmarks.runner import plan_runs, run_cases

        load_suite(args.suite)
        cases = REGISTRY.cases(args.suite, quick=args.quick, pattern=args.cases)
        runs = [(c, lib) for c, lib in plan_runs(cases, [args.lib]) if lib == args.lib]
        import nvmath

        version = str(getattr(nvmath, "__version__", "unknown"))
        reply.update(results=[], complete=False, versions={args.lib: version})
        ctx = make_context(Settings.for_run(quick=args.quick, seed=args.seed), args.device)
        with ctx, Progress(len(runs), f"{args.suite} [{args.lib}]") as progress:
            for run in runs:  # the reply so far after every row: a crash later keeps the rows before it
                reply["results"] += [r.to_dict() for r in run_cases([run], ctx, progress)]
                args.out.write_text(json.dumps(reply))
    reply["complete"] = True
    args.out.write_text(json.dumps(reply))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
