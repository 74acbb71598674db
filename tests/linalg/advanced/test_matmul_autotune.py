"""Autotuning decisions on the CPU: paired rounds, drift, noise, the head-to-head and the log.

A fake stream with a simulated clock stands in for the GPU: ``run(i)`` advances the clock by
candidate ``i``'s time (scaled by a drift of the run and perturbed by noise), events read the clock,
so :func:`_autotune.measure` runs unchanged.
"""

from __future__ import annotations

import logging
import random
from types import SimpleNamespace

import pytest

from nvmath.linalg.advanced import _autotune
from nvmath.linalg.advanced._autotune import Comparison, choose, compare, confirm, decide


class _Event:
    def __init__(self):
        self.t: float | None = None

    def __sub__(self, other: _Event) -> float:
        assert self.t is not None and other.t is not None, "event not recorded"
        return self.t - other.t


class FakeGPU:
    """A stream + device with a simulated clock (ms).

    Args:
        base: each candidate's true time right after an L2 flush.
        drift: ``f(calls so far)`` multiplying every call's time (clock/power drift).
        noise: relative uniform noise of each call.
        sustained: each candidate's time when it runs right after another call (no flush between);
            default: as after a flush.
    """

    def __init__(self, base, drift=lambda n: 1.0, noise=0.0, seed=0, sustained=None):
        self.base, self.drift, self.noise = list(base), drift, noise
        self.sustained = list(sustained or base)
        self.rng = random.Random(seed)
        self.clock = 0.0
        self.calls = 0
        self.flushed = True
        self.log: list[int] = []
        self.device = self

    # device / stream protocol used by measure()
    def create_event(self, options=None):
        return _Event()

    def record(self, event):
        event.t = self.clock

    def sync(self):
        pass

    def flush(self, stream):
        assert stream is self
        self.clock += 0.05
        self.flushed = True

    def run(self, i: int) -> None:
        t = (self.base if self.flushed else self.sustained)[i]
        t *= self.drift(self.calls) * (1.0 + self.rng.uniform(-self.noise, self.noise))
        self.clock += t
        self.calls += 1
        self.flushed = False
        self.log.append(i)

    def timer(self, run, count, **kw):
        return _autotune.measure(run, count, self, flusher=self.flush, **kw)

    def sequential_timer(self, run, count, *, iterations, order):
        """The design autotune must not use: each candidate's iterations back to back."""
        samples = [[] for _ in range(count)]
        for i in order:
            for _ in range(iterations):
                self.flush(self)
                start = self.clock
                run(i)
                samples[i].append(self.clock - start)
        return samples


def _throttling(n):
    """Times grow 1 % per 10 calls: a GPU losing its boost clock during a long bf16 run."""
    return 1.0 + 0.001 * n


def test_measure_runs_paired_rotating_rounds():
    """Warm-up per candidate, then rounds that run every candidate once, the first rotating."""
    gpu = FakeGPU([1.0, 2.0, 3.0])
    samples = gpu.timer(gpu.run, 3, iterations=4, warmup=1)
    assert gpu.log[:3] == [0, 1, 2]
    assert gpu.log[3:] == [0, 1, 2, 1, 2, 0, 2, 0, 1, 0, 1, 2]
    assert samples == [pytest.approx([float(i)] * 4) for i in (1, 2, 3)]


def test_measure_bursts_average_back_to_back_calls():
    """With burst=k a sample is the mean of k back-to-back calls after one flush."""
    gpu = FakeGPU([1.0, 1.0], sustained=[2.0, 0.5])
    samples = gpu.timer(gpu.run, 2, iterations=2, warmup=0, burst=3)
    assert samples[0] == pytest.approx([(1 + 2 + 2) / 3] * 2)
    assert samples[1] == pytest.approx([(1 + 0.5 + 0.5) / 3] * 2)
    assert len(gpu.log) == 12


def test_compare_uses_paired_ratios():
    """Drift common to a round cancels in the ratio; the margin is max(1 %, IQR of the ratios)."""
    first = [1.0, 1.1, 1.2, 1.3, 1.4]
    c = compare([0.9 * t for t in first], first)
    assert c.ratio == pytest.approx(0.9) and c.spread == pytest.approx(0.0) and c.wins
    assert c.margin == _autotune.MIN_GAIN
    assert not compare([0.995 * t for t in first], first).wins  # within MIN_GAIN
    noisy = compare([0.9, 1.3, 0.7, 1.1, 0.95], [1.0] * 5)
    assert noisy.margin == pytest.approx(noisy.spread) and not noisy.wins
    assert confirm([1.0, 1.01, 0.99], [2.0, 2.01, 1.99])
    assert confirm([1.0, 1.5, 0.5], [1.1, 1.6, 0.6])  # noisy rounds, yet it wins in every one
    assert not confirm([1.0, 1.5, 0.5], [1.1, 1.2, 0.6])  # loses one round: the spread is too large
    with pytest.raises(ValueError, match="paired"):
        compare([1.0], [1.0, 2.0])


