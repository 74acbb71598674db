"""Run the FP8 cast-transpose kernels' CUDA source on the CPU, one host thread per CUDA thread.

The kernel source of :mod:`nvmath.torch._fp8_cast` is compiled by the host C++ compiler (g++, C++20)
behind a prelude that gives it CUDA's execution model: blocks run one after another, each as 256
``std::thread`` s (``threadIdx``, ``blockIdx``, ``gridDim`` as variables), ``__syncthreads`` a
``std::barrier`` of the block, ``__shfl_xor_sync`` an exchange through memory behind a barrier of the
warp (the 32 threads of one ``threadIdx.y``), ``__shared__`` a static (one block at a time),
``atomicMax`` a compare-exchange loop (``uint4``, CUDA's 16-byte vector, a struct of four words). The
only code replaced is the PTX inline assembly of five leaf
conversions (float16 -> float32, the float16 / bfloat16 round trip, the saturating FP8 conversion of
one value and of a pair), and CUDA's ``__byte_perm`` is a loop over the four result bytes,
by C++ with the same rounding (nearest even; the FP8 conversion saturates finite values): everything
else -- the tiling, the bounds, the shared tile and its transposed read, the reductions -- is the
kernel's own code. The GPU tests check the conversions against torch on the H200.

:func:`build` compiles (skips without g++); :class:`HostKernels` launches on numpy arrays (the
cast-transpose, the vectorized amax reduction and the FP8 transpose); ``lib.host_cast_grouped`` runs
the grouped cast-transpose on raw addresses (grid ``(gx, gy, groups)``, ``blockIdx.z`` the group),
``lib.host_cast_vec`` / ``lib.host_cast_grouped_vec`` (:meth:`HostKernels.cast_vec`) the vectorized
cast-transposes, ``lib.host_amax_grouped`` the grouped amax reduction (grid ``(gx, groups)``),
``lib.host_grouped_record`` the grouped scaling-state update, ``lib.host_grouped_scale`` current
scaling's scales of every group.
"""

from __future__ import annotations

import ctypes
import shutil
import subprocess
from pathlib import Path

import numpy as np

from nvmath.torch import _fp8_cast as C

_LEAVES = {
    # float16 bits -> float32
    """__device__ __forceinline__ float nvmath_h2f(unsigned short h) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return f;
}""": """__device__ __forceinline__ float nvmath_h2f(unsigned short h) {
  _Float16 v;
  std::memcpy(&v, &h, 2);
  return (float)v;
}""",
    """__device__ __forceinline__ float nv_round(float x, const nvmath_f16*) {
  unsigned short h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(x));
  return nvmath_h2f(h);
}""": """__device__ __forceinline__ float nv_round(float x, const nvmath_f16*) {
  return (float)(_Float16)x;
}""",
    """__device__ __forceinline__ float nv_round(float x, const nvmath_bf16*) {
  unsigned short h;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(x));
  return __uint_as_float(((unsigned int)h) << 16);
}""": """__device__ __forceinline__ float nv_round(float x, const nvmath_bf16*) {
  unsigned int u = __float_as_uint(x);
  if (std::isnan(x)) return x;
  u = (u + 0x7FFFu + ((u >> 16) & 1u)) & 0xFFFF0000u;
  return __uint_as_float(u);
}""",
    """template <int E5M2>
__device__ __forceinline__ unsigned char nvmath_to_fp8(float x) {
  unsigned short r;
  if (E5M2) {
    asm("{cvt.rn.satfinite.e5m2x2.f32 %0, %2, %1;}" : "=h"(r) : "f"(x), "f"(0.0f));
  } else {
    asm("{cvt.rn.satfinite.e4m3x2.f32 %0, %2, %1;}" : "=h"(r) : "f"(x), "f"(0.0f));
  }
  return (unsigned char)(r & 0xFFu);
}""": """template <int E5M2>
__device__ __forceinline__ unsigned char nvmath_to_fp8(float x) {
  return host_fp8(x, E5M2);
}""",
    # the vectorized kernels' pair conversion
    """template <int E5M2>
__device__ __forceinline__ unsigned int nv_fp8x2(float lo, float hi) {
  unsigned short r;
  if (E5M2) {
    asm("cvt.rn.satfinite.e5m2x2.f32 %0, %1, %2;" : "=h"(r) : "f"(hi), "f"(lo));
  } else {
    asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(r) : "f"(hi), "f"(lo));
  }
  return (unsigned int)r;
}""": """template <int E5M2>
__device__ __forceinline__ unsigned int nv_fp8x2(float lo, float hi) {
  return (unsigned int)host_fp8(lo, E5M2) | ((unsigned int)host_fp8(hi, E5M2) << 8);
}""",
}

