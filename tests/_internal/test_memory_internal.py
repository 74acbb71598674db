"""Tests of nvmath._internal.memory: allocate(), Allocation, allocator validation, Workspace."""

from __future__ import annotations

import warnings

import pytest

from nvmath._internal import memory
from nvmath._internal.streams import StreamHandle


class _Block:
    """What a fake allocator returns: a pointer and a free() that counts calls."""

    def __init__(self, ptr: int, log: list):
        self.device_ptr = ptr
        self.log = log

    def free(self):
        self.log.append(("free", self.device_ptr))


class _AsyncManager:
    """A fake stream-ordered memory manager handing out increasing fake addresses."""

    def __init__(self):
        self.log: list = []
        self.next = 0x1000

    def memalloc_async(self, size, stream):
        self.log.append(("alloc", size, stream))
        ptr, self.next = self.next, self.next + size
        return _Block(ptr, self.log)


def _handle() -> StreamHandle:
    handle = StreamHandle(0x5, 0, "numpy")
    handle._core = "core-stream"  # no driver: the fake manager only passes it through
    return handle


def test_zero_bytes_allocates_nothing():
    """allocate(0) returns a null allocation without touching any allocator; free is idempotent."""
    alloc = memory.allocate(0, device_id=0, stream=_handle(), package="torch")
    assert (alloc.ptr, alloc.size, alloc.closed) == (0, 0, False)
    alloc.free()
    alloc.free()
    assert alloc.closed


@pytest.mark.parametrize("bad", [-1, 1.5, True, "8"])
def test_bad_size(bad):
    """A size that is not an int >= 0 raises ValueError."""
    with pytest.raises(ValueError, match="nbytes"):
        memory.allocate(bad, device_id=0, stream=_handle(), package="numpy")


def test_user_async_allocator_is_used_and_freed_once():
    """A memalloc_async manager receives (size, core stream); free() releases exactly once."""
    mm = _AsyncManager()
    alloc = memory.allocate(256, device_id=0, stream=_handle(), package="numpy", allocator=mm)
    assert alloc.ptr == 0x1000 and alloc.size == 256 and alloc.package == "user"
    assert mm.log == [("alloc", 256, "core-stream")]
    alloc.free()
    alloc.free()
    assert mm.log[1:] == [("free", 0x1000)]


def test_user_allocator_gets_the_null_stream_as_handle_0(monkeypatch):
    """The default (null) stream reaches a user's memalloc_async as a stream with handle 0, as in
    nvmath-python (cuda.core's legacy default stream has handle 1, which torch.cuda.ExternalStream
    refuses); other streams are passed as they are."""
    class _Wrapped:
        handle = 0

    monkeypatch.setattr(memory, "_null_core", lambda device_id: _Wrapped())
    monkeypatch.setattr(memory, "_NULL_STREAMS", {})
    null = StreamHandle(0, 0, "torch")
    null._core = "legacy-stream"
    mm = _AsyncManager()
    memory.allocate(64, device_id=0, stream=null, package="torch", allocator=mm).free()
    memory.allocate(64, device_id=0, stream=_handle(), package="torch", allocator=mm).free()
    streams_given = [entry[2] for entry in mm.log if entry[0] == "alloc"]
    assert streams_given[0].handle == 0 and streams_given[1] == "core-stream"


def test_user_allocator_null_stream_falls_back_to_legacy(monkeypatch):
    """Where cuda.core cannot wrap handle 0, the legacy default stream (same ordering) is given."""
    def refuse(device_id):
        raise RuntimeError("no")

    monkeypatch.setattr(memory, "_null_core", refuse)
    monkeypatch.setattr(memory, "_NULL_STREAMS", {})
    null = StreamHandle(0, 0, "torch")
    null._core = "legacy-stream"
    mm = _AsyncManager()
    memory.allocate(64, device_id=0, stream=null, package="torch", allocator=mm).free()
    assert mm.log[0][2] == "legacy-stream"


def test_allocation_freed_on_collection():
    """An Allocation dropped without free() releases its memory."""
    mm = _AsyncManager()
    alloc = memory.allocate(64, device_id=0, stream=_handle(), package="numpy", allocator=mm)
    del alloc
    assert ("free", 0x1000) in mm.log


def test_failing_free_warns_and_does_not_raise():
    """A release that raises becomes a RuntimeWarning."""

    def boom(owner, stream):
        raise RuntimeError("driver gone")

    alloc = memory.Allocation(0x10, 16, 0, "numpy", object(), boom)
    with pytest.warns(RuntimeWarning, match="driver gone"):
        alloc.free()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        alloc.free()


def test_check_allocator():
    """check_allocator accepts None and protocol implementers, and names the protocols otherwise."""
    assert memory.check_allocator(None) is None
    mm = _AsyncManager()
    assert memory.check_allocator(mm) is mm
    with pytest.raises(TypeError, match="BaseCUDAMemoryManager.*memalloc"):
        memory.check_allocator(object())
    with pytest.raises(TypeError, match="options.allocator"):
        memory.check_allocator("cupy", "options.allocator")


@pytest.mark.parametrize("attr", ["device_ptr", "device_pointer", "ptr", "pointer"])
def test_pointer_of_accepted_attributes(attr):
    """pointer_of reads any of the four attribute names nvmath-python accepts."""
    obj = type("Obj", (), {attr: 1234})()
    assert memory.pointer_of(obj) == 1234


@pytest.mark.parametrize("ptr", [-1, 2**64, 2**70])
def test_pointer_of_rejects_addresses_outside_uint64(ptr):
    """A pointer outside [0, 2**64) (which the unchecked bindings would wrap) is a ValueError naming it."""
    obj = type("Obj", (), {"ptr": ptr})()
    with pytest.raises(ValueError, match=f"ptr is {ptr}, not a device address"):
        memory.pointer_of(obj)
    assert memory.pointer_of(type("Obj", (), {"ptr": 2**64 - 1})()) == 2**64 - 1


