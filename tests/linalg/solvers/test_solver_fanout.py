"""Multi-stream fan-out of the looped solver paths (``_fanout``), its lane choice and its option.

These tests drive :class:`FanOut` and the looped LU / QR / Cholesky engines with fake contexts,
fake driver calls and fake cuSOLVER bindings, recording every call (no GPU needed); the GPU tests
comparing ``streams=1`` with the automatic fan-out are in ``test_solver_gpu.py``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import threading
from types import SimpleNamespace

import numpy as np
import pytest

import nvmath.linalg._solvers as S
from nvmath._internal import devices
from nvmath.linalg._solvers import _dispatch, _fanout, _lu


# ------------------------------------------------------------------------------------ fakes
class FakeStream:
    """What FanOut reads of a StreamHandle."""

    def __init__(self, ptr: int, ctx: int | None = None):
        self.ptr, self.ctx, self.device_id = ptr, ctx, 0


class FakeCtx:
    """A GpuContext stand-in: bump allocations, host buffers, a main stream and handle."""

    def __init__(self, *, user_handle: int | None = None, green: bool = False):
        self.device_id = 0
        self.stream = FakeStream(0x5000, 0xC0 if green else None)
        self.user_handle = user_handle
        self.dn = user_handle or 0xD0
        self.params = 0xE0
        self.allocs: list[tuple[int, int]] = []
        self._next = 0x10000

    def alloc(self, nbytes: int) -> int:
        if nbytes <= 0:
            return 0
        ptr = self._next
        self._next += -(-nbytes // 4096) * 4096 + 4096
        self.allocs.append((ptr, nbytes))
        return ptr

    def host(self, nbytes: int) -> np.ndarray:
        return np.empty(max(nbytes, 0), dtype=np.uint8)

    def memset(self, ptr: int, nbytes: int) -> None:
        pass

    def info(self, count: int):
        from nvmath.linalg._solvers._gpu import InfoArray

        return InfoArray(self, count)

    def matrix(self, like, batch_shape, rows, cols, dtype=None, shape=None):
        from nvmath.linalg._solvers._gpu import WorkMatrix

        count = int(np.prod(batch_shape)) if batch_shape else 1
        dtype = dtype or "float32"
        itemsize = np.dtype(dtype).itemsize
        adapter = SimpleNamespace(
            data_ptr=self.alloc(rows * cols * count * itemsize), itemsize=itemsize, dtype=dtype
        )
        return WorkMatrix(adapter, rows, cols, count)

    def vector(self, like, shape, dtype):
        return SimpleNamespace(data_ptr=self.alloc(int(np.prod(shape)) * np.dtype(dtype).itemsize))

    def pointer_array(self, base, stride_bytes, count):
        return self.alloc(8 * count)


@pytest.fixture
def lanes_log(monkeypatch):
    """Replace the side-lane, fork, join and capture-query steps by recorders; return the event log."""
    log: list[tuple] = []
    state = {"capturing": False}

    def sides(device_id, count):
        log.append(("sides", count))
        made = [
            SimpleNamespace(dn=0xA0 + j, params=0xB0 + j, stream=FakeStream(0x6000 + j))
            for j in range(1, count + 1)
        ]
        return "fork-event", made

    monkeypatch.setattr(_fanout, "_sides", sides)
    monkeypatch.setattr(_fanout, "_fork", lambda dev, ev, main, s: log.append(("fork", main.ptr, len(s))))
    monkeypatch.setattr(_fanout, "_join", lambda dev, main, s: log.append(("join", main.ptr, len(s))))
    monkeypatch.setattr(_fanout, "_capturing", lambda stream: state["capturing"])
    return SimpleNamespace(log=log, state=state)


def _jobs(fan, ctx, count, log):
    def job(lane, i):
        log.append(("job", i, lane.index, lane.dn, lane.stream))

    return fan.run(ctx, count, job)


# ------------------------------------------------------------------------------------ FanOut
def test_job_i_runs_on_lane_i_mod_s_between_fork_and_join(lanes_log):
    """With 3 lanes job i runs on lane i % 3 (0: the main stream and handle), between a fork and a join."""
    ctx = FakeCtx()
    fan = _fanout.FanOut(ctx, 3, dsize=1000)
    assert _jobs(fan, ctx, 7, lanes_log.log) == 3
    log = lanes_log.log
    assert log[0] == ("sides", 2)
    assert log[1] == ("fork", 0x5000, 2)
    jobs = [e for e in log if e[0] == "job"]
    assert [e[2] for e in jobs] == [i % 3 for i in range(7)]
    assert all(e[3] == (0xD0 if e[2] == 0 else 0xA0 + e[2]) for e in jobs)
    assert all(e[4] == (0x5000 if e[2] == 0 else 0x6000 + e[2]) for e in jobs)
    assert log[-1] == ("join", 0x5000, 2) and len(log) == 2 + 7 + 1


def test_lanes_never_exceed_the_jobs(lanes_log):
    """A loop of 2 jobs on an 8-lane plan uses 2 lanes."""
    ctx = FakeCtx()
    fan = _fanout.FanOut(ctx, 8)
    assert _jobs(fan, ctx, 2, lanes_log.log) == 2
    assert lanes_log.log[0] == ("sides", 1)


@pytest.mark.parametrize("case", ["one-job", "one-lane", "user-handle", "green-context", "capturing"])
def test_falls_back_to_one_stream(lanes_log, case):
    """One job, a one-lane plan, options.handle, a green-context stream, graph capture: today's loop."""
    ctx = FakeCtx(user_handle=0x77 if case == "user-handle" else None, green=case == "green-context")
    lanes_log.state["capturing"] = case == "capturing"
    fan = _fanout.FanOut(ctx, 1 if case == "one-lane" else 4)
    count = 1 if case == "one-job" else 5
    assert _jobs(fan, ctx, count, lanes_log.log) == 1
    assert all(e[0] == "job" and e[2] == 0 and e[3] == ctx.dn and e[4] == 0x5000 for e in lanes_log.log)
    assert len(lanes_log.log) == count