_PRELUDE = r"""
#include <atomic>
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <algorithm>
#include <thread>
#include <vector>
#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static
struct dim3s { unsigned x, y, z; };
thread_local dim3s threadIdx;
dim3s blockIdx, gridDim, blockDim;
static std::barrier<>* g_block;
static std::barrier<>* g_warp[8];
static unsigned g_shfl[8][32];
struct float2 { float x, y; };
struct uint4 { unsigned x, y, z, w; };
struct uint2 { unsigned x, y; };
inline uint2 make_uint2(unsigned x, unsigned y) { return {x, y}; }
inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return {x, y, z, w}; }
// byte n of the result: byte (s >> 4 n) & 7 of the 8 bytes y:x (x the low four)
inline unsigned __byte_perm(unsigned x, unsigned y, unsigned s) {
  const unsigned long long v = ((unsigned long long)y << 32) | x;
  unsigned r = 0;
  for (int n = 0; n < 4; ++n) r |= (unsigned)((v >> (8 * ((s >> (4 * n)) & 7))) & 0xFFu) << (8 * n);
  return r;
}
using std::max;
inline float __uint_as_float(unsigned u) { float f; std::memcpy(&f, &u, 4); return f; }
inline unsigned __float_as_uint(float f) { unsigned u; std::memcpy(&u, &f, 4); return u; }
inline float __int_as_float(int i) { float f; std::memcpy(&f, &i, 4); return f; }
inline void __syncthreads() { g_block->arrive_and_wait(); }
inline unsigned __shfl_xor_sync(unsigned, unsigned v, int offset) {
  const unsigned w = threadIdx.y, l = threadIdx.x;
  g_shfl[w][l] = v;
  g_warp[w]->arrive_and_wait();
  const unsigned r = g_shfl[w][l ^ offset];
  g_warp[w]->arrive_and_wait();
  return r;
}
inline unsigned atomicMax(unsigned* p, unsigned v) {
  std::atomic_ref<unsigned> a(*p);
  unsigned old = a.load();
  while (old < v && !a.compare_exchange_weak(old, v)) {}
  return old;
}
// round to nearest even among the format's finite values, saturating (cvt.rn.satfinite); NaN -> NaN
static float fp8_value(int code, int e5m2) {
  const int sign = code >> 7, e = e5m2 ? (code >> 2) & 31 : (code >> 3) & 15, m = e5m2 ? code & 3 : code & 7;
  const int mbits = e5m2 ? 2 : 3, bias = e5m2 ? 15 : 7;
  const float frac = m / float(1 << mbits);
  const float v = e ? std::ldexp(1.0f + frac, e - bias) : std::ldexp(frac, 1 - bias);
  return sign ? -v : v;
}
static unsigned char host_fp8(float x, int e5m2) {
  if (std::isnan(x)) return 0x7F;  // (a NaN of both formats)
  const int top = e5m2 ? 0x7B : 0x7E;  // the largest finite positive code
  int best = 0;
  float bestd = INFINITY;
  const int sign = std::signbit(x) ? 0x80 : 0;
  const float ax = std::fabs(x);
  for (int c = 0; c <= top; ++c) {
    const float d = std::fabs(fp8_value(c, e5m2) - ax);
    if (d < bestd || (d == bestd && (c & 1) == 0)) { bestd = d; best = c; }
  }
  return (unsigned char)(best | sign);
}
"""

