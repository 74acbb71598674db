"""Device memory: allocation through the operands' package allocator, and growable workspaces.

* torch operands: the torch caching allocator (``torch.cuda.caching_allocator_alloc``), so our
  memory shows in ``torch.cuda.memory_allocated()`` and is CUDA-graph friendly;
* cupy operands: ``cupy.cuda.alloc`` (the current cupy allocator, a memory pool by default);
* everything else: cuda.core's stream-ordered device memory resource of the device;
* a user allocator (``options.allocator``) following :class:`~nvmath.memory.BaseCUDAMemoryManager`
  or :class:`~nvmath.memory.BaseCUDAMemoryManagerAsync` wins over all of these.

Policy: freeing is idempotent and never raises (a failing free warns).
"""

from __future__ import annotations

import logging
import sys
import threading
import weakref
from collections.abc import Callable
from typing import Any, Protocol, Self, runtime_checkable

from nvmath._errors import warn_cleanup_failure
from nvmath._internal import devices, streams
from nvmath._internal.streams import StreamHandle

__all__ = [
    "Allocation",
    "BaseCUDAMemoryManager",
    "BaseCUDAMemoryManagerAsync",
    "MemoryPointer",
    "SharedWorkspaces",
    "Workspace",
    "allocate",
    "check_allocator",
    "device_memory_info",
    "pointer_of",
    "user_stream",
]

logger = logging.getLogger(__name__)


@runtime_checkable
class BaseCUDAMemoryManager(Protocol):
    """Protocol of a user memory manager (nvmath-python compatible).

    Implementations take ``(device_id, logger)`` in ``__init__`` and return from ``memalloc`` an
    object with ``.device_ptr`` (or ``.device_pointer``, ``.ptr``, ``.pointer``) that frees the
    memory when it is garbage collected (see :class:`MemoryPointer`).
    """

    def memalloc(self, size: int) -> Any:
        """Allocate ``size`` bytes on the manager's device."""
        ...


@runtime_checkable
class BaseCUDAMemoryManagerAsync(Protocol):
    """Protocol of a stream-ordered user memory manager (nvmath-python compatible).

    ``memalloc_async(size, stream)`` receives a ``cuda.core.Stream`` and returns an object like
    :meth:`BaseCUDAMemoryManager.memalloc` does.
    """

    def memalloc_async(self, size: int, stream: Any) -> Any:
        """Allocate ``size`` bytes ordered on ``stream``."""
        ...


class MemoryPointer:
    """An owned device pointer that calls ``finalizer()`` once: on :meth:`free` or at collection.

    Args:
        device_ptr: the device address (int).
        size: the size in bytes.
        finalizer: a callable of no argument releasing the memory, or ``None``.
    """

    def __init__(self, device_ptr: int, size: int, finalizer: Callable[[], Any] | None):
        self.device_ptr = int(device_ptr)
        self.size = int(size)
        self._finalizer = None
        if finalizer is not None:
            self._finalizer = weakref.finalize(
                self, _safe_call, finalizer, f"MemoryPointer({self.device_ptr:#x})"
            )
            self._finalizer.atexit = False

    @property
    def ptr(self) -> int:
        """Alias of :attr:`device_ptr`."""
        return self.device_ptr

    def free(self) -> None:
        """Release the memory now (a failing finalizer warns, it does not raise).

        Raises:
            RuntimeError: the memory was already freed (a second call, as in nvmath-python).
        """
        if self._finalizer is not None:
            if not self._finalizer.alive:
                raise RuntimeError(f"{self!r}: the buffer has already been freed")
            self._finalizer()

    def __repr__(self) -> str:
        return f"MemoryPointer(device_ptr={self.device_ptr:#x}, size={self.size})"


_finalizing = sys.is_finalizing  # bound now: module globals may be gone when __del__ runs at exit