def test_join_runs_when_a_job_fails(lanes_log):
    """A failing library call still leaves the main stream joined to the side streams."""
    ctx = FakeCtx()
    fan = _fanout.FanOut(ctx, 4)

    def job(lane, i):
        if i == 2:
            raise RuntimeError("cuSOLVER failed")

    with pytest.raises(RuntimeError, match="cuSOLVER failed"):
        fan.run(ctx, 6, job)
    assert lanes_log.log[-1] == ("join", 0x5000, 3)


def test_each_lane_has_its_own_workspaces(lanes_log):
    """Device slices, host buffers and scratch slots are disjoint per lane, allocated at plan time."""
    ctx = FakeCtx()
    fan = _fanout.FanOut(ctx, 4, dsize=1000, hsize=24)
    planned = list(ctx.allocs)
    seen = []
    fan.run(ctx, 4, lambda lane, i: seen.append(lane))
    assert ctx.allocs == planned  # execution allocates nothing
    dws = sorted(lane.dws for lane in seen)
    assert all(b - a >= 1000 and (b - a) % 256 == 0 for a, b in itertools.pairwise(dws))
    assert len({lane.hws for lane in seen}) == 4 and all(lane.hsize == 24 for lane in seen)
    assert len({lane.scratch for lane in seen}) == 4
    assert all(lane.workspace == (lane.dws, 1000, lane.hws, 24) for lane in seen)


def test_no_workspace_means_null_pointers(lanes_log):
    """Without a workspace the lanes pass (0, 0, 0, 0)."""
    ctx = FakeCtx()
    fan = _fanout.FanOut(ctx, 2)
    seen = []
    fan.run(ctx, 2, lambda lane, i: seen.append(lane.workspace))
    assert seen == [(0, 0, 0, 0)] * 2


def test_workspace_limit_reduces_lanes(monkeypatch):
    """Lanes whose workspaces would exceed LANE_WORKSPACE_LIMIT together are cut down."""
    monkeypatch.setattr(_fanout, "LANE_WORKSPACE_LIMIT", 3 * 4096)
    assert _fanout.FanOut(FakeCtx(), 8, dsize=4096).lanes == 3
    assert _fanout.FanOut(FakeCtx(), 8, dsize=1 << 20).lanes == 1


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, None])
def test_fanout_rejects_bad_lane_counts(bad):
    """FanOut needs an int >= 1."""
    with pytest.raises(ValueError, match="lanes must be an int >= 1"):
        _fanout.FanOut(FakeCtx(), bad)


