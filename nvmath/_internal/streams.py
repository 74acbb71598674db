"""One resolver for every way a user can name a CUDA stream, and the stream helpers' public face.

:func:`get_stream` turns a user's ``stream=`` argument into a :class:`StreamHandle`. Accepted:

* a ``cuda.core.Stream`` or any object with ``__cuda_stream__()`` returning ``(0, handle)``
  (torch >= 2.10 and cupy >= 14 streams, cuda.bindings ``CUstream``);
* a legacy ``torch.cuda.Stream`` (``.cuda_stream``) or ``cupy.cuda.Stream`` (``.ptr``);
* a raw ``int`` ``cudaStream_t`` (0 = legacy default stream, 1 = legacy, 2 = per-thread default);
* ``None``: the operands' package's *current* stream (torch / cupy), or a library-owned
  non-blocking stream per device for numpy and every other package.

Handles are cached (bounded) per stream object and per raw pointer, so a repeated call with the
same stream costs a dictionary lookup. A handle keeps the user's stream object alive; whether its
stream may be destroyed behind our back (*mortal*) is decided here, once per handle.

What is done with a handle -- its context, the library streams, waits between streams, the done-event
rule of mortal streams under CUDA graph capture -- lives in :mod:`nvmath._internal.streams_handle` and
is re-exported here: callers import this module only.
"""

from __future__ import annotations

import logging
import numbers
import sys
from typing import Any

from nvmath._internal import devices
from nvmath._internal.native_streams import native_stream
from nvmath._internal.streams_handle import _LIBRARY_STREAMS  # noqa: F401 - (the tests' fake GPU sets it)
from nvmath._internal.streams_handle import (
    SPECIAL_STREAMS,
    StreamHandle,
    done_after_every_call,
    done_recorder,
    is_capturing,
    library_stream,
    record_done,
    stream_ctx,
    stream_wait,
    synchronize,
    wait_on_ptr,
)

__all__ = [
    "STREAM_CACHE_SIZE",
    "CallerStream",
    "StreamHandle",
    "check_stream",
    "clear_stream_cache",
    "current_stream",
    "done_after_every_call",
    "done_recorder",
    "current_getter",
    "get_stream",
    "is_capturing",
    "library_stream",
    "mark_done",
    "native_stream",
    "record_done",
    "stream_ctx",
    "stream_wait",
    "survivor",
    "synchronize",
    "torch_device_getter",
    "torch_raw_stream",
    "wait_on_ptr",
]

logger = logging.getLogger(__name__)

STREAM_CACHE_SIZE = 64
"""How many stream objects (and, separately, raw handles per package) are remembered."""

_ACCEPTED = (
    "a cuda.core.Stream, an object with __cuda_stream__ (torch >= 2.10, cupy >= 14, cuda.bindings "
    "CUstream), a torch.cuda.Stream, a cupy.cuda.Stream, an int cudaStream_t, or None"
)
_SPECIAL = SPECIAL_STREAMS


_OBJ_CACHE: dict[int, StreamHandle] = {}
_INT_CACHE: dict[str, dict[int, StreamHandle]] = {}
_TORCH_RAW: Any = None


def get_stream(stream: Any, *, device_id: int, package: str) -> StreamHandle:
    """Normalize a user's ``stream`` argument for work on ``device_id`` with ``package`` operands.

    Args:
        stream: see the module docstring for what is accepted.
        device_id: the device the work runs on (from the operands or the options).
        package: the operands' package; decides what ``None`` means.

    Raises:
        TypeError: ``stream`` is of no accepted kind (the message lists them).
        ValueError: the stream belongs to another device, or is not a valid handle.
    """
    if stream is None:
        return current_stream(device_id, package)
    if type(stream) is int:
        cache = _INT_CACHE.get(package)
        if cache is not None:
            handle = cache.get(stream)
            if handle is not None and handle.device_id == device_id:
                return handle
        return _handle_from_int(stream, device_id, package, stream)
    if type(stream) is StreamHandle:
        if stream.device_id != device_id:
            raise ValueError(
                f"the stream is on device {stream.device_id} but the operands are on device {device_id}"
            )
        return stream
    handle = _OBJ_CACHE.get(id(stream))
    if (
        handle is not None
        and handle.obj is stream
        and handle.device_id == device_id
        and handle.package == package
    ):
        return handle
    ptr = _stream_ptr(stream)
    handle = _new_handle(ptr, device_id, package, stream)
    _remember(_OBJ_CACHE, id(stream), handle)
    return handle


