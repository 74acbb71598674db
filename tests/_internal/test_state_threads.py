"""The planners' thread contract (nvmath._internal.state.requires): one thread at a time per object.
A second thread entering a guarded method while another thread is inside one gets the planner's
state error at once; the same thread may nest guarded calls; the flag is cleared on return and on
error. Planners refuse pickling and copying with a TypeError that says why."""

from __future__ import annotations

import copy
import pickle
import threading

import numpy as np
import pytest

import nvmath
from nvmath._errors import InvalidMatmulState
from nvmath._internal.state import FreedOnExit, Lifecycle, PlannerState, requires


class Slow(FreedOnExit):
    """A planner whose execute() blocks until released (to make two calls overlap)."""

    def __init__(self):
        self._lifecycle = Lifecycle("Matmul", InvalidMatmulState)
        self._lifecycle.mark_planned()
        self.entered, self.go = threading.Event(), threading.Event()

    @requires(PlannerState.PLANNED, operands=True)
    def execute(self, *, stream=None):
        self.entered.set()
        assert self.go.wait(10)
        return "done"

    @requires(PlannerState.CREATED, PlannerState.PLANNED)
    def reset_operands(self, a=None):
        return a

    @requires(PlannerState.PLANNED)
    def nested(self):
        return self.reset_operands("x")  # a guarded method calling another, same thread

    @requires(PlannerState.PLANNED)
    def fails(self):
        raise ValueError("boom")

    def free(self):
        self._lifecycle.mark_freed()


@pytest.mark.parametrize("second", ["execute", "reset_operands"])
def test_overlapping_call_from_another_thread_is_refused(second):
    """While thread A is inside execute(), thread B's execute()/reset_operands() raises at once."""
    p = Slow()
    result = []
    worker = threading.Thread(target=lambda: result.append(p.execute()))
    worker.start()
    assert p.entered.wait(10)
    with pytest.raises(InvalidMatmulState, match=rf"Matmul.{second}\(\) called while another thread"):
        getattr(p, second)()
    p.go.set()
    worker.join(10)
    assert result == ["done"]
    p.go.set()
    assert p.execute() == "done"  # free again once A returned


def test_same_thread_may_nest_guarded_calls_and_errors_clear_the_flag():
    """Nested guarded calls in one thread pass; an exception leaves the object usable."""
    p = Slow()
    assert p.nested() == "x"
    with pytest.raises(ValueError, match="boom"):
        p.fails()
    assert p._lifecycle.owner is None
    assert p.reset_operands(1) == 1


def test_real_planner_refuses_overlap(monkeypatch):
    """A CPU Cholesky planner used by two threads at once: the second call raises, the first completes."""
    from nvmath.linalg._solvers import _cpu

    entered, go = threading.Event(), threading.Event()
    real = _cpu.cholesky

    def slow(a, lower):
        entered.set()
        assert go.wait(10)
        return real(a, lower)

    monkeypatch.setattr(_cpu, "cholesky", slow)
    a = np.eye(3) * 4.0
    with nvmath.linalg.Cholesky(a) as planner:
        planner.plan()
        out = []
        worker = threading.Thread(target=lambda: out.append(planner.execute()))
        worker.start()
        assert entered.wait(10)
        with pytest.raises(RuntimeError, match="another thread"):
            planner.reset_operands(a=a)
        go.set()
        worker.join(10)
    np.testing.assert_allclose(out[0], np.eye(3) * 2.0)


def _planners():
    a = np.eye(4)
    yield nvmath.linalg.Cholesky(a)
    yield nvmath.linalg.SVD(a)
    yield nvmath.linalg.DirectSolver(a, a)
    yield nvmath.fft.FFT(a.astype(complex))
    yield nvmath.linalg.generic.Matmul(a, a)


@pytest.mark.parametrize("make", [copy.copy, copy.deepcopy, pickle.dumps])
def test_planners_are_not_picklable(make):
    """Pickling or copying a planner raises TypeError saying planners are not picklable and why."""
    for planner in _planners():
        with planner, pytest.raises(TypeError, match=f"{type(planner).__name__} objects cannot be pickled"):
            make(planner)


def test_torch_planner_cache_is_not_picklable():
    """nvmath.torch.PlannerCache (planned Matmul objects) says why it cannot be pickled."""
    torch_mod = pytest.importorskip("nvmath.torch")
    with pytest.raises(TypeError, match="PlannerCache objects cannot be pickled"):
        pickle.dumps(torch_mod.PlannerCache())
