"""Autotuning: time candidate algorithms on the device and order them, never worse than the first.

Measurement (:func:`measure`): CUDA events around each timed call, an L2 flush before each timed
call, a warm-up of every candidate, and ``iterations`` *rounds*: each round runs every candidate once
(round-robin, the starting candidate rotating from round to round), so slow drifts of clocks, power
or temperature hit all candidates alike and the samples of one round are *paired*.

Decision (:func:`choose`): every challenger is compared with the heuristic's first choice (candidate
0) on the per-round ratios ``challenger / first choice``. A challenger qualifies only when the median
ratio is below ``1 - margin``, ``margin = max(MIN_GAIN, IQR of the ratios)``; the qualifier with the
best ratio must then also win a head-to-head re-measurement (:func:`confirm`, bursts of back-to-back
calls alternating the two, closer to sustained execution), otherwise candidate 0 stays first. The
other candidates follow by their median paired ratio to candidate 0.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from nvmath._internal import timing
from nvmath._internal.logging import log_phase
from nvmath.bindings import cublasLt as lt
from nvmath.linalg.advanced import _device, _plan
from nvmath.linalg.advanced._algorithm import Algorithm, check_algorithm
from nvmath.linalg.advanced._autotune_cache import autotune_cache, problem_key
from nvmath.linalg.advanced._plan import Plan
from nvmath.linalg.advanced._spec import Spec

__all__ = [
    "MIN_GAIN",
    "Comparison",
    "Decision",
    "Timing",
    "cache_key",
    "choose",
    "compare",
    "confirm",
    "decide",
    "measure",
    "runner",
    "summarize",
    "tune",
    "tuned_plan",
]

Timing = tuple[float, float]
"""``(median ms, spread ms)`` of one candidate."""


def summarize(samples: Sequence[float]) -> Timing:
    """``(median, interquartile range)`` of a candidate's samples (ms)."""
    return timing.median(samples), timing.spread(samples)


MIN_GAIN = 0.01
"""A challenger must be faster than the first choice by at least this fraction (and by more than the
spread of its paired ratios): smaller wins measured with L2 flushes do not reliably survive sustained
back-to-back execution (power and clock effects)."""

DUEL_BURST = 4
"""Back-to-back calls per timed sample in the head-to-head confirmation (no flush inside a burst)."""


@dataclass(frozen=True)
class Comparison:
    """A challenger against the first choice on paired samples (same rounds)."""

    ratio: float
    """Median over rounds of ``challenger time / first-choice time`` (< 1: the challenger is faster)."""
    spread: float
    """Interquartile range of those ratios (the run-to-run spread, relative)."""

    @property
    def margin(self) -> float:
        """The gain a challenger needs: ``max(MIN_GAIN, spread)``."""
        return max(MIN_GAIN, self.spread)

    @property
    def wins(self) -> bool:
        """Whether the challenger is faster beyond the margin."""
        return self.ratio < 1.0 - self.margin


def compare(challenger: Sequence[float], incumbent: Sequence[float]) -> Comparison:
    """Compare paired samples (``challenger[k]`` and ``incumbent[k]`` measured in the same round)."""
    if len(challenger) != len(incumbent) or not challenger:
        raise ValueError(
            f"paired samples need equal, non-zero lengths; got {len(challenger)} and {len(incumbent)}"
        )
    ratios = [c / i if i > 0 else float("inf") for c, i in zip(challenger, incumbent, strict=True)]
    return Comparison(timing.median(ratios), timing.spread(ratios))


def confirm(challenger: Sequence[float], incumbent: Sequence[float]) -> bool:
    """Whether a paired head-to-head re-measurement confirms that the challenger beats the incumbent."""
    return compare(challenger, incumbent).wins


