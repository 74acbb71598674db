"""Helpers for block-scaled (MXFP8, NVFP4) and FP4 matmul operands (experimental).

Call-compatible with ``nvmath.linalg.advanced.helpers.matmul`` of nvmath-python 1.0:

* :class:`BlockScalingFormat` names the two block-scaled formats.
* :func:`get_block_scale_offset`, :func:`to_block_scale` and :func:`expand_block_scale` move
  block scales between three views: the 1-D tensor in cuBLASLt's tiled layout that
  :func:`~nvmath.linalg.advanced.matmul` takes, the dense per-block grid (the operand's shape with
  the block axis divided by the block size), and one scale per operand element.
* :func:`create_mxfp8_scale`, :func:`invert_mxfp8_scale` and :func:`apply_mxfp8_scale` make, invert
  and apply MXFP8 scales.
* :func:`quantize_to_fp4` and :func:`unpack_fp4` pack and unpack FP4 data (torch only).

Tensors may be torch (CPU or CUDA), numpy or cupy, except where torch is required; results are
tensors of the input's package on its device. The **block axis** of a matmul operand is K, the
contracted extent: the last axis of ``a`` ``(..., M, K)`` and the next-to-last axis of ``b``
``(..., K, N)``. Where a function takes ``axis=None`` it is the operand's unit-stride axis among its
last two (row-major ``a``, column-major ``b``: the layouts block-scaled matmul accepts), or the last
axis when only a shape is given. A ``float4_e2m1fn_x2`` operand counts two values per element along
the block axis (its logical shape); a shape is always the logical one. Batched operands (leading
batch axes) have their matrices' scales one after another, in the C order of the batch axes.

The tiled layout (cuBLAS documentation, "1D Block Scaling Factors Layout"): a matrix's
``outer x (K / block)`` grid of scales (``outer`` = M for ``a``, N for ``b``) is padded to whole
tiles of 128 rows x 4 scale columns; tiles are stored row-tile by row-tile (the column tile varying
fastest), 512 bytes each, scale ``(o, k)`` of a tile at byte ``(o % 32) * 16 + (o // 32) * 4 + k``.
"""

from __future__ import annotations

from typing import Any

from nvmath.linalg.advanced.helpers import _arrays
from nvmath.linalg.advanced.helpers._fp4 import quantize_to_fp4, unpack_fp4
from nvmath.linalg.advanced.helpers._geometry import (
    BlockScalingFormat,
    check_format,
    resolve_geometry,
    block_scale_offset,
)
from nvmath.linalg.advanced.helpers._mxfp8 import apply_mxfp8_scale, create_mxfp8_scale, invert_mxfp8_scale
from nvmath.linalg.advanced.helpers._tiles import check_scales, tile, untile
from nvmath.linalg.advanced.helpers._values import decode

__all__ = [
    "BlockScalingFormat",
    "apply_mxfp8_scale",
    "create_mxfp8_scale",
    "expand_block_scale",
    "get_block_scale_offset",
    "invert_mxfp8_scale",
    "quantize_to_fp4",
    "to_block_scale",
    "unpack_fp4",
]


def get_block_scale_offset(
    index: Any,
    operand_or_shape: Any,
    block_scaling_format: BlockScalingFormat | str,
    *,
    axis: int | None = None,
) -> Any:
    """The position, in the 1-D block-scale tensor, of the scale of block ``index``.

    This helper is experimental. The offsets of a shape whose outer extent is a multiple of 128
    and whose block count per row is a multiple of 4 are a bijection onto
    ``range(operand size // block)``; otherwise the tiles are padded and some offsets are unused.

    Args:
        index: one entry per operand dimension, as in nvmath-python: element indices, except along
            the block axis, where the entry is the block's index (``element // block``; the
            scale of ``a[5, 40]`` of an NVFP4 ``a`` is at ``(5, 2)``). Ints (negative ones count
            from the end) or integer tensors, broadcast together (not range-checked).
        operand_or_shape: the operand (torch / numpy / cupy tensor) or its logical shape, at least
            2-D, with a block-axis extent that is a multiple of the block size.
        block_scaling_format: :class:`BlockScalingFormat` (or its name): MXFP8 (blocks of 32) or
            NVFP4 (blocks of 16).
        axis: the block axis, one of the last two (see the module docstring for ``None``).

    Returns:
        An int, or an integer tensor of the broadcast index shape.

    Raises:
        TypeError: a bad type of ``index``, ``operand_or_shape``, ``block_scaling_format`` or
            ``axis``.
        ValueError: a bad ``block_scaling_format`` or ``axis``, fewer than 2 dimensions, a
            non-positive extent, a block-axis extent that is not a multiple of the block size, or an
            index of the wrong length.
        IndexError: an int index entry out of range.

    Example:
        >>> from nvmath.linalg.advanced.helpers.matmul import get_block_scale_offset
        >>> get_block_scale_offset((33, 2), (256, 256), "MXFP8")  # a (M, K): row 33, block 2
        22
        >>> get_block_scale_offset((33, 5), (256, 256), "MXFP8")  # block 5: the next tile
        533
        >>> get_block_scale_offset((5, 2), (128, 128), "NVFP4")
        82
    """
    return block_scale_offset(index, resolve_geometry(operand_or_shape, block_scaling_format, axis))


