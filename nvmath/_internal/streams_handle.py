"""A normalized CUDA stream (:class:`StreamHandle`) and what is done with one: its context, the
library's own streams, ordering work between streams, and the done-event rule of mortal streams.

Split from :mod:`nvmath._internal.streams` (which resolves a user's ``stream=`` argument into a handle
and re-exports everything here: import from there).

Stream lifetime: a plan or workspace bound to a stream may outlive it (a cached plan, a stream closed
or collected by its owner). Handles of streams that can be destroyed behind our back (raw ints other
than the default streams, ``cuda.core`` streams, external and cupy streams) are *mortal*: planners
call ``streams.mark_done`` (or, with the stream's context current, :func:`record_done`) after enqueueing
work on them, and :func:`stream_wait` / ``streams.survivor`` order later work after that recorded event
instead of touching the (maybe destroyed) stream. The event belongs to its handle: it is destroyed
(once, never at interpreter shutdown) when the handle is collected, that is evicted from the caches and
no longer held by any plan or workspace. Waits already enqueued on it stay valid (the driver releases a
destroyed event once it completes).

The done-event rule and CUDA graph capture: an event recorded into a capture cannot be waited on
outside it, so :func:`record_done` asks the driver whether the stream is capturing before every record.
That answer is never cached: a capture can begin or end on the stream between any two calls, from code
we do not see (``torch.cuda.graph``, another library). What is fixed per handle is cached: the event,
the driver's entry points and the stream, in one call kept by the handle that makes the query and the
record (one compiled call when the compiled path is active, see :mod:`nvmath._internal.event_record`).
"""

from __future__ import annotations

import logging
import sys
import threading
import weakref
from typing import Any

from nvmath._errors import warn_cleanup_failure
from nvmath._internal import devices, event_record

__all__ = [
    "SPECIAL_STREAMS",
    "StreamHandle",
    "done_after_every_call",
    "done_recorder",
    "is_capturing",
    "library_stream",
    "record_done",
    "stream_ctx",
    "stream_wait",
    "synchronize",
    "wait_on_ptr",
]

logger = logging.getLogger(__name__)

SPECIAL_STREAMS = (0, 1, 2)
"""The stream handles that always exist: the legacy default (NULL), ``CU_STREAM_LEGACY`` and
``CU_STREAM_PER_THREAD``."""
_SPECIAL = SPECIAL_STREAMS
_LIBRARY_STREAMS: dict[int, StreamHandle] = {}
_LOCK = threading.RLock()  # reentrant: a finalizer run by the GC inside it may need the library stream
_THREAD = threading.local()


class StreamHandle:
    """A normalized CUDA stream.

    Attributes:
        ptr: the ``cudaStream_t`` as an int.
        device_id: the device the stream runs work on.
        package: the package of the operands this handle was made for ("torch", "cupy", ...).
        obj: the user's stream object (kept alive), or the int handle.
        ctx: the stream's ``CUcontext`` (int) when it is not the device's primary context (a green
            context, say), else ``None``.
        native: a package-native stream object for ``ptr`` (torch / cupy), made lazily by adapters.
        mortal: the stream may be destroyed while a plan still refers to it (see the module notes).
    """

    __slots__ = (
        "__weakref__", "_core", "_done", "_recorder", "ctx", "device_id", "mortal", "native", "obj",
        "package", "ptr",
    )  # fmt: skip

    def __init__(
        self, ptr: int, device_id: int, package: str, obj: Any = None, ctx: int | None = None,
        mortal: bool = False,
    ):  # fmt: skip
        self.ptr = ptr
        self.device_id = device_id
        self.package = package
        self.obj = ptr if obj is None else obj
        self.ctx = ctx
        self.mortal = mortal and ptr not in _SPECIAL
        self.native: Any = None
        self._core: Any = None
        self._done: Any = None  # the event mark_done() records on a mortal stream
        self._recorder: Any = None  # (driver module, its capture-checked record of _done), see record_done

    @property
    def done(self) -> Any:
        """The event :func:`record_done` records on this (mortal) stream, or ``None`` before the first."""
        return self._done

    @property
    def core(self) -> Any:
        """The ``cuda.core.Stream`` for this handle (created once; ``Stream.from_handle`` is slow)."""
        core = self._core
        if core is None or (core is self.obj and getattr(core, "is_closed", False)):
            import cuda.core as cc

            # The caller's own Stream, unless it was closed: a handle value outlives the object that
            # made it (the driver reuses it for the next stream), and a non-owning wrapper still works.
            if isinstance(self.obj, cc.Stream) and not getattr(self.obj, "is_closed", False):
                core = self.obj
            elif self.ptr in (0, 1):
                core = cc.LEGACY_DEFAULT_STREAM
            elif self.ptr == 2:
                core = cc.PER_THREAD_DEFAULT_STREAM
            else:
                devices.core_device(self.device_id)
                core = cc.Stream.from_handle(self.ptr)
            self._core = core
        return core

    def __repr__(self) -> str:
        ctx = f", ctx={self.ctx:#x}" if self.ctx else ""
        return f"StreamHandle(ptr={self.ptr:#x}, device_id={self.device_id}, package={self.package!r}{ctx})"