def test_pointer_of_rejects_objects_without_pointer():
    """pointer_of raises TypeError listing the accepted attribute names."""
    with pytest.raises(TypeError, match="device_ptr, device_pointer, ptr, pointer"):
        memory.pointer_of(object())


def test_workspace_grows_and_releases():
    """Workspace reuses its buffer when big enough, reallocates when not, and releases once."""
    mm = _AsyncManager()
    ws = memory.Workspace(device_id=0, package="numpy", allocator=mm, name="ws")
    stream = _handle()
    assert ws.ensure(0, stream) == 0 and ws.size == 0
    p1 = ws.ensure(100, stream)
    assert ws.ensure(50, stream) == p1 and ws.size == 100
    p2 = ws.ensure(200, stream)
    assert p2 != p1 and ws.size == 200
    assert ("free", p1) in mm.log
    ws.release()
    ws.release()
    assert ws.ptr == 0 and ws.size == 0
    assert [e for e in mm.log if e[0] == "free"] == [("free", p1), ("free", p2)]
    assert "ws" in repr(ws)


def test_workspace_validates_allocator():
    """A Workspace with an object that is no memory manager raises TypeError at construction."""
    with pytest.raises(TypeError):
        memory.Workspace(device_id=0, package="numpy", allocator=42)


# --------------------------------------------------------------------------------------------- GPU
@pytest.mark.gpu
def test_torch_allocations_use_the_caching_allocator(torch_cuda):
    """torch operands allocate from torch's caching allocator (memory_allocated grows, then shrinks)."""
    from nvmath._internal.streams import get_stream

    torch = torch_cuda
    stream = get_stream(None, device_id=0, package="torch")
    before = torch.cuda.memory_allocated(0)
    alloc = memory.allocate(1 << 20, device_id=0, stream=stream, package="torch")
    assert alloc.ptr != 0
    assert torch.cuda.memory_allocated(0) >= before + (1 << 20)
    alloc.free(stream)
    assert torch.cuda.memory_allocated(0) == before


@pytest.mark.gpu
def test_cupy_allocations_use_the_pool(cupy):
    """cupy operands allocate from cupy's memory pool (used_bytes grows, then shrinks)."""
    from nvmath._internal.streams import get_stream

    pool = cupy.get_default_memory_pool()
    stream = get_stream(None, device_id=0, package="cupy")
    before = pool.used_bytes()
    alloc = memory.allocate(1 << 20, device_id=0, stream=stream, package="cupy")
    assert pool.used_bytes() >= before + (1 << 20)
    alloc.free()
    assert pool.used_bytes() == before


@pytest.mark.gpu
def test_cuda_core_pool_allocation():
    """Other packages allocate from cuda.core's stream-ordered pool; free(stream) is stream-ordered."""
    from nvmath._internal.streams import get_stream

    stream = get_stream(None, device_id=0, package="numpy")
    alloc = memory.allocate(4096, device_id=0, stream=stream, package="numpy")
    assert alloc.ptr != 0 and alloc.ptr % 256 == 0
    alloc.free(stream)
    assert alloc.closed
    free, total = memory.device_memory_info(0)
    assert 0 < free <= total


@pytest.mark.gpu
def test_sync_user_allocator_runs_in_device_context():
    """A memalloc(size) manager is called with the device's context current."""
    from nvmath._internal import devices
    from nvmath._internal.streams import get_stream

    seen = []

    class _Sync:
        def memalloc(self, size):
            seen.append(devices.current_context())
            return memory.MemoryPointer(0xABC, size, None)

    alloc = memory.allocate(
        16,
        device_id=0,
        stream=get_stream(None, device_id=0, package="numpy"),
        package="numpy",
        allocator=_Sync(),
    )
    assert alloc.ptr == 0xABC and seen == [devices.primary_context(0)]


@pytest.mark.gpu
def test_workspace_on_second_device():
    """A Workspace on device 1 allocates there (cuda.core pool) and releases."""
    from nvmath._internal import devices
    from nvmath._internal.streams import get_stream

    if devices.device_count() < 2:
        pytest.skip("needs 2 GPUs")
    stream = get_stream(None, device_id=1, package="numpy")
    ws = memory.Workspace(device_id=1, package="numpy")
    assert ws.ensure(1 << 16, stream) != 0
    ws.release()
    assert ws.size == 0


def test_shared_workspaces_one_per_device_and_package():
    """SharedWorkspaces hands out one workspace (with a lock) per (device, package); clear() forgets them."""
    from nvmath._internal.memory import SharedWorkspaces

    pool = SharedWorkspaces("test shared")
    w = pool.get(0, "torch")
    assert pool.get(0, "torch") is w and pool.get(1, "torch") is not w and pool.get(0, "cupy") is not w
    assert w.lock is not None and w.size == 0 and pool.nbytes == 0 and len(pool) == 3
    pool.clear()
    assert len(pool) == 0 and pool.get(0, "torch") is not w


def test_cleanup_failures_warn_with_nvmath_warning():
    """warn_cleanup_failure warns with NvmathWarning (a RuntimeWarning), naming what and the error."""
    from nvmath._errors import NvmathWarning, warn_cleanup_failure

    assert issubclass(NvmathWarning, RuntimeWarning)
    with pytest.warns(NvmathWarning, match="freeing a buffer failed: OSError: gone"):
        warn_cleanup_failure("freeing a buffer", OSError("gone"), stacklevel=2)
