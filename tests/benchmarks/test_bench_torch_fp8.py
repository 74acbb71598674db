"""Tests of the FP8 rows' set-up helpers (benchmarks/suites/_torch_fp8.py) that run without a GPU."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from benchmarks.suites import _torch_fp8


def test_bump_moves_versions_without_touching_the_values(monkeypatch):
    """_bump (the stand-in for an optimizer step) moves every parameter's version, so the FP8 layers
    remake their weights' copies, with no operation on the data (no kernel charged to the step)."""
    params = [torch.nn.Parameter(torch.randn(4, 4)), torch.nn.Parameter(torch.randn(3))]
    before = [(p._version, p.detach().clone()) for p in params]

    def no_kernel(*args, **kwargs):
        raise AssertionError("_bump ran an operation on a parameter's data")

    monkeypatch.setattr(torch.Tensor, "mul_", no_kernel)
    _torch_fp8._bump(torch, params)
    for p, (version, values) in zip(params, before):
        assert p._version > version and torch.equal(p.detach(), values)


def test_bump_falls_back_to_an_in_place_multiply(monkeypatch):
    """Where torch lacks autograd.graph.increment_version, _bump multiplies by 1 in place (the versions
    move, the values stay)."""
    monkeypatch.delattr(torch.autograd.graph, "increment_version")
    p = torch.nn.Parameter(torch.randn(5))
    version, values = p._version, p.detach().clone()
    _torch_fp8._bump(torch, [p])
    assert p._version > version and torch.equal(p.detach(), values)
