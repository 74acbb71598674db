"""Tests of benchmarks.progress: result lines and the plain / rich displays."""

from __future__ import annotations

import io

from benchmarks.measure import Result
from benchmarks.progress import Progress, format_result


def _ok():
    return Result(
        suite="s",
        case="gemm",
        lib="torch",
        status="ok",
        mode="device",
        unit="ms",
        median=1.5,
        spread=0.02,
        n=30,
        tflops=700.0,
    )


def test_format_result():
    """Result lines show the median, unit, spread, count and throughput, or the skip reason."""
    assert format_result(_ok()) == "s/gemm [torch] 1.5 ms (IQR 0.02, n=30), 700.0 TFLOP/s"
    skipped = Result(
        suite="s", case="c", lib="cupy", status="skipped", mode="host", unit="us/call", note="no cupy"
    )
    assert format_result(skipped) == "s/c [cupy] skipped: no cupy"


def test_plain_progress_lines():
    """Without rich, progress prints a header and one numbered line per result."""
    out = io.StringIO()
    with Progress(2, "suite", use_rich=False, stream=out) as p:
        p.start("gemm [torch]")
        p.finish(_ok())
    lines = out.getvalue().splitlines()
    assert lines == ["suite: 2 measurements", "[1/2] s/gemm [torch] 1.5 ms (IQR 0.02, n=30), 700.0 TFLOP/s"]


def test_rich_progress_prints_results():
    """With rich available, results are still printed as lines on the given stream."""
    import pytest

    pytest.importorskip("rich", reason="rich is not installed (pip install -e '.[bench]')")
    out = io.StringIO()
    with Progress(1, "suite", stream=out) as p:
        p.start("gemm [torch]")
        p.finish(_ok())
    assert "[1/1] s/gemm [torch] 1.5 ms" in out.getvalue()
