"""Tests of nvmath._internal.streams: the stream normalizer, its cache, and ordering helpers."""

from __future__ import annotations

import gc
import weakref

import pytest
from call_profile import c_calls, profile_calls, python_calls

from nvmath._internal import devices, streams
from nvmath._internal.streams import StreamHandle, get_stream


class _ProtocolStream:
    """A stream-like object implementing only __cuda_stream__."""

    def __init__(self, handle: int, version: int = 0):
        self.handle = handle
        self.version = version

    def __cuda_stream__(self):
        return (self.version, self.handle)


@pytest.fixture(autouse=True)
def _fresh_cache():
    streams.clear_stream_cache()
    yield
    streams.clear_stream_cache()


@pytest.mark.parametrize("bad", ["stream", 1.5, True, object(), [1]])
def test_wrong_type_lists_accepted(bad):
    """An unsupported stream value raises TypeError listing what is accepted."""
    with pytest.raises(TypeError, match="cuda.core.Stream.*__cuda_stream__.*int"):
        get_stream(bad, device_id=0, package="numpy")


def test_bad_protocol_version():
    """__cuda_stream__ must return (0, handle); another version raises TypeError."""
    with pytest.raises(TypeError, match=r"must return \(0, handle\)"):
        get_stream(_ProtocolStream(5, version=1), device_id=0, package="numpy")


@pytest.mark.parametrize("ptr", [-3, 1 << 64, (1 << 64) + 2])
def test_handles_outside_64_bits_rejected(ptr):
    """An int handle that is negative or does not fit 64 bits raises ValueError (the libraries get it
    unchecked, so it must never wrap), also the ones that alias the special handles."""
    with pytest.raises(ValueError, match=r"\[0, 2\*\*64\)"):
        get_stream(ptr, device_id=0, package="numpy")
    with pytest.raises(ValueError, match=r"\[0, 2\*\*64\)"):
        streams.check_stream(ptr)


@pytest.mark.parametrize("ptr", [0, 1, 2])
def test_special_int_handles_need_no_driver(ptr):
    """The legacy / per-thread default handles normalize without a driver, on the requested device."""
    handle = get_stream(ptr, device_id=3, package="torch")
    assert (handle.ptr, handle.device_id, handle.package, handle.ctx) == (ptr, 3, "torch", None)
    assert get_stream(ptr, device_id=3, package="torch") is handle
    assert get_stream(ptr, device_id=1, package="torch").device_id == 1


def test_protocol_object_is_cached_and_kept_alive():
    """A __cuda_stream__ object gives one cached handle that keeps the object alive."""
    obj = _ProtocolStream(2)
    ref = weakref.ref(obj)
    handle = get_stream(obj, device_id=0, package="jax")
    assert handle.ptr == 2 and handle.obj is obj
    assert get_stream(obj, device_id=0, package="jax") is handle
    del obj
    gc.collect()
    assert ref() is not None  # held by the handle in the cache
    streams.clear_stream_cache()
    del handle
    gc.collect()
    assert ref() is None


def test_handle_passes_through():
    """A StreamHandle is returned as is; on another device it raises ValueError."""
    handle = StreamHandle(0, 0, "numpy")
    assert get_stream(handle, device_id=0, package="numpy") is handle
    with pytest.raises(ValueError, match="device 0"):
        get_stream(handle, device_id=1, package="numpy")


def test_cache_is_bounded():
    """The object cache never holds more than STREAM_CACHE_SIZE handles."""
    objs = [_ProtocolStream(1) for _ in range(streams.STREAM_CACHE_SIZE + 10)]
    for obj in objs:
        get_stream(obj, device_id=0, package="numpy")
    assert len(streams._OBJ_CACHE) <= streams.STREAM_CACHE_SIZE


def test_cached_lookup_is_a_dictionary_hit():
    """A repeated get_stream with the same object returns the same handle through one dictionary
    lookup by id(): no other Python call (the object's __cuda_stream__ is not asked again), no other
    C call.
    The cost is measured by the benchmarks' overhead/stream-torch-object row."""
    obj = _ProtocolStream(2)
    first = get_stream(obj, device_id=0, package="numpy")
    events = profile_calls(lambda: get_stream(obj, device_id=0, package="numpy"))
    assert python_calls(events) == ["get_stream"]
    assert c_calls(events) == ["id", "get"]
    assert get_stream(obj, device_id=0, package="numpy") is first


