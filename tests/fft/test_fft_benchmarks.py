"""The `fft` benchmark suite registers every TARGETS.md FFT row (stateless and execute) and the sweep."""

from __future__ import annotations

import importlib
import sys

import pytest

from benchmarks.registry import REGISTRY


@pytest.fixture(scope="module")
def suite():
    """The fft suite module (imported once; it registers its cases)."""
    return importlib.import_module("benchmarks.suites.fft")


def test_target_rows_have_both_variants(suite):
    """Each target row has a stateless and an FFT.execute case against torch, cupy and nvmath-python."""
    names = {c.name: c for c in REGISTRY.cases("fft")}
    for name, spec, _ in suite._TARGETS:
        for variant in (name, name + "-execute"):
            case = names[variant]
            assert {"nvmath", "torch", "cupy", "nvmath-python"} <= set(case.setups)
            assert case.bytes == spec.bytes > 0
    assert names["c2c-1024-host"].mode == "host" and "gaussian-filter-4096x4096" in names


def test_spec_shapes_and_bytes(suite):
    """Output shapes and one-pass byte counts follow the transform kind."""
    c2r = suite.Spec((512, 512, 257), kind="irfft")
    assert c2r.out_shape == (512, 512, 512) and c2r.out_dtype == "float32"
    assert c2r.bytes == 512 * 512 * 257 * 8 + 512**3 * 4
    r2c = suite.Spec((64, 1024, 1024), "float32", (1, 2), "rfft")
    assert r2c.out_shape == (64, 1024, 513) and r2c.fft_type == "R2C"


def test_sweep_is_opt_in(suite, monkeypatch):
    """Sweep cases exist only with NVMATH_BENCH_FFT_SWEEP=1; the sweep covers 2^4..2^24 and non-powers of two."""
    assert not any(c.name.startswith("sweep-") for c in REGISTRY.cases("fft"))
    names = [n for n, _ in suite._sweep_specs()]
    assert "sweep-1d-2^4" in names and "sweep-1d-2^24" in names and "sweep-1d-n10007" in names
    assert any(n.startswith("sweep-3d") for n in names) and any("batch" in n for n in names)
    assert sys.modules["benchmarks.suites.fft"] is suite