@dataclass
class Decision:
    """The outcome of :func:`choose` (and, in :func:`tune`, of the confirmation)."""

    order: list[int]
    """Candidate indices, the chosen one first."""
    timings: list[Timing]
    """``(median, spread)`` ms per candidate."""
    comparisons: list[Comparison]
    """Per candidate, its paired comparison with candidate 0 (candidate 0: ratio 1, spread 0)."""
    challenger: int | None = None
    """The best qualifying challenger (before confirmation), or ``None``."""
    promising: int | None = None
    """Without a qualifier: the fastest challenger by at least ``MIN_GAIN`` on the median ratio (its
    rounds too noisy to qualify), which the head-to-head may still confirm; else ``None``."""
    confirmation: Comparison | None = field(default=None)
    """The head-to-head comparison of the challenger, when one was measured."""

    @property
    def chosen(self) -> int:
        return self.order[0]

    @property
    def dueled(self) -> int | None:
        """The candidate the head-to-head measures against candidate 0: the challenger, else the
        promising one, else ``None``."""
        return self.challenger if self.challenger is not None else self.promising

    def describe(self) -> str:
        """A one-line account: first choice, each challenger's ratio and margin, the winner."""
        parts = [f"first choice #0 {self.timings[0][0]:.4f} ms"]
        for i, c in enumerate(self.comparisons[1:], start=1):
            parts.append(f"#{i} x{c.ratio:.3f} (needs < x{1 - c.margin:.3f})")
        text = "; ".join(parts)
        dueled = self.dueled
        if dueled is not None and self.confirmation is not None:
            c = self.confirmation
            verdict = "confirmed" if self.chosen == dueled else "not confirmed"
            text += f"; head-to-head #{dueled} x{c.ratio:.3f} (needs < x{1 - c.margin:.3f}): {verdict}"
        return text + f"; chose #{self.chosen}"


def choose(samples: Sequence[Sequence[float]]) -> Decision:
    """Decide from paired samples: ``samples[i][k]`` is candidate ``i``'s time in round ``k``.

    Candidate 0 (the heuristic's first choice) stays first unless a challenger's median paired ratio
    beats it by more than ``max(MIN_GAIN, IQR of the ratios)``; among such challengers the one with the
    smallest ratio wins. The others follow by increasing ratio (ties: planner order).
    """
    if not samples:
        return Decision([], [], [])
    base = samples[0]
    comparisons = [Comparison(1.0, 0.0)] + [compare(s, base) for s in samples[1:]]
    timings = [summarize(s) for s in samples]
    ranked = sorted(range(len(samples)), key=lambda i: (comparisons[i].ratio, i))
    qualifiers = [i for i in ranked if i != 0 and comparisons[i].wins]
    best = qualifiers[0] if qualifiers else 0
    order = [best] + [i for i in ranked if i != best]
    promising = None
    if not qualifiers:
        promising = next((i for i in ranked if i != 0 and comparisons[i].ratio < 1.0 - MIN_GAIN), None)
    return Decision(order, timings, comparisons, challenger=best if best != 0 else None, promising=promising)


def _put_first(decision: Decision, index: int) -> None:
    """Move candidate ``index`` to the front (the head-to-head's verdict), the rest unchanged in order."""
    decision.order.remove(index)
    decision.order.insert(0, index)


def measure(
    run: Callable[[int], Any],
    count: int,
    stream: Any,
    *,
    iterations: int,
    warmup: int = 2,
    burst: int = 1,
    flusher: Callable[[Any], Any] | None = None,
    device: Any = None,
) -> list[list[float]]:
    """Time ``run(i)`` for candidates ``0 .. count-1`` in paired rounds; return ms samples per candidate.

    Round ``k`` runs every candidate once, starting with candidate ``k % count`` (so each candidate
    is equally often first); ``samples[i][k]`` is candidate ``i``'s time in round ``k``.

    Args:
        run: enqueues candidate ``i``'s work on the stream.
        count: the number of candidates.
        stream: a ``cuda.core.Stream`` (its device must be current).
        iterations: timed rounds.
        warmup: untimed calls per candidate first (interleaved).
        burst: back-to-back calls per timed sample (the sample is their mean).
        flusher: called with ``stream`` before each timed sample (an L2 flush), or ``None``.
        device: the ``cuda.core.Device`` that creates the events (default: the stream's).
    """
    for _ in range(warmup):
        for i in range(count):
            run(i)
    device = stream.device if device is None else device
    options = timing.timing_event_options()
    events = [
        [
            (device.create_event(options=options), device.create_event(options=options))
            for _ in range(iterations)
        ]
        for _ in range(count)
    ]
    for k in range(iterations):
        for step in range(count):
            i = (k + step) % count
            if flusher is not None:
                flusher(stream)
            start, end = events[i][k]
            stream.record(start)
            for _ in range(burst):
                run(i)
            stream.record(end)
    stream.sync()
    return [[float(end - start) / burst for start, end in pairs] for pairs in events]


