"""Multi-stream fan-out of a loop of independent per-matrix library calls.

A looped solver path issues one cuSOLVER call per matrix; on one stream each call of a small or
medium matrix leaves most of the GPU idle. :class:`FanOut` spreads such a loop over ``S`` *lanes*:

* lane 0 is the caller's (main) stream with the plan's own handle, ``params`` and workspace slice;
* lanes 1 .. S-1 are nvmath's side streams of the same device (non-blocking, primary context), each
  with its own cusolverDn handle (bound to that stream once, at creation) and ``cusolverDnParams_t``.
  Side lanes are created on first use and kept per (thread, device, lane index) for the process, like
  the per-thread handles of :mod:`~nvmath.linalg._solvers._gpu`;
* every lane has its own slice of the plan's device workspace, its own host workspace and its own
  ``int`` scratch slot (the ``info`` of solves), all allocated at plan time: no two lanes share
  memory, and execution allocates nothing.

:meth:`FanOut.run` issues job ``i`` on lane ``i % S`` between a *fork* (an event recorded once on
the main stream; every side stream waits for it, so the side work starts after everything queued on
the main stream so far -- the plan's allocations and the operand copies included) and a *join* (the
main stream waits for an event recorded on every side stream, even when a call fails), so the
results are ordered on the caller's stream exactly as with one stream. Memory is allocated and freed
on the main stream, which has joined the side work before any later free or reuse.

One lane (today's single-stream behaviour: no side stream, no event) is used when the loop has one
job, when the plan has one lane (``options.streams=1``, ``options.handle`` given, one matrix), when
the main stream is being captured into a CUDA graph (or its capture state cannot be read), and when
the main stream belongs to a green (or any non-primary) context.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from nvmath._internal import devices
from nvmath._internal.logging import debug
from nvmath._internal.streams import StreamHandle

__all__ = ["LANE_WORKSPACE_LIMIT", "FanOut", "Lane"]

logger = logging.getLogger(__name__)

LANE_WORKSPACE_LIMIT = 1 << 30
"""Most bytes of device workspace a plan's lanes may hold together (fewer lanes above it)."""

_ALIGN = 256  # bytes between lane workspace slices (and scratch slots) are a multiple of this
_THREAD = threading.local()


class Lane:
    """What job ``i`` of :meth:`FanOut.run` issues its call with.

    Attributes:
        index: the lane number (0: the main stream).
        dn: a cusolverDn handle bound to the lane's stream.
        params: a ``cusolverDnParams_t`` of this lane (64-bit ``X*`` calls).
        stream: the lane's stream (``cudaStream_t``).
        dws, dsize: the lane's device workspace (0, 0 without one).
        hws, hsize: the lane's host workspace (0, 0 without one).
        workspace: ``(dws, dsize, hws, hsize)``, the workspace arguments of a 64-bit call.
        scratch: the address of the lane's device ``int`` (the ``info`` of solves, not read).
    """

    __slots__ = ("dn", "dsize", "dws", "hsize", "hws", "index", "params", "scratch", "stream", "workspace")

    def __init__(
        self, index: int, dn: int, params: int, stream: int, ws: tuple[int, int, int, int], scratch: int
    ):
        self.index, self.dn, self.params, self.stream = index, dn, params, stream
        self.dws, self.dsize, self.hws, self.hsize = ws
        self.workspace = ws
        self.scratch = scratch


class _Side:
    """A side lane of one thread on one device: stream, join event, handle, params (kept for the process)."""

    __slots__ = ("dn", "done", "params", "stream")

    def __init__(self, stream: StreamHandle, done: Any, dn: int, params: int):
        self.stream, self.done, self.dn, self.params = stream, done, dn, params


def _new_side(device_id: int) -> _Side:
    """Create a side lane on ``device_id`` (its primary context is current); a failure creates nothing."""
    from nvmath.bindings import cusolverDn

    drv = devices.driver()
    made: list[Callable[[], Any]] = []
    try:
        cu = devices.check(drv.cuStreamCreate(drv.CUstream_flags.CU_STREAM_NON_BLOCKING), "cuStreamCreate")
        made.append(lambda: drv.cuStreamDestroy(cu))
        done = devices.check(drv.cuEventCreate(drv.CUevent_flags.CU_EVENT_DISABLE_TIMING), "cuEventCreate")
        made.append(lambda: drv.cuEventDestroy(done))
        dn = cusolverDn.create()
        made.append(lambda: cusolverDn.destroy(dn))
        cusolverDn.set_stream(dn, int(cu))
        params = cusolverDn.create_params()
    except BaseException:
        for undo in reversed(made):
            try:
                undo()
            except Exception as exc:  # noqa: BLE001 - best effort; the original error is raised
                logger.debug("releasing a half-made side lane failed: %s", exc)
        raise
    return _Side(StreamHandle(int(cu), device_id, "cuda", cu), done, dn, params)


