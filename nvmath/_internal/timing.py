"""Timing helpers: CUDA-event timing on a stream, an L2 flush, robust statistics, host per-call timing.

Used by autotuning and by ``benchmarks/``. This module imports only the standard library at import
time (``cuda.core`` / ``cuda.bindings`` are imported on first use, so importing it never touches the
driver) and nothing from ``nvmath``: the benchmark harness loads it by file path in processes where
``nvmath`` is another package.

Device timing (:func:`time_on_stream`) records a pair of timing events around each call on the
stream and synchronizes once at the end, so the host does not serialize with the device; for calls
whose host cost exceeds their device time the events measure the host launch rate instead. Host
timing (:func:`time_host_per_call`) runs a loop of calls with one synchronization at the end.
The stream's device must be current in the calling thread (``Device(i).set_current()``).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any, Self

__all__ = [
    "L2Flusher",
    "l2_cache_size",
    "median",
    "spread",
    "stream_handle",
    "time_host_per_call",
    "time_on_stream",
    "timing_event_options",
]


def median(samples: Sequence[float]) -> float:
    """The median of ``samples``; raises ``ValueError`` when empty."""
    if not samples:
        raise ValueError("median of no samples")
    return float(statistics.median(samples))


def spread(samples: Sequence[float], kind: str = "iqr") -> float:
    """A robust spread of ``samples``: ``"iqr"`` (Q3 - Q1) or ``"mad"`` (median absolute deviation).

    Returns 0.0 for a single sample; raises ``ValueError`` when empty or for an unknown ``kind``.
    """
    if kind not in ("iqr", "mad"):
        raise ValueError(f"spread kind must be 'iqr' or 'mad'; got {kind!r}")
    if not samples:
        raise ValueError("spread of no samples")
    if len(samples) == 1:
        return 0.0
    if kind == "mad":
        m = median(samples)
        return median([abs(x - m) for x in samples])
    q1, _, q3 = statistics.quantiles(samples, n=4, method="inclusive")
    return float(q3 - q1)


def stream_handle(stream: Any) -> int:
    """The ``cudaStream_t`` of ``stream`` as an int (an int, a ``__cuda_stream__`` object or a Stream)."""
    if isinstance(stream, int) and not isinstance(stream, bool):
        return stream
    protocol = getattr(stream, "__cuda_stream__", None)
    if protocol is not None:
        return int(protocol()[1])
    handle = getattr(stream, "handle", None)
    if handle is not None:
        return int(handle)
    raise TypeError(
        f"expected a stream (int handle, __cuda_stream__ object or cuda.core Stream); got {stream!r}"
    )


def _core_stream(stream: Any) -> Any:
    """Return a cuda.core Stream for ``stream`` (a Stream, a ``__cuda_stream__`` object or an int handle)."""
    from cuda.core import Device, Stream

    if isinstance(stream, Stream):
        return stream
    if isinstance(stream, int) and not isinstance(stream, bool):
        return Stream.from_handle(stream)
    return Device().create_stream(stream)


def timing_event_options() -> Any:
    """``cuda.core.EventOptions`` with timing on (``timing_enabled`` in 1.x, ``enable_timing`` before)."""
    from cuda.core import EventOptions

    try:
        return EventOptions(timing_enabled=True)
    except TypeError:
        return EventOptions(enable_timing=True)


def l2_cache_size(device_id: int = 0) -> int:
    """The L2 cache size of ``device_id`` in bytes (from the device properties)."""
    from cuda.core import Device

    return int(Device(device_id).properties.l2_cache_size)


class L2Flusher:
    """Evicts the L2 cache by writing a device buffer of twice its size (``cuMemsetD8Async``).

    Args:
        device_id: the device whose L2 to flush (must be current when the flusher is built).
        nbytes: the buffer size; default twice the L2 size.

    Call ``flusher(stream)`` to enqueue a flush on ``stream``; ``close()`` frees the buffer.
    """

    def __init__(self, device_id: int = 0, *, nbytes: int | None = None):
        from cuda.core import Device

        device = Device(device_id)
        self.nbytes = int(nbytes) if nbytes is not None else 2 * l2_cache_size(device_id)
        if self.nbytes <= 0:
            raise ValueError(f"nbytes must be > 0; got {self.nbytes}")
        stream = device.default_stream
        self._buffer = device.allocate(self.nbytes, stream=stream)
        stream.sync()
        self._ptr = int(self._buffer.handle)
        self._value = 0

    def __call__(self, stream: Any) -> None:
        """Enqueue the flush on ``stream``."""
        from cuda.bindings import driver

        self._value = (self._value + 1) & 0xFF
        (err,) = driver.cuMemsetD8Async(
            driver.CUdeviceptr(self._ptr), self._value, self.nbytes, driver.CUstream(stream_handle(stream))
        )
        if int(err) != 0:
            raise RuntimeError(f"cuMemsetD8Async failed while flushing L2: {err}")

    def close(self) -> None:
        """Free the buffer; idempotent."""
        buffer, self._buffer = self._buffer, None
        if buffer is not None:
            buffer.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def time_on_stream(
    fn: Callable[[], Any],
    stream: Any,
    *,
    warmup: int = 3,
    iterations: int = 10,
    flush_l2: L2Flusher | bool | None = None,
) -> list[float]:
    """Time ``fn()`` (which enqueues work on ``stream``) with CUDA events; return one time per call, in ms.

    Args:
        fn: a zero-argument callable that enqueues its work on ``stream``.
        stream: a cuda.core ``Stream``, an object with ``__cuda_stream__`` or an int handle.
        warmup: untimed calls first.
        iterations: timed calls.
        flush_l2: an :class:`L2Flusher` to run before each timed call, ``True`` for a temporary one,
            or ``None``/``False`` for no flush (the flush itself is outside the timed region).
    """
    if warmup < 0 or iterations < 1:
        raise ValueError(f"need warmup >= 0 and iterations >= 1; got {warmup}, {iterations}")
    core = _core_stream(stream)
    flusher = L2Flusher(core.device.device_id) if flush_l2 is True else (flush_l2 or None)
    try:
        for _ in range(warmup):
            fn()
        options = timing_event_options()
        starts = [core.device.create_event(options=options) for _ in range(iterations)]
        ends = [core.device.create_event(options=options) for _ in range(iterations)]
        for start, end in zip(starts, ends):
            if flusher is not None:
                flusher(core)
            core.record(start)
            fn()
            core.record(end)
        ends[-1].sync()
        return [float(end - start) for start, end in zip(starts, ends)]
    finally:
        if flush_l2 is True and flusher is not None:
            flusher.close()


def time_host_per_call(
    fn: Callable[[], Any],
    *,
    calls: int = 1000,
    repeats: int = 5,
    warmup: int = 10,
    sync: Callable[[], Any] | None = None,
) -> list[float]:
    """Host time per call: ``repeats`` loops of ``calls`` calls, one ``sync()`` after each loop; us/call.

    Args:
        fn: a zero-argument callable.
        calls: calls per loop.
        repeats: loops (one sample each).
        warmup: untimed calls first (followed by a sync).
        sync: called at the end of each loop (e.g. ``stream.sync``), inside the timed region.
    """
    if calls < 1 or repeats < 1 or warmup < 0:
        raise ValueError(f"need calls >= 1, repeats >= 1, warmup >= 0; got {calls}, {repeats}, {warmup}")
    for _ in range(warmup):
        fn()
    if sync is not None:
        sync()
    samples = []
    clock = time.perf_counter_ns
    for _ in range(repeats):
        start = clock()
        for _ in range(calls):
            fn()
        if sync is not None:
            sync()
        samples.append((clock() - start) / calls / 1e3)
    return samples