# ------------------------------------------------------------------------------------ driver steps
class FakeDriver:
    """Records driver calls; every call succeeds."""

    class CUstream_flags:
        CU_STREAM_NON_BLOCKING = 1

    class CUevent_flags:
        CU_EVENT_DISABLE_TIMING = 2

    def __init__(self):
        self.calls: list[tuple] = []
        self._n = 0
        self.capture = (0, 0)

    def _new(self, kind):
        self._n += 1
        return f"{kind}{self._n}"

    def cuStreamCreate(self, flags):
        self.calls.append(("cuStreamCreate", flags))
        self._n += 1
        return 0, 0x9000 + self._n

    def cuEventCreate(self, flags):
        self.calls.append(("cuEventCreate", flags))
        return 0, self._new("event")

    def cuEventRecord(self, event, stream):
        self.calls.append(("record", event, stream))
        return (0,)

    def cuStreamWaitEvent(self, stream, event, flags):
        self.calls.append(("wait", stream, event))
        return (0,)

    def cuStreamDestroy(self, stream):
        self.calls.append(("cuStreamDestroy", stream))
        return (0,)

    def cuEventDestroy(self, event):
        self.calls.append(("cuEventDestroy", event))
        return (0,)

    def cuStreamIsCapturing(self, stream):
        return self.capture


@pytest.fixture
def fake_driver(monkeypatch):
    """A fake driver, no context switches, fake cusolverDn handle calls, and a fresh lane cache."""
    from nvmath.bindings import cusolverDn

    drv = FakeDriver()
    monkeypatch.setattr(devices, "driver", lambda: drv)
    monkeypatch.setattr(devices, "device_ctx", lambda device_id: contextlib.nullcontext())
    handles = iter(range(0x100, 0x200))
    monkeypatch.setattr(cusolverDn, "create", lambda: drv.calls.append(("dn.create",)) or next(handles))
    monkeypatch.setattr(cusolverDn, "set_stream", lambda h, s: drv.calls.append(("dn.set_stream", h, s)))
    monkeypatch.setattr(cusolverDn, "create_params", lambda: drv.calls.append(("dn.create_params",)) or 0x300)
    monkeypatch.setattr(cusolverDn, "destroy", lambda h: drv.calls.append(("dn.destroy", h)))
    monkeypatch.setattr(_fanout, "_THREAD", threading.local())
    return drv


def test_side_lanes_are_created_once_per_thread_and_bound_to_their_stream(fake_driver):
    """Each side lane: a non-blocking stream, a join event, a handle bound to the stream, params; cached."""
    fork, sides = _fanout._sides(0, 2)
    assert len(sides) == 2 and len({s.stream.ptr for s in sides}) == 2
    for side in sides:
        assert ("dn.set_stream", side.dn, side.stream.ptr) in fake_driver.calls
        assert side.stream.ctx is None and side.stream.device_id == 0
    assert ("cuStreamCreate", 1) in fake_driver.calls and ("cuEventCreate", 2) in fake_driver.calls
    made = len(fake_driver.calls)
    fork2, again = _fanout._sides(0, 1)
    assert fork2 == fork and again == sides[:1] and len(fake_driver.calls) == made
    out = []
    thread = threading.Thread(target=lambda: out.append(_fanout._sides(0, 1)[1][0]))
    thread.start()
    thread.join()
    assert out[0] is not sides[0]  # another thread gets its own lanes


def test_a_failed_side_lane_creates_nothing(fake_driver, monkeypatch):
    """If params creation fails, the lane's handle, event and stream are destroyed again."""
    from nvmath.bindings import cusolverDn

    def boom():
        raise RuntimeError("out of memory")

    monkeypatch.setattr(cusolverDn, "create_params", boom)
    with pytest.raises(RuntimeError, match="out of memory"):
        _fanout._new_side(0)
    names = [c[0] for c in fake_driver.calls]
    assert names[-3:] == ["dn.destroy", "cuEventDestroy", "cuStreamDestroy"]


