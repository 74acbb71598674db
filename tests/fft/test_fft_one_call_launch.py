"""The one-call FFT launch (CPU only): ``fft_exec_in_context`` of ``nvmath._fastcall`` switches the
context only when another one is current and restores it, reports each failure as it should, and
``CufftPlan.launch`` uses it only once the plan runs steadily on a stream -- giving the same bits as the
Python launch (C-callable stand-ins for the driver's context calls and cuFFT, made with ctypes)."""

from __future__ import annotations

import ctypes
import importlib.util
import pathlib

import numpy as np
import pytest
from fake_gpu import torch_read_as_gpu

from nvmath._internal import devices, fastpath
from nvmath.bindings import cufft
from nvmath.fft import FFT, _cufft_plan

_spec = importlib.util.spec_from_file_location(
    "fft_cuda_path_fakes", pathlib.Path(__file__).with_name("test_fft_cuda_path.py")
)
_cuda_path = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_cuda_path)
FakeStream, dev, fake = _cuda_path.FakeStream, _cuda_path.dev, _cuda_path.fake  # (fake: the fixture)

compiled_only = pytest.mark.skipif(
    not fastpath.available(), reason=f"the compiled path is not active: {fastpath.describe()}"
)

GET = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_uint64))
SET = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_uint64)
EXEC = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_int)


def _address(f):
    return ctypes.cast(f, ctypes.c_void_p).value


class Driver:
    """The driver's context calls as C functions: a current context, statuses to return, a call log."""

    def __init__(self, current=0xC0):
        self.current, self.calls, self.get_status, self.set_status = current, [], 0, []

        def get(out):
            self.calls.append(("get",))
            out[0] = self.current
            return self.get_status

        def set_(ctx):
            self.calls.append(("set", ctx))
            status = self.set_status.pop(0) if self.set_status else 0
            if status == 0:
                self.current = ctx
            return status

        self.keep = (GET(get), SET(set_))
        self.addresses = tuple(_address(f) for f in self.keep)


def _launcher(drv, exec_status=0, ctx=0xC1):
    from nvmath import _fastcall

    log = []

    def exec_(plan, i, o, direction):
        log.append(("exec", plan, i, o, direction, drv.current))
        return exec_status

    fn = EXEC(exec_)
    call = fastpath.make_caller(
        _fastcall.fft_exec_in_context_address(), (*drv.addresses, _address(fn), ctx, 9, 0, 0, 0), (5, 6, 7),
        error=_cufft_plan._LaunchFailure,
    )  # fmt: skip
    return call, log, fn


@compiled_only
def test_context_already_current_is_not_switched():
    """With the plan's context current, the call is one query and the launch (both directions)."""
    drv = Driver(current=0xC1)
    call, log, keep = _launcher(drv)
    call(0x1000, 0x2000, -1)
    call(0x1000, 0x2000, 1)
    assert drv.calls == [("get",), ("get",)]
    assert log == [("exec", 9, 0x1000, 0x2000, -1, 0xC1), ("exec", 9, 0x1000, 0x2000, 1, 0xC1)]


@compiled_only
def test_another_context_is_switched_and_restored():
    """Another current context: made the plan's for the launch, then restored."""
    drv = Driver(current=0xC0)
    call, log, keep = _launcher(drv)
    call(0x1000, 0x2000, -1)
    assert drv.calls == [("get",), ("set", 0xC1), ("set", 0xC0)] and drv.current == 0xC0
    assert log == [("exec", 9, 0x1000, 0x2000, -1, 0xC1)]


@compiled_only
def test_a_failed_launch_restores_the_context_and_raises_cufft_error():
    """cufftXtExec's failure status raises cuFFTError with it; the caller's context is back."""
    drv = Driver(current=0xC0)
    call, log, keep = _launcher(drv, exec_status=5)
    with pytest.raises(cufft.cuFFTError) as info:
        call(1, 2, -1)
    assert info.value.status == 5 and drv.current == 0xC0