def check_stream(stream: Any) -> None:
    """Refuse a ``stream`` argument of no accepted kind, without any driver call.

    For paths that do not use the stream (CPU execution) and for checks before anything is loaded,
    so that one rule holds everywhere: what :func:`get_stream` would refuse for its kind is refused.

    Raises:
        TypeError: not a stream (the message lists the accepted kinds); ValueError: a handle outside
        [0, 2**64).
    """
    if stream is None or type(stream) is StreamHandle:
        return
    if type(stream) is int:
        _check_ptr(stream)
        return
    _stream_ptr(stream)


def current_stream(device_id: int, package: str) -> StreamHandle:
    """Return the package's current stream on ``device_id`` (a library stream for non torch/cupy)."""
    if package == "torch":
        raw = _TORCH_RAW
        if raw is None:
            raw = _torch_raw_getter()
        ptr = raw(device_id)
    elif package == "cupy":
        ptr = _cupy_current_ptr(device_id)
    else:
        return library_stream(device_id)
    return _current_handle(ptr, device_id, package)


def _current_handle(ptr: int, device_id: int, package: str) -> StreamHandle:
    """The handle of ``package``'s current stream ``ptr`` on ``device_id`` (cached per pointer)."""
    cache = _INT_CACHE.get(package)
    if cache is not None:
        handle = cache.get(ptr)
        if handle is not None and handle.device_id == device_id:
            return handle
    # torch's current stream may be an external one (torch.cuda.ExternalStream) that its owner destroys;
    # decided once per pointer (the handle is cached), so torch's own streams never pay for done events
    mortal = _torch_current_mortal(device_id, ptr) if package == "torch" else True
    return _handle_from_int(ptr, device_id, package, ptr, mortal)


def torch_raw_stream() -> Any:
    """torch's raw current-stream getter (``device_id -> cudaStream_t``), or ``None`` without torch."""
    raw = _TORCH_RAW
    if raw is None and "torch" in sys.modules:
        raw = _torch_raw_getter()
    return raw


def torch_device_getter() -> Any:
    """torch's current-device getter (``() -> device id``), or ``None`` (no torch, a CPU build)."""
    return getattr(getattr(sys.modules.get("torch"), "_C", None), "_cuda_getDevice", None)


def current_getter(package: str) -> Any:
    """``device_id -> address of package's current stream``; ``None``: a fixed library stream."""
    if package == "torch":
        return torch_raw_stream()
    if package == "cupy":
        return _cupy_current_ptr
    return None


class CallerStream:
    """The one resolver of a planner's ``stream=`` argument (bound to its device and package).

    ``stream=None``: the package's current stream, read with one call of :attr:`current` and compared
    with the memoised handle :attr:`last` (a new one is resolved without querying a stream that
    captures a CUDA graph); an explicit stream: memoised by identity, else :func:`get_stream`.
    Attributes: ``device_id``, ``package``, ``current`` (:func:`current_getter`), ``last``, ``torch``
    (the package is torch: a current-stream handle is torch's current stream).
    """

    __slots__ = ("_obj", "_obj_handle", "current", "device_id", "last", "package", "torch")

    def __init__(self, device_id: int, package: str):
        self.device_id, self.package = device_id, package
        self.current = current_getter(package)
        self.torch = package == "torch"
        self.last: StreamHandle | None = None
        self._obj: Any = None
        self._obj_handle: StreamHandle | None = None

    def resolve(self, stream: Any) -> tuple[StreamHandle, bool]:
        """``(handle, current)``: ``current``: ``handle`` is torch's current stream (checked); raises as
        :func:`get_stream`."""
        if stream is None:
            raw, handle = self.current, self.last
            if raw is None:
                if handle is None:
                    handle = self.last = get_stream(None, device_id=self.device_id, package=self.package)
                return handle, False
            ptr = raw(self.device_id)
            if handle is None or handle.ptr != ptr:
                handle = self.last = _current_handle(ptr, self.device_id, self.package)
            return handle, self.torch
        if stream is self._obj:
            return self._obj_handle, False  # type: ignore[return-value]
        handle = get_stream(stream, device_id=self.device_id, package=self.package)
        self._obj, self._obj_handle = stream, handle
        return handle, False

    def __call__(self, stream: Any) -> StreamHandle:
        """The handle of ``stream`` (see :meth:`resolve`)."""
        return self.resolve(stream)[0]