def test_fork_records_once_and_join_waits_for_every_side(fake_driver):
    """Fork: one record on main, each side waits; join: record on each side, main waits for each."""
    fork, sides = _fanout._sides(0, 3)
    main = FakeStream(0x5000)
    fake_driver.calls.clear()
    _fanout._fork(0, fork, main, sides)
    assert fake_driver.calls == [("record", fork, 0x5000)] + [("wait", s.stream.ptr, fork) for s in sides]
    fake_driver.calls.clear()
    _fanout._join(0, main, sides)
    expected = []
    for s in sides:
        expected += [("record", s.done, s.stream.ptr), ("wait", 0x5000, s.done)]
    assert fake_driver.calls == expected


@pytest.mark.parametrize(
    "result,capturing", [((0, 0), False), ((0, 1), True), ((0, 2), True), ((900, 0), True)]
)
def test_capture_query(fake_driver, result, capturing):
    """Active or invalidated capture, or an unreadable state, count as capturing."""
    fake_driver.capture = result
    assert _fanout._capturing(FakeStream(0x5000)) is capturing


# ------------------------------------------------------------------------------------ lane choice, option
@pytest.mark.parametrize(
    "n,batch,streams,handle,expected",
    [
        (1024, 16, None, False, 8),
        (256, 256, None, False, 8),
        (128, 3, None, False, 3),
        (32, 8192, None, False, 4),
        (127, 100, None, False, 4),
        (1024, 1, None, False, 1),
        (1024, 16, 1, False, 1),
        (1024, 16, 12, False, 12),
        (1024, 5, 12, False, 5),
        (1024, 16, None, True, 1),
    ],
)
def test_choose_lanes(n, batch, streams, handle, expected):
    """auto: 8 lanes from order 128, else 4, at most the batch; streams= overrides; a user handle: 1."""
    lanes = _dispatch.choose_lanes("lu", rows=n, cols=n, batch=batch, streams=streams, user_handle=handle)
    assert lanes == expected


def test_choose_lanes_is_logged_and_retunable(monkeypatch, caplog):
    """The lane choice is logged at DEBUG with its reason; STREAM_LANES can be changed."""
    import logging

    log = logging.getLogger("test.solvers.fanout")
    with caplog.at_level(logging.DEBUG, logger="test.solvers.fanout"):
        _dispatch.choose_lanes("qr", rows=256, cols=256, batch=256, logger=log)
    assert "qr 256x256, batch 256: per-matrix loops on 8 stream(s) (n >= 128)" in caplog.text
    monkeypatch.setitem(_dispatch.STREAM_LANES, "small", 2)
    assert _dispatch.choose_lanes("qr", rows=32, cols=32, batch=64) == 2


@pytest.mark.parametrize(
    "value,error,match",
    [
        (0, ValueError, r"streams must be >= 1; got 0"),
        (33, ValueError, r"streams must be <= 32; got 33"),
        ("4", TypeError, r"streams must be None \(automatic\) or an int from 1 to 32; got str"),
        (True, TypeError, r"got bool"),
        (2.0, TypeError, r"got float"),
    ],
)
@pytest.mark.parametrize("cls", ["SolverOptions", "DirectSolverOptions"])
def test_streams_option_is_validated(cls, value, error, match):
    """options.streams is None or an int 1..32; anything else is refused when the options are built."""
    with pytest.raises(error, match=match):
        getattr(S, cls)(streams=value)


def test_streams_option_keeps_nvmath_python_fields_first():
    """The new field is last: DirectSolverOptions' 1.0 fields keep their order and defaults."""
    fields = [f.name for f in dataclasses.fields(S.DirectSolverOptions)]
    assert fields[:6] == ["allocator", "blocking", "logger", "handle", "inplace_a", "inplace_b"]
    assert fields[-1] == "streams" and S.DirectSolverOptions().streams is None
    assert [f.name for f in dataclasses.fields(S.SolverOptions)][-1] == "streams"
    assert S.SolverOptions(streams=1).streams == 1 and S.SolverOptions(streams=32).streams == 32


def test_planners_pass_the_option_to_the_lane_choice():
    """SolverBase._lanes: options.streams, one lane for batched kernels and for a user handle."""
    a = np.ones((6, 200, 200))
    lu = S.LU(a, options={"streams": 3})
    spec = lu._specs["a"]
    assert lu._lanes("lu", spec) == 3
    assert lu._lanes("lu", spec, _dispatch.Choice("batched", "x", "y")) == 1
    assert S.LU(a)._lanes("lu", spec) == 6  # auto: min(batch 6, 8)
    assert S.LU(a, options={"handle": 5})._lanes("lu", spec) == 1


