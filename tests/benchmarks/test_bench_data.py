"""Tests of benchmarks.suites._data: round-robin rotation and the GPU requirement."""

from __future__ import annotations

import pytest

from benchmarks.context import Context, Settings
from benchmarks.registry import Skip
from benchmarks.suites._data import require_gpu, rotate


def test_rotate_round_robin():
    """rotate calls the callables in turn, wrapping around."""
    seen = []
    fn = rotate([lambda i=i: seen.append(i) for i in range(3)])
    for _ in range(7):
        fn()
    assert seen == [0, 1, 2, 0, 1, 2, 0]


def test_rotate_single_and_empty():
    """A single callable is returned as is; no callables is an error."""
    f = lambda: 1
    assert rotate([f]) is f
    with pytest.raises(ValueError):
        rotate([])


def test_require_gpu():
    """require_gpu raises Skip with the context's reason when there is no GPU."""
    with pytest.raises(Skip, match="no CUDA device: x"):
        require_gpu(Context(settings=Settings(), no_gpu_reason="no CUDA device: x"))
