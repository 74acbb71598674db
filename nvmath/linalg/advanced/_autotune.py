"""Autotuning: time candidate algorithms on the device and order them, never worse than the first.

Measurement (:func:`measure`): CUDA events around each call, an L2 flush before each timed call,
a warm-up, and ``iterations`` rounds in which every candidate runs once in a random order (so slow
drifts of clocks or temperature hit all candidates alike). Decision (:func:`choose`): candidates
are ranked by median time, but the heuristic's first choice keeps the first place unless another
candidate beats it by more than the run-to-run spread (the larger interquartile range of the two,
and at least :data:`MIN_GAIN`),
and a challenger must win a second, head-to-head measurement too (see ``Matmul.autotune``).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any

from nvmath._internal import timing
from nvmath.linalg.advanced import _handles
from nvmath.linalg.advanced._algorithm import Algorithm, check_algorithm
from nvmath.linalg.advanced._autotune_cache import autotune_cache, problem_key

__all__ = ["Timing", "cache_key", "choose", "confirm", "measure", "summarize", "tune", "tuned_order"]

Timing = tuple[float, float]
"""``(median ms, spread ms)`` of one candidate."""


def summarize(samples: Sequence[float]) -> Timing:
    """``(median, interquartile range)`` of a candidate's samples (ms)."""
    return timing.median(samples), timing.spread(samples)


MIN_GAIN = 0.01
"""A challenger must also be faster by this fraction: smaller wins measured in short bursts (with L2
flushes) do not reliably survive sustained back-to-back execution (power and clock effects)."""


def _beats(challenger: Timing, incumbent: Timing) -> bool:
    """Whether ``challenger`` is faster than ``incumbent`` by more than the run-to-run spread (and 1 %)."""
    margin = max(challenger[1], incumbent[1], MIN_GAIN * incumbent[0])
    return challenger[0] < incumbent[0] - margin


def choose(timings: Sequence[Timing]) -> list[int]:
    """Order candidates by median time, keeping candidate 0 first unless another clearly beats it.

    Args:
        timings: ``(median, spread)`` per candidate; candidate 0 is the heuristic's first choice.

    Returns:
        Candidate indices, the chosen one first, the others by increasing median.
    """
    if not timings:
        return []
    ranked = sorted(range(len(timings)), key=lambda i: (timings[i][0], i))
    best = ranked[0]
    if best != 0 and not _beats(timings[best], timings[0]):
        best = 0
    return [best] + [i for i in ranked if i != best]


def confirm(challenger: Sequence[float], incumbent: Sequence[float]) -> bool:
    """Whether a head-to-head re-measurement confirms that the challenger beats the incumbent."""
    return _beats(summarize(challenger), summarize(incumbent))