def test_repr_names_pointer_and_device():
    """StreamHandle's repr shows the handle, device and package."""
    assert repr(StreamHandle(0x10, 1, "cupy")) == "StreamHandle(ptr=0x10, device_id=1, package='cupy')"


# --------------------------------------------------------------------------------------------- GPU
@pytest.mark.gpu
def test_library_stream_is_per_device_and_non_blocking():
    """None for numpy operands gives one library-owned non-blocking stream per device."""
    handle = get_stream(None, device_id=0, package="numpy")
    assert handle is get_stream(None, device_id=0, package="cuda") is streams.library_stream(0)
    assert handle.ptr not in (0, 1, 2)
    assert handle.core.is_nonblocking


@pytest.mark.gpu
def test_torch_current_stream(torch_cuda):
    """None for torch operands is torch's current stream (also inside a torch.cuda.stream block)."""
    torch = torch_cuda
    assert get_stream(None, device_id=0, package="torch").ptr == torch.cuda.current_stream(0).cuda_stream
    side = torch.cuda.Stream(0)
    with torch.cuda.stream(side):
        assert get_stream(None, device_id=0, package="torch").ptr == side.cuda_stream
    handle = get_stream(side, device_id=0, package="torch")
    assert handle.ptr == side.cuda_stream and handle.obj is side and handle.ctx is None


@pytest.mark.gpu
def test_torch_own_streams_are_immortal_and_external_ones_mortal(torch_cuda):
    """torch's pooled streams get no per-call done events; an ExternalStream (whose owner may destroy
    it) does, both when passed and when current."""
    import cuda.core as cc

    torch = torch_cuda
    side = torch.cuda.Stream(0)
    with torch.cuda.stream(side):
        assert not get_stream(None, device_id=0, package="torch").mortal
    assert not get_stream(side, device_id=0, package="torch").mortal
    core = cc.Device(0).create_stream()
    try:
        ext = torch.cuda.ExternalStream(int(core.handle))
        assert get_stream(ext, device_id=0, package="torch").mortal
        with torch.cuda.stream(ext):
            assert get_stream(None, device_id=0, package="torch").mortal
            assert get_stream(torch.cuda.current_stream(0), device_id=0, package="torch").mortal
    finally:
        streams.clear_stream_cache()
        core.close()


@pytest.mark.gpu
def test_cupy_streams(cupy):
    """None for cupy operands is cupy's current stream; cupy stream objects are accepted."""
    side = cupy.cuda.Stream(non_blocking=True)
    with side:
        assert get_stream(None, device_id=0, package="cupy").ptr == side.ptr
    assert get_stream(side, device_id=0, package="cupy").ptr == side.ptr


@pytest.mark.gpu
def test_cuda_core_stream_and_raw_int():
    """A cuda.core Stream is its own core stream; its raw int gives the same pointer."""
    dev = devices.core_device(0)
    s = dev.create_stream()
    handle = get_stream(s, device_id=0, package="numpy")
    assert handle.ptr == int(s.handle) and handle.core is s
    assert get_stream(int(s.handle), device_id=0, package="numpy").ptr == handle.ptr
    core = get_stream(int(s.handle), device_id=0, package="cupy").core
    assert int(core.handle) == handle.ptr


@pytest.mark.gpu
def test_stream_of_another_device_rejected():
    """A stream created on device 1 used for device-0 operands raises ValueError naming both devices."""
    if devices.device_count() < 2:
        pytest.skip("needs 2 GPUs")
    s = devices.core_device(1).create_stream()
    with pytest.raises(ValueError, match="device 1.*device 0"):
        get_stream(s, device_id=0, package="numpy")