@compiled_only
@pytest.mark.parametrize(
    ("get_status", "set_status", "launched"),
    [(201, [], False), (0, [201], False), (0, [0, 201], True)],
    ids=["query fails", "switch fails", "restore fails"],
)
def test_a_failed_context_call_raises_runtime_error(get_status, set_status, launched):
    """A refused context query or switch launches nothing; a refused restore is reported after the
    launch: a RuntimeError naming the context calls and the driver's status."""
    drv = Driver(current=0xC0)
    drv.get_status, drv.set_status = get_status, list(set_status)
    call, log, keep = _launcher(drv)
    with pytest.raises(RuntimeError, match="cuCtxSetCurrent around cufftXtExec failed: status 201") as info:
        call(1, 2, -1)
    assert not isinstance(info.value, cufft.cuFFTError) and bool(log) == launched


def test_launch_error_maps_statuses():
    """Statuses below the driver flag are cuFFT's; flagged ones are the driver's."""
    assert isinstance(_cufft_plan.launch_error(3), cufft.cuFFTError)
    err = _cufft_plan.launch_error(0x10000 | 4)
    assert type(err) is RuntimeError and "status 4" in str(err)


@pytest.fixture
def one_call(fake, monkeypatch):
    """The fake cuFFT reached through a C entry point (so the compiled launch can call it), the driver's
    context calls as C functions, primary context 0xC0; yields (fake cuFFT, driver, exec log)."""
    drv = Driver(current=0)
    execs = []

    def exec_(plan, i, o, direction):
        execs.append((plan, drv.current))
        fake.xt_exec(plan, i, o, direction)
        return 0

    fn = EXEC(exec_)
    monkeypatch.setattr(cufft, "_p_cufftXtExec", fn)
    monkeypatch.setattr(_cufft_plan, "_context_calls", lambda: drv.addresses)
    monkeypatch.setattr(devices, "primary_context", lambda device_id: 0xC0)
    yield fake, drv, execs, fn


@compiled_only
def test_plan_launch_goes_one_call_once_steady_and_matches_the_python_launch(one_call, rng):
    """The first launch on a stream runs the Python path (binds stream and workspace); the next ones are
    one compiled call in the stream's context (switched from none and restored). Every result equals
    numpy's, and the one-call result is bit-identical to the Python launch's."""
    fake, drv, execs, keep = one_call
    x = dev(rng, (4, 16))
    with FFT(x, axes=(1,)) as f:
        f.plan()
        plan = f._plan
        stream = FakeStream(7)
        outs = [np.empty((4, 16), np.complex128) for _ in range(3)]
        for out in outs:
            plan.launch(x.data_ptr, out.ctypes.data, -1, stream)
        assert [ctx for _, ctx in execs] == [0, 0xC0, 0xC0]  # Python path (fake context), then the context
        assert drv.current == 0 and [c[0] for c in drv.calls] == ["get", "set", "set"] * 2
        np.testing.assert_allclose(outs[0], np.fft.fft(x.tensor, axis=1), rtol=1e-12)
        assert outs[1].tobytes() == outs[0].tobytes() == outs[2].tobytes()


@compiled_only
def test_plan_launch_follows_stream_changes(one_call, rng):
    """Another stream rebinds through the Python path before going one-call on it; going back to the
    first stream rebinds again (the one-call launch never runs on a stream the plan is not bound to)."""
    fake, drv, execs, keep = one_call
    x = dev(rng, (2, 8))
    out = np.empty((2, 8), np.complex128)
    with FFT(x, axes=(1,)) as f:
        f.plan()
        plan, a, b = f._plan, FakeStream(7), FakeStream(8)
        for stream in (a, a, b, b, a, a):
            fake.calls.clear()
            plan.launch(x.data_ptr, out.ctypes.data, -1, stream)
            binds = [c[2] for c in fake.calls if c[0] == "set_stream"]
            assert binds in ([], [stream.ptr])
        assert [ctx for _, ctx in execs] == [0, 0xC0, 0, 0xC0, 0, 0xC0]