def _safe_call(release: Callable[..., Any], what: str, *args: Any) -> None:
    try:
        release(*args)
    except Exception as exc:
        if _finalizing():
            return  # the process is exiting: the driver reclaims the memory, logging may be gone
        warn_cleanup_failure(f"freeing {what}", exc)
        logger.debug("freeing %s failed", what, exc_info=True)


_POINTER_ATTRS = ("device_ptr", "device_pointer", "ptr", "pointer")


def pointer_of(obj: Any) -> int:
    """Return the device address of an allocation object from a user memory manager."""
    for attr in _POINTER_ATTRS:
        value = getattr(obj, attr, None)
        if value is not None:
            ptr = int(value)
            if not 0 <= ptr < 2**64:  # it reaches the libraries through unchecked bindings
                raise ValueError(
                    f"the allocator returned a {type(obj).__qualname__} whose {attr} is {ptr}, "
                    "not a device address in [0, 2**64)"
                )
            return ptr
    raise TypeError(
        f"the allocator returned a {type(obj).__qualname__}, which has none of the attributes "
        f"{', '.join(_POINTER_ATTRS)} holding the device pointer"
    )


def check_allocator(allocator: Any, what: str = "allocator") -> Any:
    """Return ``allocator`` if it follows one of the memory-manager protocols, else raise TypeError."""
    if allocator is None:
        return None
    if not (
        callable(getattr(allocator, "memalloc_async", None)) or callable(getattr(allocator, "memalloc", None))
    ):
        raise TypeError(
            f"{what} must implement nvmath.memory.BaseCUDAMemoryManager (memalloc(size)) or "
            f"BaseCUDAMemoryManagerAsync (memalloc_async(size, stream)); got {type(allocator).__qualname__}"
        )
    return allocator


class Allocation:
    """Device memory from :func:`allocate`: ``ptr``, ``size``, and an idempotent :meth:`free`.

    The memory is also released when the object is collected. ``free(stream)`` is stream-ordered
    for cuda.core memory; torch and cupy memory returns to its pool, which orders reuse on the
    stream it was allocated on.
    """

    __slots__ = ("__weakref__", "_late", "_owner", "_release", "device_id", "package", "ptr", "size")

    def __init__(self, ptr: int, size: int, device_id: int, package: str, owner: Any, release: Any):
        self.ptr = ptr
        self.size = size
        self.device_id = device_id
        self.package = package
        self._owner = owner
        self._release = release
        self._late: StreamHandle | None = None  # the mortal stream a collected allocation is freed after

    @property
    def closed(self) -> bool:
        """Whether the memory has been released."""
        return self._release is None

    def free(self, stream: StreamHandle | None = None) -> None:
        """Release the memory, ordered on ``stream`` where the allocator supports it; idempotent."""
        release, self._release = self._release, None
        owner, self._owner = self._owner, None
        if release is not None:
            stream = streams.survivor(stream)  # never order on a stream that may be destroyed
            _safe_call(release, f"{self.size} bytes at {self.ptr:#x} ({self.package})", owner, stream)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.free()

    def __del__(self) -> None:
        if self._release is not None and not _finalizing():
            try:
                self.free(self._late)
            except Exception as exc:  # noqa: BLE001 - the library stream's wait failed
                warn_cleanup_failure(f"freeing {self.size} bytes at {self.ptr:#x}", exc)

    def __repr__(self) -> str:
        state = "freed" if self.closed else f"ptr={self.ptr:#x}"
        return f"Allocation({state}, size={self.size}, device_id={self.device_id}, package={self.package!r})"


