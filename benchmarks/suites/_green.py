"""Green-context cases of the matmul suite: a small matmul's latency while a long GEMM runs.

Registered into the ``matmul`` suite (``benchmarks/suites/matmul.py`` imports this module; a name
without the underscore would make it a suite of its own). The request is a bf16 64x4096x4096
product (a decode-step projection); next to it a bf16 8192^3 GEMM is kept queued.

Method. One timed call is one request of a latency-sensitive service: top up the queue of long
GEMMs to :data:`DEPTH` pending (a host query of the oldest one's event; a launch only when one has
finished), enqueue the small matmul on its stream and wait for it on the host. The harness's
timing events, recorded on its own stream just before and after the call, therefore bracket the
request's submit-to-completion latency: host launch, waiting for SMs held by the long GEMM, the
kernel and the host wake-up. Host waits make every request start on an idle stream (the events
never measure a backlog), and keep the long-GEMM queue bounded whatever the latency. The host
parts (~10 us) are the same in every row. Requests rotate among operand sets (one round touches
more than twice the L2), as in the rest of the suite.

* ``green-context-latency``: nvmath runs the request on a green context of :data:`SMALL_SMS` SMs
  and the long GEMMs on a green context of the remaining SMs, each planned with
  ``sm_count_target`` = its SM count; torch runs the request on the harness stream and the long
  GEMMs on another ordinary stream (both share the whole GPU). "nvmath vs best peer" is the
  latency the partition saves.
* ``green-context-latency-shared``: the control, nvmath on ordinary streams as torch above (the same
  library without a partition).
* ``green-context-latency-idle``: no long GEMM; nvmath on the :data:`SMALL_SMS`-SM partition (the
  price of the partition), torch on the whole GPU.

The green contexts are made once per run (kept in ``ctx.extras``, closed with the context).
Streams of one context share its hardware work queues (``CUDA_DEVICE_MAX_CONNECTIONS``, 8 by
default), so a request can also queue behind long GEMMs in order when its stream shares a queue
with theirs; the green contexts ask for balanced work queues where the driver has them (the note
says which), and a run with ``CUDA_DEVICE_MAX_CONNECTIONS=32`` tells the two effects apart.
"""

from __future__ import annotations

import collections
import itertools
from collections.abc import Callable
from typing import Any

from benchmarks.registry import Case, Prepared, Skip, register
from benchmarks.suites._data import torch_on_ctx_stream, torch_random

__all__ = ["BIG", "DEPTH", "SMALL", "SMALL_SMS", "Feeder", "GreenPair", "partition_size"]

SMALL = (64, 4096, 4096)
"""``(M, N, K)`` of the latency-sensitive request (bf16)."""
BIG = (8192, 8192, 8192)
"""``(M, N, K)`` of the long GEMM kept queued next to it (bf16)."""
SMALL_SMS = 16
"""SMs asked for the request's partition (rounded up to what the split allows)."""
DEPTH = 3
"""Long GEMMs kept pending."""