def is_capturing(ptr: int) -> bool:
    """Whether the stream ``ptr`` is capturing a CUDA graph (the default streams never are; a failed
    query answers ``False`` and leaves the error to the next call on the stream)."""
    if ptr in _SPECIAL:
        return False
    status, capture = devices.driver().cuStreamIsCapturing(ptr)
    return int(status) == 0 and int(capture) != 0


def library_stream(device_id: int) -> StreamHandle:
    """Return nvmath's own non-blocking stream on ``device_id``, created on first use."""
    handle = _LIBRARY_STREAMS.get(device_id)
    if handle is None:
        with _LOCK:
            handle = _LIBRARY_STREAMS.get(device_id)
            if handle is None:
                drv = devices.driver()
                with devices.device_ctx(device_id):
                    cu = devices.check(
                        drv.cuStreamCreate(drv.CUstream_flags.CU_STREAM_NON_BLOCKING), "cuStreamCreate"
                    )
                handle = StreamHandle(int(cu), device_id, "cuda", cu)
                _LIBRARY_STREAMS[device_id] = handle
                logger.debug("created the library stream %#x on device %d", handle.ptr, device_id)
    return handle


def stream_ctx(handle: StreamHandle) -> devices.context_ctx:
    """Context manager making ``handle``'s own context current (its green context, if any)."""
    return devices.context_ctx(handle.ctx or devices.primary_context(handle.device_id))


def stream_wait(waiter: StreamHandle, signaler: StreamHandle) -> None:
    """Make ``waiter`` wait (on the device, not the host) for the work queued so far on ``signaler``.

    For a mortal ``signaler`` with a done event (:func:`record_done`), the wait is on that event, so a
    destroyed ``signaler`` is never touched; also when ``waiter`` is another handle of the same raw
    stream (a new stream the driver gave a destroyed one's handle).
    """
    done = signaler._done
    if waiter.ptr == signaler.ptr and waiter.ctx == signaler.ctx and (waiter is signaler or done is None):
        return  # (a new stream may reuse a destroyed one's handle: then wait on the old one's event)
    ctx = signaler.ctx or devices.primary_context(signaler.device_id)
    if signaler.mortal and done is not None:
        drv = devices.driver()
        with devices.context_ctx(ctx):
            devices.check(drv.cuStreamWaitEvent(waiter.ptr, done, 0), "cuStreamWaitEvent")
        return
    _record_and_wait(ctx, signaler.ptr, waiter.ptr)


def record_done(handle: StreamHandle) -> None:
    """``streams.mark_done`` for a caller that has ``handle``'s context current (saves a context switch).

    Never records into a stream capture: a handle made before a capture began on its stream would
    otherwise get an event of the capture, which cannot be waited on outside it
    (CUDA_ERROR_INVALID_VALUE at a later free); the capture's graph orders its own replays, and the
    event keeps the last record made outside the capture. The capture state is asked on every call
    (it is not ours to cache, see the module notes); the handle keeps the call that asks and records
    (:func:`nvmath._internal.event_record.capture_checked`: one compiled call when the path is active).
    """
    if not handle.mortal:
        return
    done_recorder(handle)()