def allocate(
    nbytes: int,
    *,
    device_id: int,
    stream: StreamHandle,
    package: str,
    allocator: Any = None,
) -> Allocation:
    """Allocate ``nbytes`` of device memory on ``device_id``, ordered on ``stream``.

    Args:
        nbytes: the size; 0 gives an empty allocation with ``ptr == 0``.
        device_id: the device.
        stream: the stream the memory is first used on.
        package: the operands' package ("torch", "cupy", anything else = cuda.core).
        allocator: an optional user memory manager (see :func:`check_allocator`).
    """
    if isinstance(nbytes, bool) or not isinstance(nbytes, int) or nbytes < 0:
        raise ValueError(f"nbytes must be an int >= 0; got {nbytes!r}")
    if nbytes == 0:
        return Allocation(0, 0, device_id, package, None, _drop)
    if allocator is not None:
        return _allocate_user(nbytes, device_id, stream, check_allocator(allocator))
    if package == "torch":
        torch = sys.modules["torch"]
        ptr = torch.cuda.caching_allocator_alloc(nbytes, device_id, stream.ptr)
        return Allocation(int(ptr), nbytes, device_id, package, ptr, _torch_free)
    if package == "cupy":
        cupy = sys.modules["cupy"]
        with cupy.cuda.Device(device_id), streams.native_stream(stream, "cupy"):
            mem = cupy.cuda.alloc(nbytes)
        return Allocation(int(mem.ptr), nbytes, device_id, package, mem, _drop)
    buf = devices.core_device(device_id).memory_resource.allocate(nbytes, stream=stream.core)
    allocation = Allocation(int(buf.handle), nbytes, device_id, package, buf, _core_free)
    if stream.mortal:  # cuda.core frees a buffer closed without a stream on its allocation stream
        allocation._late = stream
    return allocation


_NULL_STREAMS: dict[int, Any] = {}


def user_stream(stream: StreamHandle) -> Any:
    """The ``cuda.core.Stream`` a user allocator's ``memalloc_async`` receives for ``stream``.

    The null (default) stream is one whose handle is 0, as nvmath-python passes it, so that a user's
    ``torch.cuda.ExternalStream(stream.handle)`` works (cuda.core's ``LEGACY_DEFAULT_STREAM`` has
    handle 1, which torch refuses). Should cuda.core refuse to wrap handle 0, the legacy stream is
    given (same ordering, handle 1).
    """
    if stream.ptr != 0:
        return stream.core
    core = _NULL_STREAMS.get(stream.device_id)
    if core is None:
        try:
            core = _null_core(stream.device_id)
        except Exception:  # noqa: BLE001 - cuda.core refused: the legacy default stream instead
            core = stream.core
        _NULL_STREAMS[stream.device_id] = core
    return core


def _null_core(device_id: int) -> Any:
    """A ``cuda.core.Stream`` wrapping handle 0 (the null stream) on ``device_id``."""
    import cuda.core as cc

    devices.core_device(device_id)
    return cc.Stream.from_handle(0)


def _allocate_user(nbytes: int, device_id: int, stream: StreamHandle, allocator: Any) -> Allocation:
    if callable(getattr(allocator, "memalloc_async", None)):
        obj = allocator.memalloc_async(nbytes, user_stream(stream))
    else:
        with devices.device_ctx(device_id):
            obj = allocator.memalloc(nbytes)
    return Allocation(pointer_of(obj), nbytes, device_id, "user", obj, _user_free)


def _torch_free(ptr: int, stream: StreamHandle | None) -> None:
    sys.modules["torch"].cuda.caching_allocator_delete(ptr)


def _drop(owner: Any, stream: StreamHandle | None) -> None:
    del owner  # the pool takes the memory back when the last reference goes


def _core_free(buf: Any, stream: StreamHandle | None) -> None:
    buf.close(stream.core if stream is not None else None)


def _user_free(obj: Any, stream: StreamHandle | None) -> None:
    free = getattr(obj, "free", None)
    if callable(free):
        free()


def device_memory_info(device_id: int) -> tuple[int, int]:
    """Return ``(free_bytes, total_bytes)`` of device ``device_id``."""
    with devices.device_ctx(device_id):
        free, total = devices.check(devices.driver().cuMemGetInfo(), "cuMemGetInfo")
    return int(free), int(total)