def clear_stream_cache() -> None:
    """Forget the cached stream handles (the library streams are kept)."""
    _OBJ_CACHE.clear()
    _INT_CACHE.clear()


def mark_done(handle: StreamHandle) -> None:
    """Record, on a mortal stream, the event that later waits use instead of the stream itself.

    Planners that keep a stream bound beyond a call (cached plans, workspaces) call this after
    enqueueing their work; it does nothing for streams that cannot vanish (default, library, torch's
    own). Hot paths that already hold the stream's context call :func:`record_done` instead.
    """
    if handle.mortal:
        with stream_ctx(handle):
            record_done(handle)


def survivor(handle: StreamHandle | None) -> StreamHandle | None:
    """A stream to order a late release on: ``handle`` itself, or for a mortal one with a
    :func:`mark_done` event, the library stream made to wait on that event."""
    if handle is None or not handle.mortal or handle.done is None:
        return handle
    lib = library_stream(handle.device_id)
    stream_wait(lib, handle)
    return lib


# ------------------------------------------------------------------------------------ helpers
def _stream_ptr(stream: Any) -> int:
    """Return the ``cudaStream_t`` of an accepted stream object (not an int, not None)."""
    if isinstance(stream, bool):
        raise TypeError(f"stream must be {_ACCEPTED}; got {stream!r}")
    if isinstance(stream, numbers.Integral):
        return _check_ptr(int(stream))
    protocol = getattr(type(stream), "__cuda_stream__", None)
    if protocol is not None:
        info = stream.__cuda_stream__()
        if not (isinstance(info, tuple) and len(info) == 2 and info[0] == 0 and isinstance(info[1], int)):
            raise TypeError(
                f"{type(stream).__name__}.__cuda_stream__() must return (0, handle); got {info!r}"
            )
        return _check_ptr(info[1])
    top = type(stream).__module__.split(".", 1)[0]
    if top == "torch" and hasattr(stream, "cuda_stream"):
        return _check_ptr(int(stream.cuda_stream))
    if top == "cupy" and hasattr(stream, "ptr"):
        return _check_ptr(int(stream.ptr))
    raise TypeError(f"stream must be {_ACCEPTED}; got an object of type {type(stream).__qualname__}")


def _check_ptr(ptr: int) -> int:
    if not 0 <= ptr < 1 << 64:  # (planners pass it to the libraries unchecked)
        raise ValueError(f"a stream handle must be an int in [0, 2**64); got {ptr}")
    return ptr


def _handle_from_int(ptr: int, device_id: int, package: str, obj: Any, mortal: bool = True) -> StreamHandle:
    handle = _new_handle(_check_ptr(ptr), device_id, package, obj, mortal)
    cache = _INT_CACHE.setdefault(package, {})
    _remember(cache, ptr, handle)
    return handle