@pytest.mark.parametrize(
    "samples,order,challenger",
    [
        ([[1.0] * 3, [0.5] * 3, [0.8] * 3], [1, 2, 0], 1),  # a clear winner, the rest by ratio
        ([[1.0, 1.2, 1.0], [0.9, 1.25, 0.8], [1.5] * 3], [0, 1, 2], None),  # within the spread
        ([[1.0] * 2, [1.0] * 2], [0, 1], None),  # a tie keeps the first choice
        ([[1.0] * 2, [0.995] * 2], [0, 1], None),  # 0.5 % is below MIN_GAIN
        ([[0.4]], [0], None),
        ([], [], None),
    ],
)
def test_choose_keeps_the_first_choice_unless_clearly_beaten(samples, order, challenger):
    """choose() keeps candidate 0 unless another beats it beyond max(1 %, the paired spread)."""
    decision = choose(samples)
    assert decision.order == order and decision.challenger == challenger


def test_sequential_design_is_fooled_by_drift_but_paired_rounds_are_not():
    """Under throttling the first-timed candidate looks faster; paired interleaved rounds keep #0."""
    base = [1.0, 1.0, 1.02]  # the challengers are no faster than the first choice
    gpu = FakeGPU(base, drift=_throttling)
    fooled = choose(gpu.sequential_timer(gpu.run, 3, iterations=10, order=[1, 2, 0]))
    assert fooled.chosen == 1  # a sequential design would switch to the first-timed candidate
    gpu = FakeGPU(base, drift=_throttling)
    decision = decide(gpu.timer, gpu.run, 3, iterations=10)
    assert decision.chosen == 0 and decision.challenger is None
    assert decision.comparisons[1].ratio == pytest.approx(1.0, abs=0.005)
    assert decision.order == [0, 1, 2]


@pytest.mark.parametrize("seed", range(20))
def test_noise_and_drift_never_replace_an_equal_first_choice(seed):
    """±3 % noise with drift: an equally fast challenger never replaces the first choice."""
    gpu = FakeGPU([1.0, 1.0, 1.0, 1.0], drift=_throttling, noise=0.03, seed=seed)
    assert decide(gpu.timer, gpu.run, 4, iterations=10).chosen == 0


@pytest.mark.parametrize("seed", range(10))
def test_a_real_win_is_taken_despite_drift_and_noise(seed):
    """A challenger 8 % faster wins both rounds and the head-to-head; the rest follow by ratio."""
    gpu = FakeGPU([1.0, 1.05, 0.92, 1.2], drift=_throttling, noise=0.01, seed=seed)
    decision = decide(gpu.timer, gpu.run, 4, iterations=10)
    assert decision.order == [2, 0, 1, 3]
    assert decision.confirmation is not None and decision.confirmation.wins


def test_noisy_rounds_send_a_promising_challenger_to_the_head_to_head():
    """±10 % noise per flushed call hides a 7 % win from the first rounds' margin; the fastest
    challenger by >= 1 % still gets the head-to-head (bursts: less noise) and wins it in most runs."""
    wins = 0
    for seed in range(10):
        gpu = FakeGPU([1.0, 0.93], noise=0.1, seed=seed)
        decision = decide(gpu.timer, gpu.run, 2, iterations=10)
        if decision.challenger is None:  # not qualified in the rounds: the promising path
            assert decision.promising == 1 and decision.confirmation is not None
        wins += decision.chosen == 1
    assert wins >= 8


@pytest.mark.parametrize("seed", range(30))
def test_noise_never_promotes_a_slower_challenger(seed):
    """With ±10 % noise a challenger 1-3 % slower is never chosen, promising or not."""
    gpu = FakeGPU([1.0, 1.01, 1.03], noise=0.1, seed=seed)
    assert decide(gpu.timer, gpu.run, 3, iterations=10).chosen == 0


def test_step_throttle_midway_does_not_decide():
    """A sudden 15 % clock drop halfway through hits every candidate of a round alike."""
    gpu = FakeGPU([1.0, 0.995], drift=lambda n: 1.0 if n < 12 else 1.15)
    assert decide(gpu.timer, gpu.run, 2, iterations=10).chosen == 0


