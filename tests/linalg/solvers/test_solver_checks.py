"""The dense-solver self-test checks of `python -m nvmath` pass (CPU here, GPU on the GPU machine)."""

from __future__ import annotations

import pytest

import nvmath._diagnostics.checks_solvers  # noqa: F401 - registers the checks
from nvmath._diagnostics.selftest import Context, registered, run_checks

SOLVER_CHECKS = tuple(c for c in registered() if c.name.startswith("solvers:"))


def test_solver_checks_registered():
    """CPU and GPU solver checks are registered."""
    assert any(c.needs_gpu for c in SOLVER_CHECKS) and any(not c.needs_gpu for c in SOLVER_CHECKS)


def test_cpu_solver_checks_pass():
    """Every CPU solver check passes (GPU ones are skipped here)."""
    outcomes = list(run_checks(Context(gpu=False), SOLVER_CHECKS))
    assert all(o.status in ("PASS", "SKIP") for o in outcomes), outcomes
    assert sum(o.status == "PASS" for o in outcomes) >= 2


@pytest.mark.gpu
def test_gpu_solver_checks_pass():
    """Every solver check passes on the GPU."""
    outcomes = list(run_checks(Context(gpu=True), SOLVER_CHECKS))
    assert all(o.status == "PASS" for o in outcomes), outcomes