def to_block_scale(
    scale_tensor: Any,
    operand_or_shape: Any,
    block_scaling_format: BlockScalingFormat | str,
    *,
    axis: int | None = None,
    out: Any = None,
) -> Any:
    """Lay dense per-block scales out as the 1-D tensor cuBLASLt takes.

    This helper is experimental.

    Args:
        scale_tensor: one scale per block, with the operand's logical shape except the block axis,
            divided by the block size (``(M, K // 32)`` for an MXFP8 ``a``, ``(K // 16, N)`` for
            an NVFP4 ``b``). dtype ``uint8`` (UE8M0, or torch ``float8_e8m0fnu``) for MXFP8,
            ``float8_e4m3fn`` (UE4M3) for NVFP4. torch, numpy or cupy.
        operand_or_shape: the operand or its logical shape (see :func:`get_block_scale_offset`).
        block_scaling_format: :class:`BlockScalingFormat` or its name.
        axis: the block axis (see the module docstring for ``None``).
        out: a contiguous 1-D tensor to write into (``scale_tensor``'s package, dtype and device).

    Returns:
        A 1-D tensor (``out`` when given) with ``scale_tensor``'s package, dtype and device, such
        that entry ``get_block_scale_offset(i, ...)`` holds the scale of element ``i``. Padding
        entries (partial tiles) are zero.

    Raises:
        TypeError: a bad argument type.
        ValueError: a bad dtype or shape of ``scale_tensor`` or ``out``, or see
            :func:`get_block_scale_offset`.
    """
    fmt = check_format(block_scaling_format)
    check_scales(scale_tensor, fmt, "scale_tensor")
    geom = resolve_geometry(operand_or_shape, fmt, axis)
    with _arrays.device_ctx(scale_tensor):
        return tile(scale_tensor, geom, out)


def expand_block_scale(
    scales_1d: Any,
    operand_or_shape: Any,
    block_scaling_format: BlockScalingFormat | str,
    *,
    axis: int | None = None,
    output_dtype: Any = "smallest",
    device: Any = None,
) -> Any:
    """Give every operand element the value of its block's scale.

    This helper is experimental. ``operand * expand_block_scale(..., output_dtype=torch.float32)``
    dequantizes an operand.

    Args:
        scales_1d: the 1-D scales in cuBLASLt's tiled layout (``uint8`` / torch ``float8_e8m0fnu``
            for MXFP8; ``float8_e4m3fn``, or ``uint8`` holding its bit patterns, for NVFP4),
            torch, numpy or cupy.
        operand_or_shape: the operand or its logical shape (see :func:`get_block_scale_offset`).
        block_scaling_format: :class:`BlockScalingFormat` or its name.
        axis: the block axis (see the module docstring for ``None``).
        output_dtype: ``'smallest'`` (as in nvmath-python): the scale entries themselves, that is
            ``float8_e4m3fn`` for NVFP4 (float16 for packages without that dtype) and the ``uint8``
            exponent bytes (UE8M0) for MXFP8; or a float dtype for the values: float16, bfloat16
            (torch), float32 or float64 (object or name), which must hold every MXFP8 value.
        device: where to put the result (a torch device, ``"cpu"`` for numpy, a device id for
            cupy); ``None`` keeps ``scales_1d``'s device.

    Returns:
        A tensor of the operand's logical shape, with ``scales_1d``'s package, laid out with the
        block axis contiguous. MXFP8 NaN scales (255) give NaN in a float ``output_dtype``.

    Raises:
        TypeError: a bad argument type, or an ``output_dtype`` the format's scales cannot be
            expanded to (``uint8`` for NVFP4, ``float8_e4m3fn`` for MXFP8, an integer dtype, ...).
        ValueError: a bad dtype or length of ``scales_1d``, a bad ``device``, MXFP8 values that
            ``output_dtype`` cannot hold, or see :func:`get_block_scale_offset`.
    """
    fmt = check_format(block_scaling_format)
    pkg = check_scales(scales_1d, fmt, "scales_1d", also=("uint8",))
    geom = resolve_geometry(operand_or_shape, fmt, axis)
    scales = _arrays.to_device(scales_1d, device)
    with _arrays.device_ctx(scales):
        values = decode(untile(scales, geom), fmt, output_dtype, pkg)
        if geom.axis == len(geom.shape) - 1:
            return _arrays.repeat(values, geom.block, -1)
        return _arrays.swap_last(_arrays.repeat(_arrays.swap_last(values), geom.block, -1))
