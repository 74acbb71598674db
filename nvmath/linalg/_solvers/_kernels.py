"""Two tiny device kernels the solvers need and no library offers, compiled with NVRTC on first use.

* ``zero_triangle``: zero the strictly lower (or upper) triangle of a batch of column-major
  matrices (Cholesky factors and QR's ``R`` come back from cuSOLVER with the other triangle holding
  the input or the Householder vectors).
* ``fill_identity``: write identity matrices (the right-hand side of an inverse on the looped path).

Compiled once per device through :mod:`nvmath._internal.nvrtc` (like nvmath's strided-copy kernel)
and launched on the caller's stream. Nothing is compiled or loaded at import time.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from nvmath._internal import nvrtc
from nvmath._internal.streams import StreamHandle

__all__ = ["fill_identity", "zero_triangle"]

logger = logging.getLogger(__name__)

_TYPES = {4: "unsigned int", 8: "unsigned long long", 16: "nvmath_solver_b16"}

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

_NAMES = {f"zero{size}": f"nvmath_zero_triangle<{ctype}>" for size, ctype in _TYPES.items()}
_NAMES["eye"] = "nvmath_fill_identity"


def _kernels(device_id: int) -> dict[str, Any]:
    return nvrtc.compiled_kernels(_SOURCE, _NAMES, device_id, what="solver kernels", logger=logger)


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
    nvrtc.launch_1d(kernel, total, stream, *args)


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
    nvrtc.launch_1d(kernel, n * n * count * words, stream, *args)
