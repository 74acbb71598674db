"""Launches of NVRTC kernels in one C call (``nvmath._fastcall.KernelLauncher``), or through cuda.core.

A launch of one of our NVRTC kernels through cuda.core (``cuda.core.launch`` inside
``devices.device_ctx`` on the stream handle of ``streams.current_stream``) costs about 23 us of host
time on the H200 machine: the FP8 grouped layer's step makes ~11 of them. :func:`launcher` returns the
compiled launcher, which does the same in C: reads torch's current stream, packs the kernel's
arguments by their numpy (or Python) scalar types (:data:`KINDS`: the widths cuda.core gives them),
makes the device's primary context current when another one (or none: torch's autograd thread) is
current, calls the driver's ``cuLaunchKernel`` and restores the context; it returns the ``CUresult``
(nonzero: nothing ran, or a context call failed: :func:`describe_status`).

:func:`launcher` is ``None`` on the pure-Python path (``NVMATH_PURE_PYTHON=1``, the extension not
built or built before ``KernelLauncher``) and where the driver library or its entry points are
missing; callers then launch through cuda.core, with the same arguments (:func:`core_config` makes
cuda.core's launch configuration of a ``(grid, block)`` pair). A kernel is given to the launcher as
its handle (:func:`kernel_handle`: the ``CUkernel`` of a cuda.core ``Kernel``, which ``cuLaunchKernel``
takes as a ``CUfunction``).
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from nvmath._internal import caches, fastpath

__all__ = ["KINDS", "core_config", "describe_status", "kernel_handle", "launcher", "reset"]

logger = logging.getLogger(__name__)

KINDS: tuple[tuple[type, str], ...] = (
    (np.uint64, "Q"), (np.int64, "q"), (np.uint32, "I"), (np.int32, "i"), (np.uint16, "H"),
    (np.int16, "h"), (np.uint8, "B"), (np.int8, "b"), (np.bool_, "?"), (np.float32, "f"),
    (np.float64, "d"), (int, "q"), (float, "d"), (bool, "?"),
)  # fmt: skip
"""The argument types the compiled launcher packs, and how (``KernelLauncher``'s codes: ``q`` 8-byte
integer, ``i`` 4-byte, ``f`` float32, ``d`` float64, ``?`` a 1-byte bool...): numpy scalars by their own
width (``np.uintp`` is ``np.uint64`` here), a Python ``int`` as 8 bytes and a ``float`` as a double, as
cuda.core's launch packs them. Any other type: the call goes to cuda.core (:func:`launcher`'s callers)."""

DRIVER_SYMBOLS = ("cuLaunchKernel", "cuCtxGetCurrent", "cuCtxSetCurrent")
"""The driver entry points the launcher calls, in its constructor's order."""

_DRIVER_FAILED = 0x10000  # nvmath._fastcall.KERNEL_LAUNCH_DRIVER_FAILED
_MADE: list[Any] = []
"""``[the launcher or None]``, made at the first :func:`launcher` call."""


def _driver_addresses() -> tuple[int, ...]:
    """The addresses of :data:`DRIVER_SYMBOLS` (tests replace this with recording C functions)."""
    return tuple(fastpath.driver_symbol_address(name) for name in DRIVER_SYMBOLS)


def _make() -> Any:
    if not fastpath.available():
        return None
    from nvmath import _fastcall
    from nvmath._internal import streams

    maker = getattr(_fastcall, "KernelLauncher", None)
    raw = streams.torch_raw_stream()
    if maker is None or raw is None:  # (an extension built before KernelLauncher; no torch)
        return None
    try:
        launch, get, set_ = _driver_addresses()
    except Exception as exc:  # noqa: BLE001 (no driver library: cuda.core's launch, which will say so)
        logger.debug("NVRTC kernels launch through cuda.core: %s", exc)
        return None
    return maker(launch, get, set_, raw, KINDS)


def launcher() -> Any:
    """The compiled launcher (made once), or ``None`` where launches go through cuda.core (see the
    module notes)."""
    if not _MADE:
        _MADE.append(_make())
    return _MADE[0]


def reset() -> None:
    """Forget the launcher (the next :func:`launcher` call makes it again: tests, a replaced driver)."""
    _MADE.clear()


def kernel_handle(kernel: Any) -> int:
    """The driver handle (an int) of a cuda.core ``Kernel``: what the launcher's ``kernel`` takes."""
    return int(kernel.handle)


_CONFIGS = caches.memo("nvmath NVRTC launches: cuda.core launch configurations", 1024)


def core_config(dims: tuple[tuple[int, int, int], tuple[int, int, int]]) -> Any:
    """cuda.core's ``LaunchConfig`` of ``(grid, block)`` (made once per pair, a bounded cache)."""
    config = _CONFIGS.get(dims)
    if config is None:
        from cuda.core import LaunchConfig

        config = _CONFIGS.put(dims, LaunchConfig(grid=dims[0], block=dims[1]))
    return config


def describe_status(status: int) -> str:
    """What a nonzero status of the launcher means, for a log line or an error."""
    if status & _DRIVER_FAILED:
        code = status & (_DRIVER_FAILED - 1)
        return (
            f"CUDA driver call cuCtxGetCurrent / cuCtxSetCurrent around cuLaunchKernel failed: status {code}"
        )
    return f"cuLaunchKernel failed: CUresult {status}"