def tune(
    run: Callable[[int], Any],
    count: int,
    handle: Any,
    device_id: int,
    iterations: int,
    log: logging.Logger | None = None,
    *,
    measurer: Callable[..., list[list[float]]] | None = None,
) -> tuple[list[int], list[Timing]]:
    """Measure ``count`` candidates on the stream ``handle``; return ``(order, timings)``.

    The candidates run in paired rounds with an L2 flush before each timed call (:func:`measure`);
    :func:`choose` decides. A challenger must also win a head-to-head re-measurement against
    candidate 0 (``iterations`` paired rounds of :data:`DUEL_BURST` back-to-back calls each,
    alternating which runs first), otherwise candidate 0 stays first. When no challenger qualifies
    because the flushed single-call rounds are too noisy (their spread exceeds the gain), the fastest
    one by at least ``MIN_GAIN`` gets that head-to-head, and takes first place only by winning it
    beyond the head-to-head's own spread.

    Args:
        run: enqueues candidate ``i`` on the stream.
        count: the number of candidates (>= 2).
        handle: a :class:`~nvmath._internal.streams.StreamHandle`.
        device_id: its device.
        iterations: timed rounds.
        log: where to log the decision (INFO), or ``None``.
        measurer: replaces :func:`measure` (tests); called as ``measurer(run, count, stream, ...)``.
    """
    from nvmath._internal import devices, streams

    measurer = measure if measurer is None else measurer
    with streams.stream_ctx(handle):
        device = devices.core_device(device_id)
        stream = handle.core
        flusher = timing.L2Flusher(device_id)
        try:
            decision = decide(
                lambda r, n, **kw: measurer(r, n, stream, flusher=flusher, device=device, **kw),
                run,
                count,
                iterations,
                log,
            )
        finally:
            flusher.close()
    return decision.order, decision.timings


def decide(
    timer: Callable[..., list[list[float]]],
    run: Callable[[int], Any],
    count: int,
    iterations: int,
    log: logging.Logger | None = None,
) -> Decision:
    """The measure-decide-confirm sequence of :func:`tune`, device-free; logs the decision at INFO.

    ``timer(run, count, iterations=..., burst=...)`` returns paired samples per candidate (as
    :func:`measure` does with the stream, flusher and device bound).
    """
    decision = choose(timer(run, count, iterations=iterations))
    dueled = decision.dueled
    if dueled is not None:
        pair = (0, dueled)
        duel = timer(lambda j: run(pair[j]), 2, iterations=iterations, burst=DUEL_BURST)
        decision.confirmation = compare(duel[1], duel[0])
        _put_first(decision, dueled if decision.confirmation.wins else 0)
    if log is not None:
        log.info(
            "Matmul: autotune decision over %d paired rounds (x = time / first choice's time): %s",
            iterations,
            decision.describe(),
        )
    return decision


@dataclass(frozen=True)
class Tuning:
    """What autotuning reads of a :class:`~._planner.Matmul` (the planner makes one per ``autotune()``).

    Attributes:
        spec: the planner's :class:`~._spec.Spec`.
        prefs: the preferences of the plan (``None``: the plan came from given algorithms).
        lt_handle: the cuBLASLt handle.
        log: the planner's logger.
        slots, scales: the operand and scale slots (for another formulation's plan).
        runner: ``(plans, stream handle) -> (run(i), buffers to keep alive)``: runs candidate ``i`` of
            the plans' algorithms, concatenated in order.
    """

    spec: Spec
    prefs: Any
    lt_handle: int
    log: logging.Logger
    slots: Any
    scales: Any
    runner: Callable[[Sequence[Plan], Any], tuple[Callable[[int], None], list]]


def autotune(t: Tuning, current: Plan, handle: Any, iterations: int, prune: int | None) -> Plan:
    """``Matmul.autotune``'s work: gather the candidates, time them; return the winner's plan.

    The candidates: ``current``'s algorithms, those of the ``ORDER_ROW`` formulation where it applies
    (:func:`._plan.row_plan`), and for each formulation those the heuristic offers with autotuning's
    larger workspace cap (:func:`._plan.widen`). After a failure ``current`` is as it was. The winner's
    plan (``current`` or the other formulation's, which the planner then installs) keeps its candidates
    fastest first (``prune``: only that many), without losing wide ones.
    """
    spec, prefs, lt_handle, log = t.spec, t.prefs, t.lt_handle, t.log
    alt = _plan.row_plan(spec, t.slots, t.scales, prefs, current, handle, lt_handle, log)
    planned = list(current.algorithms)
    try:
        for p in (current, alt):
            if p is not None and (added := _plan.widen(p, spec, prefs, lt_handle, log)):
                log.info("Matmul: autotuning adds %d candidates that need a larger workspace", added)
        with log_phase(log, "Matmul: autotuning"):
            plan, order = tuned_plan(t, current, alt, handle, iterations)
    except BaseException:
        current.algorithms = planned
        if alt is not None:
            alt.close()
        raise
    if plan is not current:
        current.algorithms = planned  # the ORDER_ROW formulation won
    elif alt is not None:
        alt.close()
    plan.algorithms = [plan.algorithms[i] for i in order][: prune or None]
    _plan.trim_workspace(plan)
    return plan


