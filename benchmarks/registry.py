"""The case registry: a suite is a set of cases, a case has one setup per library.

A suite module (``benchmarks/suites/<name>.py``) registers its cases at import time::

    def _torch(ctx):                      # setup: prepare inputs, return a zero-arg callable
        torch = torch_on_ctx_stream(ctx)
        a = ...
        return lambda: torch.matmul(a, a)

    register(Case(suite="matmul", name="bf16-8192", setups={"torch": _torch, "nvmath": _ours},
                  flops=2 * 8192**3))

A setup receives the run's :class:`~benchmarks.context.Context` and returns the callable to time
(or a :class:`Prepared` with a teardown); it raises :class:`Skip` (or ``ImportError``) when the
library cannot run the case. Setups must import their libraries lazily.
"""

from __future__ import annotations

import fnmatch
import importlib
import pkgutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "BASELINE_LIBRARIES",
    "LIBRARIES",
    "MODES",
    "OURS",
    "REGISTRY",
    "SUBPROCESS_LIBRARIES",
    "Case",
    "Prepared",
    "Registry",
    "Skip",
    "available_suites",
    "load_suite",
    "register",
]

OURS = "nvmath"
LIBRARIES: tuple[str, ...] = (
    "nvmath", "torch", "cupy", "cuda.core", "nvmath-python", "numpy", "python", "nvmath-1gpu",
)  # fmt: skip
"""Every library name a case may have a setup for, in table order."""
SUBPROCESS_LIBRARIES = frozenset({"nvmath-python"})
"""Libraries that run in their own process (they share the import name ``nvmath``)."""
BASELINE_LIBRARIES = frozenset({"python", "nvmath-1gpu"})
"""Reference rows that always run when a case has them and are never a peer: ``python`` (e.g. an
unguarded method), ``nvmath-1gpu`` (the distributed suite's problem on one GPU through our single-GPU
cuFFT / cuBLASLt: the base of its efficiency column)."""
MODES = ("device", "host")
"""``device``: CUDA-event ms per call; ``host``: host us per call in a loop with one sync."""


class Skip(Exception):
    """Raised by a setup when its library cannot run the case (the reason is reported)."""


@dataclass(frozen=True)
class Prepared:
    """What a setup may return instead of a bare callable.

    Attributes:
        fn: the zero-argument callable to time.
        teardown: called once after timing (free buffers, restore state).
        note: a remark shown in the report (e.g. the algorithm chosen).
    """

    fn: Callable[[], Any]
    teardown: Callable[[], Any] | None = None
    note: str = ""


Setup = Callable[[Any], "Callable[[], Any] | Prepared"]


@dataclass(frozen=True)
class Case:
    """One benchmark case.

    Attributes:
        suite: the suite name.
        name: the case name, unique within the suite.
        setups: library name -> setup function.
        mode: ``"device"`` or ``"host"`` (see :data:`MODES`).
        flops: floating-point operations per call (for TFLOP/s), if meaningful.
        bytes: bytes moved per call (for GB/s), if meaningful.
        needs_gpu: whether the case needs a CUDA device.
        quick: whether ``--quick`` runs include the case.
        description: one line for the report.
        host_calls: host mode: calls per loop for this case (``None``: the settings'; a few for
            calls that take a large fraction of a second, such as starting an interpreter).
    """

    suite: str
    name: str
    setups: Mapping[str, Setup]
    mode: str = "device"
    flops: float | None = None
    bytes: float | None = None
    needs_gpu: bool = True
    quick: bool = True
    description: str = ""
    tags: tuple[str, ...] = field(default=())
    host_calls: int | None = None

    def __post_init__(self) -> None:
        if not self.suite or not self.name:
            raise ValueError(f"a case needs a suite and a name; got {self.suite!r}/{self.name!r}")
        if self.mode not in MODES:
            raise ValueError(f"case {self.name!r}: mode must be one of {MODES}; got {self.mode!r}")
        unknown = sorted(set(self.setups) - set(LIBRARIES))
        if unknown:
            raise ValueError(
                f"case {self.name!r}: unknown libraries {unknown}; known: {', '.join(LIBRARIES)}"
            )
        if not self.setups:
            raise ValueError(f"case {self.name!r} has no setups")
        if self.host_calls is not None and self.host_calls < 1:
            raise ValueError(f"case {self.name!r}: host_calls must be >= 1; got {self.host_calls}")

    @property
    def key(self) -> str:
        """``suite/name``."""
        return f"{self.suite}/{self.name}"


class Registry:
    """Cases by suite, in registration order."""

    def __init__(self) -> None:
        self._suites: dict[str, dict[str, Case]] = {}

    def add(self, case: Case) -> Case:
        """Register ``case``; a duplicate name in the same suite raises ``ValueError``."""
        suite = self._suites.setdefault(case.suite, {})
        if case.name in suite:
            raise ValueError(f"case {case.key} is already registered")
        suite[case.name] = case
        return case

    def suites(self) -> list[str]:
        """The names of the suites with registered cases."""
        return list(self._suites)

    def cases(self, suite: str, *, quick: bool = False, pattern: str | None = None) -> list[Case]:
        """The cases of ``suite``, optionally only ``quick`` ones and those matching a glob ``pattern``."""
        if suite not in self._suites:
            raise KeyError(
                f"no cases registered for suite {suite!r}; registered: {', '.join(self._suites) or 'none'}"
            )
        cases = list(self._suites[suite].values())
        if quick:
            cases = [c for c in cases if c.quick]
        if pattern:
            patterns = [p.strip() for p in pattern.split(",") if p.strip()]
            cases = [c for c in cases if any(fnmatch.fnmatchcase(c.name, p) for p in patterns)]
        return cases


REGISTRY = Registry()


def register(case: Case) -> Case:
    """Add ``case`` to the global registry and return it."""
    return REGISTRY.add(case)


def available_suites() -> list[str]:
    """The suite modules under ``benchmarks/suites`` (without importing them)."""
    from benchmarks import suites

    return sorted(m.name for m in pkgutil.iter_modules(suites.__path__) if not m.name.startswith("_"))


def load_suite(name: str) -> list[Case]:
    """Import ``benchmarks.suites.<name>`` (registering its cases) and return them."""
    if name not in available_suites():
        raise KeyError(f"unknown suite {name!r}; available: {', '.join(available_suites())}")
    importlib.import_module(f"benchmarks.suites.{name}")
    return REGISTRY.cases(name)
