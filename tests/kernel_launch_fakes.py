"""A recording CUDA driver for the compiled kernel launcher's tests (``nvmath._fastcall.KernelLauncher``,
:mod:`nvmath._internal.kernel_launch`): ``cuLaunchKernel``, ``cuCtxGetCurrent`` and ``cuCtxSetCurrent``
as real C functions (ctypes callbacks with the driver's signatures) over one emulated current context.

A launch is recorded with its grid, block, shared memory, stream, the context current while it ran and
the 8 bytes behind each of its ``kernelParams`` pointers (read during the call: the launcher's packed
values live on its stack), for the kernel handles the test declared with their parameter counts
(``arity``): the fake does not know a kernel's parameter list, so it reads exactly that many pointers.
"""

from __future__ import annotations

import ctypes
import dataclasses
from typing import Any

LAUNCH = ctypes.CFUNCTYPE(
    ctypes.c_int, ctypes.c_uint64, *([ctypes.c_uint] * 7), ctypes.c_uint64, ctypes.POINTER(ctypes.c_void_p),
    ctypes.c_void_p,
)  # fmt: skip
GET = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_uint64))
SET = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_uint64)


@dataclasses.dataclass
class Launch:
    """One recorded ``cuLaunchKernel`` call."""

    kernel: int
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared: int
    stream: int
    context: int
    params: list[bytes]
    extra: int


class FakeDriver:
    """The three driver entry points over an emulated current context ``current`` (0: none). Statuses
    to return are set in ``launch_status`` / ``get_status`` / ``set_status`` (0: success); ``sets``
    lists every context made current, ``launches`` every launch."""

    def __init__(self, arity: dict[int, int], current: int = 0):
        self.arity, self.current = arity, current
        self.launches: list[Launch] = []
        self.sets: list[int] = []
        self.launch_status = self.get_status = self.set_status = 0
        self._fns = (LAUNCH(self._launch), GET(self._get), SET(self._set))  # (kept alive with the fake)

    def addresses(self) -> tuple[int, int, int]:
        """``(cuLaunchKernel, cuCtxGetCurrent, cuCtxSetCurrent)`` addresses."""
        return tuple(ctypes.cast(f, ctypes.c_void_p).value for f in self._fns)  # type: ignore[return-value]

    def _launch(self, f: int, gx: int, gy: int, gz: int, bx: int, by: int, bz: int, shared: int, stream: int,
                params: Any, extra: Any) -> int:  # fmt: skip
        n = self.arity.get(f, 0)
        values = [ctypes.string_at(params[i], 8) for i in range(n)]
        self.launches.append(
            Launch(f, (gx, gy, gz), (bx, by, bz), shared, stream, self.current, values, extra or 0)
        )
        return self.launch_status

    def _get(self, out: Any) -> int:
        if self.get_status:
            return self.get_status
        out[0] = self.current
        return 0

    def _set(self, ctx: int) -> int:
        if self.set_status:
            return self.set_status
        self.sets.append(ctx)
        self.current = ctx
        return 0


def install(monkeypatch: Any, driver: FakeDriver, stream: Any = None) -> Any:
    """Make :func:`nvmath._internal.kernel_launch.launcher` build on ``driver`` (and ``stream``,
    ``device -> raw stream``, for torch's getter where given); returns the launcher (``None`` on the
    pure-Python path)."""
    from nvmath._internal import kernel_launch, streams

    monkeypatch.setattr(kernel_launch, "_driver_addresses", driver.addresses)
    if stream is not None:
        monkeypatch.setattr(streams, "torch_raw_stream", lambda: stream)
    monkeypatch.setattr(kernel_launch, "_MADE", [])
    return kernel_launch.launcher()
