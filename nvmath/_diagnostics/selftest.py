"""The self-test of ``python -m nvmath``: a registry of small end-to-end checks.

A check is a function taking a :class:`Context` and raising on failure. Checks declare whether
they need a GPU and which optional packages they need (``requires=("scipy",)``); a check whose needs
are not met here is reported as SKIP with the reason and the install hint, never as FAIL. Each
feature area registers its checks in its own ``checks*`` module.
"""

from __future__ import annotations

import dataclasses
import time
import traceback
from collections.abc import Callable, Iterator

from nvmath._diagnostics import requirements

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
    requires: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class Outcome:
    name: str
    status: str  # "PASS" | "FAIL" | "SKIP"
    detail: str
    seconds: float


_REGISTRY: list[Check] = []


def check(name: str, *, gpu: bool = False, requires: tuple[str, ...] = ()) -> Callable[[CheckFn], CheckFn]:
    """Register ``fn`` as a self-test check called ``name``.

    Args:
        name: what the check shows, as printed in the report.
        gpu: the check needs a GPU (SKIP without one).
        requires: import names of the optional packages it needs (SKIP with the install hint
            when one is missing; see :mod:`nvmath._diagnostics.requirements`).
    """

    def register(fn: CheckFn) -> CheckFn:
        _REGISTRY.append(Check(name, fn, gpu, tuple(requires)))
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
        missing = requirements.unmet(item.requires)
        if missing is not None:
            yield Outcome(item.name, "SKIP", missing, 0.0)
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