@pytest.mark.gpu
def test_green_context_stream():
    """A stream of a green context records its context, and stream_ctx switches to it and back."""
    import cuda.core as cc

    if not all(hasattr(cc, n) for n in ("ContextOptions", "SMResourceOptions")):
        pytest.skip("this cuda.core has no green contexts")
    dev = devices.core_device(0)
    try:
        groups, _rest = dev.resources.sm.split(cc.SMResourceOptions(count=8))
        green = dev.create_context(cc.ContextOptions(resources=[groups[0]]))
        s = green.create_stream()
    except Exception as exc:  # noqa: BLE001 - any failure means: no green contexts here
        pytest.skip(f"green contexts unavailable: {exc}")
    handle = get_stream(s, device_id=0, package="cuda")
    assert handle.ctx is not None and handle.ctx != devices.primary_context(0)
    previous = devices.current_context()
    devices.set_current_context(devices.primary_context(0))
    try:
        with streams.stream_ctx(handle):
            assert devices.current_context() == handle.ctx
        assert devices.current_context() == devices.primary_context(0)
    finally:
        devices.set_current_context(previous)
    plain = get_stream(dev.create_stream(), device_id=0, package="cuda")
    assert plain.ctx is None


@pytest.mark.gpu
def test_stream_wait_orders_work(torch_cuda):
    """stream_wait makes one stream wait for a slow kernel on another, without a host sync."""
    torch = torch_cuda
    producer, consumer = torch.cuda.Stream(0), torch.cuda.Stream(0)
    x = torch.zeros(1 << 20, device="cuda")
    with torch.cuda.stream(producer):
        torch.cuda._sleep(50_000_000)
        x.fill_(3.0)
    streams.stream_wait(
        get_stream(consumer, device_id=0, package="torch"), get_stream(producer, device_id=0, package="torch")
    )
    with torch.cuda.stream(consumer):
        y = x * 2
    consumer.synchronize()
    assert float(y.min()) == 6.0


@pytest.mark.gpu
def test_cached_get_stream_none_is_a_raw_query_and_a_dictionary_hit(torch_cuda):
    """A repeated get_stream(None) for torch is torch's raw current-stream query plus the handle
    cache's lookups: no Python call beyond current_stream() and its raw-handle helper, no new handle. The cost is measured by
    the benchmarks' overhead/stream-none row."""
    first = get_stream(None, device_id=0, package="torch")
    events = profile_calls(lambda: get_stream(None, device_id=0, package="torch"))
    assert python_calls(events) == ["get_stream", "current_stream", "_current_handle"]
    calls = c_calls(events)
    assert len(calls) <= 3 and calls.count("get") == 2, calls  # the raw query, two dict lookups
    assert get_stream(None, device_id=0, package="torch") is first


@pytest.mark.gpu
def test_new_stream_seen_during_graph_capture_keeps_capture_valid(torch_cuda):
    """Normalizing a stream first seen while it captures a CUDA graph does not break the capture."""
    torch = torch_cuda
    x = torch.ones(16, device="cuda")
    graph = torch.cuda.CUDAGraph()
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        x.add_(1)  # warm-up outside capture
    torch.cuda.synchronize()
    with torch.cuda.graph(graph):
        handle = streams.get_stream(None, device_id=0, package="torch")
        assert handle.ptr == torch.cuda.current_stream().cuda_stream
        x.mul_(2)
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(x, torch.full_like(x, 4.0))


@pytest.mark.parametrize("bad", ["notastream", object(), 1.5, True, b"0", [0]])
def test_check_stream_refuses_what_get_stream_would(bad):
    """check_stream refuses a stream argument of no accepted kind (TypeError), with no driver call."""
    with pytest.raises(TypeError, match="stream must be"):
        streams.check_stream(bad)


def test_check_stream_accepts_the_accepted_kinds_and_refuses_negative_handles():
    """None, ints >= 0, StreamHandle and __cuda_stream__ objects pass; a negative int is a ValueError."""

    class Protocol:
        def __cuda_stream__(self):
            return (0, 1234)

    for good in (None, 0, 2, 0x7F0000, Protocol()):
        assert streams.check_stream(good) is None
    with pytest.raises(ValueError, match=r"\[0, 2\*\*64\)"):
        streams.check_stream(-1)


@pytest.mark.parametrize(
    "internal, package, always",
    [(False, "torch", False), (False, "cupy", False), (True, "torch", True), (False, "numpy", True), (False, "cuda", True)],
)
def test_which_plans_record_done_events_after_every_call(internal, package, always):
    """torch / cupy outputs come from allocators that order their own frees: a plan without an internal
    buffer records a done event only after calls that used its workspace; any other plan after every call."""
    assert streams.done_after_every_call(internal, package) is always


