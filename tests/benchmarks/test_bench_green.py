"""Tests of benchmarks.suites._green: partition sizes, the GEMM feeder, green-context set-up, cases."""

from __future__ import annotations

import pytest

from benchmarks.context import Context, Settings
from benchmarks.measure import run_one
from benchmarks.registry import REGISTRY, Skip, load_suite
from benchmarks.suites import _green
from benchmarks.suites._green import Feeder, GreenPair, partition_size


def test_partition_size_rounds_up_to_the_split_granularity():
    """The request is rounded up to the alignment and to the minimum partition size."""
    assert partition_size(16, 132, 8, 8) == 16
    assert partition_size(10, 132, 8, 8) == 16
    assert partition_size(4, 132, 8, 8) == 8
    assert partition_size(6, 108, 4, 2) == 6
    assert partition_size(5, 108, 0, 0) == 5  # no constraints reported


def test_partition_size_leaves_a_rest():
    """A request that would leave fewer than the minimum (or no) SMs for the rest is refused."""
    assert partition_size(120, 132, 8, 8) == 120
    with pytest.raises(ValueError, match="cannot split 132 SMs into 128"):
        partition_size(125, 132, 8, 8)
    with pytest.raises(ValueError, match="cannot split 8 SMs"):
        partition_size(8, 8, 0, 1)
    with pytest.raises(ValueError, match="requested must be >= 1"):
        partition_size(0, 132, 8, 8)


class _Markers:
    """Fake events: launch() returns increasing ids; ``finished`` holds the ids that are done."""

    def __init__(self):
        self.next, self.finished = 0, set()

    def launch(self):
        self.next += 1
        return self.next

    def done(self, marker):
        return marker in self.finished


def test_feeder_keeps_depth_pending():
    """top_up fills the queue, launches nothing while nothing finished, and replaces finished GEMMs."""
    m = _Markers()
    feeder = Feeder(m.launch, m.done, depth=3)
    assert feeder.top_up() == 3 and len(feeder) == 3
    assert feeder.top_up() == 0
    m.finished |= {1}
    assert feeder.top_up() == 1 and len(feeder) == 3
    m.finished |= {2, 3}
    assert feeder.top_up() == 2 and feeder.launched == 6 and len(feeder) == 3


def test_feeder_checks_only_the_front():
    """Stream order: a later GEMM cannot finish before an earlier one, so only the front is queried."""
    m = _Markers()
    queried = []
    feeder = Feeder(m.launch, lambda e: queried.append(e) or m.done(e), depth=2)
    feeder.top_up()
    m.finished |= {2}  # impossible on one stream; must not be dropped
    assert feeder.top_up() == 0 and queried == [1]
    with pytest.raises(ValueError, match="depth must be >= 1"):
        Feeder(m.launch, m.done, depth=0)


class _FakeCtx:
    def __init__(self, resources):
        self.resources, self.closed = resources, False

    def close(self):
        self.closed = True


class _FakeDevice:
    """create_context fails on the ``fail_at``-th call (0-based), or for workqueue resources."""

    def __init__(self, *, wq_error=None, fail_at=None):
        self.made, self._wq_error, self._fail_at = [], wq_error, fail_at
        dev = self

        class _Resources:
            @property
            def workqueue(self):
                if dev._wq_error:
                    raise dev._wq_error
                return _FakeWorkqueue()

        self.resources = _Resources()

    def create_context(self, options):
        if self._fail_at is not None and len(self.made) == self._fail_at:
            self._fail_at = None
            raise RuntimeError("no room")
        ctx = _FakeCtx(options.resources)
        self.made.append(ctx)
        return ctx


class _FakeWorkqueue:
    def configure(self, options):
        assert options.sharing_scope == "green_ctx_balanced"


class _FakeCC:
    class ContextOptions:
        def __init__(self, resources):
            self.resources = resources

    class WorkqueueResourceOptions:
        def __init__(self, sharing_scope):
            self.sharing_scope = sharing_scope


def _bare_pair():
    pair = GreenPair.__new__(GreenPair)
    pair._contexts, pair._streams = [], []
    return pair


def test_green_pair_prefers_balanced_workqueues():
    """With a workqueue resource each context gets the SM group plus the balanced workqueue config."""
    pair, dev = _bare_pair(), _FakeDevice()
    assert pair._create(_FakeCC, dev, ["small", "rest"]) == "balanced"
    assert [c.resources[0] for c in pair._contexts] == ["small", "rest"]
    assert all(isinstance(c.resources[1], _FakeWorkqueue) for c in pair._contexts)


@pytest.mark.parametrize(
    "dev",
    [_FakeDevice(wq_error=AttributeError("no workqueue")), _FakeDevice(fail_at=1)],
    ids=["no-workqueue-resource", "balanced-context-fails"],
)
def test_green_pair_falls_back_to_sm_groups_only(dev):
    """Without workqueue support (or when a balanced context fails) both contexts hold only their SMs,
    and any context made on the way is closed."""
    pair = _bare_pair()
    assert pair._create(_FakeCC, dev, ["small", "rest"]) == "shared"
    assert [c.resources for c in pair._contexts] == [["small"], ["rest"]]
    assert all(c.closed for c in dev.made if c not in pair._contexts)
    pair.close()
    pair.close()  # idempotent
    assert all(c.closed for c in dev.made) and not pair._contexts


def test_green_pair_builds_or_skips():
    """On a GPU with green contexts: two partitions with a stream each; elsewhere Skip with a reason."""
    try:
        pair = GreenPair(0)
    except Skip as exc:
        assert "green contexts" in str(exc)
        return
    try:
        assert pair.small_sms >= _green.SMALL_SMS and pair.big_sms >= 1
        assert pair.workqueues in ("balanced", "shared") and "green contexts of" in pair.describe()
    finally:
        pair.close()
        pair.close()


def test_cases_are_registered_in_the_matmul_suite():
    """The three green-context cases are device cases of the matmul suite with the documented rows."""
    load_suite("matmul")
    cases = {c.name: c for c in REGISTRY.cases("matmul", pattern="green-context-*")}
    assert set(cases) == {
        "green-context-latency",
        "green-context-latency-shared",
        "green-context-latency-idle",
    }
    assert set(cases["green-context-latency"].setups) == {"nvmath", "torch"}
    assert set(cases["green-context-latency-shared"].setups) == {"nvmath"}
    assert all(c.mode == "device" and c.needs_gpu and c.flops is None for c in cases.values())


def test_cases_skip_without_a_gpu():
    """Without a GPU every row is reported as skipped, never as an error."""
    load_suite("matmul")
    ctx = Context(settings=Settings(), no_gpu_reason="no CUDA device: test")
    for case in REGISTRY.cases("matmul", pattern="green-context-*"):
        for lib in case.setups:
            result = run_one(case, lib, ctx)
            assert result.status == "skipped" and "no CUDA device" in result.note