def _is_mortal(obj: Any) -> bool:
    """Whether the stream behind ``obj`` may be destroyed while we still refer to it."""
    if isinstance(obj, int):
        return True
    top = type(obj).__module__.split(".", 1)[0]
    if top == "torch":
        return _torch_id_mortal(getattr(obj, "stream_id", None), getattr(obj, "cuda_stream", None))
    if top == "cupy":  # a cupy stream lives as long as its object (the handle holds it)
        return "External" in type(obj).__name__
    return True  # cuda.core streams can be closed, raw CUstream objects destroyed


def _torch_id_mortal(stream_id: Any, ptr: Any) -> bool:
    """Whether a torch stream with this ``stream_id`` and ``cuda_stream`` may be destroyed.

    torch's own streams (the default and the pooled ones) live as long as the process; an external
    one (``torch.cuda.ExternalStream``, also when ``torch.cuda.current_stream()`` returns it as a plain
    ``torch.cuda.Stream``) is destroyed by its owner. torch encodes this in the stream id: an external
    stream's id is its ``cudaStream_t``, its own streams' ids are small odd numbers (0: the default
    stream). Anything else is treated as external.
    """
    if not isinstance(stream_id, int) or not isinstance(ptr, int):
        return True
    if stream_id == 0:
        return False
    return stream_id == ptr or not stream_id & 1 or stream_id >= 1 << 16


def _torch_current_mortal(device_id: int, ptr: int) -> bool:
    """:func:`_torch_id_mortal` for torch's current stream on ``device_id`` (``ptr``: its handle)."""
    try:
        current = sys.modules["torch"].cuda.current_stream(device_id)
        stream_id, current_ptr = current.stream_id, current.cuda_stream
    except Exception:  # noqa: BLE001 - an unknown torch: assume the worst
        return True
    return current_ptr != ptr or _torch_id_mortal(stream_id, current_ptr)


def _new_handle(ptr: int, device_id: int, package: str, obj: Any, mortal: bool | None = None) -> StreamHandle:
    """Query the stream's device and context once, and build its handle."""
    if mortal is None:
        mortal = _is_mortal(obj)
    if ptr in _SPECIAL:
        return StreamHandle(ptr, device_id, package, obj, None)
    devices.init_driver()
    if is_capturing(ptr):
        # Querying a capturing stream's device or context invalidates the capture (seen with
        # torch.cuda.graph): trust the operands' device and assume the primary context. No events
        # are recorded on it (mortal=False): a wait on an event of a capture would break it.
        return StreamHandle(ptr, device_id, package, obj, None)
    drv = devices.driver()
    status, dev = drv.cuStreamGetDevice(ptr)
    if status != 0:
        raise ValueError(f"{ptr:#x} is not a usable CUDA stream ({getattr(status, 'name', status)})")
    if int(dev) != device_id:
        raise ValueError(
            f"the stream {ptr:#x} belongs to device {int(dev)} but the operands are on device {device_id}: "
            "pass a stream of the operands' device"
        )
    ctx = int(devices.check(drv.cuStreamGetCtx(ptr), "cuStreamGetCtx"))
    green = ctx if ctx and ctx != devices.primary_context(device_id) else None
    return StreamHandle(ptr, device_id, package, obj, green, mortal)


def _remember(cache: dict, key: int, handle: StreamHandle) -> None:
    if len(cache) >= STREAM_CACHE_SIZE:
        try:
            del cache[next(iter(cache))]
        except (KeyError, StopIteration, RuntimeError):
            cache.clear()
    cache[key] = handle


def _torch_raw_getter() -> Any:
    global _TORCH_RAW
    torch = sys.modules["torch"]
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if raw is None:  # pragma: no cover - very old or future torch

        def raw(device_id: int) -> int:
            return int(torch.cuda.current_stream(device_id).cuda_stream)

    _TORCH_RAW = raw
    return raw


def _cupy_current_ptr(device_id: int) -> int:
    cupy = sys.modules["cupy"]
    try:
        return int(cupy.cuda.get_current_stream(device_id).ptr)
    except TypeError:  # older cupy: no device argument
        with cupy.cuda.Device(device_id):
            return int(cupy.cuda.get_current_stream().ptr)