def test_head_to_head_rejects_a_win_that_does_not_survive_sustained_runs():
    """Faster right after an L2 flush but slower back to back: the bursts of the duel keep #0."""
    gpu = FakeGPU([1.0, 0.9], sustained=[1.0, 1.1])
    decision = decide(gpu.timer, gpu.run, 2, iterations=5)
    assert decision.challenger == 1 and decision.confirmation is not None
    assert not decision.confirmation.wins and decision.order == [0, 1]
    assert "not confirmed" in decision.describe()


def test_decision_is_logged_at_info(caplog):
    """decide() logs first choice, ratios, margins, the head-to-head and the winner at INFO."""
    gpu = FakeGPU([1.0, 0.8, 1.1], noise=0.005)
    log = logging.getLogger("test.autotune")
    with caplog.at_level(logging.INFO, logger="test.autotune"):
        assert decide(gpu.timer, gpu.run, 3, 6, log).order == [1, 0, 2]
    text = caplog.text
    assert "6 paired rounds" in text and "first choice #0 1.0" in text
    assert "#1 x0.8" in text and "needs < x0.99" in text and "#2 x1.1" in text
    assert "head-to-head #1" in text and "confirmed; chose #1" in text


def test_tuned_plan_passes_the_log_and_applies_tune(monkeypatch, caplog):
    """tuned_plan() gives tune() the planner's logger and returns the plan and tune()'s order."""
    seen = {}

    def fake_tune(run, count, handle, device_id, iterations, log):
        seen["log"] = log
        return [2, 0, 1], [(1.0, 0.0), (1.2, 0.0), (0.5, 0.0)]

    monkeypatch.setattr(_autotune, "cache_key", lambda spec, plan: None)
    monkeypatch.setattr(_autotune, "tune", fake_tune)
    log = logging.getLogger("test.autotune")
    mm = SimpleNamespace(log=log, runner=lambda plans, handle: (None, []), spec=SimpleNamespace(device_id=0))
    plan = SimpleNamespace(algorithms=[object()] * 3)
    with caplog.at_level(logging.INFO, logger="test.autotune"):
        assert _autotune.tuned_plan(mm, plan, None, None, 4) == (plan, [2, 0, 1])
    assert seen["log"] is log and "chose #2 (0.5000 ms; first choice 1.0000 ms)" in caplog.text


def test_comparison_margin_property():
    """The margin is the larger of MIN_GAIN and the spread."""
    assert Comparison(0.95, 0.02).margin == 0.02 and Comparison(0.95, 0.02).wins
    assert Comparison(0.985, 0.0).margin == _autotune.MIN_GAIN and not Comparison(0.995, 0.0).wins


def test_tuned_plan_picks_the_formulation_of_the_winner(monkeypatch):
    """Candidates of both formulations are timed together; the winner's plan comes back with its own order."""
    monkeypatch.setattr(_autotune, "cache_key", lambda spec, plan: None)
    monkeypatch.setattr(
        _autotune,
        "tune",
        lambda run, count, *a: ([3, 0, 4, 1, 2], [(1.0, 0.0)] * 3 + [(0.5, 0.0), (0.9, 0.0)]),
    )
    mm = SimpleNamespace(
        log=logging.getLogger("t"), runner=lambda plans, handle: (None, []), spec=SimpleNamespace(device_id=0)
    )
    plan, alt = SimpleNamespace(algorithms=[object()] * 3), SimpleNamespace(algorithms=[object()] * 2)
    assert _autotune.tuned_plan(mm, plan, alt, None, 4) == (alt, [0, 1])


def test_tuned_plan_falls_back_when_a_row_order_candidate_fails(monkeypatch):
    """A cuBLASLt error while timing both formulations retries with the default formulation only."""
    from nvmath.bindings import cublasLt as lt

    calls = []

    def fake_tune(run, count, *a):
        calls.append(count)
        if count == 5:
            raise lt.cuBLASLtError(15)
        return [1, 0, 2], [(1.0, 0.0)] * 3

    monkeypatch.setattr(_autotune, "cache_key", lambda spec, plan: None)
    monkeypatch.setattr(_autotune, "tune", fake_tune)
    mm = SimpleNamespace(
        log=logging.getLogger("t"), runner=lambda plans, handle: (None, []), spec=SimpleNamespace(device_id=0)
    )
    plan, alt = SimpleNamespace(algorithms=[object()] * 3), SimpleNamespace(algorithms=[object()] * 2)
    assert _autotune.tuned_plan(mm, plan, alt, None, 4) == (plan, [1, 0, 2]) and calls == [5, 3]