def partition_size(requested: int, total: int, minimum: int, alignment: int) -> int:
    """The SM count to ask for: ``requested`` rounded up to ``alignment``, at least ``minimum``.

    Raises:
        ValueError: the rest of the ``total`` SMs would be smaller than ``minimum`` (or empty).
    """
    if requested < 1:
        raise ValueError(f"requested must be >= 1; got {requested}")
    step = max(1, alignment)
    count = max(minimum, -(-requested // step) * step)
    if total - count < max(1, minimum):
        raise ValueError(
            f"cannot split {total} SMs into {count} and a rest of at least {max(1, minimum)} "
            f"(minimum partition {minimum}, alignment {alignment})"
        )
    return count


class Feeder:
    """Keeps ``depth`` long GEMMs pending on a stream.

    Args:
        launch: enqueues one GEMM and returns a marker recorded after it (an event).
        done: whether a marker's work has finished (an event query; never a sync).
        depth: how many GEMMs to keep pending.

    :meth:`top_up` drops finished markers from the front and launches until ``depth`` are pending:
    one query per call when nothing finished, so the request path stays cheap.
    """

    def __init__(self, launch: Callable[[], Any], done: Callable[[Any], bool], depth: int = DEPTH):
        if depth < 1:
            raise ValueError(f"depth must be >= 1; got {depth}")
        self._launch, self._done, self.depth = launch, done, depth
        self._pending: collections.deque[Any] = collections.deque()
        self.launched = 0

    def __len__(self) -> int:
        return len(self._pending)

    def top_up(self) -> int:
        """Launch GEMMs until ``depth`` are pending; return how many were launched."""
        pending = self._pending
        while pending and self._done(pending[0]):
            pending.popleft()
        n = 0
        while len(pending) < self.depth:
            pending.append(self._launch())
            n += 1
        self.launched += n
        return n


class GreenPair:
    """Two green contexts of one device, ``small_sms`` SMs and the rest, with one stream each.

    Attributes:
        small_stream, big_stream: cuda.core streams of the two contexts.
        small_sms, big_sms: their SM counts.
        workqueues: ``"balanced"`` when each context has its own hardware work queues (CUDA 13.1+
            drivers), ``"shared"`` otherwise.

    Raises:
        Skip: this cuda.core or driver has no green contexts (the reason is reported).
    """

    def __init__(self, device_id: int, small_sms: int = SMALL_SMS):
        import cuda.core as cc

        if not all(hasattr(cc, n) for n in ("ContextOptions", "SMResourceOptions")):
            raise Skip(f"cuda.core {getattr(cc, '__version__', '?')} has no green contexts")
        self._contexts: list[Any] = []
        self._streams: list[Any] = []
        try:
            dev = cc.Device(device_id)
            sm = dev.resources.sm
            count = partition_size(small_sms, sm.sm_count, sm.min_partition_size, sm.coscheduled_alignment)
            groups, rest = sm.split(cc.SMResourceOptions(count=count))
            parts = [groups[0], rest]
            self.small_sms, self.big_sms = (int(p.sm_count) for p in parts)
            self.workqueues = self._create(cc, dev, parts)
            self.small_stream, self.big_stream = (c.create_stream() for c in self._contexts)
            self._streams = [self.small_stream, self.big_stream]
        except Exception as exc:  # any failure means: no green contexts here
            self.close()
            raise Skip(f"green contexts unavailable: {type(exc).__name__}: {exc}") from exc

    def _create(self, cc: Any, dev: Any, parts: list[Any]) -> str:
        try:  # own hardware work queues per green context (CUDA 13.1+ drivers)
            wq = dev.resources.workqueue
            wq.configure(cc.WorkqueueResourceOptions(sharing_scope="green_ctx_balanced"))
            for p in parts:
                self._contexts.append(dev.create_context(cc.ContextOptions(resources=[p, wq])))
            return "balanced"
        except Exception:  # noqa: BLE001 - an older driver: SM partitions only
            self._close_contexts()
        for p in parts:
            self._contexts.append(dev.create_context(cc.ContextOptions(resources=[p])))
        return "shared"

    def describe(self) -> str:
        """E.g. ``"green contexts of 16 + 116 SMs, balanced work queues"``."""
        return f"green contexts of {self.small_sms} + {self.big_sms} SMs, {self.workqueues} work queues"

    def _close_contexts(self) -> None:
        while self._contexts:
            self._contexts.pop().close()

    def close(self) -> None:
        """Wait for and close the streams, then the contexts; idempotent."""
        while self._streams:
            stream = self._streams.pop()
            stream.sync()
            stream.close()
        self._close_contexts()


def _green_pair(ctx: Any) -> GreenPair:
    """The run's green contexts, made on first use and closed with the run's context."""
    pair = ctx.extras.get("green_pair")
    if pair is None:
        pair = GreenPair(ctx.device_id)
        ctx.extras["green_pair"] = pair
        ctx.extras.setdefault("restore", []).append(pair.close)
    return pair


def _operands(ctx: Any, long_gemm: bool) -> tuple[Any, list[tuple[Any, Any]], tuple[Any, Any] | None]:
    """torch, the request's operand sets (rotated: one round touches > 2x the L2), the long GEMM's."""
    torch = torch_on_ctx_stream(ctx)
    (m, n, k), (bm, bn, bk) = SMALL, BIG
    sets = ctx.rotation(2 * (m * k + k * n + m * n))
    small = [
        (torch_random(torch, (m, k), torch.bfloat16), torch_random(torch, (k, n), torch.bfloat16))
        for _ in range(sets)
    ]
    big = (
        (torch_random(torch, (bm, bk), torch.bfloat16), torch_random(torch, (bk, bn), torch.bfloat16))
        if long_gemm
        else None
    )
    ctx.stream.sync()  # ready for every stream
    return torch, small, big


# --------------------------------------------------------------------------- setups
def _nvmath(mode: str):
    """``mode``: ``"green"`` (two partitions), ``"shared"`` (ordinary streams), ``"idle"`` (partition)."""

    def setup(ctx: Any):
        import cuda.core as cc

        import nvmath.linalg.advanced as adv

        _, small_sets, big_ops = _operands(ctx, long_gemm=mode != "idle")
        closers: list[Callable[[], Any]] = []  # run last first
        if mode == "shared":
            side = cc.Device(ctx.device_id).create_stream()
            closers += [side.close, side.sync]
            small_s, big_s, note = ctx.stream, side, "ordinary streams"
            small_sms = big_sms = 0  # sm_count_target=0: the whole GPU
        else:
            pair = _green_pair(ctx)
            small_s, big_s, note = pair.small_stream, pair.big_stream, pair.describe()
            small_sms, big_sms = pair.small_sms, pair.big_sms
        try:
            smalls = []
            for ops in small_sets:
                smalls.append(adv.Matmul(*ops, options={"sm_count_target": small_sms}, stream=small_s))
                closers.append(smalls[-1].free)
                smalls[-1].plan(stream=small_s)
            feeder = None
            if big_ops is not None:
                big = adv.Matmul(*big_ops, options={"sm_count_target": big_sms}, stream=big_s)
                closers.append(big.free)
                big.plan(stream=big_s)
                feeder = Feeder(lambda: (big.execute(stream=big_s), big_s.record())[1], lambda e: e.is_done)
        except BaseException:
            _run_all(closers)
            raise

        turn = itertools.cycle(smalls)

        def request() -> None:
            if feeder is not None:
                feeder.top_up()
            next(turn).execute(stream=small_s)
            small_s.sync()

        def teardown() -> None:
            big_s.sync()
            _run_all(closers)

        return Prepared(fn=request, teardown=teardown, note=note)

    return setup


def _torch(long_gemm: bool):
    def setup(ctx: Any):
        torch, small_sets, big_ops = _operands(ctx, long_gemm)
        turn = itertools.cycle(small_sets)
        feeder = side = None
        if big_ops is not None:
            big_a, big_b = big_ops
            side = torch.cuda.Stream(ctx.device_id)

            def launch() -> Any:
                with torch.cuda.stream(side):
                    torch.matmul(big_a, big_b)
                event = torch.cuda.Event()
                event.record(side)
                return event

            feeder = Feeder(launch, lambda e: e.query())

        def request() -> None:
            if feeder is not None:
                feeder.top_up()
            torch.matmul(*next(turn))  # on the harness stream (torch's current stream)
            ctx.stream.sync()

        def teardown() -> None:
            if side is not None:
                side.synchronize()

        return Prepared(fn=request, teardown=teardown, note="ordinary streams")

    return setup


def _run_all(calls: list[Callable[[], Any]]) -> None:
    """Call ``calls`` last first."""
    while calls:
        calls.pop()()


# --------------------------------------------------------------------------- registration
_WHAT = "ms per request: bf16 64x4096x4096 matmul, submitted and waited on"
register(
    Case(
        suite="matmul",
        name="green-context-latency",
        setups={"nvmath": _nvmath("green"), "torch": _torch(long_gemm=True)},
        description=f"{_WHAT}, while bf16 8192^3 GEMMs run; nvmath: {SMALL_SMS}-SM green context, the "
        "GEMMs on the other SMs; torch: ordinary streams",
    )
)
register(
    Case(
        suite="matmul",
        name="green-context-latency-shared",
        setups={"nvmath": _nvmath("shared")},
        description=f"{_WHAT}, while bf16 8192^3 GEMMs run; nvmath on ordinary streams (no partition)",
    )
)
register(
    Case(
        suite="matmul",
        name="green-context-latency-idle",
        setups={"nvmath": _nvmath("idle"), "torch": _torch(long_gemm=False)},
        description=f"{_WHAT}, GPU otherwise idle; nvmath: {SMALL_SMS}-SM green context; torch: whole GPU",
    )
)
