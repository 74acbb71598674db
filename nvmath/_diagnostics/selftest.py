"""The self-test of ``python -m nvmath``: a registry of small end-to-end checks.

A check is a function taking a :class:`Context` and raising on failure. Checks declare whether
they need a GPU; GPU checks are reported as SKIP on a machine without one. Each feature area
registers its checks in :mod:`nvmath._diagnostics.checks`.
"""

from __future__ import annotations

import dataclasses
import time
import traceback
from collections.abc import Callable, Iterator

CheckFn = Callable[["Context"], object]


@dataclasses.dataclass(frozen=True)
class Context:
    """What a check may rely on."""

    gpu: bool
    device_id: int = 0


@dataclasses.dataclass(frozen=True)
class Check:
    name: str
    fn: CheckFn
    needs_gpu: bool


@dataclasses.dataclass(frozen=True)
class Outcome:
    name: str
    status: str  # "PASS" | "FAIL" | "SKIP"
    detail: str
    seconds: float


_REGISTRY: list[Check] = []


def check(name: str, *, gpu: bool = False) -> Callable[[CheckFn], CheckFn]:
    """Register ``fn`` as a self-test check called ``name``."""

    def register(fn: CheckFn) -> CheckFn:
        _REGISTRY.append(Check(name, fn, gpu))
        return fn

    return register


def registered() -> tuple[Check, ...]:
    return tuple(_REGISTRY)


def run_checks(ctx: Context, checks: tuple[Check, ...] | None = None) -> Iterator[Outcome]:
    """Run every check, yielding one outcome each; a failure never stops the run."""
    for item in registered() if checks is None else checks:
        if item.needs_gpu and not ctx.gpu:
            yield Outcome(item.name, "SKIP", "needs a GPU", 0.0)
            continue
        start = time.perf_counter()
        try:
            detail = item.fn(ctx)
        except Exception as exc:
            last = traceback.extract_tb(exc.__traceback__)[-1]
            where = f" [{last.filename.rsplit('/', 1)[-1]}:{last.lineno}]"
            yield Outcome(item.name, "FAIL", f"{type(exc).__name__}: {exc}{where}", time.perf_counter() - start)
        else:
            yield Outcome(item.name, "PASS", "" if detail is None else str(detail), time.perf_counter() - start)