def _sides(device_id: int, count: int) -> tuple[Any, list[_Side]]:
    """``(fork event, side lanes 1 .. count)`` of this thread on ``device_id`` (created on first use)."""
    table = getattr(_THREAD, "lanes", None)
    if table is None:
        table = _THREAD.lanes = {}
    entry = table.get(device_id)
    with devices.device_ctx(device_id):
        if entry is None:
            drv = devices.driver()
            flags = drv.CUevent_flags.CU_EVENT_DISABLE_TIMING
            entry = table[device_id] = (devices.check(drv.cuEventCreate(flags), "cuEventCreate"), [])
        sides = entry[1]
        while len(sides) < count:
            sides.append(_new_side(device_id))
            logger.debug(
                "created side lane %d (stream %#x) on device %d", len(sides), sides[-1].stream.ptr, device_id
            )
    return entry[0], sides[:count]


def _fork(device_id: int, fork: Any, main: StreamHandle, sides: list[_Side]) -> None:
    """Make every side stream wait for the work queued so far on ``main`` (one record, many waits)."""
    drv = devices.driver()
    with devices.device_ctx(device_id):
        devices.check(drv.cuEventRecord(fork, main.ptr), "cuEventRecord")
        for side in sides:
            devices.check(drv.cuStreamWaitEvent(side.stream.ptr, fork, 0), "cuStreamWaitEvent")


def _join(device_id: int, main: StreamHandle, sides: list[_Side]) -> None:
    """Make ``main`` wait for the work queued so far on every side stream."""
    drv = devices.driver()
    with devices.device_ctx(device_id):
        for side in sides:
            devices.check(drv.cuEventRecord(side.done, side.stream.ptr), "cuEventRecord")
            devices.check(drv.cuStreamWaitEvent(main.ptr, side.done, 0), "cuStreamWaitEvent")


def _capturing(stream: StreamHandle) -> bool:
    """Whether ``stream`` is capturing a CUDA graph (``True`` too when the state cannot be read)."""
    status, state = devices.driver().cuStreamIsCapturing(stream.ptr)
    return status != 0 or int(state) != 0


def _round_up(nbytes: int, align: int) -> int:
    return -(-nbytes // align) * align


class FanOut:
    """The lanes of one plan's loops of per-matrix calls, and their workspaces (see the module docstring).

    Args:
        ctx: the plan's GPU context (allocations are made here, at plan time, on its stream).
        lanes: the planned number of lanes (``1``: every call on the main stream).
        dsize: bytes of device workspace each call needs.
        hsize: bytes of host workspace each call needs.
        log: where to log a reduced lane count (DEBUG).
    """

    def __init__(self, ctx: Any, lanes: int, *, dsize: int = 0, hsize: int = 0, log: Any = None):
        if isinstance(lanes, bool) or not isinstance(lanes, int) or lanes < 1:
            raise ValueError(f"lanes must be an int >= 1; got {lanes!r}")
        self.dsize, self.hsize = int(dsize), int(hsize)
        stride = _round_up(self.dsize, _ALIGN)
        if lanes > 1 and stride * lanes > LANE_WORKSPACE_LIMIT:
            fewer = max(1, LANE_WORKSPACE_LIMIT // stride)
            debug(log or logger, "%d lanes instead of %d: %d B of workspace each", fewer, lanes, self.dsize)
            lanes = fewer
        self.lanes = lanes
        ctx.params  # noqa: B018 - create lane 0's params now: execution creates nothing
        base = ctx.alloc(stride * lanes) if stride else 0
        self._dws = [base + j * stride if stride else 0 for j in range(lanes)]
        self._hws = [ctx.host(self.hsize) for _ in range(lanes)] if self.hsize else []
        scratch = ctx.alloc(_ALIGN * lanes)
        self._scratch = [scratch + j * _ALIGN for j in range(lanes)]

    def _workspace(self, j: int) -> tuple[int, int, int, int]:
        host = self._hws[j].ctypes.data if self.hsize else 0
        return self._dws[j], self.dsize, host, self.hsize

    def active(self, ctx: Any, count: int) -> int:
        """How many lanes a loop of ``count`` jobs on ``ctx``'s current stream uses (the fallbacks)."""
        lanes = min(self.lanes, count)
        if lanes < 2 or ctx.user_handle is not None:
            return 1
        stream = ctx.stream
        if stream.ctx is not None or _capturing(stream):
            return 1
        return lanes

    def run(self, ctx: Any, count: int, job: Callable[[Lane, int], None]) -> int:
        """Issue ``job(lane, i)`` for ``i`` in ``range(count)``, job ``i`` on lane ``i % S``.

        The device must be current and ``ctx`` bound to this call's stream. Returns ``S``.
        """
        if count <= 0:
            return 0
        lanes = self.active(ctx, count)
        main = ctx.stream
        first = Lane(0, ctx.dn, ctx.params, main.ptr, self._workspace(0), self._scratch[0])
        if lanes == 1:
            for i in range(count):
                job(first, i)
            return 1
        fork, sides = _sides(ctx.device_id, lanes - 1)
        all_lanes = [first]
        for j, side in enumerate(sides, 1):
            ws, scratch = self._workspace(j), self._scratch[j]
            all_lanes.append(Lane(j, side.dn, side.params, side.stream.ptr, ws, scratch))
        _fork(ctx.device_id, fork, main, sides)
        try:
            for i in range(count):
                job(all_lanes[i % lanes], i)
        finally:
            _join(ctx.device_id, main, sides)
        return lanes
