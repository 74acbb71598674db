"""The CUDA source of the FP8 layers' cast kernels (:mod:`._fp8_cast` compiles and launches them).

After the library's shared FP8 device helpers (:data:`nvmath.linalg.advanced._aux_quantize.FP8_PRELUDE`):
the cast-transpose (plain and dgelu, every wide / FP8 / aux dtype: a template), the vectorized amax
reduction (current scaling's first pass), current scaling's one-thread state update and the FP8
transpose; then the vectorized cast-transpose and the grouped amax reduction
(:mod:`._fp8_cast_vector_source`). See :mod:`._fp8_cast` for what each computes and how it is launched.
"""

from __future__ import annotations

import os

from nvmath.linalg.advanced._aux_quantize import FP8_PRELUDE
from nvmath.torch._fp8_cast_vector_source import VECTOR_SOURCE

__all__ = ["PREFETCH", "SOURCE"]

PREFETCH = os.environ.get("NVMATH_FP8_CAST_PREFETCH", "1").strip().lower() not in ("0", "false", "off", "no")
"""Whether the plain cast-transpose (no DGELU) issues the loads of a block's next tile before the
current tile's transposed stores and barriers (``NVMATH_CT_PREFETCH`` in the source; the same outputs
bit for bit and the same occupancy, 64 registers as before: only the schedule differs; the DGELU pass
is unchanged). ``NVMATH_FP8_CAST_PREFETCH=0`` in the environment at import: each tile's loads at its
start, the former kernels exactly (the same PTX), to compare the two on the GPU."""