def tuned_plan(t: Tuning, plan: Any, alt: Any, handle: Any, iterations: int) -> tuple[Any, list[int]]:
    """The winning plan and its candidate order: from the cache, or measured.

    ``alt`` is another formulation of the same product (``ORDER_ROW`` layouts) or ``None``; its
    candidates are timed beside ``plan``'s, and candidate 0 (``plan``'s first choice) stays the
    incumbent every challenger must beat (see :func:`decide`). A cached winner (of either
    formulation) is validated (``cublasLtMatmulAlgoCheck``) and put first; otherwise the winner is
    stored under its formulation's key when the cache is enabled.
    """
    plans = [plan] if alt is None else [plan, alt]
    for candidate in plans:
        key = cache_key(t.spec, candidate)
        cached = _from_cache(t, key, candidate) if key else None
        if cached is not None:
            return candidate, cached
    index = [(no, i) for no, p in enumerate(plans) for i in range(len(p.algorithms))]
    if len(index) < 2:
        t.log.info("Matmul: autotuning skipped: only one algorithm was planned")
        return plan, [0]
    run, _keep = t.runner(plans, handle)
    try:
        order, timings = tune(run, len(index), handle, t.spec.device_id, iterations, t.log)
    except lt.cuBLASLtError as exc:
        if alt is None:
            raise
        t.log.warning(
            "Matmul: an ORDER_ROW candidate failed (%s); autotuning the default formulation only", exc
        )
        return tuned_plan(t, plan, None, handle, iterations)
    winner, _ = index[order[0]]
    chosen = plans[winner]
    own = [index[j][1] for j in order if index[j][0] == winner]
    t.log.info(
        "Matmul: autotuned %d algorithms%s; median ms %s; chose #%d (%.4f ms; first choice %.4f ms)%s",
        len(index), "" if alt is None else f" ({len(plan.algorithms)} + {len(alt.algorithms)} ORDER_ROW)",
        [round(t[0], 4) for t in timings], order[0], timings[order[0]][0], timings[0][0],
        " in the ORDER_ROW formulation" if winner else "",
    )  # fmt: skip
    key = cache_key(t.spec, chosen)
    if key:
        best = chosen.algorithms[own[0]]
        autotune_cache.store(
            key, best.to_bytes(), algorithm_id=best.algorithm_id, median_ms=timings[order[0]][0],
            first_choice_ms=timings[0][0],
        )  # fmt: skip
    return chosen, own


def _from_cache(t: Tuning, key: str, plan: Any) -> list[int] | None:
    entry = autotune_cache.lookup(key)
    if entry is None:
        return None
    algorithm = Algorithm.from_bytes(entry["algorithm"])
    try:
        check_algorithm(t.lt_handle, plan.desc.ptr, plan.layouts.ptrs, algorithm)
    except ValueError as exc:
        t.log.warning("Matmul: ignoring a cached autotuning result: %s", exc)
        return None
    raw = algorithm.to_bytes()[:64]
    index = next((i for i, a in enumerate(plan.algorithms) if a.to_bytes()[:64] == raw), None)
    if index is None:
        plan.algorithms.append(algorithm)
        index = len(plan.algorithms) - 1
    t.log.info(
        "Matmul: autotuning result from the cache (%s): algorithm %d",
        autotune_cache.path,
        algorithm.algorithm_id,
    )
    return [index] + [i for i in range(len(plan.algorithms)) if i != index]


def cache_key(spec: Spec, plan: Any) -> str | None:
    """The autotune-cache key of a plan of ``spec`` (GPU, cuBLASLt version, problem), or ``None`` when off."""
    if not autotune_cache.enabled:
        return None
    info = _device.device_info(spec.device_id)
    return problem_key((info.name, info.compute_capability, spec.version, *plan.signature(spec)))
