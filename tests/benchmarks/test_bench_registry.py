"""Tests of benchmarks.registry: cases, suites and discovery."""

from __future__ import annotations

import pytest

from benchmarks.registry import LIBRARIES, Case, Registry, available_suites, load_suite


def _noop(ctx):
    return lambda: None


def test_case_validation():
    """A case needs a suite, a name, a known mode and known libraries."""
    with pytest.raises(ValueError, match="suite and a name"):
        Case(suite="", name="x", setups={"torch": _noop})
    with pytest.raises(ValueError, match="mode must be one of"):
        Case(suite="s", name="x", setups={"torch": _noop}, mode="wall")
    with pytest.raises(ValueError, match="unknown libraries \\['tensorflow'\\]"):
        Case(suite="s", name="x", setups={"tensorflow": _noop})
    with pytest.raises(ValueError, match="no setups"):
        Case(suite="s", name="x", setups={})
    with pytest.raises(ValueError, match="host_calls must be >= 1"):
        Case(suite="s", name="x", setups={"torch": _noop}, host_calls=0)


def test_registry_order_filters_and_duplicates():
    """Cases keep registration order, filter by quick and glob patterns, and names are unique."""
    reg = Registry()
    reg.add(Case(suite="s", name="gemm-bf16", setups={"torch": _noop}))
    reg.add(Case(suite="s", name="gemm-fp32", setups={"torch": _noop}, quick=False))
    reg.add(Case(suite="s", name="fft-1d", setups={"torch": _noop}))
    assert [c.name for c in reg.cases("s")] == ["gemm-bf16", "gemm-fp32", "fft-1d"]
    assert [c.name for c in reg.cases("s", quick=True)] == ["gemm-bf16", "fft-1d"]
    assert [c.name for c in reg.cases("s", pattern="gemm-*")] == ["gemm-bf16", "gemm-fp32"]
    assert [c.name for c in reg.cases("s", pattern="fft*, *fp32")] == ["gemm-fp32", "fft-1d"]
    assert reg.cases("s")[0].key == "s/gemm-bf16"
    with pytest.raises(ValueError, match="already registered"):
        reg.add(Case(suite="s", name="fft-1d", setups={"torch": _noop}))
    with pytest.raises(KeyError, match="no cases registered for suite 'nope'"):
        reg.cases("nope")


def test_suites_are_discovered_and_loaded():
    """The shipped suites are discovered without import and register cases when loaded."""
    assert {"ceilings", "overhead"} <= set(available_suites())
    cases = load_suite("overhead")
    assert {"planner-guard", "wrap-torch-tensor", "stream-none", "allocate-1MiB"} <= {c.name for c in cases}
    assert all(set(c.setups) <= set(LIBRARIES) for c in cases)
    ceilings = {c.name: c for c in load_suite("ceilings")}
    assert ceilings["gemm-bf16-8192"].flops == 2.0 * 8192**3
    assert ceilings["copy-d2d-1024MiB"].bytes == 2 * (1 << 30)
    with pytest.raises(KeyError, match="unknown suite"):
        load_suite("nope")


def test_loading_twice_is_harmless():
    """Loading a suite again does not re-register its cases."""
    first = load_suite("ceilings")
    assert load_suite("ceilings") == first
