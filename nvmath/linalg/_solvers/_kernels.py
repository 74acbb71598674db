"""Two tiny device kernels the solvers need and no library offers, compiled with NVRTC on first use.

* ``zero_triangle``: zero the strictly lower (or upper) triangle of a batch of column-major
  matrices (Cholesky factors and QR's ``R`` come back from cuSOLVER with the other triangle holding
  the input or the Householder vectors).
* ``fill_identity``: write identity matrices (the right-hand side of an inverse on the looped path).

Compiled once per device through ``cuda.core.Program`` (like nvmath's strided-copy kernel) and
launched on the caller's stream. Nothing is compiled or loaded at import time.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

import numpy as np

from nvmath._internal import devices, streams
from nvmath._internal.streams import StreamHandle

__all__ = ["fill_identity", "zero_triangle"]

logger = logging.getLogger(__name__)

_TYPES = {4: "unsigned int", 8: "unsigned long long", 16: "nvmath_solver_b16"}
_BLOCK = 256

_SOURCE = r"""
struct __align__(16) nvmath_solver_b16 { unsigned long long x, y; };

template <typename T>
__global__ void nvmath_zero_triangle(T* a, long long rows, long long cols, long long ld, long long stride,
                                     long long count, int zero_lower) {
  const long long per = rows * cols;
  const long long total = per * count;
  for (long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x; t < total;
       t += (long long)gridDim.x * blockDim.x) {
    long long b = t / per, r = t % per;
    long long j = r / rows, i = r % rows;
    if (zero_lower ? (i > j) : (i < j)) {
      a[b * stride + j * ld + i] = T{};
    }
  }
}

__global__ void nvmath_fill_identity(unsigned int* a, long long n, long long stride_words, long long count,
                                     int words, unsigned int w0, unsigned int w1) {
  const long long per = n * n * words;
  const long long total = per * count;
  for (long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x; t < total;
       t += (long long)gridDim.x * blockDim.x) {
    long long b = t / per, r = t % per;
    long long e = r / words, k = r % words;
    long long j = e / n, i = e % n;
    unsigned int v = 0u;
    if (i == j) v = (k == 0) ? w0 : ((k == 1) ? w1 : 0u);
    a[b * stride_words + r] = v;
  }
}
"""

_KERNELS: dict[int, dict[str, Any]] = {}
_LOCK = threading.Lock()


def _kernels(device_id: int) -> dict[str, Any]:
    kernels = _KERNELS.get(device_id)
    if kernels is not None:
        return kernels
    with _LOCK:
        kernels = _KERNELS.get(device_id)
        if kernels is None:
            from cuda.core import Program, ProgramOptions

            major, minor = devices.compute_capability(device_id)
            names = {}
            for size, ctype in _TYPES.items():
                names[f"zero{size}"] = f"nvmath_zero_triangle<{ctype}>"
            names["eye"] = "nvmath_fill_identity"
            devices.core_device(device_id)
            with devices.device_ctx(device_id):
                program = Program(_SOURCE, "c++", ProgramOptions(arch=f"sm_{major}{minor}", std="c++17"))
                code = program.compile("cubin", name_expressions=tuple(names.values()))
                kernels = {key: code.get_kernel(name) for key, name in names.items()}
            _KERNELS[device_id] = kernels
            logger.debug("compiled the solver kernels for device %d (sm_%d%d)", device_id, major, minor)
    return kernels


def _launch(kernel: Any, total: int, stream: StreamHandle, *args: Any) -> None:
    from cuda.core import LaunchConfig, launch

    blocks = max(1, min((total + _BLOCK - 1) // _BLOCK, 65536))
    with streams.stream_ctx(stream):
        launch(stream.core, LaunchConfig(grid=blocks, block=_BLOCK), kernel, *args)


def zero_triangle(
    ptr: int,
    *,
    rows: int,
    cols: int,
    ld: int,
    stride: int,
    count: int,
    itemsize: int,
    zero_lower: bool,
    device_id: int,
    stream: StreamHandle,
) -> None:
    """Zero the strictly lower (``zero_lower``) or strictly upper triangle of ``count`` matrices.

    Matrix ``b`` is column-major at ``ptr + b * stride * itemsize`` with leading dimension ``ld``.
    """
    total = rows * cols * count
    if total == 0:
        return
    kernel = _kernels(device_id)[f"zero{itemsize}"]
    args = (
        np.uintp(ptr),
        np.int64(rows),
        np.int64(cols),
        np.int64(ld),
        np.int64(stride),
        np.int64(count),
        np.int32(1 if zero_lower else 0),
    )
    _launch(kernel, total, stream, *args)


# The 32-bit words of 1 in each dtype (little endian; the imaginary part is zero).
_ONE_WORDS = {
    "float32": (1, 0x3F800000, 0),
    "float64": (2, 0x00000000, 0x3FF00000),
    "complex64": (2, 0x3F800000, 0),
    "complex128": (4, 0x00000000, 0x3FF00000),
}


def fill_identity(
    ptr: int, *, n: int, stride: int, count: int, dtype: str, device_id: int, stream: StreamHandle
) -> None:
    """Write ``count`` identity matrices of order ``n`` (column-major, ``ld = n``) at ``ptr``.

    Matrix ``b`` starts at element ``b * stride``.
    """
    words, w0, w1 = _ONE_WORDS[dtype]
    kernel = _kernels(device_id)["eye"]
    args = (
        np.uintp(ptr),
        np.int64(n),
        np.int64(stride * words),
        np.int64(count),
        np.int32(words),
        np.uint32(w0),
        np.uint32(w1),
    )
    _launch(kernel, n * n * count * words, stream, *args)
