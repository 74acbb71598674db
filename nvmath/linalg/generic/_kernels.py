"""A device kernel for symm / hemm as GEMM: mirror a stored triangle into a full matrix (NVRTC).

``mirror(dst, src, n, ld, uplo, hermitian, dtype, stream)`` writes the full column-major ``n x n``
matrix (leading dimension ``n``) whose ``uplo`` triangle is stored at ``src`` (leading dimension
``ld``): the other triangle is the transpose (the conjugate transpose for Hermitian matrices, whose
diagonal is taken as real, as hemm does). Compiled once per device on first use.
"""

from __future__ import annotations

import functools
import logging
from typing import Any

import numpy as np

from nvmath._internal import nvrtc

__all__ = ["mirror"]

logger = logging.getLogger(__name__)

_TYPES = {"float32": "float", "float64": "double", "complex64": "float2", "complex128": "double2"}


@functools.cache
def _source() -> str:
    return """
template <typename T> __device__ __forceinline__ T nvm_conj(T x) { return x; }
template <> __device__ __forceinline__ float2 nvm_conj(float2 x) { x.y = -x.y; return x; }
template <> __device__ __forceinline__ double2 nvm_conj(double2 x) { x.y = -x.y; return x; }
template <typename T> __device__ __forceinline__ T nvm_real(T x) { return x; }
template <> __device__ __forceinline__ float2 nvm_real(float2 x) { x.y = 0.f; return x; }
template <> __device__ __forceinline__ double2 nvm_real(double2 x) { x.y = 0.0; return x; }

template <typename T, bool HERM>
__global__ void nvmath_mirror(T* __restrict__ dst, const T* __restrict__ src, long long n, long long ld,
                              int lower) {
  const long long count = n * n;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < count;
       i += (long long)gridDim.x * blockDim.x) {
    const long long row = i % n, col = i / n;
    const bool stored = lower ? (row >= col) : (row <= col);
    T v = stored ? src[row + col * ld] : src[col + row * ld];
    if (HERM) v = row == col ? nvm_real(v) : (stored ? v : nvm_conj(v));
    dst[i] = v;
  }
}
"""


_NAMES = {
    (dtype, herm): f"nvmath_mirror<{ctype}, {'true' if herm else 'false'}>"
    for dtype, ctype in _TYPES.items()
    for herm in (False, True)
}


def mirror(dst: int, src: int, n: int, ld: int, uplo: int, hermitian: bool, dtype: str, stream: Any) -> None:
    """Queue the mirror of one matrix on ``stream`` (a ``StreamHandle``)."""
    if n == 0:
        return
    kernels = nvrtc.compiled_kernels(_source(), _NAMES, stream.device_id, what="mirror kernels", logger=logger)
    kernel = kernels[(dtype, bool(hermitian) and dtype.startswith("complex"))]
    args = (np.uintp(dst), np.uintp(src), np.int64(n), np.int64(ld), np.int32(1 if uplo == 0 else 0))
    nvrtc.launch_1d(kernel, n * n, stream, *args)
