"""Tests of benchmarks.measure and benchmarks.context: statistics, rotation and running one case."""

from __future__ import annotations

import pytest

from benchmarks.context import Context, Settings, rotation_count
from benchmarks.measure import device_iterations, run_one, summarize, timing
from benchmarks.registry import Case, Prepared, Skip

QUICK = Settings(warmup=1, iterations=3, host_calls=5, host_repeats=3, quick=True)


def test_summarize():
    """summarize gives the median, the IQR, the minimum and the count."""
    s = summarize([3.0, 1.0, 2.0, 4.0, 5.0])
    assert s == {"median": 3.0, "spread": 2.0, "min": 1.0, "n": 5}


def test_timing_is_loaded_by_path_not_package():
    """The harness's timing module is the library file loaded by path, not imported via nvmath."""
    assert timing.__name__ == "benchmarks._timing"
    assert timing.__file__.endswith("timing.py")


@pytest.mark.parametrize(
    ("input_bytes", "l2", "expected"),
    [(1 << 30, 60 << 20, 1), (16 << 20, 60 << 20, 8), (1, 60 << 20, 64), (1 << 20, 0, 1), (0, 60 << 20, 1)],
)
def test_rotation_count(input_bytes, l2, expected):
    """Rotation covers more than twice the L2 with at most 64 sets; no rotation when unknown."""
    n = rotation_count(input_bytes, l2)
    assert n == expected
    if l2 and input_bytes and n < 64:
        assert n * input_bytes > 2 * l2


def test_host_cases_do_not_rotate_inputs():
    """A host-mode setup sees one input set (it times host cost, not L2); a device setup rotates."""
    seen = {}

    def setup(ctx):
        seen[ctx.mode] = ctx.rotation(1)
        return lambda: None

    ctx = Context(settings=QUICK, l2_bytes=60 << 20)
    run_one(_case(setup, mode="host"), "nvmath", ctx)
    assert seen == {"host": 1}
    assert Context(settings=QUICK, l2_bytes=60 << 20).rotation(1) == 64


def test_settings_for_run():
    """--quick settings are lighter than the defaults."""
    quick, full = Settings.for_run(quick=True), Settings.for_run(quick=False, seed=7)
    assert quick.quick and quick.iterations < full.iterations and full.seed == 7


def _case(setup, **kw):
    return Case(
        suite="t", name="c", setups={"nvmath": setup}, mode=kw.pop("mode", "host"), needs_gpu=False, **kw
    )


def test_run_one_host_ok():
    """A host case yields us/call samples and a summary."""
    r = run_one(_case(lambda ctx: lambda: None), "nvmath", Context(settings=QUICK))
    assert r.status == "ok" and r.unit == "us/call" and r.n == 3 and r.median is not None and r.median >= 0


def test_case_host_calls_caps_the_loop():
    """A case's host_calls sets the calls per loop (never more than the settings')."""
    calls = []
    case = _case(lambda ctx: lambda: calls.append(1), host_calls=2)
    assert run_one(case, "nvmath", Context(settings=QUICK)).status == "ok"
    assert len(calls) == QUICK.warmup + 2 * QUICK.host_repeats
    calls.clear()
    run_one(_case(lambda ctx: lambda: calls.append(1), host_calls=50), "nvmath", Context(settings=QUICK))
    assert len(calls) == QUICK.warmup + QUICK.host_calls * QUICK.host_repeats


def test_run_one_skip_and_import_error():
    """Skip and ImportError in a setup become 'skipped' with the reason."""

    def skip(ctx):
        raise Skip("no fp8 here")

    def missing(ctx):
        import nvmath._internal.does_not_exist  # noqa: F401

    assert run_one(_case(skip), "nvmath", Context(settings=QUICK)).note == "Skip: no fp8 here"
    r = run_one(_case(missing), "nvmath", Context(settings=QUICK))
    assert r.status == "skipped" and "ModuleNotFoundError" in r.note


def test_run_one_error_and_teardown():
    """A failing call becomes 'error' naming the exception; teardown runs anyway."""
    torn = []

    def setup(ctx):
        def fn():
            raise ZeroDivisionError("boom")

        return Prepared(fn=fn, teardown=lambda: torn.append(1))

    r = run_one(_case(setup), "nvmath", Context(settings=QUICK))
    assert r.status == "error" and r.note.startswith("ZeroDivisionError: boom") and torn == [1]


