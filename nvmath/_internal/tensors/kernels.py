"""A device-side strided copy kernel (NVRTC through cuda.core), compiled once per device on first use.

Used only when both ends of a device-to-device copy are outside torch / cupy and their layouts
differ (DeviceArray and DLPack producers such as jax). Axes are first coalesced (size-1 axes
dropped, axes contiguous in both layouts merged), so most copies need one to three dimensions.
"""

from __future__ import annotations

import functools
import logging
from typing import Any

import numpy as np

from nvmath._internal import nvrtc
from nvmath._internal.streams import StreamHandle

__all__ = ["MAX_DIMS", "coalesce", "strided_copy"]

logger = logging.getLogger(__name__)

MAX_DIMS = 8
_TYPES = {
    1: "unsigned char",
    2: "unsigned short",
    4: "unsigned int",
    8: "unsigned long long",
    16: "nvmath_b16",
}


@functools.cache
def _source() -> str:
    params = ", ".join(f"long long {p}{i}" for p in ("n", "d", "s") for i in range(MAX_DIMS))

    def arr(p: str) -> str:
        return ", ".join(f"{p}{i}" for i in range(MAX_DIMS))

    return f"""
struct __align__(16) nvmath_b16 {{ unsigned long long x, y; }};
template <typename T>
__global__ void nvmath_strided_copy(T* __restrict__ dst, const T* __restrict__ src, long long count, int ndim,
                                    {params}) {{
  const long long shape[{MAX_DIMS}] = {{{arr("n")}}};
  const long long dstr[{MAX_DIMS}] = {{{arr("d")}}};
  const long long sstr[{MAX_DIMS}] = {{{arr("s")}}};
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < count;
       i += (long long)gridDim.x * blockDim.x) {{
    long long rem = i, doff = 0, soff = 0;
    for (int d = ndim - 1; d >= 0; --d) {{
      long long idx = rem % shape[d];
      rem /= shape[d];
      doff += idx * dstr[d];
      soff += idx * sstr[d];
    }}
    dst[doff] = src[soff];
  }}
}}
"""


_NAMES = {size: f"nvmath_strided_copy<{t}>" for size, t in _TYPES.items()}


def _kernels(device_id: int) -> dict[int, Any]:
    """Compile (once per device) and return itemsize -> kernel."""
    return nvrtc.compiled_kernels(_source(), _NAMES, device_id, what="strided-copy kernels", logger=logger)


def coalesce(
    shape: tuple[int, ...], dst_strides: tuple[int, ...], src_strides: tuple[int, ...]
) -> tuple[list[int], list[int], list[int]]:
    """Drop size-1 axes and merge neighbours that are contiguous in both layouts (outer to inner)."""
    dims = [(n, d, s) for n, d, s in zip(shape, dst_strides, src_strides) if n != 1]
    merged: list[list[int]] = []
    for n, d, s in dims:
        if merged:
            pn, pd, ps = merged[-1]
            if pd == d * n and ps == s * n:
                merged[-1] = [pn * n, d, s]
                continue
        merged.append([n, d, s])
    return [m[0] for m in merged], [m[1] for m in merged], [m[2] for m in merged]


def strided_copy(
    dst_ptr: int,
    dst_strides: tuple[int, ...],
    src_ptr: int,
    src_strides: tuple[int, ...],
    shape: tuple[int, ...],
    itemsize: int,
    device_id: int,
    stream: StreamHandle,
) -> None:
    """Queue ``dst[i] = src[i]`` for every index of ``shape`` on ``stream`` (pointers to element 0)."""
    count = 1
    for n in shape:
        count *= n
    if count == 0:
        return
    if itemsize not in _TYPES:
        raise NotImplementedError(f"no strided-copy kernel for {itemsize}-byte elements")
    dims, dst_s, src_s = coalesce(tuple(shape), tuple(dst_strides), tuple(src_strides))
    if len(dims) > MAX_DIMS:
        raise NotImplementedError(
            f"strided device copies support up to {MAX_DIMS} non-mergeable axes; got {len(dims)}"
        )
    pad = MAX_DIMS - len(dims)
    args = [np.uintp(dst_ptr), np.uintp(src_ptr), np.int64(count), np.int32(len(dims))]
    for values, fill in ((dims, 1), (dst_s, 0), (src_s, 0)):
        args.extend(np.int64(v) for v in list(values) + [fill] * pad)
    nvrtc.launch_1d(_kernels(device_id)[itemsize], count, stream, *args)
