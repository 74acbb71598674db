"""Compile small CUDA C++ kernels with NVRTC (through ``cuda.core.Program``) and launch them.

:func:`compiled_kernels` compiles a source once per device (for that device's ``sm_XY``) and
caches the kernels, thread-safely, keyed by ``(device, source, name expressions)``;
:func:`launch_1d` launches a grid-stride kernel over ``total`` work items on a stream. Nothing is
compiled or imported from ``cuda.core`` until first use. Users: the strided device-copy kernel
(:mod:`nvmath._internal.tensors.kernels`) and the solver kernels
(:mod:`nvmath.linalg._solvers._kernels`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Hashable, Mapping
from typing import Any, TypeVar

from nvmath._internal import devices, streams
from nvmath._internal.streams import StreamHandle

__all__ = ["BLOCK", "compiled_kernels", "launch_1d"]

_logger = logging.getLogger(__name__)

#: Threads per block of :func:`launch_1d`.
BLOCK = 256
#: Most blocks :func:`launch_1d` launches (the kernels loop, grid-stride, over the rest).
MAX_BLOCKS = 65536

K = TypeVar("K", bound=Hashable)

_CACHE: dict[tuple[int, str, tuple[tuple[Any, str], ...]], dict[Any, Any]] = {}
_LOCK = threading.Lock()


def compiled_kernels(
    source: str,
    name_expressions: Mapping[K, str],
    device_id: int,
    *,
    what: str = "NVRTC kernels",
    logger: logging.Logger | None = None,
    std: str = "c++17",
) -> dict[K, Any]:
    """Return ``key -> kernel`` for ``name_expressions`` (``key -> C++ name``) compiled from ``source``.

    The source is compiled to a cubin for device ``device_id`` on first use and cached per
    ``(device_id, source, name_expressions)``; ``what`` names the kernels in the debug log line.
    """
    key = (device_id, source, tuple(name_expressions.items()))
    kernels = _CACHE.get(key)
    if kernels is not None:
        return kernels
    with _LOCK:
        kernels = _CACHE.get(key)
        if kernels is None:
            from cuda.core import Program, ProgramOptions

            major, minor = devices.compute_capability(device_id)
            devices.core_device(device_id)
            with devices.device_ctx(device_id):
                program = Program(source, "c++", ProgramOptions(arch=f"sm_{major}{minor}", std=std))
                code = program.compile("cubin", name_expressions=tuple(name_expressions.values()))
                kernels = {k: code.get_kernel(name) for k, name in name_expressions.items()}
            _CACHE[key] = kernels
            (logger or _logger).debug(
                "compiled the %s for device %d (sm_%d%d)", what, device_id, major, minor
            )
    return kernels


def launch_1d(kernel: Any, total: int, stream: StreamHandle, *args: Any) -> None:
    """Launch grid-stride ``kernel(*args)`` on ``stream`` with enough ``BLOCK``-thread blocks for ``total``."""
    from cuda.core import LaunchConfig, launch

    blocks = max(1, min((total + BLOCK - 1) // BLOCK, MAX_BLOCKS))
    with streams.stream_ctx(stream):
        launch(stream.core, LaunchConfig(grid=blocks, block=BLOCK), kernel, *args)
