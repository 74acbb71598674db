"""The library's FP8 GELU aux: quantize cuBLASLt's wide pre-activation on the execution stream.

nvmath-python 1.0 documents an FP8 GELU aux output (``preferences={"epilog": {"aux_type":
CUDA_R_8F_E4M3 or CUDA_R_8F_E5M2, "aux_amax": ...}}`` with ``epilog_inputs={"aux_quantization_scale":
s}``): ``"gelu_aux"`` is the pre-activation times ``s`` in FP8 and ``"gelu_aux_amax"`` (float32,
shape ``(1,)``) the absolute maximum of the pre-activation before scaling (cuBLASLt's AMAX semantics,
as for ``AMAX_D_POINTER``). cuBLASLt 13.1 on H200 refuses every FP8 aux with an AUX scale pointer at
planning ("A custom pointer for epilogue AUX scale is not supported for the given types combination
with scale mode SCALAR_32F", INVALID_VALUE), whatever the C / D types; it runs the aux in its default
wide type (C's dtype over an FP8 D, else D's: float16, bfloat16 or float32).

So the library does it, always: the plan asks cuBLASLt for the aux in that default wide type (no
``EPILOGUE_AUX_DATA_TYPE`` / ``AUX_SCALE_POINTER`` / ``AUX_AMAX_POINTER``) into an internal buffer
allocated, stream-ordered, with the other aux outputs on each execute; right after
``cublasLtMatmul``, on the same stream, :func:`quantize` writes ``fp8(s * wide)`` into the caller's
``gelu_aux`` and, when asked, ``max |wide|`` into ``gelu_aux_amax`` (zeroed first, by a one-thread
kernel, then ``atomicMax`` on the float bits of ``|x|``, which order as the values do for x >= 0; a
NaN wins, as its bits exceed infinity's). The scale is read from the device on each launch, so
``reset_operands(epilog_inputs={"aux_quantization_scale": ...})`` takes effect; nothing is allocated
or synchronised here, so the launch is CUDA-graph capture safe (the kernels are compiled and loaded
at plan time).

One route, not two: a future cuBLASLt that accepted the AUX scale pointer would save one small
elementwise pass, but trying it first would cost a heuristic query and an error path at every plan,
give results that depend on the cuBLASLt version (its amax is taken from the unrounded accumulator,
ours from the wide aux) and leave a route the GPU machine cannot test today. The library route runs
on every cuBLASLt that runs the wide aux, and is the same code on all of them.

Numerics: the conversion is the PTX instruction ``cvt.rn.satfinite.{e4m3x2,e5m2x2}.f32`` (sm_89+),
which is what ``cuda_fp8.h``'s ``__nv_cvt_float_to_fp8(x, __NV_SATFINITE, ...)`` compiles to on those
GPUs: round to nearest even, finite values beyond the format's largest saturate to it (+-448 for
e4m3, +-57344 for e5m2), NaN stays NaN. The source uses the instruction directly because NVRTC has no
``cuda_fp8.h`` without the CUDA toolkit's headers; FP8 matmuls need sm_89+ anyway. The product
``s * wide`` is one float32 multiplication of the wide value (exactly converted to float32; float64
values are rounded to float32 first). The amax is that of the wide values, i.e. of the pre-activation
as rounded to the wide type.

Padding: the aux has ``round_up(M, 8)`` rows per column (nvmath-python's layout); cuBLASLt leaves
rows ``M..`` unwritten in its wide aux, so they are not data: the kernel writes 0 there and leaves
them out of the amax.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from nvmath._internal import nvrtc
from nvmath._internal.streams import StreamHandle

__all__ = ["FP8_DTYPES", "FP8_PRELUDE", "WIDE_DTYPES", "QUANTIZE_BLOCKS", "kernels", "quantize"]

logger = logging.getLogger(__name__)

FP8_PRELUDE = r"""
struct nvmath_f16 { unsigned short bits; };
struct nvmath_bf16 { unsigned short bits; };

// float16 bits -> float32 (exact)
__device__ __forceinline__ float nvmath_h2f(unsigned short h) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return f;
}
__device__ __forceinline__ float nvmath_to_float(float x) { return x; }
__device__ __forceinline__ float nvmath_to_float(double x) { return (float)x; }
__device__ __forceinline__ float nvmath_to_float(nvmath_f16 x) { return nvmath_h2f(x.bits); }
__device__ __forceinline__ float nvmath_to_float(nvmath_bf16 x) {
  return __uint_as_float(((unsigned int)x.bits) << 16);
}