def done_recorder(handle: StreamHandle) -> Any:
    """:func:`record_done` of the mortal ``handle`` as a call of no arguments, for a caller that keeps it
    (``nvmath.torch``'s compiled Linear hit): the handle's capture-checked record of its done event,
    made now if needed (a compiled call when the path is active). A kept one stays bound to the driver
    module of now; :func:`record_done` asks again each call, so it follows a change of driver module
    (tests' fakes)."""
    drv = devices.driver()
    made = handle._recorder
    if made is None or made[0] is not drv:  # (made once per handle; again only if the driver module changed)
        made = _make_recorder(handle, drv)
    return made[1]


def _make_recorder(handle: StreamHandle, drv: Any) -> tuple[Any, Any]:
    done = handle._done
    if done is None:
        done = _own_event(handle, drv)
    made = handle._recorder = (drv, event_record.capture_checked(drv, done, handle.ptr))
    return made


def done_after_every_call(internal: bool, package: str) -> bool:
    """Whether every call of a plan on a mortal stream needs :func:`record_done`, not only the calls that
    used the plan's workspace.

    A call leaves something of ours to order later work or a late free after when it uses the
    workspace, writes a buffer the plan keeps (``internal``: a staging copy, say), or allocates its
    outputs with our own allocator (packages other than torch and cupy, whose allocators order their
    frees themselves). A call that did none of these needs no event: nothing of ours is in flight.
    """
    return internal or package not in ("torch", "cupy")


def _own_event(handle: StreamHandle, drv: Any) -> Any:
    """Create ``handle``'s done event, destroyed by ``drv`` when ``handle`` is collected (exactly once;
    a racing thread's extra event is destroyed at once)."""
    event = devices.check(drv.cuEventCreate(drv.CUevent_flags.CU_EVENT_DISABLE_TIMING), "cuEventCreate")
    with _LOCK:
        done = handle._done
        if done is None:
            done = handle._done = event
            event = None
    if event is not None:
        _destroy_event(drv, event)
    else:
        weakref.finalize(handle, _destroy_event, drv, done).atexit = False  # the driver may be gone then
    return done


def _destroy_event(drv: Any, event: Any) -> None:
    """Destroy a done event; never raises (a failure warns), does nothing at interpreter shutdown."""
    if sys.is_finalizing():
        return
    try:
        status = drv.cuEventDestroy(event)[0]
        if status != 0:
            raise RuntimeError(f"cuEventDestroy failed: {getattr(status, 'name', status)}")
    except Exception as exc:  # noqa: BLE001 - cleanup failures warn
        warn_cleanup_failure("destroying a stream's done event", exc, stacklevel=2)


def wait_on_ptr(waiter: StreamHandle, producer_ptr: int) -> None:
    """Make ``waiter`` wait for the work queued so far on the raw stream ``producer_ptr``.

    Used for ``__cuda_array_interface__`` producers, which export the stream their data is ready on.
    """
    if producer_ptr == waiter.ptr:
        return
    if producer_ptr in _SPECIAL:
        ctx = waiter.ctx or devices.primary_context(waiter.device_id)
    else:
        ctx = int(devices.check(devices.driver().cuStreamGetCtx(producer_ptr), "cuStreamGetCtx"))
    _record_and_wait(ctx, producer_ptr, waiter.ptr)


def synchronize(handle: StreamHandle) -> None:
    """Block the host until all work queued on ``handle`` has finished."""
    with stream_ctx(handle):
        devices.check(devices.driver().cuStreamSynchronize(handle.ptr), "cuStreamSynchronize")


def _event_for(ctx: int) -> Any:
    """Return this thread's reusable (timing-disabled) event of context ``ctx``; ``ctx`` is current."""
    events = getattr(_THREAD, "events", None)
    if events is None:
        events = _THREAD.events = {}
    event = events.get(ctx)
    if event is None:
        drv = devices.driver()
        event = devices.check(drv.cuEventCreate(drv.CUevent_flags.CU_EVENT_DISABLE_TIMING), "cuEventCreate")
        events[ctx] = event
    return event


def _record_and_wait(ctx: int, signaler_ptr: int, waiter_ptr: int) -> None:
    drv = devices.driver()
    with devices.context_ctx(ctx):
        event = _event_for(ctx)
        devices.check(drv.cuEventRecord(event, signaler_ptr), "cuEventRecord")
        devices.check(drv.cuStreamWaitEvent(waiter_ptr, event, 0), "cuStreamWaitEvent")
