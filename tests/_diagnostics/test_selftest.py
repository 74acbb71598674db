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


def test_check_missing_an_optional_package_is_skipped_with_the_hint():
    """A check requiring an absent package is SKIP (never FAIL) with the install hint, and is not run."""
    (outcome,) = run_checks(Context(gpu=False), (Check("needs pkg", _boom, False, ("surely_not_a_module_xyz",)),))
    assert outcome.status == "SKIP"
    assert "pip install surely_not_a_module_xyz" in outcome.detail


def test_cpu_checks_declare_scipy():
    """The CPU FFT and solver checks declare scipy, so a plain install reports SKIP, not FAIL."""
    from nvmath._diagnostics import checks_fft, checks_solvers  # noqa: F401 - registers the checks

    cpu = [c for c in selftest.registered() if c.name.startswith(("fft:", "solvers:")) and not c.needs_gpu]
    assert cpu and all("scipy" in c.requires for c in cpu)
