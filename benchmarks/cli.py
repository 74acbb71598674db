"""Command line: ``python -m benchmarks <suite> [--libs ...] [--out DIR] [--quick] ...``."""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from benchmarks import registry, report, subproc
from benchmarks.context import COOLDOWN_ENV, Context, Settings, make_context
from benchmarks.measure import Result
from benchmarks.progress import Progress
from benchmarks.runner import plan_runs, run_cases

__all__ = [
    "DEADLINE_ENV", "DEFAULT_LIBS", "PEER_TIMEOUT_ENV", "best_of_rounds", "build_parser", "job_rank",
    "job_size", "main", "parse_args", "peer_timeout",
]  # fmt: skip

DEFAULT_LIBS = ("nvmath", "torch", "cupy", "cuda.core", "nvmath-python", "numpy")
RESULTS_BASE = Path(__file__).resolve().parent / "results"


def _libs(text: str) -> list[str]:
    libs = [s.strip() for s in text.split(",") if s.strip()]
    unknown = [lib for lib in libs if lib not in registry.LIBRARIES]
    if unknown or not libs:
        raise argparse.ArgumentTypeError(
            f"unknown librar{'y' if len(unknown) == 1 else 'ies'} {', '.join(unknown) or '(none given)'}; "
            f"choose from {', '.join(registry.LIBRARIES)}"
        )
    return libs


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (suites are discovered without importing them)."""
    p = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description="Run a benchmark suite for several libraries; write JSON, Markdown and PNG results.",
        epilog="Results go to benchmarks/results/<YYYY-MM-DD>-<gpu>/ unless --out is given; "
        "see benchmarks/README.md.",
    )
    p.add_argument("suite", choices=registry.available_suites(), help="the suite to run")
    p.add_argument(
        "--libs",
        type=_libs,
        default=list(DEFAULT_LIBS),
        help=f"comma-separated libraries (default: {','.join(DEFAULT_LIBS)})",
    )
    p.add_argument(
        "--out", type=Path, default=None, help="output directory (default: benchmarks/results/<date>-<gpu>)"
    )
    p.add_argument("--quick", action="store_true", help="fewer iterations and only the quick cases")
    p.add_argument(
        "--nvmath-python-path",
        type=Path,
        default=os.environ.get("NVMATH_PYTHON_PATH") or None,
        help="directory holding nvmath-python's 'nvmath' package (default: $NVMATH_PYTHON_PATH)",
    )
    p.add_argument("--cases", default=None, help="comma-separated glob patterns of case names")
    p.add_argument(
        "--device",
        type=int,
        default=_local_rank(),
        help="CUDA device id (default: torchrun's / Open MPI's local rank, else 0)",
    )
    p.add_argument("--seed", type=int, default=1234, help="random seed for inputs")
    p.add_argument("--list", action="store_true", help="list the suite's cases and exit")
    p.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    p.add_argument("--plain", action="store_true", help="plain progress lines even if rich is installed")
    p.add_argument(
        "--rounds",
        type=_positive,
        default=1,
        help="run every library N times, alternating which goes first, and keep each library's "
        "fastest round (evens out clock and power drift over a long run; default 1)",
    )
    p.add_argument(
        "--cooldown",
        type=float,
        default=None,
        help="idle seconds before each device measurement, here and in peer processes "
        "(sets $NVMATH_BENCH_COOLDOWN; default 0)",
    )
    return p


def _local_rank() -> int:
    """The local rank a launcher (torchrun, mpirun) gives this process, else 0."""
    return int(os.environ.get("LOCAL_RANK", os.environ.get("OMPI_COMM_WORLD_LOCAL_RANK", "0")))


def job_rank() -> int:
    """This process's rank in a launched job (0 when not launched): only rank 0 reports."""
    return int(os.environ.get("RANK", os.environ.get("OMPI_COMM_WORLD_RANK", "0")))