def test_run_one_teardown_failure_is_noted():
    """A failing teardown is reported in the note without losing the measurement."""

    def setup(ctx):
        def bad():
            raise OSError("leak")

        return Prepared(fn=lambda: None, teardown=bad, note="algo 3")

    r = run_one(_case(setup), "nvmath", Context(settings=QUICK))
    assert r.status == "ok" and r.note.startswith("algo 3") and "teardown failed: OSError: leak" in r.note


def test_gpu_case_skipped_without_gpu():
    """A GPU case is skipped with the context's reason when there is no GPU."""
    case = Case(suite="t", name="g", setups={"torch": lambda ctx: lambda: None})
    r = run_one(case, "torch", Context(settings=QUICK, no_gpu_reason="no CUDA device: test"))
    assert r.status == "skipped" and r.note == "no CUDA device: test" and r.unit == "ms"


def test_device_throughput(monkeypatch):
    """Device results get TFLOP/s and GB/s from the median time and the case's flops/bytes."""
    monkeypatch.setattr(timing, "time_on_stream", lambda fn, stream, **kw: [2.0, 2.0, 2.0])
    case = Case(
        suite="t",
        name="d",
        setups={"torch": lambda ctx: lambda: None},
        flops=4e12,
        bytes=8e9,
        needs_gpu=False,
    )
    r = run_one(case, "torch", Context(settings=QUICK))
    assert r.median == 2.0 and r.tflops == pytest.approx(2000.0) and r.gbps == pytest.approx(4000.0)


@pytest.mark.parametrize(
    ("probe_ms", "expected"),
    [
        (0.1, (5, 30)),  # fast: the configured counts
        (100.0, (0, 30)),  # 35 calls = 3.5 s > 3 s: no warm-up, 30 fit
        (200.0, (0, 15)),  # 15 fit in the 3 s budget
        (1500.0, (0, 3)),  # a 1.5 s call still gets the 3-iteration floor
    ],
)
def test_device_iterations_budget(probe_ms, expected):
    """Slow device calls get fewer iterations within budget_s, never below min_iterations."""
    assert device_iterations(probe_ms, Settings()) == expected


def test_cooldown_from_environment(monkeypatch):
    """$NVMATH_BENCH_COOLDOWN sets Settings.cooldown_s (0 when unset); a bad value is refused."""
    from benchmarks.context import COOLDOWN_ENV

    monkeypatch.delenv(COOLDOWN_ENV, raising=False)
    assert Settings.for_run(quick=False).cooldown_s == 0.0
    monkeypatch.setenv(COOLDOWN_ENV, "0.5")
    assert Settings.for_run(quick=True).cooldown_s == 0.5
    monkeypatch.setenv(COOLDOWN_ENV, "-1")
    with pytest.raises(ValueError, match="NVMATH_BENCH_COOLDOWN"):
        Settings.for_run(quick=False)


def test_cooldown_runs_between_setup_and_timing(monkeypatch):
    """The cool-down sleep comes after the setup (which may autotune) and before the timed calls."""
    import benchmarks.measure as measure

    events = []
    monkeypatch.setattr(measure.time, "sleep", lambda s: events.append(("sleep", s)))
    monkeypatch.setattr(measure, "_measure", lambda fn, case, ctx: events.append(("time",)) or [1.0])

    def setup(ctx):
        events.append(("setup",))
        return lambda: None

    settings = Settings(warmup=1, iterations=3, cooldown_s=0.25)
    r = run_one(_case(setup, mode="device"), "nvmath", Context(settings=settings))
    assert r.status == "ok" and events == [("setup",), ("sleep", 0.25), ("time",)]


@pytest.mark.parametrize("enabled", [True, False])
def test_failure_traceback_on_request(monkeypatch, capsys, enabled):
    """With $NVMATH_BENCH_TRACEBACK set, a failing library's whole traceback goes to stderr (a one-shot
    GPU run keeps it); unset, only the error row's one-line note."""
    from benchmarks.measure import TRACEBACK_ENV

    if enabled:
        monkeypatch.setenv(TRACEBACK_ENV, "1")
    else:
        monkeypatch.delenv(TRACEBACK_ENV, raising=False)

    def setup(ctx):
        raise KeyError("deep inside")

    r = run_one(_case(setup), "nvmath", Context(settings=QUICK))
    assert r.status == "error"
    assert ("Traceback" in capsys.readouterr().err) == enabled
