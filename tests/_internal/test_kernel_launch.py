"""nvmath._internal.kernel_launch and the compiled launcher ``nvmath._fastcall.KernelLauncher``: the
packed kernel parameters (read back through the ``kernelParams`` pointers a recording
``cuLaunchKernel`` receives), grid, block, stream, the context switch around the launch, the statuses
of refused driver calls, bad arguments refused before any driver call; on the pure-Python path there
is no launcher (callers launch through cuda.core)."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from kernel_launch_fakes import FakeDriver, install

from nvmath._internal import fastpath, kernel_launch, streams

try:
    from nvmath import _fastcall
except ImportError:  # (not built: the pure-Python path)
    _fastcall = None

compiled_only = pytest.mark.skipif(
    not fastpath.available() or not hasattr(_fastcall, "KernelLauncher"),
    reason="the compiled path is off (NVMATH_PURE_PYTHON=1, the extension not built) or predates KernelLauncher",
)

KERNEL, K1, K0, CTX, STREAM = 0x7E57_0001, 0x7E57_0002, 0x7E57_0003, 0xC0_0000, 0x5_7000
"""(a kernel of 12 parameters, one of 1, one of none; a context; a stream)"""


@pytest.fixture
def driver(monkeypatch):
    """A recording driver and the launcher built on it (stream getter: ``device -> STREAM + device``)."""
    fake = FakeDriver({KERNEL: 12, K1: 1, K0: 0})
    launcher = install(monkeypatch, fake, lambda device: STREAM + device)
    return fake, launcher


@compiled_only
def test_packs_every_kind_in_its_width(driver):
    """Each argument is packed by its type as cuda.core packs it: numpy scalars in their own width
    (uintp / int64 8 bytes, int32 / uint32 4, int16 2, int8 / uint8 / bool_ 1, float32 4, float64 8), a
    Python int as 8 bytes, a float as a double, a bool as one byte; grid, block, shared memory and the
    stream (torch's current stream of the device given) reach cuLaunchKernel as given, no ``extra``."""
    fake, launcher = driver
    args = (np.uintp(0xDEAD_BEEF_0000_1234), np.int64(-5), np.int32(-7), np.uint32(4_000_000_000),
            np.int16(-300), np.uint8(200), np.bool_(True), np.float32(1.5), np.float64(-2.25), 2**63 + 5,
            0.1, True)  # fmt: skip
    assert launcher(CTX, 3, KERNEL, (4, 5, 6), (32, 8, 1), args, 128) == 0
    (launch,) = fake.launches
    assert (launch.kernel, launch.grid, launch.block) == (KERNEL, (4, 5, 6), (32, 8, 1))
    assert (launch.shared, launch.stream, launch.extra) == (128, STREAM + 3, 0)
    expected = [np.asarray(a).tobytes() for a in args[:9]]
    expected += [struct.pack("<Q", 2**63 + 5), struct.pack("<d", 0.1), b"\x01"]
    assert [p[: len(e)] for p, e in zip(launch.params, expected)] == expected
    assert launcher.launches == 1


@compiled_only
def test_context_made_current_around_the_launch_and_restored(driver):
    """No current context (torch's autograd thread): the launch runs with ``ctx`` current and the
    thread's none is restored after; ``ctx`` already current: no context call at all; another context
    current: switched and switched back."""
    fake, launcher = driver
    args = (np.int64(1),)
    assert launcher(CTX, 0, K1, (1, 1, 1), (1, 1, 1), args) == 0
    assert fake.launches[-1].context == CTX and fake.sets == [CTX, 0] and fake.current == 0
    assert fake.launches[-1].params == [np.int64(1).tobytes()]
    fake.sets.clear()
    fake.current = CTX
    assert launcher(CTX, 0, K1, (1, 1, 1), (1, 1, 1), args) == 0
    assert fake.launches[-1].context == CTX and fake.sets == []
    fake.current = 0xAB
    assert launcher(CTX, 0, K1, (1, 1, 1), (1, 1, 1), args) == 0
    assert fake.launches[-1].context == CTX and fake.sets == [CTX, 0xAB] and fake.current == 0xAB


@compiled_only
def test_refused_calls_return_their_status(driver):
    """A refused launch returns cuLaunchKernel's CUresult (the context still restored); a refused
    context call returns KERNEL_LAUNCH_DRIVER_FAILED | its status, and nothing is launched;
    describe_status names which."""
    fake, launcher = driver
    fake.launch_status = 700
    assert launcher(CTX, 0, K0, (1, 1, 1), (1, 1, 1), ()) == 700 and fake.current == 0
    assert launcher.launches == 0 and "CUresult 700" in kernel_launch.describe_status(700)
    fake.launch_status, fake.set_status = 0, 201
    count = len(fake.launches)
    status = launcher(CTX, 0, K0, (1, 1, 1), (1, 1, 1), ())
    assert status == 0x10000 | 201 and len(fake.launches) == count
    assert "cuCtxGetCurrent / cuCtxSetCurrent" in kernel_launch.describe_status(status)
    fake.set_status, fake.get_status = 0, 3
    assert launcher(CTX, 0, K0, (1, 1, 1), (1, 1, 1), ()) == 0x10000 | 3 and len(fake.launches) == count


@compiled_only
@pytest.mark.parametrize(
    ("call", "error"),
    [
        (lambda L: L(CTX, 0, KERNEL, (1, 1, 1), (1, 1, 1), ("text",)), TypeError),  # (a kind not packed)
        (lambda L: L(CTX, 0, KERNEL, (1, 1, 1), (1, 1, 1), (np.complex64(1),)), TypeError),
        (lambda L: L(CTX, 0, KERNEL, (0, 1, 1), (1, 1, 1), ()), ValueError),
        (lambda L: L(CTX, 0, KERNEL, (1, 1), (1, 1, 1), ()), TypeError),
        (lambda L: L(CTX, 0, KERNEL, (1, 1, 1), (1, 1, 1), [np.int64(1)]), TypeError),
        (lambda L: L(CTX, 0, KERNEL, (1, 1, 1), (1, 1, 1), (np.int64(1),) * 65), ValueError),
        (lambda L: L(CTX, 0, KERNEL, (1, 1, 1), (1, 1, 1), (2**64,)), OverflowError),
        (lambda L: L(CTX, 0, KERNEL, (1, 1, 1), (1, 1, 1)), TypeError),
    ],
    ids=["str", "complex", "zero-grid", "2-d-grid", "list", "65-args", "too-wide", "missing"],
)
def test_bad_arguments_refused_before_any_driver_call(driver, call, error):
    """Arguments the launcher cannot pack or dimensions the driver would refuse raise before any driver
    call (no context switch, no launch)."""
    fake, launcher = driver
    with pytest.raises(error):
        call(launcher)
    assert fake.launches == [] and fake.sets == []


@compiled_only
def test_constructor_checks(driver):
    """The constructor refuses a NULL address, a stream getter that is not callable and kinds that are
    not (type, one-letter code) pairs; ``kinds`` reads back as given."""
    fake, launcher = driver
    a, g, s = fake.addresses()
    with pytest.raises(ValueError):
        _fastcall.KernelLauncher(0, g, s, lambda d: 0, ())
    with pytest.raises(TypeError):
        _fastcall.KernelLauncher(a, g, s, 5, ())
    with pytest.raises(ValueError):
        _fastcall.KernelLauncher(a, g, s, lambda d: 0, ((int, "x"),))
    assert launcher.kinds == kernel_launch.KINDS


def test_no_launcher_without_the_compiled_path_or_a_driver(monkeypatch):
    """launcher() is None on the pure-Python path and where the driver's entry points cannot be found
    (then cuda.core launches); made once (the same object on later calls)."""
    monkeypatch.setattr(kernel_launch, "_MADE", [])
    monkeypatch.setattr(streams, "torch_raw_stream", lambda: lambda d: 0)

    def missing():
        raise OSError("libcuda.so.1: cannot open shared object file")

    monkeypatch.setattr(kernel_launch, "_driver_addresses", missing)
    assert kernel_launch.launcher() is None
    monkeypatch.setattr(kernel_launch, "_MADE", [])
    monkeypatch.setattr(fastpath, "available", lambda: False)
    monkeypatch.setattr(kernel_launch, "_driver_addresses", FakeDriver({}).addresses)
    assert kernel_launch.launcher() is None and kernel_launch.launcher() is None


def test_kernel_handle_is_the_int_of_the_kernels_handle():
    """kernel_handle gives the int of a cuda.core Kernel's ``handle`` (the CUkernel the launcher takes)."""
    kernel = type("K", (), {"handle": type("H", (), {"__int__": lambda self: 0x1234})()})()
    assert kernel_launch.kernel_handle(kernel) == 0x1234
