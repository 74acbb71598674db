"""FP4 (e2m1) packing for NVFP4 operands: round to FP4 and pack two values per byte, and back.

torch only (torch >= 2.9 has the packed dtype ``float4_e2m1fn_x2``). An e2m1 code is 4 bits: sign
(bit 3), a 2-bit exponent and a 1-bit mantissa; codes 0-7 are ``0, 0.5, 1, 1.5, 2, 3, 4, 6`` and
codes 8-15 their negatives. Two consecutive values along the packed axis share a byte, the first
in the low nibble. Exported by :mod:`nvmath.linalg.advanced.helpers.matmul`.
"""

from __future__ import annotations

import sys
from typing import Any

from nvmath.linalg.advanced.helpers import _arrays
from nvmath.linalg.advanced.helpers._geometry import FP4_DTYPE, normalize_axis

__all__ = ["FP4_VALUES", "quantize_to_fp4", "unpack_fp4"]

FP4_VALUES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)
"""The magnitudes of e2m1 codes 0 to 7."""

# Midpoints between neighbouring magnitudes, and whether a tie rounds up (to the even code above).
_MIDPOINTS = (
    (0.25, False),
    (0.75, True),
    (1.25, False),
    (1.75, True),
    (2.5, False),
    (3.5, True),
    (5.0, False),
)
_INPUT_DTYPES = ("float16", "bfloat16", "float32", "float64", "float8_e4m3fn", "float8_e5m2")


def _torch(x: Any, name: str) -> Any:
    if _arrays.is_tensor(x) and type(x).__module__.startswith("torch"):
        return sys.modules["torch"]
    raise TypeError(f"{name} must be a torch tensor (the FP4 helpers are torch-only); got {type(x).__name__}")


def _fp4_dtype(torch: Any) -> Any:
    dt = getattr(torch, FP4_DTYPE, None)
    if dt is None:
        raise RuntimeError(f"torch {torch.__version__} has no {FP4_DTYPE} dtype; FP4 needs torch >= 2.9")
    return dt


def quantize_to_fp4(x: Any, axis: int) -> Any:
    """Round ``x`` to FP4 (e2m1) and pack pairs of values along ``axis`` into bytes.

    This helper is experimental. Values round to the nearest FP4 value, ties to the even code;
    magnitudes beyond 6 (infinities included) saturate to 6; the sign is kept (a small negative
    value becomes -0). NaN has no FP4 code and becomes 0. No scaling is applied: divide by the
    NVFP4 block scales first.

    Args:
        x: a torch tensor of float16, bfloat16, float32, float64 or FP8 values (CPU or CUDA).
        axis: the axis to pack (K for a matmul operand: ``-1`` for ``a``, ``-2`` for ``b``); its
            extent must be even.

    Returns:
        A ``torch.float4_e2m1fn_x2`` tensor on ``x``'s device, of ``x``'s shape with ``axis``
        halved, laid out with ``axis`` contiguous (so a ``b`` packed along ``-2`` is column-major,
        as cuBLASLt wants it).

    Raises:
        TypeError: ``x`` is not a torch tensor, or ``axis`` is not an int.
        ValueError: another dtype, an axis out of range, or an odd extent along ``axis``.
    """
    torch = _torch(x, "x")
    dtype = _arrays.dtype_name(x)
    if dtype not in _INPUT_DTYPES:
        raise ValueError(f"x must have a real floating dtype ({', '.join(_INPUT_DTYPES)}); got {dtype}")
    axis = normalize_axis(axis, x.ndim, matrix_only=False)
    if x.shape[axis] % 2:
        raise ValueError(
            f"x's extent along axis {axis} must be even to pack FP4 pairs; got shape {tuple(x.shape)}"
        )
    wide = x.to(torch.float64 if x.dtype == torch.float64 else torch.float32)
    magnitude = wide.abs()
    codes = torch.zeros(x.shape, dtype=torch.uint8, device=x.device)
    for midpoint, tie_up in _MIDPOINTS:
        codes += (magnitude >= midpoint) if tie_up else (magnitude > midpoint)
    codes |= torch.signbit(wide).to(torch.uint8) << 3
    pairs = codes.movedim(axis, -1)
    packed = (pairs[..., 0::2] | (pairs[..., 1::2] << 4)).contiguous()
    return packed.view(_fp4_dtype(torch)).movedim(-1, axis)


def unpack_fp4(fp4_tensor: Any, axis: int) -> Any:
    """Unpack a ``float4_e2m1fn_x2`` tensor along ``axis`` into float32 values.

    This helper is experimental; it inverts :func:`quantize_to_fp4` (every FP4 value is exact in
    float32).

    Args:
        fp4_tensor: a torch ``float4_e2m1fn_x2`` tensor (CPU or CUDA).
        axis: the packed axis.

    Returns:
        A float32 tensor on the same device, of ``fp4_tensor``'s shape with ``axis`` doubled, laid
        out with ``axis`` contiguous.

    Raises:
        TypeError: not a torch tensor, or ``axis`` is not an int.
        ValueError: another dtype, or an axis out of range.
    """
    torch = _torch(fp4_tensor, "fp4_tensor")
    dtype = _arrays.dtype_name(fp4_tensor)
    if dtype != FP4_DTYPE:
        raise ValueError(f"fp4_tensor must have dtype {FP4_DTYPE}; got {dtype}")
    axis = normalize_axis(axis, fp4_tensor.ndim, matrix_only=False)
    packed = fp4_tensor.view(torch.uint8).movedim(axis, -1)
    codes = torch.stack((packed & 0xF, packed >> 4), dim=-1).reshape(*packed.shape[:-1], 2 * packed.shape[-1])
    magnitudes = torch.tensor(FP4_VALUES, dtype=torch.float32, device=fp4_tensor.device)
    table = torch.cat((magnitudes, -magnitudes))
    return table[codes.long()].movedim(-1, axis)
