"""A latency-sensitive small matmul keeps its latency next to a long GEMM: green contexts.

cuda.core (1.0+) splits the GPU's SMs into green contexts. Here a small partition serves a small
bf16 matmul (a decode-step projection, 64 x 4096 x 4096) and the rest of the GPU a long GEMM
(8192^3) that is kept queued. A Matmul given a stream of a green context runs its kernels inside
that partition (nvmath makes the stream's own context current around its calls), and the option
``sm_count_target`` tells cuBLASLt how many SMs the partition has.

Each request is timed with CUDA events on its stream and waited on, as a server would; the table
shows the median of 50 requests per scenario. Requests rotate among copies of the weights (more
than twice the L2 cache), so they read them from memory as a real model's layers would.

Exits with status 77 (skipped) where there is no GPU or no green-context support (cuda.core older
than 1.0, or a driver without them).
"""

from nvmath._diagnostics.requirements import require

require("gpu", "torch")  # or exit 77 ("skipped") with a message saying what is missing

import collections
import itertools
import statistics
import sys

import cuda.core as cc
import torch
from cuda.bindings import driver

from nvmath.linalg.advanced import Matmul

SMALL_SMS = 16  # SMs asked for the latency partition (rounded up to the split granularity)
SMALL, BIG = (64, 4096, 4096), (8192, 8192, 8192)  # (M, N, K) of the two problems, bf16
REQUESTS, WARMUP, DEPTH = 50, 5, 3  # requests per scenario, untimed ones, long GEMMs kept queued


def skip(reason: str) -> None:
    print(f"skipped: {reason}")
    sys.exit(77)


if not all(hasattr(cc, name) for name in ("ContextOptions", "SMResourceOptions")):
    skip(f"cuda.core {getattr(cc, '__version__', '?')} has no green contexts (they came with 1.0)")

dev = cc.Device(0)
dev.set_current()
TIMING = cc.EventOptions(timing_enabled=True)