# ------------------------------------------------------------------------------------ engines on fakes
@pytest.fixture
def fake_dn(monkeypatch):
    """Fake cusolverDn sizes and per-matrix calls, recording (name, handle, args)."""
    from nvmath.bindings import cusolverDn

    calls: list[tuple] = []

    def rec(name):
        return lambda handle, *args: calls.append((name, handle, args))

    monkeypatch.setattr(cusolverDn, "xgetrf_buffer_size", lambda *a: (1000, 16))
    monkeypatch.setattr(cusolverDn, "sgetrf_buffer_size", lambda *a: 50)
    monkeypatch.setattr(cusolverDn, "xgeqrf_buffer_size", lambda *a: (700, 0))
    monkeypatch.setattr(cusolverDn, "sorgqr_buffer_size", lambda *a: 300)
    monkeypatch.setattr(cusolverDn, "xpotrf_buffer_size", lambda *a: (400, 0))
    for name in ("xgetrf", "xgetrs", "sgetrf", "sgetrs", "xgeqrf", "sorgqr", "xpotrf", "xpotrs"):
        monkeypatch.setattr(cusolverDn, name, rec(name))
    return calls


def _lane_of(handle):
    return 0 if handle == 0xD0 else handle - 0xA0


def _spec(count, n):
    return SimpleNamespace(rows=n, cols=n, batch_count=count, batch_shape=(count,), dtype="float32")


@pytest.mark.parametrize("x64", [True, False])
def test_looped_lu_fans_out_with_per_lane_workspaces(lanes_log, fake_dn, x64):
    """getrf / getrs (32-bit and X*): matrix i on lane i % 4, with that lane's handle, workspace, scratch."""
    ctx = FakeCtx()
    g = _lu.plan_lu(ctx, None, _spec(10, 300), _dispatch.Choice("looped", "k", "r"), x64=x64, lanes=4)
    _lu.gpu_getrf(ctx, g)
    x = ctx.matrix(None, (10,), 300, 2)
    _lu.gpu_getrs(ctx, g, x, 0)
    getrf = [c for c in fake_dn if c[0].endswith("getrf")]
    getrs = [c for c in fake_dn if c[0].endswith("getrs")]
    assert len(getrf) == len(getrs) == 10
    for i, (f, s) in enumerate(zip(getrf, getrs)):
        assert _lane_of(f[1]) == _lane_of(s[1]) == i % 4
        a = g.work.at(i)
        assert a in f[2] and a in s[2] and x.at(i) in s[2]
        if x64:
            assert f[2][0] == (0xE0 if i % 4 == 0 else 0xB0 + i % 4)  # the lane's params
            assert f[2][-1] == g.info.at(i)
            dws, dsize, hws, hsize = f[2][-5:-1]
            assert (dsize, hsize) == (1000, 16) and hws != 0
        else:
            dws = f[2][-3]
            assert f[2][-1] == g.info.at(i)
        assert dws == g.fan._dws[i % 4]
        assert s[2][-1] == g.fan._scratch[i % 4]
    assert [e[0] for e in lanes_log.log if e[0] != "job"] == [
        "sides",
        "fork",
        "join",
        "sides",
        "fork",
        "join",
    ]


def test_batched_lu_has_no_lanes(fake_dn):
    """A batched LU plan gets a one-lane FanOut and no workspace."""
    ctx = FakeCtx()
    g = _lu.plan_lu(ctx, None, _spec(10, 16), _dispatch.Choice("batched", "k", "r"), lanes=4)
    assert g.fan.lanes == 1 and g.fan.dsize == 0


def _qr_plan(fake_dn, monkeypatch, algorithm, m=40, n=40, mode="reduced"):
    from nvmath.bindings import cublas

    monkeypatch.setattr(cublas, "sgeqrf_batched", lambda *a: fake_dn.append(("geqrf_batched", None, a)))
    qr = S.QR(np.ones((6, m, n), dtype=np.float32), mode=mode, options={"algorithm": algorithm})
    ctx = FakeCtx()
    ctx.bind_blas = lambda: 0xBB
    return qr, ctx, qr._plan_gpu(ctx)