_LAUNCHER = r"""
template <typename F>
static void run_grid(unsigned gx, unsigned gy, F body, unsigned gz = 1) {
  gridDim = {gx, gy, gz};
  blockDim = {32, 8, 1};
  for (unsigned bz = 0; bz < gz; ++bz)
  for (unsigned by = 0; by < gy; ++by) {
    for (unsigned bx = 0; bx < gx; ++bx) {
      blockIdx = {bx, by, bz};
      std::barrier<> block(256);
      for (int w = 0; w < 8; ++w) { g_warp[w] = new std::barrier<>(32); }
      g_block = &block;
      std::vector<std::thread> threads;
      for (unsigned ty = 0; ty < 8; ++ty)
        for (unsigned tx = 0; tx < 32; ++tx)
          threads.emplace_back([=] { threadIdx = {tx, ty, 0}; body(); });
      for (auto& t : threads) t.join();
      for (int w = 0; w < 8; ++w) delete g_warp[w];
    }
  }
}

// variant: 0 bf16, 1 f16, 2 f32 (x); aux: 0 none, 1 same as x, 2 float16 (bf16 x only); e5m2 0/1
extern "C" int host_cast(int variant, int aux_kind, int e5m2, const void* x, const void* aux,
                         unsigned char* q, unsigned char* qt, const float* scale, unsigned* amax,
                         float* partial, long long rows, long long cols, unsigned gx, unsigned gy) {
#define NV_RUN(T, A, E, D) run_grid(gx, gy, [=] { nvmath_cast_transpose<T, A, E, D>( \
    (const T*)x, (const A*)aux, q, qt, scale, amax, partial, rows, cols); }); return 0;
#define NV_E(T, A, D) if (e5m2) { NV_RUN(T, A, 1, D) } else { NV_RUN(T, A, 0, D) }
  if (variant == 0 && aux_kind == 0) { NV_E(nvmath_bf16, nvmath_bf16, 0) }
  if (variant == 0 && aux_kind == 1) { NV_E(nvmath_bf16, nvmath_bf16, 1) }
  if (variant == 0 && aux_kind == 2) { NV_E(nvmath_bf16, nvmath_f16, 1) }
  if (variant == 1 && aux_kind == 0) { NV_E(nvmath_f16, nvmath_f16, 0) }
  if (variant == 1 && aux_kind == 1) { NV_E(nvmath_f16, nvmath_f16, 1) }
  if (variant == 2 && aux_kind == 0) { NV_E(float, float, 0) }
  if (variant == 2 && aux_kind == 1) { NV_E(float, float, 1) }
  return 1;
}

// the instantiation of the wide input type ``variant`` (0 bfloat16, 1 float16, 2 float32) of a launch
// macro M(T) (which returns 0); falls through (to the caller's "return 1") for another variant
#define NV_BY_WIDE(M) if (variant == 0) { M(nvmath_bf16) } if (variant == 1) { M(nvmath_f16) } \
  if (variant == 2) { M(float) }

// the grouped cast-transpose (no aux) over a (gx, gy, gz) grid: gz groups at the row offsets
extern "C" int host_cast_grouped(int variant, int e5m2, const void* x, unsigned char* q, unsigned char* qt,
                                 const float* scale, unsigned* amax, float* partial, const long long* offsets,
                                 long long cols, long long partial_rows, long long target, unsigned gx,
                                 unsigned gy, unsigned gz) {
#define NV_GROUPED(T, E) run_grid(gx, gy, [=] { nvmath_cast_transpose_grouped<T, T, E, 0>( \
    (const T*)x, nullptr, q, qt, scale, amax, partial, offsets, cols, partial_rows, target); }, gz); return 0;
#define NV_GE(T) if (e5m2) { NV_GROUPED(T, 1) } else { NV_GROUPED(T, 0) }
  NV_BY_WIDE(NV_GE)
  return 1;
}

// the vectorized cast-transpose (no aux) over a (gx, gy) grid: gx = ceil(cols / 256)
extern "C" int host_cast_vec(int variant, int e5m2, const void* x, unsigned char* q, unsigned char* qt,
                             const float* scale, unsigned* amax, float* partial, long long rows, long long cols,
                             unsigned gx, unsigned gy) {
#define NV_VEC(T, E) run_grid(gx, gy, [=] { nvmath_cast_transpose_vec<T, E>( \
    (const T*)x, nullptr, q, qt, scale, amax, partial, rows, cols); }); return 0;
#define NV_VE(T) if (e5m2) { NV_VEC(T, 1) } else { NV_VEC(T, 0) }
  NV_BY_WIDE(NV_VE)
  return 1;
}

// the vectorized grouped cast-transpose: host_cast_grouped's arguments, gx = ceil(cols / 256)
extern "C" int host_cast_grouped_vec(int variant, int e5m2, const void* x, unsigned char* q, unsigned char* qt,
                                     const float* scale, unsigned* amax, float* partial, const long long* offsets,
                                     long long cols, long long partial_rows, long long target, unsigned gx,
                                     unsigned gy, unsigned gz) {
#define NV_GVEC(T, E) run_grid(gx, gy, [=] { nvmath_cast_transpose_grouped_vec<T, E>( \
    (const T*)x, nullptr, q, qt, scale, amax, partial, offsets, cols, partial_rows, target); }, gz); return 0;
#define NV_GVE(T) if (e5m2) { NV_GVEC(T, 1) } else { NV_GVEC(T, 0) }
  NV_BY_WIDE(NV_GVE)
  return 1;
}

// the grouped amax reduction over a (gx, groups) grid
extern "C" int host_amax_grouped(int variant, const void* x, unsigned* amax, const long long* offsets,
                                 long long cols, unsigned gx, unsigned groups) {
#define NV_AG(T) run_grid(gx, groups, [=] { nvmath_amax_grouped<T>((const T*)x, amax, offsets, cols); }); return 0;
  NV_BY_WIDE(NV_AG)
  return 1;
}

// current scaling's scales of n groups, one thread each
extern "C" void host_grouped_scale(const float* amax, const float* scale, float* out, long long n,
                                   float fp8_max, float divisor) {
  run_grid((unsigned)((n + 255) / 256), 1,
           [=] { nvmath_grouped_scale(amax, scale, out, n, fp8_max, divisor); });
}

// the grouped scaling-state update: one block per (role, group), rows * groups blocks
extern "C" void host_grouped_record(const float* amax, const float* used, const bool* active, int active_rows,
                                    float* hist, float* scale, int* found_inf, float* out, long long rows,
                                    long long groups, long long hist_len, long long hist_stride, int delayed,
                                    int use_max, float fp8_max, float divisor) {
  run_grid((unsigned)(rows * groups), 1, [=] { nvmath_grouped_record(amax, used, active, active_rows, hist,
      scale, found_inf, out, groups, hist_len, hist_stride, delayed, use_max, fp8_max, divisor); });
}

// the vectorized amax reduction over n elements on a 1-D grid of gx blocks (32 x 8 threads each)
extern "C" int host_amax(int variant, int aux_kind, const void* x, const void* aux, unsigned* amax,
                         long long n, unsigned gx) {
#define NV_AMAX(T, A, D) \
  run_grid(gx, 1, [=] { nvmath_amax<T, A, D>((const T*)x, (const A*)aux, amax, n); }); \
  return 0;
  if (variant == 0 && aux_kind == 0) { NV_AMAX(nvmath_bf16, nvmath_bf16, 0) }
  if (variant == 0 && aux_kind == 1) { NV_AMAX(nvmath_bf16, nvmath_bf16, 1) }
  if (variant == 0 && aux_kind == 2) { NV_AMAX(nvmath_bf16, nvmath_f16, 1) }
  if (variant == 1 && aux_kind == 0) { NV_AMAX(nvmath_f16, nvmath_f16, 0) }
  if (variant == 1 && aux_kind == 1) { NV_AMAX(nvmath_f16, nvmath_f16, 1) }
  if (variant == 2 && aux_kind == 0) { NV_AMAX(float, float, 0) }
  if (variant == 2 && aux_kind == 1) { NV_AMAX(float, float, 1) }
  return 1;
}

// the current-scaling state update: one thread, called directly
extern "C" void host_current_scale(const float* amax, float* scale, float* hist, int* found_inf, float* used,
                                   float fp8_max, float divisor) {
  nvmath_current_scale(amax, scale, hist, found_inf, used, fp8_max, divisor);
}

extern "C" void host_transpose(const unsigned char* in, unsigned char* out, long long rows, long long cols,
                               unsigned gx, unsigned gy) {
  run_grid(gx, gy, [=] { nvmath_fp8_transpose(in, out, rows, cols); });
}
"""