def green_contexts() -> tuple[list, list[int], str]:
    """Two green contexts, SMALL_SMS SMs (rounded up as the split requires) and the rest."""
    sm = dev.resources.sm
    step = max(sm.coscheduled_alignment, 1)
    count = max(sm.min_partition_size, -(-SMALL_SMS // step) * step)
    groups, rest = sm.split(cc.SMResourceOptions(count=count))
    parts = [groups[0], rest]
    try:  # CUDA 13.1+ drivers: hardware work queues not shared with the other green context
        wq = dev.resources.workqueue
        wq.configure(cc.WorkqueueResourceOptions(sharing_scope="green_ctx_balanced"))
        contexts = [dev.create_context(cc.ContextOptions(resources=[p, wq])) for p in parts]
        return contexts, [p.sm_count for p in parts], "balanced"
    except Exception:  # noqa: BLE001 - older driver: SM partitions only
        contexts = [dev.create_context(cc.ContextOptions(resources=[p])) for p in parts]
        return contexts, [p.sm_count for p in parts], "shared with the device"


try:
    (small_ctx, big_ctx), (small_sms, big_sms), workqueues = green_contexts()
    small_green, big_green = small_ctx.create_stream(), big_ctx.create_stream()
except Exception as exc:  # noqa: BLE001 - e.g. a driver without green contexts
    skip(f"green contexts are unavailable here ({type(exc).__name__}: {exc})")

_, _, highest = driver.cuCtxGetStreamPriorityRange()  # lower numbers are higher priorities
plain, side = dev.create_stream(), dev.create_stream()
urgent = dev.create_stream(options=cc.StreamOptions(priority=highest))


def randn(*shape: int) -> torch.Tensor:
    return torch.randn(*shape, device="cuda", dtype=torch.bfloat16) / 16


def planner(x: torch.Tensor, y: torch.Tensor, stream, sms: int = 0) -> Matmul:
    """A planned Matmul for ``stream``; ``sms`` > 0 targets a partition of that many SMs."""
    mm = Matmul(x, y, options={"sm_count_target": sms}, stream=stream)
    mm.plan(stream=stream)
    return mm


(m, n, k), (bm, bn, bk) = SMALL, BIG
copies = 2 * dev.properties.l2_cache_size // (k * n * 2) + 1
x, weights = randn(m, k), [randn(k, n) for _ in range(copies)]
A, B = randn(bm, bk), randn(bk, bn)
torch.cuda.synchronize()  # the operands are ready for every stream (green ones included)
small_plain = [planner(x, w, plain) for w in weights]
small_urgent = [planner(x, w, urgent) for w in weights]
small_part = [planner(x, w, small_green, small_sms) for w in weights]  # targets the partition's SMs
big_side, big_part = planner(A, B, side), planner(A, B, big_green, big_sms)

out = small_part[0].execute(stream=small_green)  # results are ordinary torch tensors
long_out = big_part.execute(stream=big_green)
small_green.sync()
big_green.sync()
torch.testing.assert_close(out, x @ weights[0], rtol=2e-2, atol=2e-2)
torch.testing.assert_close(long_out[:64], A[:64] @ B, rtol=2e-2, atol=2e-2)
del out, long_out


class LongGemms:
    """Keeps DEPTH long GEMMs queued on a stream; ``top_up()`` is one event query when none finished."""

    def __init__(self, mm: Matmul, stream):
        self.mm, self.stream = mm, stream
        self.pending: collections.deque = collections.deque()
        self.finished: list = []

    def top_up(self) -> None:
        while self.pending and self.pending[0].is_done:
            self.finished.append(self.pending.popleft())
        while len(self.pending) < DEPTH:
            self.mm.execute(stream=self.stream)
            self.pending.append(self.stream.record(options=TIMING))

    def finish(self) -> float:
        """Wait for the queue; return the median ms per long GEMM (between consecutive completions)."""
        self.stream.sync()
        done = self.finished + list(self.pending)
        return statistics.median(end - start for start, end in itertools.pairwise(done))


def latency(mms: list[Matmul], stream, long_gemms: LongGemms | None = None) -> tuple[float, float | None]:
    """Median ms of REQUESTS small matmuls on ``stream``, each waited on; and ms per long GEMM."""
    samples, turn = [], itertools.cycle(mms)
    for _ in range(WARMUP + REQUESTS):
        if long_gemms is not None:
            long_gemms.top_up()
        mm = next(turn)
        start = stream.record(options=TIMING)
        mm.execute(stream=stream)
        end = stream.record(options=TIMING)
        end.sync()
        samples.append(end - start)
    return statistics.median(samples[WARMUP:]), long_gemms.finish() if long_gemms else None


queue = LongGemms(big_side, side)
queue.top_up()
long_alone = queue.finish()  # ms per long GEMM with the whole GPU
alone = latency(small_plain, plain)
partition_alone = latency(small_part, small_green)
shared = latency(small_plain, plain, LongGemms(big_side, side))
urgent_shared = latency(small_urgent, urgent, LongGemms(big_side, side))
green = latency(small_part, small_green, LongGemms(big_part, big_green))

print(
    f"{dev.name}: {small_sms} SMs for the small matmul, {big_sms} for the long GEMM; workqueues {workqueues}"
)
print(
    f"small matmul bf16 {m}x{n}x{k} ({copies} copies of the weights), long GEMM bf16 {bm}x{bn}x{bk}; "
    f"median of {REQUESTS} requests\n"
)
print(f"{'small matmul':54s} {'ms':>8s} {'vs alone':>9s} {'long GEMM ms':>13s}")
for name, (ms, long_ms) in {
    "alone, whole GPU": alone,
    f"alone, {small_sms}-SM green context": partition_alone,
    "next to the long GEMM, ordinary streams": shared,
    "  the same on a high-priority stream": urgent_shared,
    f"green contexts: {small_sms} SMs, the long GEMM on {big_sms}": green,
}.items():
    print(f"{name:54s} {ms:8.3f} {ms / alone[0]:8.2f}x {'-' if long_ms is None else f'{long_ms:.2f}':>13s}")
print(f"{'the long GEMM alone, whole GPU':54s} {'-':>8s} {'':9s} {long_alone:13.2f}")
print(
    f"\ngreen contexts: {green[0] / partition_alone[0]:.2f}x the partition's own latency, "
    f"{shared[0] / green[0]:.1f}x lower than sharing the whole GPU with the long GEMM"
)

for mm in (*small_plain, *small_urgent, *small_part, big_side, big_part):
    mm.free()
for stream in (plain, side, urgent, small_green, big_green):
    stream.sync()
    stream.close()
small_ctx.close()
big_ctx.close()
print("ok")