// x -> FP8 (low byte of the pair): round to nearest even, saturate finite values, NaN stays NaN.
template <int E5M2>
__device__ __forceinline__ unsigned char nvmath_to_fp8(float x) {
  unsigned short r;
  if (E5M2) {
    asm("{cvt.rn.satfinite.e5m2x2.f32 %0, %2, %1;}" : "=h"(r) : "f"(x), "f"(0.0f));
  } else {
    asm("{cvt.rn.satfinite.e4m3x2.f32 %0, %2, %1;}" : "=h"(r) : "f"(x), "f"(0.0f));
  }
  return (unsigned char)(r & 0xFFu);
}
"""
"""The device helpers every FP8 kernel of the library shares (this module's aux quantization and the
FP8 layers' cast-transpose kernels, :mod:`nvmath.torch._fp8_cast`): the wide element types as 16-bit
structs (NVRTC has no ``cuda_fp16.h`` / ``cuda_bf16.h`` without the toolkit's headers), their exact
conversion to float32 (``nvmath_h2f``, ``nvmath_to_float``) and the saturating FP8 conversion
``nvmath_to_fp8<E5M2>`` (``cvt.rn.satfinite``, see the module docstring)."""

_SOURCE = FP8_PRELUDE + r"""
extern "C" __global__ void nvmath_aux_zero_amax(unsigned int* amax) { *amax = 0u; }

// out[t] = fp8(scale * wide[t]) for the `rows` real rows of each column of `ld` rows (0 in the
// padding); amax (if not null) = max |wide[t]| over the real rows, as float bits. Grid-stride.
template <typename T, int E5M2>
__global__ void nvmath_aux_quantize(const T* __restrict__ wide, unsigned char* __restrict__ out,
                                    const float* __restrict__ scale, unsigned int* __restrict__ amax,
                                    long long rows, long long ld, long long total) {
  __shared__ unsigned int warp_max[32];
  const float s = *scale;
  unsigned int local = 0u;
  for (long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x; t < total;
       t += (long long)gridDim.x * blockDim.x) {
    if (t % ld < rows) {
      const float v = nvmath_to_float(wide[t]);
      out[t] = nvmath_to_fp8<E5M2>(v * s);
      local = max(local, __float_as_uint(fabsf(v)));
    } else {
      out[t] = 0;
    }
  }
  if (amax == nullptr) return;
  for (int offset = 16; offset > 0; offset >>= 1) {
    local = max(local, __shfl_xor_sync(0xffffffffu, local, offset));
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
  if (lane == 0) warp_max[warp] = local;
  __syncthreads();
  if (warp == 0) {
    local = lane < warps ? warp_max[lane] : 0u;
    for (int offset = 16; offset > 0; offset >>= 1) {
      local = max(local, __shfl_xor_sync(0xffffffffu, local, offset));
    }
    if (lane == 0) atomicMax(amax, local);
  }
}
"""

#: The wide aux dtypes cuBLASLt writes, and their element type in the kernel source.
WIDE_DTYPES = {"float16": "nvmath_f16", "bfloat16": "nvmath_bf16", "float32": "float", "float64": "double"}
#: The FP8 aux dtypes, and the kernel's ``E5M2`` template argument.
FP8_DTYPES = {"float8_e4m3fn": 0, "float8_e5m2": 1}
#: Most blocks (of :data:`~nvmath._internal.nvrtc.BLOCK` threads) one quantization launches; the
#: kernel loops over the rest (fewer blocks: fewer amax atomics on one address).
QUANTIZE_BLOCKS = 1024

_NAMES: dict[Any, str] = {
    (wide, fp8): f"nvmath_aux_quantize<{ctype}, {e5m2}>"
    for wide, ctype in WIDE_DTYPES.items()
    for fp8, e5m2 in FP8_DTYPES.items()
}
_NAMES["zero"] = "nvmath_aux_zero_amax"


def kernels(wide_dtype: str, fp8_dtype: str, device_id: int) -> tuple[Any, Any]:
    """``(quantize kernel, amax-zeroing kernel)`` for these dtypes on ``device_id``, compiled (NVRTC,
    once per device) and loaded: call it at plan time, never while a stream captures.

    Raises:
        ValueError: a wide dtype other than float16/bfloat16/float32/float64 or a non-FP8 aux dtype.
    """
    if wide_dtype not in WIDE_DTYPES or fp8_dtype not in FP8_DTYPES:
        raise ValueError(
            f"the library quantizes a {sorted(WIDE_DTYPES)} aux to {sorted(FP8_DTYPES)}; "
            f"got {wide_dtype} -> {fp8_dtype}"
        )
    found = nvrtc.compiled_kernels(_SOURCE, _NAMES, device_id, what="FP8 aux kernels", logger=logger)
    return found[(wide_dtype, fp8_dtype)], found["zero"]


def quantize(
    kernel: Any, zero: Any, wide: int, out: int, scale: int, amax: int, *, rows: int, ld: int, total: int,
    stream: StreamHandle,
) -> None:  # fmt: skip
    """Launch the quantization of ``total`` aux elements (columns of ``ld`` rows, ``rows`` of them real).

    Args:
        kernel, zero: from :func:`kernels`.
        wide, out, scale, amax: device addresses of cuBLASLt's wide aux, the FP8 aux, the float32
            scale and the float32 amax (``0``: no amax).
        rows, ld, total: real rows per column, rows per column, elements in all (batch included).
        stream: the execution stream (the one ``cublasLtMatmul`` ran on); the caller holds its
            context (the launch's, see :class:`~._launch.MatmulLaunch`).
    """
    from cuda.core import LaunchConfig, launch

    core = stream.core
    blocks = max(1, min(-(-total // nvrtc.BLOCK), QUANTIZE_BLOCKS))
    if amax:
        launch(core, LaunchConfig(grid=1, block=1), zero, np.uintp(amax))
    launch(
        core, LaunchConfig(grid=blocks, block=nvrtc.BLOCK), kernel, np.uintp(wide), np.uintp(out),
        np.uintp(scale), np.uintp(amax), np.int64(rows), np.int64(ld), np.int64(total),
    )  # fmt: skip
