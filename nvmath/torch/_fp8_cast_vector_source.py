"""The CUDA source of the FP8 layers' vectorized cast kernels (appended to :data:`._fp8_cast_source.SOURCE`,
whose helpers they use).

* ``nvmath_cast_transpose_vec`` / ``nvmath_cast_transpose_grouped_vec`` -- the plain cast-transpose
  (no DGELU) with 16-byte loads of ``x``: a block of 32 x 8 threads runs tiles of 64 rows x 256
  columns, thread ``(tx, ty)`` the 8 columns ``8 tx ..`` of the rows ``ty + 8 k`` (``k < 8``). ``q``
  is written from registers, 8 bytes a row; the FP8 tile goes through shared memory as 32-bit words
  (swizzled: no bank conflicts), each thread reads a 16 x 4 block of it, transposes 4 x 4 bytes with
  ``prmt`` and writes ``q.T`` in 16-byte stores (4 threads of a warp: 64 contiguous bytes of a row).
  The next tile's loads are issued before the transposed stores. With column sums a block row walks
  the 64-row tiles of the plain kernel's block row (the grid rows of :func:`~._fp8_cast.grid`, which
  counts 64-column strips), and thread ``(tx, ty)`` adds the rows ``ty + 8 k`` in the same order as
  the plain kernel's thread ``ty`` does: the same FP8 bytes, amax and partial column sums, bit for
  bit, with a quarter of the blocks (without sums the plain launch may take one block row per tile:
  :func:`~._fp8_cast.vector_grid`). Needs ``cols % 8 == 0`` and 16-byte aligned rows (the launch
  chooses it); 80 registers, 24.6 KB of shared memory, three blocks per SM for 2-byte inputs.
* ``nvmath_amax_grouped`` -- the amax-only pass over row groups (current scaling's first pass of the
  grouped layers): group ``g``'s rows are one contiguous range, reduced as the plain ``nvmath_amax``
  reduces a tensor (16-byte loads, grid-stride, four vectors in flight), block ``(bx, g)``, one
  ``atomicMax`` per block into ``amax[g]``.
"""

from __future__ import annotations

__all__ = ["VECTOR_SOURCE"]