def job_size() -> int:
    """The number of processes of a launched job (1 when not launched)."""
    return int(os.environ.get("WORLD_SIZE", os.environ.get("OMPI_COMM_WORLD_SIZE", "1")))


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1; got {value}")
    return value


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Parse the command line."""
    return build_parser().parse_args(argv)


PEER_TIMEOUT_ENV = "NVMATH_BENCH_PEER_TIMEOUT"
DEADLINE_ENV = "NVMATH_BENCH_DEADLINE"


def _env_seconds(name: str) -> float | None:
    text = os.environ.get(name, "").strip()
    if not text:
        return None
    value = float(text)
    if not value > 0:
        raise ValueError(f"${name} must be a number of seconds > 0; got {text!r}")
    return value


def peer_timeout(now: float | None = None) -> float | None:
    """Seconds after which a peer's process is killed (None: never): ``$NVMATH_BENCH_PEER_TIMEOUT``,
    cut to what is left before ``$NVMATH_BENCH_DEADLINE`` (a Unix time: the end of a run with a hard
    time limit, which must still write what the peer measured), at least one second.

    Raises:
        ValueError: a variable that is not a positive number.
    """
    timeout, deadline = _env_seconds(PEER_TIMEOUT_ENV), _env_seconds(DEADLINE_ENV)
    if deadline is not None:
        left = max(1.0, deadline - (time.time() if now is None else now))
        timeout = left if timeout is None else min(timeout, left)
    return timeout


def _peer_results(
    args: argparse.Namespace, runs: list[tuple[registry.Case, str]], lib: str
) -> tuple[list[dict], dict]:
    """Run ``lib``'s share of ``runs`` in its own process; failures become skipped/error rows."""
    mine = [(c, l) for c, l in runs if l == lib]
    if not mine:
        return [], {}

    def rows(status: str, note: str) -> list[dict]:
        return [
            Result(
                suite=c.suite,
                case=c.name,
                lib=lib,
                status=status,
                mode=c.mode,
                unit="ms" if c.mode == "device" else "us/call",
                note=note,
            ).to_dict()
            for c, _ in mine
        ]

    if args.nvmath_python_path is None:
        return rows("skipped", "no --nvmath-python-path (or $NVMATH_PYTHON_PATH) given"), {}
    try:
        reply = subproc.run_peer(
            args.suite,
            lib,
            args.nvmath_python_path,
            quick=args.quick,
            pattern=args.cases,
            device_id=args.device,
            seed=args.seed,
            timeout=peer_timeout(),
        )
    except Exception as exc:  # noqa: BLE001 - a failing peer becomes error rows
        return rows("error", str(exc)), {}
    results = reply.get("results", [])
    if reply.get("note"):  # it crashed or hung: after replying, or after some rows
        results = [{**r, "note": "; ".join(filter(None, (r.get("note"), reply["note"])))} for r in results]
        done = {r.get("case") for r in results}
        results += [r for r in rows("error", reply["note"]) if r["case"] not in done]
    return results, reply.get("versions", {})


def best_of_rounds(rounds: list[list[dict]]) -> list[dict]:
    """Merge the rows of several rounds: per (case, lib), the ``ok`` row with the lowest median.

    Rows keep the order of the first round; a library that never succeeded keeps its first row.
    """
    if len(rounds) == 1:
        return rounds[0]
    best: dict[tuple[str, str], dict] = {}
    for rows in rounds:
        for row in rows:
            key = (row["case"], row["lib"])
            held = best.get(key)
            if held is None or (
                row["status"] == "ok"
                and (held["status"] != "ok" or (row["median"] or 0.0) < (held["median"] or 0.0))
            ):
                best[key] = row
    note = f"best of {len(rounds)} rounds"
    merged = []
    for row in rounds[0]:
        chosen = dict(best[(row["case"], row["lib"])])
        if chosen["status"] == "ok":
            chosen["note"] = f"{chosen['note']}; {note}" if chosen.get("note") else note
        merged.append(chosen)
    return merged


def gpu_skipped(runs: list[tuple[registry.Case, str]], reason: str) -> list[dict]:
    """``skipped`` rows of the (case, library) pairs that need a GPU, on a machine without one."""
    return [
        Result(
            suite=c.suite, case=c.name, lib=lib, status="skipped", mode=c.mode,
            unit="ms" if c.mode == "device" else "us/call", note=reason,
        ).to_dict()
        for c, lib in runs
    ]  # fmt: skip


Checkpoint = Callable[[list[dict], Context, dict], None]
"""Called with the rows so far (and the context and versions) after every in-process row and after
the peers: ``main`` writes them, so that a crash of an engine later in the run keeps them."""


