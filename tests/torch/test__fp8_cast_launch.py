"""How nvmath.torch._fp8_cast launches its kernels: by the compiled launcher
(``nvmath._fastcall.KernelLauncher``) where the extension and a driver are present, else by
cuda.core's ``launch``.

On the CPU the driver is a recording one (``tests/kernel_launch_fakes.py``: ``cuLaunchKernel``,
``cuCtxGetCurrent``, ``cuCtxSetCurrent`` as C functions) and the kernels are handles: the cast-transpose,
the grouped launch and the state update reach cuLaunchKernel with their grid, block, torch's stream, the
device's primary context made current (none was: torch's autograd thread) and every parameter packed as
the argument's numpy type (the bytes behind ``kernelParams`` against numpy's); a launch or context call
the driver refuses behaves as cuda.core's refusal (logged, the torch path computes that call, the
kernels out of use for the process); an argument the launcher does not pack goes to cuda.core. The
compiled cases skip on the pure-Python path, where the launcher is absent and cuda.core launches.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging

import numpy as np
import pytest
from kernel_launch_fakes import FakeDriver, install

torch = pytest.importorskip("torch")

from nvmath._internal import devices, fastpath, kernel_launch, streams
from nvmath.torch import _fp8_cast as C
from nvmath.torch._fp8 import quantize

E4, BF16 = torch.float8_e4m3fn, torch.bfloat16
CTX, STREAM = 0xC7C7_0000, 0x5_7000
HANDLES = {key: 0x1000 + i for i, key in enumerate(C._NAMES)}


class _Kernel:
    def __init__(self, handle: int):
        self.handle = handle


@pytest.fixture
def launches(monkeypatch):
    """The kernels as handles on device 0 (primary context CTX), CPU tensors posing as CUDA ones;
    cuda.core's launch replaced by a recorder. Returns ``(driver, seen, core_calls)``: the recording
    driver (its launcher installed: ``seen`` gets every argument tuple it is called with) and cuda.core's
    calls."""
    core = pytest.importorskip("cuda.core")
    core_calls: list = []
    monkeypatch.setattr(
        core, "launch", lambda stream, config, kernel, *args: core_calls.append((kernel, args))
    )
    monkeypatch.setattr(devices, "device_ctx", lambda device_id: contextlib.nullcontext())
    monkeypatch.setattr(devices, "primary_context", lambda device_id: CTX)
    monkeypatch.setattr(streams, "current_stream", lambda device_id, package: type("H", (), {"core": "s"})())
    monkeypatch.setattr(C, "_kernels", lambda device_id: {k: _Kernel(h) for k, h in HANDLES.items()})
    monkeypatch.setattr(C, "available", lambda x, aux=None: True)
    monkeypatch.setattr(C, "_kernel_shape_ok", lambda x: True)
    monkeypatch.setattr(C, "_DIRECT", {})
    monkeypatch.setattr(C, "_broken", [])
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.Tensor, "is_cuda", property(lambda self: True))
    driver = FakeDriver({h: 0 for h in HANDLES.values()})
    launcher = install(monkeypatch, driver, lambda device: STREAM + device)
    seen: list = []
    if launcher is not None:
        spy = lambda *a: (seen.append(a[5]), launcher(*a))[1]
        monkeypatch.setattr(kernel_launch, "_MADE", [spy])
    return driver, seen, core_calls


try:
    from nvmath import _fastcall
except ImportError:  # (not built: the pure-Python path)
    _fastcall = None

compiled_only = pytest.mark.skipif(
    not fastpath.available() or not hasattr(_fastcall, "KernelLauncher"),
    reason="the compiled path is off (pure Python) or its extension predates KernelLauncher",
)


def _arity(driver: FakeDriver, key, n: int) -> None:
    driver.arity[HANDLES[key]] = n


def _bytes(args: tuple) -> list[bytes]:
    return [np.asarray(a).tobytes() for a in args]


@compiled_only
def test_cast_transpose_launches_in_one_c_call(launches, monkeypatch):
    """The cast-transpose reaches cuLaunchKernel once: its kernel handle, grid() x (32, 8, 1) threads,
    torch's current stream of device 0, the device's primary context current during the launch and
    the thread's none restored after, every parameter (addresses, rows, columns) packed as numpy packs
    it; cuda.core is not called. (The 64 x 64 kernel: the vectorized one is switched off here.)"""
    driver, seen, core_calls = launches
    monkeypatch.setattr(C, "VECTOR_CAST", False)
    _arity(driver, (BF16, E4, None), 9)
    x = torch.ones(256, 192, dtype=BF16)
    r = C.cast_transpose(x, torch.tensor(2.0), E4, colsum=True)
    ((launch,), (args,)) = driver.launches, seen
    assert launch.kernel == HANDLES[(BF16, E4, None)] and core_calls == []
    assert launch.grid == (*C.grid(256, 192), 1) and launch.block == (*C.THREADS, 1)
    assert launch.stream == STREAM and launch.context == CTX and driver.sets == [CTX, 0]
    assert [p[: len(b)] for p, b in zip(launch.params, _bytes(args))] == _bytes(args)
    assert (
        int(args[0]) == x.data_ptr()
        and int(args[2]) == r.q.data_ptr()
        and (int(args[7]), int(args[8])) == (256, 192)
    )
    assert not C.broken()


@compiled_only
def test_vectorized_cast_transpose_launches_in_one_c_call(launches):
    """A tensor of whole 16-byte row vectors takes the vectorized cast-transpose through the same
    launcher: its own kernel handle, vector_grid()'s grid of (32, 8, 1) blocks, the plain kernel's
    nine parameters; cuda.core is not called."""
    driver, seen, core_calls = launches
    key = ("vector", BF16, E4)
    _arity(driver, key, 9)
    x = torch.ones(256, 512, dtype=BF16)
    assert C.vector_cast_applies(x)
    r = C.cast_transpose(x, torch.tensor(2.0), E4)
    ((launch,), (args,)) = driver.launches, seen
    assert launch.kernel == HANDLES[key] and core_calls == []
    assert launch.grid == (*C.vector_grid(256, 512, False), 1) and launch.block == (*C.THREADS, 1)
    assert [p[: len(b)] for p, b in zip(launch.params, _bytes(args))] == _bytes(args)
    assert int(args[0]) == x.data_ptr() and int(args[2]) == r.q.data_ptr()
    assert not C.broken()


@compiled_only
def test_launch_grid_and_one_block_updates(launches):
    """launch_grid passes its 3-D grid (groups on blockIdx.z) and the arguments as given; the one-block
    update (grouped_scale: int64 count, float32 constants) packs the floats as float32."""
    driver, _, core_calls = launches
    key = ("grouped", BF16, E4)
    args = (np.uintp(0xAB00), np.uintp(0), np.int64(-3), np.int32(7), np.float32(0.5))
    _arity(driver, key, len(args))
    assert C.launch_grid(torch.device("cuda", 0), key, (3, 2, 8), args)
    launch = driver.launches[-1]
    assert launch.grid == (3, 2, 8) and launch.block == (*C.THREADS, 1) and launch.context == CTX
    assert [p[: len(b)] for p, b in zip(launch.params, _bytes(args))] == _bytes(args)
    _arity(driver, "grouped_scale", 6)
    out = C.grouped_scale(torch.ones(5), torch.ones(5), 448.0, 1)
    assert out.shape == (5,) and driver.launches[-1].grid == (1, 1, 1)
    params = driver.launches[-1].params
    assert params[4][:4] == np.float32(448.0).tobytes() and params[5][:4] == np.float32(2.0).tobytes()
    assert np.frombuffer(params[3], np.int64)[0] == 5 and core_calls == []


@compiled_only
@pytest.mark.parametrize("refusal", ["launch", "context"])
def test_refused_launch_falls_back_for_the_process(launches, refusal, caplog):
    """A nonzero CUresult of cuLaunchKernel, or a refused context switch, behaves as cuda.core's
    exception: logged, this call computed by torch (the former ops' values), the kernels not used again
    in this process; cuda.core is not tried."""
    driver, _, core_calls = launches
    _arity(driver, (BF16, E4, None), 9)
    if refusal == "launch":
        driver.launch_status = 719
    else:
        driver.set_status = 201
    x = torch.randn(4, 6, dtype=BF16)
    with caplog.at_level(logging.WARNING, logger=C.__name__):
        r = C.cast_transpose(x, torch.tensor(2.0), E4)
    assert torch.equal(r.q.float(), quantize(x, torch.tensor(2.0), E4).float())
    assert C.broken() and not C.in_use() and core_calls == []
    assert ("719" if refusal == "launch" else "cuCtxSetCurrent") in caplog.text
    assert not C.launch_grid(torch.device("cuda", 0), ("grouped", BF16, E4), (1, 1, 1), ())


@compiled_only
def test_argument_the_launcher_does_not_pack_goes_to_cuda_core(launches):
    """An argument of a type outside the launcher's kinds (a ctypes value) is launched by cuda.core
    with the same arguments; nothing reached the driver and the kernels stay in use."""
    driver, _, core_calls = launches
    args = (np.uintp(1), ctypes.c_int(3))
    assert C.launch_grid(torch.device("cuda", 0), ("grouped", BF16, E4), (1, 1, 1), args)
    ((kernel, passed),) = core_calls
    assert kernel.handle == HANDLES[("grouped", BF16, E4)] and passed == args
    assert driver.launches == [] and not C.broken()


def test_pure_path_launches_through_cuda_core(launches, monkeypatch):
    """Without the compiled launcher (the pure-Python path) the same launch goes to cuda.core's launch
    with the same arguments, and nothing reaches the driver."""
    driver, _, core_calls = launches
    monkeypatch.setattr(kernel_launch, "_MADE", [None])
    args = (np.uintp(1), np.int64(2))
    assert C.launch_grid(torch.device("cuda", 0), ("grouped", BF16, E4), (3, 2, 8), args)
    ((kernel, passed),) = core_calls
    assert kernel.handle == HANDLES[("grouped", BF16, E4)] and passed == args and driver.launches == []


@pytest.mark.gpu
def test_gpu_compiled_launches_equal_cuda_core_launches():
    """On the GPU, with the compiled path active, the kernels launch through the compiled launcher (its
    count moves; from torch's autograd thread too, where no context is current) and write what
    cuda.core's launch of the same kernels writes, bit for bit; nothing falls back."""
    if not torch.cuda.is_available() or torch.cuda.get_device_capability() < (8, 9):
        pytest.skip("needs a GPU of compute capability 8.9 or later")
    launcher = kernel_launch.launcher()
    if launcher is None:
        pytest.skip("the compiled path is off (pure Python): launches go through cuda.core")
    torch.manual_seed(3)
    x = (torch.randn(1024, 768, device="cuda") * 50).to(BF16)
    s = torch.tensor(1.5, device="cuda")
    before = launcher.launches
    r = C.cast_transpose(x, s, E4, colsum=True)
    torch.cuda.synchronize()
    assert launcher.launches == before + 1 and not C.broken()
    with pytest.MonkeyPatch.context() as mp:  # (the same launch by cuda.core)
        mp.setattr(C, "_DIRECT", {})
        mp.setattr(kernel_launch, "_MADE", [None])
        w = C.cast_transpose(x, s, E4, colsum=True)
        torch.cuda.synchronize()
    assert torch.equal(r.q.view(torch.uint8), w.q.view(torch.uint8))
    assert torch.equal(r.qt.view(torch.uint8), w.qt.view(torch.uint8))
    assert torch.equal(r.amax, w.amax) and torch.equal(r.colsum, w.colsum)
    xg = x.detach().clone().requires_grad_()
    before = launcher.launches

    class Cast(torch.autograd.Function):  # (a backward on torch's autograd thread launches a kernel)
        @staticmethod
        def forward(ctx, t):
            return t.clone()

        @staticmethod
        def backward(ctx, g):
            return C.cast_transpose(g.contiguous(), s, E4).q.to(g.dtype)

    Cast.apply(xg).float().sum().backward()
    torch.cuda.synchronize()
    assert launcher.launches > before and not C.broken() and torch.isfinite(xg.grad.float()).all()