@compiled_only
def test_plan_launch_keeps_the_python_path_where_an_event_must_be_recorded(one_call, rng, monkeypatch):
    """On a stream that may vanish, a plan with a workspace records the stream's done event after each
    call: that stays on the Python path (never one-call); so does a call after release_workspace()."""
    from nvmath._internal import streams

    recorded = []
    monkeypatch.setattr(streams, "record_done", recorded.append)
    fake, drv, execs, keep = one_call
    x = dev(rng, (2, 8))
    out = np.empty((2, 8), np.complex128)
    with FFT(x, axes=(1,)) as f:
        f.plan()
        plan, mortal = f._plan, FakeStream(9)
        mortal.mortal = True
        for _ in range(3):
            plan.launch(x.data_ptr, out.ctypes.data, -1, mortal)
        assert [ctx for _, ctx in execs] == [0, 0, 0] and len(recorded) == 4  # (binding records one too)
        steady = FakeStream(7)
        plan.launch(x.data_ptr, out.ctypes.data, -1, steady)
        plan.launch(x.data_ptr, out.ctypes.data, -1, steady)
        plan.release_workspace()
        plan.launch(x.data_ptr, out.ctypes.data, -1, steady)
        assert [ctx for _, ctx in execs[3:]] == [0, 0xC0, 0]


def test_without_the_compiled_path_every_launch_is_the_python_launch(fake, rng, monkeypatch):
    """With the compiled path off (``NVMATH_PURE_PYTHON=1``), launch() is run() inside the stream's
    context on every call: no one-call launch is made, and the results are numpy's."""
    monkeypatch.setattr(fastpath, "_COMPILED", None)
    made = []
    monkeypatch.setattr(_cufft_plan, "one_call_launch", lambda *a: made.append(a))
    x = dev(rng, (4, 16))
    with FFT(x, axes=(1,)) as f:
        f.plan()
        for _ in range(3):
            out = np.empty((4, 16), np.complex128)
            f._plan.launch(x.data_ptr, out.ctypes.data, -1, FakeStream(7))
            np.testing.assert_allclose(out, np.fft.fft(x.tensor, axis=1), rtol=1e-12)
    assert made == []


def _tool(name):
    path = pathlib.Path(__file__).parents[2] / "tools" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@compiled_only
def test_torch_execute_and_stateless_hits_are_numpys_and_bit_identical(one_call, monkeypatch, request):
    """torch tensors posing as GPU tensors (``tools/torch_host_cost.py``), results made by torch on its
    current stream: ``FFT.execute`` and stateless ``fft`` hits give numpy's values, the one-call launches
    the same bits as the first (Python) launch, with the context switched for each one-call launch."""
    torch = pytest.importorskip("torch")
    from nvmath._internal import stateless, streams
    from nvmath.fft import _planner_support, fft

    fake, drv, execs, keep = one_call
    request.addfinalizer(lambda: torch.set_flush_denormal(False))  # (the tool's install turns it on)
    _tool("torch_host_cost").install(monkeypatch)
    monkeypatch.setattr(streams, "_TORCH_RAW", None)  # (looked up again: the tool's getter, not a cached one)
    monkeypatch.setattr(_planner_support, "torch_device", lambda device_id: torch.device("cpu"))

    stateless.register_reader(torch.Tensor, torch_read_as_gpu)
    x = torch.randn(4, 16, dtype=torch.complex128)
    ref = np.fft.fft(x.numpy(), axis=1)
    with FFT(x, axes=(1,)) as f:
        f.plan()
        ys = [f.execute() for _ in range(3)]
    ys += [fft(x, axes=(1,)) for _ in range(3)]
    assert all(isinstance(y, torch.Tensor) and y.shape == (4, 16) for y in ys)
    np.testing.assert_allclose(ys[0].numpy(), ref, rtol=1e-12)
    assert all(y.numpy().tobytes() == ys[0].numpy().tobytes() for y in ys)
    assert [ctx for _, ctx in execs] == [0, 0xC0, 0xC0, 0, 0xC0, 0xC0]