def _run(
    args: argparse.Namespace, cases: list[registry.Case], checkpoint: Checkpoint | None = None
) -> tuple[list[dict], Context, dict]:
    runs = plan_runs(cases, args.libs)
    ctx = make_context(Settings.for_run(quick=args.quick, seed=args.seed), args.device)
    skipped: list[dict] = []
    if not ctx.has_gpu:
        gpu_runs = [(c, lib) for c, lib in runs if c.needs_gpu]
        gpu_cases = len({c.name for c, _ in gpu_runs})
        print(
            f"no GPU here, so {gpu_cases} GPU case(s) ({len(gpu_runs)} measurements) are skipped"
            f" -- {ctx.no_gpu_reason}",
            file=sys.stderr,
        )
        skipped = gpu_skipped(gpu_runs, "no GPU on this machine")
        runs = [(c, lib) for c, lib in runs if not c.needs_gpu]
    local = [(c, lib) for c, lib in runs if lib not in registry.SUBPROCESS_LIBRARIES]
    peers = sorted({lib for _, lib in runs} & registry.SUBPROCESS_LIBRARIES)
    versions = report.library_versions(args.libs)
    rounds: list[list[dict]] = []
    with ctx, Progress(len(local) * args.rounds, args.suite, use_rich=False if args.plain else None) as progress:
        for index in range(args.rounds):
            local_rows: list[dict] = []
            peer_rows: list[dict] = []

            def save(current: list[dict] = local_rows, other: list[dict] = peer_rows) -> None:
                if checkpoint is None:
                    return
                try:
                    checkpoint(best_of_rounds([*rounds, current + other]) + skipped, ctx, versions)
                except Exception as exc:  # noqa: BLE001 - a failed checkpoint must not end the run
                    print(f"checkpoint not written: {type(exc).__name__}: {exc}", file=sys.stderr)

            def run_local(into: list[dict] = local_rows) -> None:
                for run in local:
                    into += [r.to_dict() for r in run_cases([run], ctx, progress)]
                    save()

            def run_peers(into: list[dict] = peer_rows) -> None:
                for lib in peers:
                    rows, peer_versions = _peer_results(args, runs, lib)
                    into += rows
                    versions.update(peer_versions)
                    save()

            order = (run_local, run_peers) if index % 2 == 0 else (run_peers, run_local)
            for step in order:
                step()
            rounds.append(local_rows + peer_rows)
    return best_of_rounds(rounds) + skipped, ctx, versions


def _document(args: argparse.Namespace, results: list[dict], ctx: Context, versions: dict) -> dict:
    return report.make_document(
        args.suite,
        results,
        gpu=ctx.gpu_name,
        libs=args.libs,
        settings={**vars(ctx.settings), "rounds": args.rounds, "nranks": job_size()},
        versions=versions,
    )


def _checkpoint(args: argparse.Namespace) -> Checkpoint | None:
    """With ``--out``, on rank 0: write the JSON and Markdown of the rows so far (no plots)."""
    if args.out is None or job_rank() != 0:
        return None

    def write(results: list[dict], ctx: Context, versions: dict) -> None:
        report.write_outputs(_document(args, results, ctx, versions), args.out, plots=False)

    return write


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit status."""
    args = parse_args(argv)
    if args.cooldown is not None:
        if not args.cooldown >= 0:
            print(f"--cooldown must be >= 0; got {args.cooldown}", file=sys.stderr)
            return 2
        os.environ[COOLDOWN_ENV] = str(args.cooldown)  # the peers' processes inherit it
    registry.load_suite(args.suite)
    cases = registry.REGISTRY.cases(args.suite, quick=args.quick, pattern=args.cases)
    if args.list:
        for c in cases:
            print(f"{c.name:32s} {c.mode:6s} {','.join(c.setups):40s} {c.description}")
        return 0
    if not cases:
        print(f"no cases of suite {args.suite!r} match {args.cases!r}", file=sys.stderr)
        return 2
    results, ctx, versions = _run(args, cases, _checkpoint(args))
    if job_rank() != 0:  # the other ranks of a distributed run measured the same collectives
        return 0
    doc = _document(args, results, ctx, versions)
    print(report.render_markdown(doc))
    if args.out is None and not ctx.has_gpu:
        # a CPU-only trial run: the results folder of the checkout is for GPU results
        print("results not written (no GPU on this machine); pass --out DIR to keep them", file=sys.stderr)
        return 0
    out_dir = args.out or report.results_dir(RESULTS_BASE, ctx.gpu_name)
    plots = not args.no_plots
    if plots and not report.plots_available():
        print(report.PLOTS_HINT, file=sys.stderr)
        plots = False
    written = report.write_outputs(doc, out_dir, plots=plots)
    print("wrote " + ", ".join(str(p) for p in written), file=sys.stderr)
    return 0
