"""Tests of nvmath._internal.timing: statistics, host timing, stream handles and CUDA-event timing."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from nvmath._internal import timing

SOURCE = Path(timing.__file__)


def test_median():
    """median handles odd and even counts and rejects no samples."""
    assert timing.median([3.0, 1.0, 2.0]) == 2.0
    assert timing.median([4, 1, 2, 3]) == 2.5
    with pytest.raises(ValueError):
        timing.median([])


def test_spread_iqr_and_mad():
    """spread gives the inclusive IQR or the median absolute deviation."""
    xs = [1.0, 2.0, 3.0, 4.0, 5.0]
    assert timing.spread(xs) == pytest.approx(2.0)
    assert timing.spread(xs, "mad") == pytest.approx(1.0)
    assert timing.spread([7.0]) == 0.0


def test_spread_errors():
    """spread rejects an unknown kind and no samples."""
    with pytest.raises(ValueError, match="'iqr' or 'mad'"):
        timing.spread([1.0, 2.0], "std")
    with pytest.raises(ValueError):
        timing.spread([])


def test_host_per_call_counts_calls_and_syncs():
    """The host timer makes warmup + repeats*calls calls and one sync per loop (plus one after warm-up)."""
    calls, syncs = [], []
    samples = timing.time_host_per_call(
        lambda: calls.append(1), calls=50, repeats=3, warmup=4, sync=lambda: syncs.append(1)
    )
    assert len(samples) == 3 and all(s >= 0 for s in samples)
    assert len(calls) == 4 + 150 and len(syncs) == 4


def test_host_per_call_units_are_microseconds(monkeypatch):
    """Samples are microseconds per call: with a clock (ns) that each call advances by 2 ms, three
    calls per loop give exactly 2000 us per call (a fake clock: no wall-clock assert)."""
    now = [0]
    monkeypatch.setattr(timing.time, "perf_counter_ns", lambda: now[0])

    def call():
        now[0] += 2_000_000

    assert timing.time_host_per_call(call, calls=3, repeats=2, warmup=1) == [2000.0, 2000.0]


def test_host_per_call_validates():
    """The host timer rejects non-positive counts."""
    with pytest.raises(ValueError):
        timing.time_host_per_call(lambda: None, calls=0)


def test_stream_handle_forms():
    """stream_handle accepts ints, __cuda_stream__ objects and objects with .handle."""

    class Proto:
        def __cuda_stream__(self):
            return (0, 1234)

    class Core:
        handle = 99

    assert timing.stream_handle(7) == 7
    assert timing.stream_handle(Proto()) == 1234
    assert timing.stream_handle(Core()) == 99
    with pytest.raises(TypeError):
        timing.stream_handle("default")


def test_import_touches_no_driver():
    """Importing the module imports neither cuda.core nor cuda.bindings."""
    code = (
        "import importlib.util, sys\n"
        f"spec = importlib.util.spec_from_file_location('t', {str(SOURCE)!r})\n"
        "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)\n"
        "print(sorted(n for n in sys.modules if n.startswith(('cuda', 'nvmath'))))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_module_is_self_contained():
    """The module imports nothing from nvmath at top level (the benchmark harness loads it by path)."""
    tree = ast.parse(SOURCE.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            assert not (node.module or "").startswith("nvmath")
        elif isinstance(node, ast.Import):
            assert not any(a.name.startswith("nvmath") for a in node.names)


def test_time_on_stream_validates_before_touching_cuda():
    """time_on_stream rejects bad counts before any CUDA call."""
    with pytest.raises(ValueError):
        timing.time_on_stream(lambda: None, 0, iterations=0)


@pytest.mark.gpu
def test_time_on_stream_on_gpu():
    """time_on_stream returns one positive ms value per iteration for a device memset."""
    from cuda.bindings import driver
    from cuda.core import Device

    dev = Device(0)
    dev.set_current()
    stream = dev.create_stream()
    buf = dev.allocate(64 << 20, stream=stream)

    def work():
        driver.cuMemsetD8Async(
            driver.CUdeviceptr(int(buf.handle)), 1, 64 << 20, driver.CUstream(int(stream.handle))
        )

    with timing.L2Flusher(0) as flusher:
        assert flusher.nbytes == 2 * timing.l2_cache_size(0)
        times = timing.time_on_stream(work, stream, warmup=2, iterations=5, flush_l2=flusher)
    assert len(times) == 5 and all(t > 0 for t in times)
    assert timing.time_on_stream(work, stream, iterations=2, flush_l2=True)
    buf.close()


def test_timing_event_options_builds_without_a_gpu():
    """timing_event_options builds EventOptions with timing on for the installed cuda.core."""
    pytest.importorskip("cuda.core")
    options = timing.timing_event_options()
    assert getattr(options, "timing_enabled", getattr(options, "enable_timing", None)) is True
