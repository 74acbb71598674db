"""Cast-transpose kernels of the FP8 layers: one pass writes a tensor's FP8 copy in both orders.

cuBLASLt runs FP8 GEMMs on Hopper only with both operands contiguous along K ("TN"), so every tensor
that is a GEMM operand along its feature axis in one GEMM and along its token axis in another (the
input ``x``, the hidden ``h``, the gradients ``g`` and ``dz1``, the weights) is needed as ``q`` (R, C)
and ``q.T`` (C, R), both row-major. torch's strided copy of a 1-byte tensor (``q.T.contiguous()``)
runs far below the memory bandwidth; these kernels write both orders in the pass that quantizes:

* :func:`cast_transpose` -- a wide (bfloat16 / float16 / float32) row-major (R, C) tensor ``x``:
  ``q = fp8(x * s)`` in both orders, ``amax = max |x|`` and, when asked, the column sums of ``x`` in
  float32 (a bias gradient). With ``aux`` (the saved GELU pre-activation ``z``, same shape and dtype)
  the value quantized is ``v = round(x * gelu'(z))`` (tanh GELU, computed in float32 and rounded to
  ``x``'s dtype, as ``torch.ops.aten.gelu_backward`` returns it; ``aux`` may also be float16 for a
  bfloat16 ``x``, cuBLASLt's aux type over an FP8 D): the FP8 MLP block's
  dgelu-cast-transpose-dbias, reading fc2's dgrad output once. ``scale=None`` is an amax-only pass
  (current scaling needs the amax before the scale): nothing is written but the amax (and the sums).
* :func:`transpose` -- an FP8 (R, C) tensor to (C, R) (fc1's GEMM writes ``h`` in FP8 directly).

The kernels (NVRTC, :mod:`nvmath._internal.nvrtc`, compiled on first use per device) work on 64 x 64
tiles through shared memory, so that both the reads and the writes of either order coalesce: a block
of 32 x 8 threads reads a tile two columns per thread (one 4- or 8-byte load), writes ``q`` from
registers and ``q.T`` from the shared tile, two bytes per thread. A block walks ``tile_rows /
gridDim.y`` tiles of one column strip (:func:`grid`), so the amax is one ``atomicMax`` per block (on the
float bits of ``|v|``: they order as the values; a NaN wins) and the column sums are one float32 row
per block row (``partial``, (gridDim.y, C)), summed by torch afterwards: deterministic for a shape.
The conversion is ``cvt.rn.satfinite`` (round to nearest even, finite values saturated, NaN kept) of
the float32 product ``v * s``, as :mod:`nvmath.linalg.advanced._aux_quantize`.

Everything else -- CPU tensors, odd sizes, misaligned or non-contiguous tensors, kernels that failed
to build (then :func:`available` is false for the process, logged once), or the kernels switched off
(:data:`ENABLED`, the environment variable ``NVMATH_FP8_FUSED_CAST=0``) -- runs the layers' former
ops: :func:`quantize_pair` quantizes with the scaling state's own ``quantize`` and transposes with
torch, and the FP8 MLP block runs fc2's dgrad with cuBLASLt's ``DGELU`` (:func:`in_use` is false).
:func:`torch_cast_transpose` is the kernels' arithmetic in torch ops.
:func:`emulate_partials` is the kernel's column-sum order in numpy (what the GPU tests compare
bit-exactly).
"""

from __future__ import annotations

import dataclasses
import logging
import os
from typing import Any

import numpy as np
import torch

from nvmath.torch._fp8 import FP8_MAX, amax_of, quantize

__all__ = [
    "TILE",
    "CastResult",
    "available",
    "cast_transpose",
    "emulate_partials",
    "grid",
    "in_use",
    "quantize_pair",
    "torch_cast_transpose",
    "transpose",
    "wgrad_dtype",
]

logger = logging.getLogger(__name__)

TILE = 64
"""Rows and columns of a tile (one block of :data:`THREADS` threads)."""
THREADS = (32, 8)
"""Threads of a block: 32 along the columns (two columns each), 8 along the rows (eight rows each)."""
TARGET_BLOCKS = 2048
"""About how many blocks a launch runs (each loops over tiles of its column strip)."""

ENABLED = os.environ.get("NVMATH_FP8_FUSED_CAST", "1").strip().lower() not in ("0", "false", "off", "no")
"""Whether the FP8 layers use these kernels (default on; ``NVMATH_FP8_FUSED_CAST=0`` in the
environment at import switches them off: the layers' former ops run instead)."""

