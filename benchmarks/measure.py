"""Running one case for one library: setup, timing, summary into a :class:`Result`."""

from __future__ import annotations

import importlib.util
import os
import sys
import time
import traceback
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from benchmarks.context import Context
from benchmarks.registry import Case, Prepared, Skip

__all__ = [
    "STATUSES", "TRACEBACK_ENV", "UNITS", "Result", "device_iterations", "run_one", "summarize", "timing",
]  # fmt: skip

STATUSES = ("ok", "skipped", "error")
UNITS = {"device": "ms", "host": "us/call"}
TRACEBACK_ENV = "NVMATH_BENCH_TRACEBACK"
"""Set (non-empty): a library's failure also prints its whole traceback on stderr."""


def _load_timing() -> ModuleType:
    """Load the timing helpers by file path (never through ``import nvmath``).

    In the source tree they are ``nvmath/_internal/timing.py``; in the copy of the harness made for
    a peer's subprocess they are ``benchmarks/_timing.py``.
    """
    if "benchmarks._timing" in sys.modules:
        return sys.modules["benchmarks._timing"]
    here = Path(__file__).resolve().parent
    for path in (here / "_timing.py", here.parent / "nvmath" / "_internal" / "timing.py"):
        if path.is_file():
            spec = importlib.util.spec_from_file_location("benchmarks._timing", path)
            assert spec is not None and spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            sys.modules[spec.name] = module
            spec.loader.exec_module(module)
            return module
    raise ImportError(f"timing helpers not found next to {here}")


timing = _load_timing()


@dataclass
class Result:
    """The outcome of one (case, library) pair; ``asdict`` gives its JSON form."""

    suite: str
    case: str
    lib: str
    status: str
    mode: str
    unit: str
    median: float | None = None
    spread: float | None = None
    min: float | None = None
    n: int = 0
    samples: list[float] = field(default_factory=list)
    flops: float | None = None
    bytes: float | None = None
    tflops: float | None = None
    gbps: float | None = None
    note: str = ""
    description: str = ""

    def to_dict(self) -> dict[str, Any]:
        """The JSON-ready dict."""
        return asdict(self)


def summarize(samples: list[float]) -> dict[str, float | int]:
    """Median, spread (IQR), minimum and count of ``samples``."""
    return {
        "median": timing.median(samples),
        "spread": timing.spread(samples, "iqr"),
        "min": float(min(samples)),
        "n": len(samples),
    }


def _throughput(result: Result) -> None:
    if result.mode != "device" or not result.median:
        return
    seconds = result.median * 1e-3
    if result.flops:
        result.tflops = result.flops / seconds / 1e12
    if result.bytes:
        result.gbps = result.bytes / seconds / 1e9


def device_iterations(probe_ms: float, settings: Any) -> tuple[int, int]:
    """``(warmup, iterations)`` that keep one library's case near ``settings.budget_s``.

    ``probe_ms`` is the time of one untimed-so-far call; fast calls get the configured counts.
    """
    per_call_s = max(probe_ms, 1e-6) * 1e-3
    if per_call_s * (settings.warmup + settings.iterations) <= settings.budget_s:
        return settings.warmup, settings.iterations
    fits = int(settings.budget_s / per_call_s)
    return 0, max(settings.min_iterations, min(settings.iterations, fits))


def _measure(fn: Any, case: Case, ctx: Context) -> list[float]:
    s = ctx.settings
    if case.mode == "device":
        probe = timing.time_on_stream(fn, ctx.stream, warmup=0, iterations=1)[0]  # also a warm-up
        warmup, iterations = device_iterations(probe, s)
        agree = ctx.extras.get("agree_iterations") if "collective" in case.tags else None
        if agree is not None:  # a collective must run as often on every rank (the distributed suite)
            warmup, iterations = agree(warmup, iterations)
        return timing.time_on_stream(fn, ctx.stream, warmup=max(0, warmup - 1), iterations=iterations)
    calls = s.host_calls if case.host_calls is None else min(case.host_calls, s.host_calls)
    return timing.time_host_per_call(
        fn,
        calls=calls,
        repeats=s.host_repeats,
        warmup=s.warmup,
        sync=ctx.sync if ctx.has_gpu else None,
    )


def run_one(case: Case, lib: str, ctx: Context) -> Result:
    """Set up ``case`` for ``lib``, time it, and summarize; never raises for a failing library."""
    result = Result(
        suite=case.suite,
        case=case.name,
        lib=lib,
        status="ok",
        mode=case.mode,
        unit=UNITS[case.mode],
        flops=case.flops,
        bytes=case.bytes,
        description=case.description,
    )
    if case.needs_gpu and not ctx.has_gpu:
        result.status, result.note = "skipped", ctx.no_gpu_reason or "no CUDA device"
        return result
    prepared: Prepared | None = None
    try:
        ctx.mode = case.mode
        made = case.setups[lib](ctx)
        prepared = made if isinstance(made, Prepared) else Prepared(fn=made)
        if case.mode == "device" and ctx.settings.cooldown_s > 0:
            time.sleep(ctx.settings.cooldown_s)  # after the setup: autotuning in it heats the GPU
        samples = _measure(prepared.fn, case, ctx)
        result.samples = [float(x) for x in samples]
        stats = summarize(result.samples)
        result.median, result.spread, result.min, result.n = (
            stats["median"],
            stats["spread"],
            stats["min"],
            stats["n"],
        )
        result.note = prepared.note
        _throughput(result)
    except (Skip, ImportError) as exc:
        result.status, result.note = "skipped", f"{type(exc).__name__}: {exc}"
    except Exception as exc:  # noqa: BLE001 - a failing library becomes an error row
        if os.environ.get(TRACEBACK_ENV):  # a one-shot GPU run: the whole traceback, on stderr
            traceback.print_exc(file=sys.stderr)
        result.status = "error"
        result.note = f"{type(exc).__name__}: {exc} @ {traceback.extract_tb(exc.__traceback__)[-1].name}"
    finally:
        if prepared is not None and prepared.teardown is not None:
            try:
                prepared.teardown()
            except Exception as exc:  # noqa: BLE001
                result.note += f" (teardown failed: {type(exc).__name__}: {exc})"
    return result
