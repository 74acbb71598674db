"""A device kernel for symm / hemm / trmm as GEMM: expand a stored triangle into a full matrix (NVRTC).

``expand(dst, src, n, ld, uplo, mode, dtype, stream)`` writes the full column-major ``n x n`` matrix
(leading dimension ``n``) that the ``uplo`` triangle stored at ``src`` (leading dimension ``ld``)
stands for, by ``mode``: ``"sy"`` mirrors it (the transpose), ``"he"`` mirrors it conjugated with a real
diagonal (as hemm reads it), ``"tr"`` zero-fills the other triangle and ``"tru"`` also puts ones on the
diagonal (a unit triangular matrix; the stored diagonal is not read). Only the stored triangle is
read. Compiled once per device on first use.
"""

from __future__ import annotations

import functools
import logging
from typing import Any

import numpy as np

from nvmath._internal import nvrtc

__all__ = ["MODES", "expand"]

logger = logging.getLogger(__name__)

_TYPES = {"float32": "float", "float64": "double", "complex64": "nvm_c64", "complex128": "nvm_c128"}


@functools.cache
def _source() -> str:
    return """
struct __align__(8) nvm_c64 { float x, y; };
struct __align__(16) nvm_c128 { double x, y; };
template <typename T> __device__ __forceinline__ T nvm_conj(T x) { return x; }
template <> __device__ __forceinline__ nvm_c64 nvm_conj(nvm_c64 x) { x.y = -x.y; return x; }
template <> __device__ __forceinline__ nvm_c128 nvm_conj(nvm_c128 x) { x.y = -x.y; return x; }
template <typename T> __device__ __forceinline__ T nvm_real(T x) { return x; }
template <> __device__ __forceinline__ nvm_c64 nvm_real(nvm_c64 x) { x.y = 0.f; return x; }
template <> __device__ __forceinline__ nvm_c128 nvm_real(nvm_c128 x) { x.y = 0.0; return x; }
template <typename T> __device__ __forceinline__ T nvm_scalar(double v) { return T(v); }
template <> __device__ __forceinline__ nvm_c64 nvm_scalar(double v) { return nvm_c64{(float)v, 0.f}; }
template <> __device__ __forceinline__ nvm_c128 nvm_scalar(double v) { return nvm_c128{v, 0.0}; }

// MODE: 0 symmetric, 1 Hermitian, 2 triangular, 3 unit triangular
template <typename T, int MODE>
__global__ void nvmath_expand(T* __restrict__ dst, const T* __restrict__ src, long long n, long long ld,
                              int lower) {
  const long long count = n * n;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < count;
       i += (long long)gridDim.x * blockDim.x) {
    const long long row = i % n, col = i / n;
    const bool stored = lower ? (row >= col) : (row <= col);
    T v;
    if (MODE >= 2) {
      const T zero = nvm_scalar<T>(0.0), one = nvm_scalar<T>(1.0);
      v = (MODE == 3 && row == col) ? one : (stored ? src[row + col * ld] : zero);
    } else {
      v = stored ? src[row + col * ld] : src[col + row * ld];
      if (MODE == 1) v = row == col ? nvm_real(v) : (stored ? v : nvm_conj(v));
    }
    dst[i] = v;
  }
}
"""


MODES = {"sy": 0, "he": 1, "tr": 2, "tru": 3}
"""Expansion mode -> the kernel's template argument."""

_NAMES = {
    (dtype, mode): f"nvmath_expand<{ctype}, {value}>"
    for dtype, ctype in _TYPES.items()
    for mode, value in MODES.items()
}


def expand(dst: int, src: int, n: int, ld: int, uplo: int, mode: str, dtype: str, stream: Any) -> None:
    """Queue the expansion of one matrix on ``stream`` (a ``StreamHandle``); see the module docstring."""
    if n == 0:
        return
    if mode == "he" and not dtype.startswith("complex"):
        mode = "sy"
    kernels = nvrtc.compiled_kernels(
        _source(), _NAMES, stream.device_id, what="expand kernels", logger=logger
    )
    args = (np.uintp(dst), np.uintp(src), np.int64(n), np.int64(ld), np.int32(1 if uplo == 0 else 0))
    nvrtc.launch_1d(kernels[(dtype, mode)], n * n, stream, *args)