def measure(
    run: Callable[[int], Any],
    count: int,
    stream: Any,
    *,
    iterations: int,
    warmup: int = 2,
    flusher: Callable[[Any], Any] | None = None,
    seed: int = 0,
    device: Any = None,
) -> list[list[float]]:
    """Time ``run(i)`` for candidates ``0 .. count-1`` on ``stream``; return ms samples per candidate.

    Args:
        run: enqueues candidate ``i``'s work on the stream.
        count: the number of candidates.
        stream: a ``cuda.core.Stream`` (its device must be current).
        iterations: timed rounds; each round runs every candidate once, in a random order.
        warmup: untimed calls per candidate first.
        flusher: called with ``stream`` before each timed call (an L2 flush), or ``None``.
        seed: seeds the random order.
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
    order = list(range(count))
    shuffle = random.Random(seed).shuffle
    for it in range(iterations):
        shuffle(order)
        for i in order:
            if flusher is not None:
                flusher(stream)
            start, end = events[i][it]
            stream.record(start)
            run(i)
            stream.record(end)
    stream.sync()
    return [[float(end - start) for start, end in pairs] for pairs in events]


def tune(
    run: Callable[[int], Any], count: int, handle: Any, device_id: int, iterations: int
) -> tuple[list[int], list[Timing]]:
    """Measure ``count`` candidates on the stream ``handle`` and return ``(order, timings)``.

    The candidates run with an L2 flush before each timed call. A challenger that :func:`choose`
    puts before candidate 0 must also win a head-to-head re-measurement (:func:`confirm`),
    otherwise candidate 0 stays first.

    Args:
        run: enqueues candidate ``i`` on the stream.
        count: the number of candidates (>= 2).
        handle: a :class:`~nvmath._internal.streams.StreamHandle`.
        device_id: its device.
        iterations: timed rounds.
    """
    from nvmath._internal import devices, streams

    with streams.stream_ctx(handle):
        device = devices.core_device(device_id)
        stream = handle.core
        flusher = timing.L2Flusher(device_id)
        try:
            samples = measure(run, count, stream, iterations=iterations, flusher=flusher, device=device)
            timings = [summarize(s) for s in samples]
            order = choose(timings)
            if order[0] != 0:
                pair = (0, order[0])
                duel = measure(
                    lambda j: run(pair[j]),
                    2,
                    stream,
                    iterations=iterations,
                    flusher=flusher,
                    seed=1,
                    device=device,
                )
                if not confirm(duel[1], duel[0]):
                    order.remove(0)
                    order.insert(0, 0)
        finally:
            flusher.close()
    return order, timings


def tuned_order(mm: Any, plan: Any, handle: Any, iterations: int) -> list[int]:
    """The candidate order after autotuning ``mm``'s plan: from the autotune cache, or measured.

    A cached winner is validated (``cublasLtMatmulAlgoCheck``) and put first; otherwise the
    candidates are timed with :func:`tune` and the winner is stored when the cache is enabled.
    """
    key = cache_key(mm, plan)
    cached = _from_cache(mm, key, plan) if key else None
    if cached is not None:
        return cached
    count = len(plan.algorithms)
    if count < 2:
        mm._log.info("Matmul: autotuning skipped: only one algorithm was planned")
        return [0]
    run, _keep = mm._runner(plan, handle)
    order, timings = tune(run, count, handle, mm._spec.device_id, iterations)
    mm._log.info(
        "Matmul: autotuned %d algorithms; median ms %s; chose #%d (%.4f ms; first choice %.4f ms)",
        count, [round(t[0], 4) for t in timings], order[0], timings[order[0]][0], timings[0][0],
    )  # fmt: skip
    if key:
        best = plan.algorithms[order[0]]
        autotune_cache.store(
            key, best.to_bytes(), algorithm_id=best.algorithm_id, median_ms=timings[order[0]][0],
            first_choice_ms=timings[0][0],
        )  # fmt: skip
    return order


def _from_cache(mm: Any, key: str, plan: Any) -> list[int] | None:
    entry = autotune_cache.lookup(key)
    if entry is None:
        return None
    algorithm = Algorithm.from_bytes(entry["algorithm"])
    try:
        check_algorithm(mm._handle(), plan.desc.ptr, plan.layouts.ptrs, algorithm)
    except ValueError as exc:
        mm._log.warning("Matmul: ignoring a cached autotuning result: %s", exc)
        return None
    raw = algorithm.to_bytes()[:64]
    index = next((i for i, a in enumerate(plan.algorithms) if a.to_bytes()[:64] == raw), None)
    if index is None:
        plan.algorithms.append(algorithm)
        index = len(plan.algorithms) - 1
    mm._log.info(
        "Matmul: autotuning result from the cache (%s): algorithm %d",
        autotune_cache.path,
        algorithm.algorithm_id,
    )
    return [index] + [i for i in range(len(plan.algorithms)) if i != index]


def cache_key(mm: Any, plan: Any) -> str | None:
    """The autotune-cache key of ``mm``'s plan (GPU, cuBLASLt version, problem), or ``None`` when off."""
    if not autotune_cache.enabled:
        return None
    spec = mm._spec
    info = _handles.device_info(spec.device_id)
    return problem_key((info.name, info.compute_capability, spec.version, *plan.signature(spec)))