SOURCE = FP8_PRELUDE + f"#define NVMATH_CT_PREFETCH {int(PREFETCH)}\n" + r"""
// two consecutive elements (one 4- or 8-byte aligned load): loaded raw, then as float32
template <typename T> struct nv_pair { typedef unsigned int type; };
template <> struct nv_pair<float> { typedef float2 type; };
__device__ __forceinline__ void nv_unpack2(unsigned int u, float& a, float& b, const nvmath_bf16*) {
  a = __uint_as_float(u << 16);
  b = __uint_as_float(u & 0xFFFF0000u);
}
__device__ __forceinline__ void nv_unpack2(unsigned int u, float& a, float& b, const nvmath_f16*) {
  a = nvmath_h2f((unsigned short)(u & 0xFFFFu));
  b = nvmath_h2f((unsigned short)(u >> 16));
}
__device__ __forceinline__ void nv_unpack2(float2 v, float& a, float& b, const float*) {
  a = v.x;
  b = v.y;
}
// two consecutive elements loaded and unpacked at once (the schedule without NVMATH_CT_PREFETCH)
template <typename T>
__device__ __forceinline__ void nv_load2(const T* p, float& a, float& b) {
  nv_unpack2(*reinterpret_cast<const typename nv_pair<T>::type*>(p), a, b, p);
}
// x rounded (nearest even) to the element type, as float32
__device__ __forceinline__ float nv_round(float x, const float*) { return x; }
__device__ __forceinline__ float nv_round(float x, const nvmath_f16*) {
  unsigned short h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(x));
  return nvmath_h2f(h);
}
__device__ __forceinline__ float nv_round(float x, const nvmath_bf16*) {
  unsigned short h;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(x));
  return __uint_as_float(((unsigned int)h) << 16);
}
// dy * gelu'(x) of the tanh GELU, in float32
__device__ __forceinline__ float nv_dgelu(float dy, float x) {
  const float beta = 0.7978845608028654f;  // sqrt(2 / pi)
  const float kappa = 0.044715f;
  const float x_sq = x * x;
  const float inner = beta * (x + kappa * (x_sq * x));
  const float t = tanhf(inner);
  const float left = 0.5f * x;
  const float left_d = 0.5f * (1.0f + t);
  const float right_d = left * (1.0f - t * t) * (beta * (1.0f + 3.0f * kappa * x_sq));
  return dy * (left_d + right_d);
}
__device__ __forceinline__ void nv_block_amax(unsigned int local, unsigned int* amax) {
  __shared__ unsigned int warp_max[8];
  for (int offset = 16; offset > 0; offset >>= 1) {
    local = max(local, __shfl_xor_sync(0xffffffffu, local, offset));
  }
  if (threadIdx.x == 0) warp_max[threadIdx.y] = local;
  __syncthreads();
  if (threadIdx.x == 0 && threadIdx.y == 0) {
    for (int w = 1; w < 8; ++w) local = max(local, warp_max[w]);
    atomicMax(amax, local);
  }
}

// The pairs of x thread (tx, ty) reads of the tile at row r0 (rows r0 + ty + 8 k, columns c, c + 1), raw.
template <typename T>
__device__ __forceinline__ void nv_tile_load(
    const T* __restrict__ x, typename nv_pair<T>::type* px, long long r0, int ty, long long c, long long rows,
    long long cols) {
#pragma unroll
  for (int k = 0; k < 8; ++k) {
    const long long r = r0 + ty + 8 * k;
    if (r < rows && c < cols) px[k] = *reinterpret_cast<const typename nv_pair<T>::type*>(x + r * cols + c);
  }
}

// Tiles of 64 x 64 of a row-major (rows, cols) x (both even); block (32, 8); block (bx, by) runs the
// tiles (t, bx) for t = by, by + gridDim.y, ... Thread (tx, ty) holds columns c0 + 2 tx, c0 + 2 tx + 1
// of rows r0 + ty + 8 k (k < 8). v = x, or round(x * gelu'(aux)) with DGELU (aux of type A: T, or
// float16 for a bfloat16 x: cuBLASLt's aux over an FP8 D). q, qt: null for an
// amax-only pass; partial: null without column sums, else (gridDim.y, cols) float32. With
// NVMATH_CT_PREFETCH the plain pass (no DGELU) issues the loads of a block's next tile before this
// tile's transposed stores and barriers: the same values, sums and maxima in the same order, in 64
// registers as before (4 blocks per SM); the DGELU pass keeps its schedule (44 registers: prefetching
// would cost it a block per SM).
template <typename T, typename A, int E5M2, int DGELU>
__device__ __forceinline__ void nv_cast_transpose_pass(
    const T* __restrict__ x, const A* __restrict__ aux, unsigned char* __restrict__ q,
    unsigned char* __restrict__ qt, const float* __restrict__ scale, unsigned int* __restrict__ amax,
    float* __restrict__ partial, long long rows, long long cols, long long by, long long gy) {
  __shared__ unsigned char tile[64][66];
  __shared__ float colsum[8][64];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const long long c0 = (long long)blockIdx.x * 64, c = c0 + 2 * tx;
  const long long tiles = (rows + 63) / 64;
  const bool write = q != nullptr;
  const float s = write ? *scale : 0.0f;
  unsigned int local = 0u;
  float sum0 = 0.0f, sum1 = 0.0f;
  constexpr bool prefetch = NVMATH_CT_PREFETCH != 0 && DGELU == 0;
  typename nv_pair<T>::type px[8];
  if constexpr (prefetch) {
    if (by < tiles) nv_tile_load(x, px, by * 64, ty, c, rows, cols);
  }
  for (long long t = by; t < tiles; t += gy) {
    const long long r0 = t * 64;
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      const int lr = ty + 8 * k;
      const long long r = r0 + lr;
      if (r < rows && c < cols) {
        float a, b;
        if constexpr (prefetch) {
          nv_unpack2(px[k], a, b, x);
        } else {
          nv_load2(x + r * cols + c, a, b);
        }
        if (DGELU) {
          float za, zb;
          nv_load2(aux + r * cols + c, za, zb);
          a = nv_round(nv_dgelu(a, za), x);
          b = nv_round(nv_dgelu(b, zb), x);
        }
        local = max(local, max(__float_as_uint(fabsf(a)), __float_as_uint(fabsf(b))));
        sum0 += a;
        sum1 += b;
        if (write) {
          const unsigned char qa = nvmath_to_fp8<E5M2>(a * s), qb = nvmath_to_fp8<E5M2>(b * s);
          *reinterpret_cast<unsigned short*>(q + r * cols + c) =
              (unsigned short)(qa | ((unsigned int)qb << 8));
          tile[lr][2 * tx] = qa;
          tile[lr][2 * tx + 1] = qb;
        }
      }
    }
    if constexpr (prefetch) {
      if (t + gy < tiles) nv_tile_load(x, px, (t + gy) * 64, ty, c, rows, cols);
    }
    if (write) {
      __syncthreads();
#pragma unroll
      for (int k = 0; k < 8; ++k) {
        const int lc = ty + 8 * k;
        const long long cc = c0 + lc, rr = r0 + 2 * tx;
        if (cc < cols && rr < rows) {
          *reinterpret_cast<unsigned short*>(qt + cc * rows + rr) =
              (unsigned short)(tile[2 * tx][lc] | ((unsigned int)tile[2 * tx + 1][lc] << 8));
        }
      }
      __syncthreads();
    }
  }
  if (partial != nullptr) {
    colsum[ty][2 * tx] = sum0;
    colsum[ty][2 * tx + 1] = sum1;
    __syncthreads();
    if (ty == 0 && c < cols) {
      float s0 = colsum[0][2 * tx], s1 = colsum[0][2 * tx + 1];
      for (int j = 1; j < 8; ++j) {
        s0 += colsum[j][2 * tx];
        s1 += colsum[j][2 * tx + 1];
      }
      partial[by * cols + c] = s0;
      partial[by * cols + c + 1] = s1;
    }
  }
  nv_block_amax(local, amax);
}

template <typename T, typename A, int E5M2, int DGELU>
__global__ void __launch_bounds__(256) nvmath_cast_transpose(
    const T* __restrict__ x, const A* __restrict__ aux, unsigned char* __restrict__ q,
    unsigned char* __restrict__ qt, const float* __restrict__ scale, unsigned int* __restrict__ amax,
    float* __restrict__ partial, long long rows, long long cols) {
  nv_cast_transpose_pass<T, A, E5M2, DGELU>(x, aux, q, qt, scale, amax, partial, rows, cols, blockIdx.y,
                                            gridDim.y);
}

// The pass over the row groups of x (group g: rows offsets[g] to offsets[g + 1]) in one launch: block
// (bx, by, g) runs what block (bx, by) of group g's own launch would (its grid rows gy as grid() gives
// them for its rows and gridDim.x column strips, at most target_blocks / gridDim.x; the blocks beyond
// return), on group g's rows of x, q (and aux), its transpose block at offsets[g] * cols of qt, scale[g],
// amax[g] and the (partial_rows, cols) partial sums at g * partial_rows * cols: the same values as one
// launch per group, bit for bit.
template <typename T, typename A, int E5M2, int DGELU>
__global__ void __launch_bounds__(256) nvmath_cast_transpose_grouped(
    const T* __restrict__ x, const A* __restrict__ aux, unsigned char* __restrict__ q,
    unsigned char* __restrict__ qt, const float* __restrict__ scale, unsigned int* __restrict__ amax,
    float* __restrict__ partial, const long long* __restrict__ offsets, long long cols,
    long long partial_rows, long long target_blocks) {
  const long long g = blockIdx.z, start = offsets[g], rows = offsets[g + 1] - start;
  const long long tiles = (rows + 63) / 64, per_strip = (target_blocks + gridDim.x - 1) / gridDim.x;
  long long gy = tiles < per_strip ? tiles : per_strip;
  gy = gy < 65535 ? gy : 65535;
  gy = gy > 1 ? gy : 1;
  if (rows <= 0 || (long long)blockIdx.y >= gy) return;  // (the whole block: no barrier is skipped)
  const long long at = start * cols;
  nv_cast_transpose_pass<T, A, E5M2, DGELU>(
      x + at, aux == nullptr ? aux : aux + at, q == nullptr ? q : q + at, qt == nullptr ? qt : qt + at,
      scale == nullptr ? scale : scale + g, amax + g,
      partial == nullptr ? partial : partial + g * partial_rows * cols, rows, cols, blockIdx.y, gy);
}

// 32-bit word i of a 16-byte vector (i a constant after unrolling: stays in registers)
__device__ __forceinline__ unsigned int nv_word(const uint4& v, int i) {
  return i == 0 ? v.x : (i == 1 ? v.y : (i == 2 ? v.z : v.w));
}
// element k of a 16-byte vector of T as float32 (the values nv_unpack2 gives)
__device__ __forceinline__ float nv_elem(const uint4& v, int k, const nvmath_bf16*) {
  const unsigned int u = nv_word(v, k >> 1);
  return __uint_as_float((k & 1) ? (u & 0xFFFF0000u) : (u << 16));
}
__device__ __forceinline__ float nv_elem(const uint4& v, int k, const nvmath_f16*) {
  const unsigned int u = nv_word(v, k >> 1);
  return nvmath_h2f((unsigned short)((k & 1) ? (u >> 16) : (u & 0xFFFFu)));
}
__device__ __forceinline__ float nv_elem(const uint4& v, int k, const float*) {
  return __uint_as_float(nv_word(v, k));
}

// The amax-only pass as a plain reduction (current scaling's first pass): amax = max |v| over the n
// elements of x (v = x, or round(x * gelu'(aux)) with DGELU, the values the cast-transpose
// quantizes), read as 16-byte vectors (x and aux 16-byte aligned, n a multiple of 16 / sizeof(T)),
// grid-stride, 4 vectors of each in flight per thread; block (32, 8), one atomicMax per block.
template <typename T, typename A, int DGELU>
__global__ void __launch_bounds__(256) nvmath_amax(
    const T* __restrict__ x, const A* __restrict__ aux, unsigned int* __restrict__ amax, long long n) {
  static_assert(sizeof(A) == sizeof(T), "the aux's elements pair with x's");
  constexpr int V = 16 / sizeof(T);
  constexpr int UNROLL = 4;
  const long long vectors = n / V;
  const long long stride = (long long)gridDim.x * 256;
  const uint4* vx = reinterpret_cast<const uint4*>(x);
  const uint4* va = reinterpret_cast<const uint4*>(aux);
  unsigned int local = 0u;
  for (long long i = (long long)blockIdx.x * 256 + threadIdx.y * 32 + threadIdx.x; i < vectors;
       i += UNROLL * stride) {
    uint4 bx[UNROLL], ba[UNROLL];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      const long long j = i + u * stride;
      if (j < vectors) {
        bx[u] = vx[j];
        if (DGELU) ba[u] = va[j];
      }
    }
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      if (i + u * stride < vectors) {
#pragma unroll
        for (int k = 0; k < V; ++k) {
          float v = nv_elem(bx[u], k, x);
          if (DGELU) v = nv_round(nv_dgelu(v, nv_elem(ba[u], k, aux)), x);
          local = max(local, __float_as_uint(fabsf(v)));
        }
      }
    }
  }
  nv_block_amax(local, amax);
}

// Current scaling's state update after an amax pass, one thread (one launch instead of ScalingState's
// dozen torch operations, the same values: see current_update): next = (fp8_max / amax) / divisor
// where 1 / amax > 0 and next is finite, else the old scale; the state's scale becomes it; a finite
// amax is recorded in the history, a non-finite one counted in found_inf; used = the scale, or NaN
// for a non-finite amax (what the GEMM dequantizes by).
extern "C" __global__ void nvmath_current_scale(
    const float* __restrict__ amax, float* __restrict__ scale, float* __restrict__ hist,
    int* __restrict__ found_inf, float* __restrict__ used, float fp8_max, float divisor) {
  const float a = *amax;
  const float r = 1.0f / a;
  float next = r * fp8_max;
  if (divisor != 1.0f) next = next / divisor;
  const bool ok = a < __int_as_float(0x7f800000);
  const float s = (r > 0.0f && next < __int_as_float(0x7f800000)) ? next : *scale;
  *scale = s;
  if (ok) {
    *hist = a;
  } else {
    *found_inf += 1;
  }
  *used = ok ? s : __int_as_float(0x7fc00000);
}

// Current scaling's scales of n groups (GroupedScalingState.current_scale), one thread each: out = (fp8_max /
// amax) / divisor where 1 / amax > 0 and that is finite, else the old scale (the values of
// nvmath_current_scale and of torch's lean sequence); the state is not changed.
extern "C" __global__ void __launch_bounds__(256) nvmath_grouped_scale(
    const float* __restrict__ amax, const float* __restrict__ scale, float* __restrict__ out, long long n,
    float fp8_max, float divisor) {
  const long long i = (long long)blockIdx.x * 256 + threadIdx.y * 32 + threadIdx.x;
  if (i >= n) return;
  const float inv = 1.0f / amax[i];
  float next = inv * fp8_max;
  if (divisor != 1.0f) next = next / divisor;
  out[i] = (inv > 0.0f && next < __int_as_float(0x7f800000)) ? next : scale[i];
}

// The grouped scaling state's update of R adjacent roles of G groups (GroupedScalingState.record), one
// block of 256 threads per (role r, group g) -- blockIdx.x = r * groups + g -- in place of a dozen torch
// operations; the same values. amax, used, out: (R, G); scale, found_inf: the first role's row of the
// state's (3, G) tensors; hist: the first role's column of the (hist_len, 3, G) history (hist_stride =
// 3 G). A finite amax of a group that ran (active: (G,) flags of the first active_rows roles, null:
// all ran) is pushed on the history (the older values shift down, the oldest falls off); a non-finite
// one of a group that ran adds 1 to found_inf. The scale of a pushed group becomes used (current
// scaling) or, delayed, fp8_max / (the history's max, or the new amax: use_max 0) / divisor where that
// is finite and > 0 (else it stays; used may be the scale row itself -- delayed: read before the
// write, by the same thread, so neither is __restrict__); out = 1 / used (the dequantization scale:
// correctly rounded, torch's reciprocal), NaN for a non-finite amax.
extern "C" __global__ void __launch_bounds__(256) nvmath_grouped_record(
    const float* __restrict__ amax, const float* used, const bool* __restrict__ active,
    int active_rows, float* hist, float* scale, int* __restrict__ found_inf,
    float* __restrict__ out, long long groups, long long hist_len, long long hist_stride, int delayed,
    int use_max, float fp8_max, float divisor) {
  __shared__ unsigned int best;
  const long long r = blockIdx.x / groups, g = blockIdx.x % groups, e = blockIdx.x;
  const int tid = threadIdx.y * 32 + threadIdx.x;
  const float a = amax[e];
  const bool ok = a < __int_as_float(0x7f800000);
  const bool ran = active == nullptr || r >= active_rows || active[g];
  if (tid == 0) {
    out[e] = ok ? 1.0f / used[e] : __int_as_float(0x7fc00000);  // (the dequantization scale)
    if (!ok && ran) found_inf[e] += 1;
  }
  if (!ok || !ran) return;  // (the whole block)
  float* h = hist + r * groups + g;
  unsigned int local = __float_as_uint(a);
  for (long long top = hist_len - 1; top >= 1; top -= 256) {  // (from the oldest: reads before writes)
    const long long l = top - tid;
    float v = 0.0f;
    if (l >= 1) v = h[(l - 1) * hist_stride];
    __syncthreads();
    if (l >= 1) {
      h[l * hist_stride] = v;
      local = max(local, __float_as_uint(v));
    }
    __syncthreads();
  }
  if (tid == 0) {
    best = 0u;
    h[0] = a;
  }
  nv_block_amax(local, &best);
  if (tid != 0) return;
  if (!delayed) {
    scale[e] = used[e];
    return;
  }
  const float reduced = use_max ? __uint_as_float(best) : a;
  const float inv = 1.0f / reduced;
  float next = inv * fp8_max;
  if (divisor != 1.0f) next = next / divisor;
  if (inv > 0.0f && next < __int_as_float(0x7f800000)) scale[e] = next;
}

// out (cols, rows) = in (rows, cols) of bytes, both row-major, rows and cols even; the tiling above
extern "C" __global__ void __launch_bounds__(256) nvmath_fp8_transpose(
    const unsigned char* __restrict__ in, unsigned char* __restrict__ out, long long rows, long long cols) {
  __shared__ unsigned char tile[64][66];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const long long c0 = (long long)blockIdx.x * 64, c = c0 + 2 * tx;
  const long long tiles = (rows + 63) / 64;
  for (long long t = blockIdx.y; t < tiles; t += gridDim.y) {
    const long long r0 = t * 64;
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      const int lr = ty + 8 * k;
      const long long r = r0 + lr;
      if (r < rows && c < cols) {
        const unsigned short v = *reinterpret_cast<const unsigned short*>(in + r * cols + c);
        tile[lr][2 * tx] = (unsigned char)(v & 0xFFu);
        tile[lr][2 * tx + 1] = (unsigned char)(v >> 8);
      }
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      const int lc = ty + 8 * k;
      const long long cc = c0 + lc, rr = r0 + 2 * tx;
      if (cc < cols && rr < rows) {
        *reinterpret_cast<unsigned short*>(out + cc * rows + rr) =
            (unsigned short)(tile[2 * tx][lc] | ((unsigned int)tile[2 * tx + 1][lc] << 8));
      }
    }
    __syncthreads();
  }
}
"""
SOURCE += VECTOR_SOURCE  # (the vectorized kernels, after the helpers they use)
