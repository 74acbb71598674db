"""A device kernel for symm / hemm / trmm as GEMM: expand a stored triangle into a full matrix (NVRTC).

``expand(dst, src, n, ld, uplo, mode, dtype, stream)`` writes the full column-major ``n x n`` matrix
(leading dimension ``n``) that the ``uplo`` triangle stored at ``src`` (leading dimension ``ld``)
stands for, by ``mode``: ``"sy"`` mirrors it (the transpose), ``"he"`` mirrors it conjugated with a real
diagonal (as hemm reads it), ``"tr"`` zero-fills the other triangle and ``"tru"`` also puts ones on the
diagonal (a unit triangular matrix; the stored diagonal is not read). Only the stored triangle is
read; the mirrored part goes through shared-memory tiles so that every global access is coalesced.
Compiled once per device on first use.
"""

from __future__ import annotations

import functools
import logging
from typing import Any

import numpy as np

from nvmath._internal import nvrtc, streams

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

// MODE: 0 symmetric, 1 Hermitian, 2 triangular, 3 unit triangular. One 32 x 32 tile of dst per block
// (32 x 8 threads); the mirrored part of a tile is read as the transposed source tile through shared
// memory, so every global read and write is coalesced, and a tile reads only the parts it needs.
template <typename T, int MODE>
__global__ void nvmath_expand(T* __restrict__ dst, const T* __restrict__ src, long long n, long long ld,
                              int lower) {
  __shared__ T tile[32][33];
  const long long r0 = (long long)blockIdx.x * 32, c0 = (long long)blockIdx.y * 32;
  const int tx = threadIdx.x;
  // the tile's rows r0..r0+31 and columns c0..c0+31 against the stored triangle
  const bool all_stored = lower ? (r0 >= c0 + 31) : (r0 + 31 <= c0);
  const bool none_stored = lower ? (r0 + 31 < c0) : (r0 > c0 + 31);
  if (MODE < 2 && !all_stored) {  // the transposed source tile: tile[k][tx] = X[c0 + tx, r0 + k]
    for (int k = threadIdx.y; k < 32; k += 8) {
      const long long r = c0 + tx, c = r0 + k;
      if (r < n && c < n) tile[k][tx] = src[r + c * ld];
    }
    __syncthreads();
  }
  for (int k = threadIdx.y; k < 32; k += 8) {
    const long long row = r0 + tx, col = c0 + k;
    if (row >= n || col >= n) continue;
    const bool stored = lower ? (row >= col) : (row <= col);
    T v;
    if (MODE >= 2) {
      const T zero = nvm_scalar<T>(0.0), one = nvm_scalar<T>(1.0);
      v = (MODE == 3 && row == col) ? one : (stored ? src[row + col * ld] : zero);
    } else {
      v = (stored && !none_stored) ? src[row + col * ld] : tile[tx][k];  // tile[tx][k] = X[col, row]
      if (MODE == 1) v = row == col ? nvm_real(v) : (stored ? v : nvm_conj(v));
    }
    dst[row + col * n] = v;
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
    from cuda.core import LaunchConfig, launch

    kernels = nvrtc.compiled_kernels(
        _source(), _NAMES, stream.device_id, what="expand kernels", logger=logger
    )
    args = (np.uintp(dst), np.uintp(src), np.int64(n), np.int64(ld), np.int32(1 if uplo == 0 else 0))
    tiles = (n + 31) // 32
    with streams.stream_ctx(stream):
        launch(
            stream.core, LaunchConfig(grid=(tiles, tiles, 1), block=(32, 8, 1)), kernels[(dtype, mode)], *args
        )