def source(prefetch: bool | None = None) -> str:
    """The kernel source with its four PTX leaves replaced, between the prelude and the launcher
    (``prefetch``: the cast-transpose's schedule, default the module's :data:`~._fp8_cast.PREFETCH`)."""
    src = C._SOURCE
    if prefetch is not None:
        old, new = (f"#define NVMATH_CT_PREFETCH {int(p)}" for p in (C.PREFETCH, prefetch))
        src = src.replace(old, new)
    for old, new in _LEAVES.items():
        if old not in src:
            raise AssertionError(f"the kernel source changed: update the host leaf for\n{old}")
        src = src.replace(old, new)
    return _PRELUDE + src + _LAUNCHER


def build(tmp: Path, prefetch: bool | None = None) -> HostKernels | None:
    """Compile the host build into ``tmp``; ``None`` without a C++20 g++."""
    gxx = shutil.which("g++")
    if gxx is None:
        return None
    cpp, lib = tmp / "cast_host.cpp", tmp / "cast_host.so"
    cpp.write_text(source(prefetch))
    flags = ["-std=c++20", "-O1", "-ffp-contract=off", "-shared", "-fPIC", "-pthread"]
    cmd = [gxx, *flags, str(cpp), "-o", str(lib)]
    done = subprocess.run(cmd, check=False, capture_output=True, text=True)
    if done.returncode != 0:
        raise AssertionError(f"host build of the kernels failed:\n{done.stderr[-4000:]}")
    return HostKernels(ctypes.CDLL(str(lib)))


