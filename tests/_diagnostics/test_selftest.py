"""The self-test registry and runner of ``python -m nvmath``."""

from __future__ import annotations

from nvmath._diagnostics import selftest
from nvmath._diagnostics.selftest import Check, Context, run_checks


def _ok(ctx):
    return "fine"


def _boom(ctx):
    raise ValueError("broken on purpose")


def test_passing_check_reports_pass_with_detail():
    """A check that returns normally is PASS and carries its return value as detail."""
    (outcome,) = run_checks(Context(gpu=False), (Check("ok", _ok, False),))
    assert (outcome.status, outcome.detail) == ("PASS", "fine")


def test_failing_check_reports_fail_and_run_continues():
    """An exception becomes FAIL naming the error, and later checks still run."""
    outcomes = list(run_checks(Context(gpu=False), (Check("boom", _boom, False), Check("ok", _ok, False))))
    assert [o.status for o in outcomes] == ["FAIL", "PASS"]
    assert "ValueError: broken on purpose" in outcomes[0].detail


def test_gpu_check_is_skipped_without_gpu():
    """GPU checks are SKIP, not FAIL, when the context has no GPU."""
    (outcome,) = run_checks(Context(gpu=False), (Check("g", _boom, True),))
    assert outcome.status == "SKIP"


def test_gpu_check_runs_with_gpu():
    """GPU checks run when the context says a GPU is present."""
    (outcome,) = run_checks(Context(gpu=True), (Check("g", _ok, True),))
    assert outcome.status == "PASS"


def test_decorator_registers_check(monkeypatch):
    """@check adds the function to the registry with its GPU requirement."""
    monkeypatch.setattr(selftest, "_REGISTRY", [])
    selftest.check("demo", gpu=True)(_ok)
    (item,) = selftest.registered()
    assert (item.name, item.needs_gpu, item.fn) == ("demo", True, _ok)