VECTOR_SOURCE = r"""
// blocks per SM the vectorized cast-transpose is built for: 3 for 2-byte T (80 registers, no spills;
// on the H200 13% faster than 4 blocks in 64 registers, which spill), 2 for float32's wider rows
#define NV_VEC_BLOCKS(T) (sizeof(T) == 4 ? 2 : 3)
// 8 consecutive elements of T (16 bytes of bfloat16 / float16, 32 of float32), raw
template <typename T> struct nv_raw8 { uint4 w[sizeof(T) / 2]; };
// element k of the 8 (k a constant after unrolling) as float32
template <typename T>
__device__ __forceinline__ float nv_elem8(const nv_raw8<T>& v, int k) {
  constexpr int per = 16 / sizeof(T);
  return nv_elem(v.w[k / per], k % per, (const T*)nullptr);
}
// fp8(lo) | fp8(hi) << 8: two saturating conversions in one instruction
template <int E5M2>
__device__ __forceinline__ unsigned int nv_fp8x2(float lo, float hi) {
  unsigned short r;
  if (E5M2) {
    asm("cvt.rn.satfinite.e5m2x2.f32 %0, %1, %2;" : "=h"(r) : "f"(hi), "f"(lo));
  } else {
    asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(r) : "f"(hi), "f"(lo));
  }
  return (unsigned int)r;
}

// rows r0 + ty + 8 k (k < 8, r < rows) of x, columns c .. c + 7 (16-byte aligned; c < cols), raw
template <typename T>
__device__ __forceinline__ void nv_vtile_load(
    const T* __restrict__ x, nv_raw8<T>* px, long long r0, int ty, long long c, long long rows,
    long long cols) {
  const long long left = rows - r0 - ty;  // (row ty + 8 k exists where 8 k < left)
  const uint4* p = reinterpret_cast<const uint4*>(x + (r0 + ty) * cols + c);
  const long long step = cols / (16 / (long long)sizeof(T)) * 8;  // (8 rows, in 16-byte vectors)
#pragma unroll
  for (int k = 0; k < 8; ++k) {
    if (8 * k < left) {
#pragma unroll
      for (int h = 0; h < (int)(sizeof(T) / 2); ++h) px[k].w[h] = p[k * step + h];
    }
  }
}

// the word of the FP8 tile at (row, word column w): columns swizzled by 8 words per 16 rows, so that
// a warp's reads of 4 row blocks x 8 words hit 32 banks
__device__ __forceinline__ int nv_vswz(int row, int w) { return w ^ (((row >> 4) & 3) << 3); }

// n (even, <= 16) bytes of v to dst (even address): one 16-byte store where aligned and whole
__device__ __forceinline__ void nv_store16(unsigned char* dst, const uint4& v, int n) {
  const unsigned long long a = (unsigned long long)dst;
  if (n == 16 && (a & 15ull) == 0) {
    *reinterpret_cast<uint4*>(dst) = v;
  } else if (n == 16 && (a & 7ull) == 0) {
    reinterpret_cast<uint2*>(dst)[0] = make_uint2(v.x, v.y);
    reinterpret_cast<uint2*>(dst)[1] = make_uint2(v.z, v.w);
  } else {
#pragma unroll
    for (int m = 0; m < 8; ++m) {
      if (2 * m < n) {
        *reinterpret_cast<unsigned short*>(dst + 2 * m) = (unsigned short)(nv_word(v, m >> 1) >> (16 * (m & 1)));
      }
    }
  }
}

// The transposed tile's stores: thread (p, qc) = (tid % 4, tid / 4) reads the 16 x 4 bytes of rows
// 16 p .. 16 p + 15, columns 4 qc .. 4 qc + 3 of the FP8 tile and writes each column's 16 bytes to
// its row of qt (the valid rows of the tile only; columns < cols).
__device__ __forceinline__ void nv_vtile_transposed(
    const unsigned int (*tile)[64], unsigned char* __restrict__ qt, long long r0, long long c0, long long rows,
    long long cols) {
  const int tid = threadIdx.y * 32 + threadIdx.x, p = tid & 3, qc = tid >> 2;
  if (c0 + 4 * qc >= cols) return;
  unsigned int o[4][4];  // o[i][u]: column 4 qc + i, rows 16 p + 4 u .. + 3
#pragma unroll
  for (int u = 0; u < 4; ++u) {
    const int row = 16 * p + 4 * u;
    const unsigned int a0 = tile[row][nv_vswz(row, qc)], a1 = tile[row + 1][nv_vswz(row + 1, qc)];
    const unsigned int a2 = tile[row + 2][nv_vswz(row + 2, qc)], a3 = tile[row + 3][nv_vswz(row + 3, qc)];
    const unsigned int t0 = __byte_perm(a0, a1, 0x5140), t1 = __byte_perm(a0, a1, 0x7362);
    const unsigned int t2 = __byte_perm(a2, a3, 0x5140), t3 = __byte_perm(a2, a3, 0x7362);
    o[0][u] = __byte_perm(t0, t2, 0x5410);
    o[1][u] = __byte_perm(t0, t2, 0x7632);
    o[2][u] = __byte_perm(t1, t3, 0x5410);
    o[3][u] = __byte_perm(t1, t3, 0x7632);
  }
  long long valid = rows - r0 - 16 * p;
  if (valid <= 0) return;
  const int n = valid < 16 ? (int)valid : 16;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    nv_store16(qt + (c0 + 4 * qc + i) * rows + r0 + 16 * p, make_uint4(o[i][0], o[i][1], o[i][2], o[i][3]), n);
  }
}

// The plain pass (v = x) of the cast-transpose in 64 x 256 tiles (see the module notes): block (bx, by)
// runs the tiles by, by + gy, ... of columns 256 bx .. 256 bx + 255; partial (if not null) row by.
template <typename T, int E5M2>
__device__ __forceinline__ void nv_cast_transpose_vec_pass(
    const T* __restrict__ x, unsigned char* __restrict__ q, unsigned char* __restrict__ qt,
    const float* __restrict__ scale, unsigned int* __restrict__ amax, float* __restrict__ partial,
    long long rows, long long cols, long long by, long long gy) {
  __shared__ uint4 tile_words[64][16];  // (the FP8 tile, 16-byte aligned: 64 rows of 64 words)
  unsigned int(*tile)[64] = reinterpret_cast<unsigned int(*)[64]>(tile_words);
  __shared__ float colsum[8][256];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const long long c0 = (long long)blockIdx.x * 256, c = c0 + 8 * tx;
  const long long tiles = (rows + 63) / 64;
  const bool write = q != nullptr;
  const float s = write ? *scale : 0.0f;
  unsigned int local = 0u;
  float sum[8];
#pragma unroll
  for (int e = 0; e < 8; ++e) sum[e] = 0.0f;
  nv_raw8<T> px[8];
  const bool in = c < cols;  // (cols % 8 == 0: a thread's 8 columns are all in or all out)
  if (by < tiles && in) nv_vtile_load(x, px, by * 64, ty, c, rows, cols);
  for (long long t = by; t < tiles; t += gy) {
    const long long r0 = t * 64, left = rows - r0 - ty;
    unsigned char* qr = write ? q + (r0 + ty) * cols + c : q;
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      const int lr = ty + 8 * k;
      if (8 * k < left && in) {
        float v[8];
#pragma unroll
        for (int e = 0; e < 8; ++e) {
          v[e] = nv_elem8(px[k], e);
          local = max(local, __float_as_uint(fabsf(v[e])));
          sum[e] += v[e];
        }
        if (write) {
          const unsigned int lo = nv_fp8x2<E5M2>(v[0] * s, v[1] * s) | (nv_fp8x2<E5M2>(v[2] * s, v[3] * s) << 16);
          const unsigned int hi = nv_fp8x2<E5M2>(v[4] * s, v[5] * s) | (nv_fp8x2<E5M2>(v[6] * s, v[7] * s) << 16);
          *reinterpret_cast<uint2*>(qr + 8 * k * cols) = make_uint2(lo, hi);
          *reinterpret_cast<uint2*>(&tile[lr][nv_vswz(lr, 2 * tx)]) = make_uint2(lo, hi);
        }
      }
    }
    if (t + gy < tiles && in) nv_vtile_load(x, px, (t + gy) * 64, ty, c, rows, cols);
    if (write) {
      __syncthreads();
      nv_vtile_transposed(tile, qt, r0, c0, rows, cols);
      __syncthreads();
    }
  }
  if (partial != nullptr) {
#pragma unroll
    for (int e = 0; e < 8; ++e) colsum[ty][8 * tx + e] = sum[e];
    __syncthreads();
    const int lc = ty * 32 + tx;
    if (c0 + lc < cols) {
      float acc = colsum[0][lc];
      for (int j = 1; j < 8; ++j) acc += colsum[j][lc];
      partial[by * cols + c0 + lc] = acc;
    }
  }
  nv_block_amax(local, amax);
}

// nvmath_cast_transpose's parameters and values (aux: null, unused) on a (ceil(cols / 256), gy) grid
template <typename T, int E5M2>
__global__ void __launch_bounds__(256, NV_VEC_BLOCKS(T)) nvmath_cast_transpose_vec(
    const T* __restrict__ x, const T* __restrict__ aux, unsigned char* __restrict__ q,
    unsigned char* __restrict__ qt, const float* __restrict__ scale, unsigned int* __restrict__ amax,
    float* __restrict__ partial, long long rows, long long cols) {
  nv_cast_transpose_vec_pass<T, E5M2>(x, q, qt, scale, amax, partial, rows, cols, blockIdx.y, gridDim.y);
}

// nvmath_cast_transpose_grouped's parameters and values (aux: null, unused) on a (ceil(cols / 256),
// gy, groups) grid: group g's grid rows those of its own plain launch (64-column strips counted)
template <typename T, int E5M2>
__global__ void __launch_bounds__(256, NV_VEC_BLOCKS(T)) nvmath_cast_transpose_grouped_vec(
    const T* __restrict__ x, const T* __restrict__ aux, unsigned char* __restrict__ q,
    unsigned char* __restrict__ qt, const float* __restrict__ scale, unsigned int* __restrict__ amax,
    float* __restrict__ partial, const long long* __restrict__ offsets, long long cols,
    long long partial_rows, long long target_blocks) {
  const long long g = blockIdx.z, start = offsets[g], rows = offsets[g + 1] - start;
  const long long strips = (cols + 63) / 64;
  const long long tiles = (rows + 63) / 64, per_strip = (target_blocks + strips - 1) / strips;
  long long gy = tiles < per_strip ? tiles : per_strip;
  gy = gy < 65535 ? gy : 65535;
  gy = gy > 1 ? gy : 1;
  if (rows <= 0 || (long long)blockIdx.y >= gy) return;  // (the whole block: no barrier is skipped)
  const long long at = start * cols;
  nv_cast_transpose_vec_pass<T, E5M2>(
      x + at, q == nullptr ? q : q + at, qt == nullptr ? qt : qt + at, scale == nullptr ? scale : scale + g,
      amax + g, partial == nullptr ? partial : partial + g * partial_rows * cols, rows, cols, blockIdx.y, gy);
}

// amax[g] = max |x| over group g's rows (offsets[g] .. offsets[g + 1] of a (rows, cols) x; cols a
// multiple of 16 / sizeof(T), x 16-byte aligned): block (bx, g) reduces 16-byte vectors bx * 256 + tid,
// then in steps of gridDim.x * 256, four in flight per thread; one atomicMax per block
template <typename T>
__global__ void __launch_bounds__(256) nvmath_amax_grouped(
    const T* __restrict__ x, unsigned int* __restrict__ amax, const long long* __restrict__ offsets,
    long long cols) {
  constexpr int V = 16 / sizeof(T);
  constexpr int UNROLL = 4;
  const long long g = blockIdx.y, start = offsets[g], vectors = (offsets[g + 1] - start) * cols / V;
  if (vectors <= 0) return;  // (the whole block)
  const long long stride = (long long)gridDim.x * 256;
  const uint4* vx = reinterpret_cast<const uint4*>(x + start * cols);
  unsigned int local = 0u;
  for (long long i = (long long)blockIdx.x * 256 + threadIdx.y * 32 + threadIdx.x; i < vectors;
       i += UNROLL * stride) {
    uint4 bx[UNROLL];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      if (i + u * stride < vectors) bx[u] = vx[i + u * stride];
    }
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      if (i + u * stride < vectors) {
#pragma unroll
        for (int k = 0; k < V; ++k) local = max(local, __float_as_uint(fabsf(nv_elem(bx[u], k, x))));
      }
    }
  }
  nv_block_amax(local, amax + g);
}
"""