_WIDE = {torch.bfloat16: "nvmath_bf16", torch.float16: "nvmath_f16", torch.float32: "float"}
_E5M2 = {torch.float8_e4m3fn: 0, torch.float8_e5m2: 1}

_SOURCE = r"""
struct nvmath_f16 { unsigned short bits; };
struct nvmath_bf16 { unsigned short bits; };

__device__ __forceinline__ float nv_h2f(unsigned short h) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return f;
}
// two consecutive elements (a 4- or 8-byte aligned load) as float32
__device__ __forceinline__ void nv_load2(const nvmath_bf16* p, float& a, float& b) {
  const unsigned int u = *reinterpret_cast<const unsigned int*>(p);
  a = __uint_as_float(u << 16);
  b = __uint_as_float(u & 0xFFFF0000u);
}
__device__ __forceinline__ void nv_load2(const nvmath_f16* p, float& a, float& b) {
  const unsigned int u = *reinterpret_cast<const unsigned int*>(p);
  a = nv_h2f((unsigned short)(u & 0xFFFFu));
  b = nv_h2f((unsigned short)(u >> 16));
}
__device__ __forceinline__ void nv_load2(const float* p, float& a, float& b) {
  const float2 v = *reinterpret_cast<const float2*>(p);
  a = v.x;
  b = v.y;
}
// x rounded (nearest even) to the element type, as float32
__device__ __forceinline__ float nv_round(float x, const float*) { return x; }
__device__ __forceinline__ float nv_round(float x, const nvmath_f16*) {
  unsigned short h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(x));
  return nv_h2f(h);
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
template <int E5M2>
__device__ __forceinline__ unsigned char nv_fp8(float x) {
  unsigned short r;
  if (E5M2) {
    asm("{cvt.rn.satfinite.e5m2x2.f32 %0, %2, %1;}" : "=h"(r) : "f"(x), "f"(0.0f));
  } else {
    asm("{cvt.rn.satfinite.e4m3x2.f32 %0, %2, %1;}" : "=h"(r) : "f"(x), "f"(0.0f));
  }
  return (unsigned char)(r & 0xFFu);
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

// Tiles of 64 x 64 of a row-major (rows, cols) x (both even); block (32, 8); block (bx, by) runs the
// tiles (t, bx) for t = by, by + gridDim.y, ... Thread (tx, ty) holds columns c0 + 2 tx, c0 + 2 tx + 1
// of rows r0 + ty + 8 k (k < 8). v = x, or round(x * gelu'(aux)) with DGELU (aux of type A: T, or
// float16 for a bfloat16 x: cuBLASLt's aux over an FP8 D). q, qt: null for an
// amax-only pass; partial: null without column sums, else (gridDim.y, cols) float32.
template <typename T, typename A, int E5M2, int DGELU>
__global__ void __launch_bounds__(256) nvmath_cast_transpose(
    const T* __restrict__ x, const A* __restrict__ aux, unsigned char* __restrict__ q,
    unsigned char* __restrict__ qt, const float* __restrict__ scale, unsigned int* __restrict__ amax,
    float* __restrict__ partial, long long rows, long long cols) {
  __shared__ unsigned char tile[64][66];
  __shared__ float colsum[8][64];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const long long c0 = (long long)blockIdx.x * 64, c = c0 + 2 * tx;
  const long long tiles = (rows + 63) / 64;
  const bool write = q != nullptr;
  const float s = write ? *scale : 0.0f;
  unsigned int local = 0u;
  float sum0 = 0.0f, sum1 = 0.0f;
  for (long long t = blockIdx.y; t < tiles; t += gridDim.y) {
    const long long r0 = t * 64;
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      const int lr = ty + 8 * k;
      const long long r = r0 + lr;
      if (r < rows && c < cols) {
        float a, b;
        nv_load2(x + r * cols + c, a, b);
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
          const unsigned char qa = nv_fp8<E5M2>(a * s), qb = nv_fp8<E5M2>(b * s);
          *reinterpret_cast<unsigned short*>(q + r * cols + c) =
              (unsigned short)(qa | ((unsigned int)qb << 8));
          tile[lr][2 * tx] = qa;
          tile[lr][2 * tx + 1] = qb;
        }
      }
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
      partial[(long long)blockIdx.y * cols + c] = s0;
      partial[(long long)blockIdx.y * cols + c + 1] = s1;
    }
  }
  nv_block_amax(local, amax);
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

_AUX = {torch.bfloat16: (None, torch.bfloat16, torch.float16), torch.float16: (None, torch.float16),
        torch.float32: (None, torch.float32)}  # fmt: skip
"""The aux dtypes each wide dtype takes (``None``: no aux, the plain cast-transpose)."""

_NAMES: dict[Any, str] = {
    (wide, fp8, aux): f"nvmath_cast_transpose<{ctype}, {_WIDE[aux or wide]}, {e5m2}, {int(aux is not None)}>"
    for wide, ctype in _WIDE.items()
    for fp8, e5m2 in _E5M2.items()
    for aux in _AUX[wide]
}
_NAMES["transpose"] = "nvmath_fp8_transpose"
_broken: list[str] = []
MAX_GRID_Y = 65535


@dataclasses.dataclass
class CastResult:
    """What :func:`cast_transpose` returns: ``q`` (R, C) and ``qt`` (C, R) (``None`` after an amax-only
    pass), ``amax`` (float32, shape ()), ``colsum`` (float32 (C,) column sums of the values, or
    ``None``)."""

    q: torch.Tensor | None
    qt: torch.Tensor | None
    amax: torch.Tensor
    colsum: torch.Tensor | None


def grid(rows: int, cols: int) -> tuple[int, int]:
    """``(gridDim.x, gridDim.y)`` of a launch over a (rows, cols) tensor: one block column per 64-column
    strip; block rows so that the grid holds about :data:`TARGET_BLOCKS` blocks (each at least one
    tile, at most :data:`MAX_GRID_Y`)."""
    gx = -(-cols // TILE)
    tiles = -(-rows // TILE)
    gy = max(1, min(tiles, -(-TARGET_BLOCKS // max(gx, 1)), MAX_GRID_Y))
    return gx, gy


def tiles_of_block_row(rows: int, gy: int, by: int) -> list[int]:
    """The tile indices (along the rows) block row ``by`` of a ``gy``-row grid walks, in order."""
    return list(range(by, -(-rows // TILE), gy))


def _kernel_shape_ok(x: torch.Tensor) -> bool:
    if x.dim() != 2 or not x.is_contiguous() or x.numel() == 0:
        return False
    rows, cols = x.shape
    align = 2 * x.element_size()
    return rows % 2 == 0 and cols % 2 == 0 and x.data_ptr() % align == 0


def available(x: torch.Tensor, aux: torch.Tensor | None = None) -> bool:
    """Whether :func:`cast_transpose` runs ``x`` (and ``aux``) on the kernel: a contiguous, 2-D CUDA
    tensor of a wide dtype with even sizes, ``aux`` alike, and kernels that did not fail to build."""
    if not in_use() or not x.is_cuda or x.dtype not in _WIDE or not _kernel_shape_ok(x):
        return False
    if aux is None:
        return True
    alike = aux.dtype in _AUX[x.dtype] and aux.shape == x.shape and aux.device == x.device
    return alike and _kernel_shape_ok(aux)


def _kernels(device_id: int) -> dict[Any, Any] | None:
    from nvmath._internal import nvrtc

    try:
        what = "FP8 cast-transpose kernels"
        return nvrtc.compiled_kernels(_SOURCE, _NAMES, device_id, what=what, logger=logger)
    except Exception as exc:  # noqa: BLE001 (NVRTC or the driver refused: the layers use torch's ops)
        _broken.append(repr(exc))
        logger.warning("FP8 cast-transpose kernels unavailable (%s); using torch operations instead", exc)
        return None


def _launch(x: torch.Tensor, kernel_key: Any, *args: Any) -> bool:
    """Launch the kernel ``kernel_key`` over ``x``'s grid on torch's current stream; False when the
    kernels cannot be built or the launch is refused (then nothing ran, and the kernels are not used
    again in this process)."""
    from cuda.core import LaunchConfig, launch

    from nvmath._internal import devices, streams

    device_id = x.device.index if x.device.index is not None else torch.cuda.current_device()
    kernels = _kernels(device_id)
    if kernels is None:
        return False
    rows, cols = x.shape
    gx, gy = grid(rows, cols)
    stream = streams.current_stream(device_id, "torch")
    config = LaunchConfig(grid=(gx, gy, 1), block=(*THREADS, 1))
    try:
        # the launch needs the device's context current: torch's autograd thread need not have one
        with devices.device_ctx(device_id):
            launch(stream.core, config, kernels[kernel_key], *args)
    except Exception as exc:  # noqa: BLE001 (a refused launch: the layers' former ops from now on)
        _broken.append(repr(exc))
        logger.warning("FP8 cast-transpose launch failed (%s); using torch operations instead", exc)
        return False
    return True


def _ptr(t: torch.Tensor | None) -> Any:
    return np.uintp(0 if t is None else t.data_ptr())


def cast_transpose(
    x: torch.Tensor, scale: torch.Tensor | None, dtype: torch.dtype, *, aux: torch.Tensor | None = None,
    colsum: bool = False,
) -> CastResult:  # fmt: skip
    """Quantize the (R, C) tensor ``x`` (or ``round(x * gelu'(aux))``) to ``dtype`` with ``scale`` in
    both orders, with its amax and, with ``colsum``, its column sums (see the module docstring).
    ``scale=None``: the amax (and the sums) only."""
    if not available(x, aux):
        return torch_cast_transpose(x, scale, dtype, aux=aux, colsum=colsum)
    rows, cols = x.shape
    amax = torch.zeros(1, dtype=torch.float32, device=x.device)
    q = qt = partial = None
    if scale is not None:
        q = torch.empty((rows, cols), dtype=dtype, device=x.device)
        qt = torch.empty((cols, rows), dtype=dtype, device=x.device)
        scale = scale.reshape(1).to(torch.float32).contiguous()
    if colsum:
        partial = torch.empty((grid(rows, cols)[1], cols), dtype=torch.float32, device=x.device)
    key = (x.dtype, dtype, None if aux is None else aux.dtype)
    args = (_ptr(x), _ptr(aux), _ptr(q), _ptr(qt), _ptr(scale), _ptr(amax), _ptr(partial),
            np.int64(rows), np.int64(cols))  # fmt: skip
    if not _launch(x, key, *args):
        return torch_cast_transpose(x, scale, dtype, aux=aux, colsum=colsum)
    sums = partial.sum(0) if partial is not None else None
    return CastResult(q, qt, amax[0], sums)


def torch_cast_transpose(
    x: torch.Tensor, scale: torch.Tensor | None, dtype: torch.dtype, *, aux: torch.Tensor | None = None,
    colsum: bool = False,
) -> CastResult:  # fmt: skip
    """:func:`cast_transpose` through torch's ops (the kernels' semantics; a non-finite amax makes the
    whole ``q`` NaN here, as :func:`._fp8.quantize` does, where the kernel saturates)."""
    v = _torch_values(x, aux)
    amax = amax_of(v)
    sums = v.float().sum(0) if colsum else None
    if scale is None:
        return CastResult(None, None, amax, sums)
    q = quantize(v, scale, dtype, amax)
    return CastResult(q, q.T.contiguous(), amax, sums)


def _torch_values(x: torch.Tensor, aux: torch.Tensor | None) -> torch.Tensor:
    """The values the kernel quantizes, by torch: ``x``, or ``gelu_backward(x, aux)`` in ``x``'s dtype."""
    if aux is None:
        return x
    if aux.dtype == x.dtype:
        return torch.ops.aten.gelu_backward(x, aux, approximate="tanh")
    # (the kernel reads each in its own dtype and rounds the float32 result once)
    return torch.ops.aten.gelu_backward(x.float(), aux.float(), approximate="tanh").to(x.dtype)


def transpose(q: torch.Tensor) -> torch.Tensor:
    """``q.T.contiguous()`` of an FP8 (R, C) tensor (the transpose kernel on CUDA where it applies)."""
    if not (q.is_cuda and q.dtype in FP8_MAX and in_use() and _kernel_shape_ok(q)):
        return q.T.contiguous()
    rows, cols = q.shape
    out = torch.empty((cols, rows), dtype=q.dtype, device=q.device)
    if not _launch(q, "transpose", _ptr(q), _ptr(out), np.int64(rows), np.int64(cols)):
        return q.T.contiguous()
    return out


def emulate_partials(v: np.ndarray, gy: int | None = None) -> np.ndarray:
    """The kernel's ``partial`` (gridDim.y, C) for the float32 values ``v`` (R, C): thread (tx, ty) of
    block row ``by`` adds its rows in order (tiles of :func:`tiles_of_block_row`, rows ``ty + 8 k``
    of each), then the block adds the eight threads' sums of a column in ``ty`` order. ``gy``: the
    grid's block rows (default: :func:`grid`'s)."""
    v = np.asarray(v, dtype=np.float32)
    rows, cols = v.shape
    gy = grid(rows, cols)[1] if gy is None else gy
    partial = np.zeros((gy, cols), dtype=np.float32)
    for by in range(gy):
        sums = np.zeros((8, cols), dtype=np.float32)
        for t in tiles_of_block_row(rows, gy, by):
            for k in range(8):
                for ty in range(8):
                    r = t * TILE + ty + 8 * k
                    if r < rows:
                        sums[ty] += v[r]
        acc = sums[0].copy()
        for j in range(1, 8):
            acc += sums[j]
        partial[by] = acc
    return partial


def quantize_pair(
    state: Any, x: torch.Tensor, role: str, *, aux: torch.Tensor | None = None, colsum: bool = False
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None]:  # fmt: skip
    """``(q, q.T contiguous, scale, column sums or None)`` of ``x`` (or of ``round(x * gelu'(aux))``)
    quantized as ``role`` under ``state`` (a :class:`._fp8.ScalingState`, updated as by its
    ``quantize``): one :func:`cast_transpose` pass (two under current scaling, the first amax-only);
    where the kernel does not apply (:func:`available`), the state's ``quantize`` of the values and
    torch's transpose and sum (the layers' former ops)."""
    dtype = state.dtype(role)
    if not available(x, aux):
        v = _torch_values(x, aux)
        q, scale = state.quantize(v.contiguous(), role)
        return q, q.T.contiguous(), scale, (v.float().sum(0) if colsum else None)

    def run(scale: torch.Tensor | None) -> tuple[CastResult, torch.Tensor]:
        r = cast_transpose(x.detach(), scale, dtype, aux=aux, colsum=colsum and scale is not None)
        return r, r.amax

    r, scale = state.quantize_by(role, run)
    return r.q, r.qt, scale, r.colsum


def in_use() -> bool:
    """Whether the layers use the kernels: :data:`ENABLED` and the kernels did not fail to build in
    this process (otherwise the layers' former ops run)."""
    return ENABLED and not _broken


def broken() -> bool:
    """Whether the kernels failed to build in this process."""
    return bool(_broken)


def wgrad_dtype(weight_dtype: torch.dtype) -> torch.dtype:
    """The result dtype of a weight-gradient GEMM: the weight's (the accumulator rounded once) with
    the kernels in use, else float32 (then cast to the weight's dtype: the layers' former path)."""
    return weight_dtype if ENABLED else torch.float32


def launch_tiles(device: torch.device, kernel_key: Any, launches: list[tuple[int, int, tuple]]) -> bool:
    """Launch the kernel ``kernel_key`` (a :func:`cast_transpose` key ``(wide, fp8, aux dtype or
    None)``, or ``"transpose"``) once per ``(rows, cols, args)`` of ``launches`` on torch's current
    stream, under one device context: the kernel's arguments as :func:`cast_transpose` passes them
    (addresses as ``np.uintp``, sizes as ``np.int64``), each launch over its (rows, cols) grid
    (:func:`grid`). For callers that run many slices of preallocated tensors (the FP8 grouped layer:
    one launch per group, each with its own scale, amax and partial-sum addresses). False when the
    kernels are not in use or cannot be built, or a launch is refused (the launches before it ran;
    the kernels are not used again in this process)."""
    if not in_use():
        return False
    from cuda.core import LaunchConfig, launch

    from nvmath._internal import devices, streams

    device_id = device.index if device.index is not None else torch.cuda.current_device()
    kernels = _kernels(device_id)
    if kernels is None:
        return False
    kernel = kernels[kernel_key]
    stream = streams.current_stream(device_id, "torch").core
    configs: dict[tuple[int, int], Any] = {}
    try:
        with devices.device_ctx(device_id):
            for rows, cols, args in launches:
                shape = grid(rows, cols)
                config = configs.get(shape)
                if config is None:
                    config = configs[shape] = LaunchConfig(grid=(*shape, 1), block=(*THREADS, 1))
                launch(stream, config, kernel, *args)
    except Exception as exc:  # noqa: BLE001 (a refused launch: the layers' former ops from now on)
        _broken.append(repr(exc))
        logger.warning("FP8 cast-transpose launch failed (%s); using torch operations instead", exc)
        return False
    return True
