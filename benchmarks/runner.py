"""Running a list of cases for the in-process libraries."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from benchmarks.context import Context
from benchmarks.measure import Result, run_one
from benchmarks.progress import Progress
from benchmarks.registry import BASELINE_LIBRARIES, Case

__all__ = ["plan_runs", "run_cases"]


def plan_runs(cases: Iterable[Case], libs: Sequence[str]) -> list[tuple[Case, str]]:
    """The (case, library) pairs to run: the requested libraries a case has, plus its baselines."""
    wanted = set(libs) | BASELINE_LIBRARIES
    return [(case, lib) for case in cases for lib in case.setups if lib in wanted]


def run_cases(
    runs: Sequence[tuple[Case, str]], ctx: Context, progress: Progress | None = None
) -> list[Result]:
    """Measure each (case, library) pair in this process."""
    results = []
    for case, lib in runs:
        if progress is not None:
            progress.start(f"{case.name} [{lib}]")
        result = run_one(case, lib, ctx)
        results.append(result)
        if progress is not None:
            progress.finish(result)
    return results