class Workspace:
    """A device buffer that grows on demand and can be released; used by planners.

    The memory is freed ordered on the stream it was last used on, so a release never races the
    work that used it.
    """

    def __init__(self, *, device_id: int, package: str, allocator: Any = None, name: str = "workspace"):
        self.device_id = device_id
        self.package = package
        self.allocator = check_allocator(allocator)
        self.name = name
        self.lock: Any = None
        """The lock the users of a workspace shared by several plans take (see :class:`SharedWorkspaces`)."""
        self._alloc: Allocation | None = None
        self.stream: StreamHandle | None = None
        """The stream the memory was last used on (``None`` before); read-only outside this class (a
        compiled hit compares it, as :meth:`ensure` does, before using :attr:`ptr`)."""
        # plain attributes, not properties: execute() paths read them on every launch
        self.ptr = 0
        """The device address (0 when nothing is allocated)."""
        self.size = 0
        """The allocated size in bytes (0 when nothing is allocated)."""

    def ensure(self, nbytes: int, stream: StreamHandle) -> int:
        """Return a pointer to at least ``nbytes`` bytes usable on ``stream``, growing if needed."""
        if self._alloc is not None and self._alloc.size >= nbytes:
            previous = self.stream
            if previous is not stream:
                if previous is not None:
                    streams.stream_wait(stream, previous)
                self._bind(stream)
            return self._alloc.ptr
        self.release()
        if nbytes == 0:
            return 0
        self._alloc = allocate(
            nbytes, device_id=self.device_id, stream=stream, package=self.package, allocator=self.allocator
        )
        self.ptr, self.size = self._alloc.ptr, self._alloc.size
        self._bind(stream)
        logger.debug("%s: allocated %d bytes at %#x", self.name, nbytes, self._alloc.ptr)
        return self._alloc.ptr

    def _bind(self, stream: StreamHandle) -> None:
        """Remember the stream the memory is used on; a mortal one gets a done event at once (its
        user's work re-records it), so later waits and the release never touch that stream."""
        self.stream = stream
        if stream.mortal:
            streams.mark_done(stream)

    def release(self) -> None:
        """Free the memory (ordered on the stream it was last used on); idempotent."""
        alloc, self._alloc = self._alloc, None
        self.ptr = self.size = 0
        if alloc is not None:
            alloc.free(self.stream)
            logger.debug("%s: released %d bytes", self.name, alloc.size)

    def __repr__(self) -> str:
        return f"Workspace({self.name!r}, size={self.size}, device_id={self.device_id})"


class SharedWorkspaces:
    """Workspaces shared by the cached plans of one stateless function: one per (device, package).

    Each has a :attr:`Workspace.lock`; a cached plan that uses a shared workspace is run under that
    lock (so calls on plans sharing it take turns). :meth:`clear` frees them all.
    """

    def __init__(self, name: str):
        self.name = name
        self._lock = threading.Lock()
        self._workspaces: dict[tuple[int, str], Workspace] = {}

    def get(self, device_id: int, package: str) -> Workspace:
        """The shared workspace of ``device_id`` and ``package`` (created empty on first use)."""
        key = (device_id, package)
        with self._lock:
            ws = self._workspaces.get(key)
            if ws is None:
                ws = self._workspaces[key] = Workspace(device_id=device_id, package=package, name=self.name)
                ws.lock = threading.Lock()
        return ws

    def __len__(self) -> int:
        return len(self._workspaces)

    @property
    def stats(self) -> tuple[int, int]:
        """``(number of workspaces, bytes they hold)``."""
        return len(self._workspaces), self.nbytes

    @property
    def nbytes(self) -> int:
        """The bytes the shared workspaces hold now."""
        return sum(ws.size for ws in list(self._workspaces.values()))

    def clear(self) -> None:
        """Free every shared workspace (waiting for a call that uses it)."""
        with self._lock:
            shared = list(self._workspaces.values())
            self._workspaces.clear()
        for ws in shared:
            with ws.lock:
                ws.release()