@pytest.mark.parametrize("algorithm", ["looped", "batched"])
def test_qr_loops_fan_out(lanes_log, fake_dn, monkeypatch, algorithm):
    """Xgeqrf (looped) and orgqr (no Q kernel) run matrix i on lane i % S, sharing that lane's workspace."""
    monkeypatch.setitem(_dispatch.LIMITS, "orgqr_kernel", 0)
    qr, ctx, g = _qr_plan(fake_dn, monkeypatch, algorithm)
    assert not g.q_kernel
    assert g.fan.lanes == 4 and g.fan.dsize == max(700 if algorithm == "looped" else 0, 300 * 4)
    qr._geqrf(ctx, g, 40, 40)
    qr._form_q(ctx, g, 40, 40)
    orgqr = [c for c in fake_dn if c[0] == "sorgqr"]
    assert [_lane_of(c[1]) for c in orgqr] == [i % 4 for i in range(6)]
    assert [c[2][-3] for c in orgqr] == [g.fan._dws[i % 4] for i in range(6)]
    assert [c[2][-1] for c in orgqr] == [g.info.at(i) for i in range(6)]
    geqrf = [c for c in fake_dn if c[0] == "xgeqrf"]
    if algorithm == "looped":
        assert [_lane_of(c[1]) for c in geqrf] == [i % 4 for i in range(6)]
        assert [c[2][-5] for c in geqrf] == [g.fan._dws[i % 4] for i in range(6)]
    else:
        assert not geqrf and fake_dn[0][0] == "geqrf_batched"


@pytest.mark.parametrize("mode,qcols,cols", [("reduced", 24, 24), ("complete", 40, 40)])
def test_batched_qr_forms_q_with_one_kernel_launch(lanes_log, fake_dn, monkeypatch, mode, qcols, cols):
    """After geqrfBatched of small matrices Q comes from one orgqr_small launch: no orgqr, no lanes."""
    from nvmath.linalg._solvers import _kernels

    launches = []
    monkeypatch.setattr(_kernels, "orgqr_small", lambda *a, **kw: launches.append((a, kw)))
    qr, ctx, g = _qr_plan(fake_dn, monkeypatch, "batched", 40, 24, mode)
    assert g.q_kernel and g.lwork == 0 and g.fan.lanes == 1 and g.fan.dsize == 0
    qr._geqrf(ctx, g, 40, 24)
    qr._form_q(ctx, g, 40, 24)
    assert not [c for c in fake_dn if c[0] == "sorgqr"] and not lanes_log.log
    ((args, kw),) = launches
    assert args == (g.work.ptr, g.tau.data_ptr)
    assert kw == {
        "m": 40,
        "qcols": qcols,
        "k": 24,
        "ld": 40,
        "stride": 40 * cols,
        "count": 6,
        "dtype": "float32",
        "device_id": 0,
        "stream": ctx.stream,
    }


def test_q_kernel_only_for_small_batched_qr(fake_dn, monkeypatch):
    """More rows than LIMITS['orgqr_kernel'], mode 'r' or looped geqrf: no Q kernel."""
    assert not _qr_plan(fake_dn, monkeypatch, "batched", 80, 24)[2].q_kernel
    assert not _qr_plan(fake_dn, monkeypatch, "batched", 40, 24, "r")[2].q_kernel
    assert not _qr_plan(fake_dn, monkeypatch, "looped", 40, 24)[2].q_kernel


def test_cholesky_solve_loop_fans_out(lanes_log, fake_dn):
    """Xpotrs of several right-hand sides fans out, each lane with its own info scratch."""
    from nvmath.linalg._solvers import _cholesky

    ctx = FakeCtx()
    g = _cholesky._plan_factor(
        ctx, None, _spec(5, 64), True, _dispatch.Choice("looped", "k", "r"), factorize=True, lanes=2
    )
    _cholesky._gpu_potrs(ctx, g, ctx.matrix(None, (5,), 64, 3))
    potrs = [c for c in fake_dn if c[0] == "xpotrs"]
    assert [_lane_of(c[1]) for c in potrs] == [i % 2 for i in range(5)]
    assert [c[2][-1] for c in potrs] == [g.fan._scratch[i % 2] for i in range(5)]
