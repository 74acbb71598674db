"""The FFT self-test checks of `python -m nvmath` pass (CPU here, GPU on the GPU machine)."""

from __future__ import annotations

import pytest

import nvmath._diagnostics.checks_fft  # noqa: F401 - registers the checks
from nvmath._diagnostics.selftest import Context, registered, run_checks

FFT_CHECKS = tuple(c for c in registered() if c.name.startswith("fft:"))


def test_fft_checks_registered():
    """CPU and GPU FFT checks are registered."""
    assert any(c.needs_gpu for c in FFT_CHECKS) and any(not c.needs_gpu for c in FFT_CHECKS)


def test_cpu_checks_pass():
    """Every CPU FFT check passes."""
    outcomes = list(run_checks(Context(gpu=False), FFT_CHECKS))
    assert all(o.status in ("PASS", "SKIP") for o in outcomes), outcomes


@pytest.mark.gpu
def test_gpu_checks_pass():
    """Every FFT check passes on the GPU."""
    outcomes = list(run_checks(Context(gpu=True), FFT_CHECKS))
    assert all(o.status == "PASS" for o in outcomes), outcomes