@compiled_only
def test_execute_after_a_reset_to_another_batch_arrangement_gives_its_layout(one_call, monkeypatch, request):
    """torch tensors posing as GPU tensors: after ``reset_operand`` to another batch arrangement that the
    same plan runs ((2, 3, 8) planned, (3, 2, 8) and a transposed view swapped in), ``execute`` returns
    the new operand's shape and numpy's values (on the H200 the default-direction hit kept the planned
    layout's result allocator and returned a (2, 3, 8) result)."""
    torch = pytest.importorskip("torch")
    from nvmath._internal import streams
    from nvmath.fft import _planner_support

    fake, drv, execs, keep = one_call
    request.addfinalizer(lambda: torch.set_flush_denormal(False))  # (the tool's install turns it on)
    _tool("torch_host_cost").install(monkeypatch)
    monkeypatch.setattr(streams, "_TORCH_RAW", None)  # (looked up again: the tool's getter, not a cached one)
    monkeypatch.setattr(_planner_support, "torch_device", lambda device_id: torch.device("cpu"))
    a = torch.randn(2, 3, 8, dtype=torch.complex128)
    b = torch.randn(3, 2, 8, dtype=torch.complex128)
    c = torch.randn(2, 3, 8, dtype=torch.complex128).transpose(0, 1)
    with FFT(a, axes=(2,)) as f:
        f.plan()
        for x in (a, b, c, a):
            f.reset_operand(x)
            for _ in range(2):
                y = f.execute()
                assert tuple(y.shape) == tuple(x.shape)
                np.testing.assert_allclose(y.numpy(), np.fft.fft(x.numpy(), axis=2), rtol=1e-12)


@compiled_only
def test_stateless_last_call_hits_follow_direction_stream_and_layout(one_call, monkeypatch, request):
    """torch tensors posing as GPU tensors, read raw as on the GPU: repeated default ``fft`` / ``ifft``
    calls run the cache's last call through the plan's hit entry (numpy's values); an explicit direction,
    an explicit stream and a new layout in between are each computed right."""
    torch = pytest.importorskip("torch")
    from nvmath._internal import stateless, streams
    from nvmath.fft import _planner_support, _stateless, fft, ifft, plan_cache

    fake, drv, execs, keep = one_call
    request.addfinalizer(lambda: torch.set_flush_denormal(False))  # (the tool's install turns it on)
    _tool("torch_host_cost").install(monkeypatch)
    monkeypatch.setattr(streams, "_TORCH_RAW", None)  # (looked up again: the tool's getter, not a cached one)
    monkeypatch.setattr(_planner_support, "torch_device", lambda device_id: torch.device("cpu"))

    stateless.register_reader(torch.Tensor, torch_read_as_gpu)
    monkeypatch.setattr(_stateless, "_read_torch", torch_read_as_gpu)
    monkeypatch.setattr(_stateless, "_torch_tensor", None)
    plan_cache.clear()
    request.addfinalizer(plan_cache.clear)
    x = torch.randn(32, dtype=torch.complex128)
    z = torch.randn(4, 8, dtype=torch.complex128)
    memo = plan_cache.memo_hits
    for _ in range(3):
        np.testing.assert_allclose(fft(x).numpy(), np.fft.fft(x.numpy()), rtol=1e-12)
    assert plan_cache.memo_hits >= memo + 1 and _stateless._torch_tensor is torch.Tensor
    np.testing.assert_allclose(fft(x, direction="inverse").numpy(), np.fft.ifft(x.numpy()) * 32, rtol=1e-12)
    np.testing.assert_allclose(fft(x, stream=0).numpy(), np.fft.fft(x.numpy()), rtol=1e-12)
    np.testing.assert_allclose(fft(z).numpy(), np.fft.fft2(z.numpy()), rtol=1e-12)
    np.testing.assert_allclose(fft(z.T).numpy(), np.fft.fft2(z.T.numpy()), rtol=1e-12)
    for _ in range(2):
        np.testing.assert_allclose(ifft(x).numpy(), np.fft.ifft(x.numpy()) * 32, rtol=1e-12)
        np.testing.assert_allclose(fft(x).numpy(), np.fft.fft(x.numpy()), rtol=1e-12)