# ------------------------------------------------------------------ the caller-stream resolver
def test_resolver_memoises_the_fixed_stream_for_none(monkeypatch):
    """For a package without a current stream (numpy, say), None resolves once to the library stream
    and is then memoised; the handle is not torch's current stream."""
    lib = StreamHandle(0, 0, "cuda")
    monkeypatch.setitem(streams._LIBRARY_STREAMS, 0, lib)
    resolver = streams.CallerStream(0, "numpy")
    assert resolver.current is None
    assert resolver.resolve(None) == (lib, False)
    monkeypatch.setitem(streams._LIBRARY_STREAMS, 0, StreamHandle(2, 0, "cuda"))
    assert resolver(None) is lib  # memoised


def test_resolver_follows_the_current_stream(monkeypatch):
    """For torch, None resolves to the stream the current-stream getter names, re-resolved when it
    changes (flagged as torch's current stream); the same pointer gives the same handle."""
    monkeypatch.setattr(streams, "_torch_current_mortal", lambda device_id, ptr: False)
    resolver = streams.CallerStream(1, "torch")
    now = [0]
    resolver.current = lambda device_id: now[0] if device_id == 1 else pytest.fail("wrong device")
    first, current = resolver.resolve(None)
    assert (first.ptr, first.device_id, first.package, current) == (0, 1, "torch", True)
    assert resolver(None) is first and resolver.last is first
    now[0] = 2
    second = resolver(None)
    assert second.ptr == 2 and resolver.last is second
    now[0] = 0
    assert resolver(None).ptr == 0


def test_resolver_memoises_an_explicit_stream_object():
    """An explicit stream object resolves as get_stream does and is memoised by identity; such a handle
    is never flagged as the current stream; a bad stream is refused with get_stream's error."""
    resolver = streams.CallerStream(0, "numpy")
    obj = _ProtocolStream(1)
    handle, current = resolver.resolve(obj)
    assert (handle.ptr, handle.obj, current) == (1, obj, False)
    streams.clear_stream_cache()
    assert resolver(obj) is handle  # the identity memo, not the (cleared) cache
    assert resolver(2).ptr == 2
    with pytest.raises(TypeError, match="stream must be"):
        resolver("stream")
    with pytest.raises(ValueError, match="device 0"):
        resolver(StreamHandle(0, 3, "numpy"))


def test_current_getters_are_the_one_lookup(monkeypatch):
    """current_getter: torch's raw getter (the cached one), cupy's, and None for other packages."""
    getter = lambda device_id: 0  # noqa: E731
    monkeypatch.setattr(streams, "_TORCH_RAW", getter)
    assert streams.torch_raw_stream() is getter
    assert streams.current_getter("torch") is getter
    assert streams.current_getter("cupy") is streams._cupy_current_ptr
    assert streams.current_getter("numpy") is None and streams.current_getter("cuda") is None


def test_is_capturing_needs_no_driver_for_the_default_streams():
    """The legacy and per-thread default streams never capture (answered without a driver)."""
    assert not any(streams.is_capturing(p) for p in (0, 1, 2))


def test_core_of_a_closed_caller_stream_is_a_wrapper_of_the_handle(monkeypatch):
    """A handle whose caller's cuda.core Stream was closed (the driver reuses the handle value for the
    next stream) launches through a non-owning wrapper of the handle, never the closed object."""
    import cuda.core as cc

    from nvmath._internal import devices, streams

    class FakeStream:
        def __init__(self, ptr, closed=False):
            self.ptr, self.is_closed = ptr, closed

        @staticmethod
        def from_handle(ptr):
            return FakeStream(ptr)

    monkeypatch.setattr(cc, "Stream", FakeStream)
    monkeypatch.setattr(devices, "core_device", lambda device_id: None)
    user = FakeStream(0x1234)
    handle = streams.StreamHandle(0x1234, 0, "cuda", user)
    assert handle.core is user  # open: the caller's own object
    user.is_closed = True
    core = handle.core
    assert core is not user and isinstance(core, FakeStream) and core.ptr == 0x1234 and not core.is_closed
    assert handle.core is core  # made once