_VARIANT = {"bfloat16": 0, "float16": 1, "float32": 2}


class HostKernels:
    """The compiled host build: :meth:`cast` and :meth:`transpose` on numpy arrays."""

    def __init__(self, lib: ctypes.CDLL):
        self.lib = lib
        lib.host_cast.restype = ctypes.c_int
        lib.host_cast.argtypes = (
            [ctypes.c_int] * 3 + [ctypes.c_void_p] * 7 + [ctypes.c_longlong] * 2 + [ctypes.c_uint] * 2
        )
        lib.host_grouped_scale.restype = None
        lib.host_grouped_scale.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_longlong] + [ctypes.c_float] * 2
        lib.host_grouped_record.restype = None
        lib.host_grouped_record.argtypes = (
            [ctypes.c_void_p] * 3 + [ctypes.c_int] + [ctypes.c_void_p] * 4 + [ctypes.c_longlong] * 4
            + [ctypes.c_int] * 2 + [ctypes.c_float] * 2
        )
        for grouped in (lib.host_cast_grouped, lib.host_cast_grouped_vec):
            grouped.restype = ctypes.c_int
            grouped.argtypes = (
                [ctypes.c_int] * 2 + [ctypes.c_void_p] * 7 + [ctypes.c_longlong] * 3 + [ctypes.c_uint] * 3
            )
        lib.host_cast_vec.restype = ctypes.c_int
        lib.host_cast_vec.argtypes = (
            [ctypes.c_int] * 2 + [ctypes.c_void_p] * 6 + [ctypes.c_longlong] * 2 + [ctypes.c_uint] * 2
        )
        lib.host_amax_grouped.restype = ctypes.c_int
        lib.host_amax_grouped.argtypes = (
            [ctypes.c_int] + [ctypes.c_void_p] * 3 + [ctypes.c_longlong] + [ctypes.c_uint] * 2
        )

    def cast(self, x: np.ndarray, wide: str, scale: float | None, e5m2: bool, aux: np.ndarray | None = None,
             aux_wide: str | None = None, colsum: bool = True, gy: int | None = None) -> dict:  # fmt: skip
        """Run the kernel over ``x`` (raw element bits: uint16 for bfloat16 / float16, float32); returns
        ``q``, ``qt`` (uint8 bits, or None), ``amax`` (float) and ``partial`` ((gy, C) float32)."""
        rows, cols = x.shape
        gx, gy0 = C.grid(rows, cols)
        gy = gy0 if gy is None else gy
        x = np.ascontiguousarray(x)
        kind = 0 if aux is None else (1 if aux_wide == wide else 2)
        aux = None if aux is None else np.ascontiguousarray(aux)
        q = np.zeros((rows, cols), np.uint8) if scale is not None else None
        qt = np.zeros((cols, rows), np.uint8) if scale is not None else None
        s = np.array([scale or 0.0], np.float32)
        amax = np.zeros(1, np.uint32)
        partial = np.full((gy, cols), np.nan, np.float32) if colsum else None

        def ptr(a: np.ndarray | None) -> int | None:
            return None if a is None else a.ctypes.data

        rc = self.lib.host_cast(
            _VARIANT[wide], kind, int(e5m2), ptr(x), ptr(aux), ptr(q), ptr(qt),
            ptr(s) if scale is not None else None, ptr(amax), ptr(partial), rows, cols, gx, gy,
        )  # fmt: skip
        assert rc == 0
        return {"q": q, "qt": qt, "amax": float(amax.view(np.float32)[0]), "partial": partial}

    def cast_vec(self, x: np.ndarray, wide: str, scale: float | None, e5m2: bool, colsum: bool = True,
                 gy: int | None = None) -> dict:  # fmt: skip
        """:meth:`cast` (no aux) by the vectorized kernel ``nvmath_cast_transpose_vec`` on its grid
        (:func:`~nvmath.torch._fp8_cast.vector_grid`; ``gy``: other block rows); the same results."""
        rows, cols = x.shape
        gx, gy0 = C.vector_grid(rows, cols, colsum)
        gy = gy0 if gy is None else gy
        x = np.ascontiguousarray(x)
        q = np.zeros((rows, cols), np.uint8) if scale is not None else None
        qt = np.zeros((cols, rows), np.uint8) if scale is not None else None
        s = np.array([scale or 0.0], np.float32)
        amax = np.zeros(1, np.uint32)
        partial = np.full((gy, cols), np.nan, np.float32) if colsum else None

        def ptr(a: np.ndarray | None) -> int | None:
            return None if a is None else a.ctypes.data

        rc = self.lib.host_cast_vec(
            _VARIANT[wide], int(e5m2), ptr(x), ptr(q), ptr(qt), ptr(s) if scale is not None else None, ptr(amax),
            ptr(partial), rows, cols, gx, gy,
        )  # fmt: skip
        assert rc == 0
        return {"q": q, "qt": qt, "amax": float(amax.view(np.float32)[0]), "partial": partial}

    def amax(self, x: np.ndarray, wide: str, aux: np.ndarray | None = None, aux_wide: str | None = None,
             blocks: int | None = None) -> float:  # fmt: skip
        """Run the vectorized amax reduction over ``x`` (raw element bits, any shape: its elements in
        order) on ``blocks`` blocks (default :func:`~nvmath.torch._fp8_cast.amax_blocks`'s)."""
        x = np.ascontiguousarray(x)
        kind = 0 if aux is None else (1 if aux_wide == wide else 2)
        aux = None if aux is None else np.ascontiguousarray(aux)
        gx = C.amax_blocks(x.size, x.itemsize) if blocks is None else blocks
        amax = np.zeros(1, np.uint32)
        rc = self.lib.host_amax(
            _VARIANT[wide], kind, ctypes.c_void_p(x.ctypes.data),
            ctypes.c_void_p(None if aux is None else aux.ctypes.data), ctypes.c_void_p(amax.ctypes.data),
            ctypes.c_longlong(x.size), ctypes.c_uint(gx),
        )  # fmt: skip
        assert rc == 0
        return float(amax.view(np.float32)[0])

    def current_scale(self, amax: float, scale: float, hist: float, found_inf: int, fp8_max: float,
                      margin: int) -> tuple[np.ndarray, ...]:  # fmt: skip
        """Run the current-scaling update on one role's values: ``(scale, hist, found_inf, used)`` after."""
        a = np.array([amax], np.float32)
        sc, hi = np.array([scale], np.float32), np.array([hist], np.float32)
        fl, used = np.array([found_inf], np.int32), np.zeros(1, np.float32)
        self.lib.host_current_scale(
            *(ctypes.c_void_p(t.ctypes.data) for t in (a, sc, hi, fl, used)), ctypes.c_float(fp8_max),
            ctypes.c_float(2.0**margin),
        )  # fmt: skip
        return sc, hi, fl, used

    def transpose(self, q: np.ndarray, gy: int | None = None) -> np.ndarray:
        rows, cols = q.shape
        gx, gy0 = C.grid(rows, cols)
        out = np.zeros((cols, rows), np.uint8)
        q = np.ascontiguousarray(q)
        self.lib.host_transpose(
            ctypes.c_void_p(q.ctypes.data), ctypes.c_void_p(out.ctypes.data), ctypes.c_longlong(rows),
            ctypes.c_longlong(cols), ctypes.c_uint(gx), ctypes.c_uint(gy0 if gy is None else gy),
        )  # fmt: skip
        return out
