"""Where cuBLASLt expects each block scale: the 1-D block-scaling-factor layout, as pure index math.

The layout (cuBLAS documentation, "1D Block Scaling Factors Layout", referenced by
``cublasLtMatmulMatrixScale_t`` in ``cublasLt.h``: "See documentation for layout information")
--------------------------------------------------------------------------------------------------

A block-scaled operand is a stack of matrices. In each matrix the *block axis* is the one cuBLASLt
calls the innermost: K, the contracted extent (the last axis of A ``(M, K)``, the first axis of B
``(K, N)``); the other matrix axis is the *outer* axis (M for A, N for B). Every ``block`` (32 for
MXFP8, 16 for NVFP4) consecutive elements along the block axis share one scale, so a matrix has an
``outer x (K / block)`` grid of scales, indexed ``(o, k)``. The grid is cut into tiles of 128 rows
by 4 scale columns (padded up to whole tiles), and each tile is stored as 512 consecutive bytes,
read as a 32 x 16 array whose row ``o % 32`` holds, side by side, the 4 scales of rows ``o % 32``,
``o % 32 + 32``, ``o % 32 + 64`` and ``o % 32 + 96``. Tiles follow one another row-tile by
row-tile, the scale-column tile varying fastest; matrices of a batch follow one another in the
C order of the batch axes. The offset of scale ``(o, k)`` is therefore::

    matrix * padded(outer, 128) * padded(K / block, 4)
    + ((o // 128) * (padded(K / block, 4) // 4) + k // 4) * 512
    + (o % 32) * 16 + ((o % 128) // 32) * 4 + k % 4

The documentation page could not be fetched where this was written; the rule was checked against
an independent implementation that cites it, ``to_blocked`` in PyTorch's
``torch/testing/_internal/common_quantized.py`` (the tests compare the two).
"""

from __future__ import annotations

import dataclasses
import enum
import math
import operator
from collections.abc import Sequence
from typing import Any

from nvmath.linalg.advanced.helpers import _arrays

__all__ = [
    "BLOCK_SIZES",
    "FP4_DTYPE",
    "SCALE_DTYPES",
    "TILE_COLS",
    "TILE_ROWS",
    "TILE_SIZE",
    "BlockGeometry",
    "BlockScalingFormat",
    "check_format",
    "normalize_axis",
    "resolve_geometry",
    "block_scale_offset",
    "scale_offset",
]

TILE_ROWS = 128
"""Rows (outer-axis positions) of a scale tile."""
TILE_COLS = 4
"""Scale columns (blocks along the block axis) of a scale tile."""
TILE_SIZE = TILE_ROWS * TILE_COLS
"""Scales per tile: 512, stored as 32 x 16."""
FP4_DTYPE = "float4_e2m1fn_x2"
"""torch's packed FP4 dtype: two e2m1 values per byte along the block axis."""


class BlockScalingFormat(str, enum.Enum):
    """The block-scaled narrow formats of cuBLASLt matmul.

    Attributes:
        NVFP4: FP4 (e2m1) data with one ``float8_e4m3fn`` (UE4M3) scale per 16 elements
            (``CUBLASLT_MATMUL_MATRIX_SCALE_VEC16_UE4M3``).
        MXFP8: FP8 (e4m3 / e5m2) data with one ``uint8`` (UE8M0, value ``2**(x - 127)``) scale per
            32 elements (``CUBLASLT_MATMUL_MATRIX_SCALE_VEC32_UE8M0``).
    """

    NVFP4 = "NVFP4"
    MXFP8 = "MXFP8"


BLOCK_SIZES = {BlockScalingFormat.NVFP4: 16, BlockScalingFormat.MXFP8: 32}
"""Elements per scale along the block axis."""
SCALE_DTYPES = {
    BlockScalingFormat.NVFP4: ("float8_e4m3fn",),
    BlockScalingFormat.MXFP8: ("uint8", "float8_e8m0fnu"),
}
"""The dtypes a scale tensor of each format may have (the first one is the canonical one)."""


def check_format(fmt: Any) -> BlockScalingFormat:
    """Return ``fmt`` as a :class:`BlockScalingFormat` (member, or its name in any case).

    Raises:
        TypeError: ``fmt`` is neither a member nor a string.
        ValueError: a string that names no format.
    """
    if isinstance(fmt, BlockScalingFormat):
        return fmt
    allowed = ", ".join(repr(f.value) for f in BlockScalingFormat)
    if not isinstance(fmt, str):
        raise TypeError(f"fmt must be a BlockScalingFormat or one of {allowed}; got {type(fmt).__name__}")
    try:
        return BlockScalingFormat(fmt.upper())
    except ValueError:
        raise ValueError(f"fmt must be a BlockScalingFormat or one of {allowed}; got {fmt!r}") from None


def normalize_axis(axis: Any, ndim: int, *, matrix_only: bool) -> int:
    """Return ``axis`` as a non-negative axis of an ``ndim``-dimensional tensor.

    Args:
        axis: an int (negative counts from the end).
        ndim: the number of dimensions.
        matrix_only: only the last two axes are allowed (block scaling is per matrix).

    Raises:
        TypeError: ``axis`` is not an int.
        ValueError: ``axis`` is out of range (or not one of the last two axes).
    """
    try:
        axis = operator.index(axis)
    except TypeError:
        raise TypeError(f"axis must be an int; got {type(axis).__name__}: {axis!r}") from None
    if not -ndim <= axis < ndim or (matrix_only and axis % ndim < ndim - 2):
        allowed = f"-2, -1, {ndim - 2} or {ndim - 1}" if matrix_only else f"in [{-ndim}, {ndim - 1}]"
        raise ValueError(f"axis must be {allowed} for a {ndim}-D operand; got {axis}")
    return axis % ndim


@dataclasses.dataclass(frozen=True)
class BlockGeometry:
    """How the block scales of one (batched) operand are laid out.

    Attributes:
        shape: the operand's logical shape (an FP4 operand's packed axis counted in values).
        axis: the block axis, ``ndim - 1`` or ``ndim - 2``.
        block: elements per scale along ``axis``.
    """

    shape: tuple[int, ...]
    axis: int
    block: int

    @property
    def batch_shape(self) -> tuple[int, ...]:
        return self.shape[:-2]

    @property
    def batch(self) -> int:
        return math.prod(self.batch_shape)

    @property
    def outer(self) -> int:
        """The extent of the matrix axis that is not the block axis (M for A, N for B)."""
        return self.shape[-1] if self.axis == len(self.shape) - 2 else self.shape[-2]

    @property
    def blocks(self) -> int:
        """Scales per row along the block axis: ``K / block``."""
        return self.shape[self.axis] // self.block

    @property
    def padded_outer(self) -> int:
        return -(-self.outer // TILE_ROWS) * TILE_ROWS

    @property
    def padded_blocks(self) -> int:
        return -(-self.blocks // TILE_COLS) * TILE_COLS

    @property
    def matrix_size(self) -> int:
        """Scales per matrix, padding included."""
        return self.padded_outer * self.padded_blocks

    @property
    def size(self) -> int:
        """The length of the 1-D scale tensor."""
        return self.batch * self.matrix_size

    @property
    def dense_shape(self) -> tuple[int, ...]:
        """The shape of the dense per-block scale tensor: ``shape`` with the block axis divided."""
        return self.shape[: self.axis] + (self.blocks,) + self.shape[self.axis + 1 :]

    @property
    def tiled_shape(self) -> tuple[int, ...]:
        """The 1-D scale tensor seen as (batch, row tile, column tile, o % 32, (o % 128) // 32, k % 4)."""
        return (self.batch, self.padded_outer // TILE_ROWS, self.padded_blocks // TILE_COLS, 32, 4, 4)

    @property
    def grid_shape(self) -> tuple[int, ...]:
        """The padded scale grid seen as (batch, row tile, (o % 128) // 32, o % 32, column tile, k % 4)."""
        return (self.batch, self.padded_outer // TILE_ROWS, 4, 32, self.padded_blocks // TILE_COLS, 4)


def _check_shape(shape: Sequence[Any]) -> tuple[int, ...]:
    try:
        dims = tuple(operator.index(s) for s in shape)
    except TypeError:
        raise TypeError(f"an operand shape must be a sequence of ints; got {shape!r}") from None
    if len(dims) < 2:
        raise ValueError(f"a block-scaled operand must have at least 2 dimensions; got shape {dims}")
    if any(d <= 0 for d in dims):
        raise ValueError(f"a block-scaled operand must have positive extents; got shape {dims}")
    return dims


def _contiguous_axis(x: Any) -> int:
    """The block axis of tensor ``x`` when none is given: its unit-stride axis among the last two."""
    st, ndim = _arrays.strides(x), len(x.shape)
    if st[-1] == 1:
        return ndim - 1
    if st[-2] == 1:
        return ndim - 2
    raise ValueError(
        f"cannot infer the block axis of an operand with shape {tuple(x.shape)} and strides {st} "
        "(neither of the last two axes has unit stride); pass axis=-1 or axis=-2"
    )


def resolve_geometry(operand_or_shape: Any, fmt: Any, axis: Any = None) -> BlockGeometry:
    """Validate an operand (or its shape), a format and a block axis; return their geometry.

    Args:
        operand_or_shape: a torch / numpy / cupy tensor, or a sequence of ints (the logical shape).
        fmt: a :class:`BlockScalingFormat` or its name.
        axis: the block axis (one of the last two); ``None`` means the tensor's unit-stride axis
            among its last two (K for the layouts cuBLASLt accepts), or the last axis of a shape.

    Raises:
        TypeError: not a tensor or a sequence of ints; a bad ``fmt`` or ``axis`` type.
        ValueError: fewer than 2 dimensions, a non-positive extent, a bad ``axis`` or ``fmt``, or
            a block-axis extent that is not a multiple of the block size.
    """
    fmt = check_format(fmt)
    if _arrays.is_tensor(operand_or_shape):
        x = operand_or_shape
        shape = _check_shape(tuple(x.shape))
        axis = _contiguous_axis(x) if axis is None else normalize_axis(axis, len(shape), matrix_only=True)
        if _arrays.dtype_name(x) == FP4_DTYPE:  # two values per element along the (packed) block axis
            shape = shape[:axis] + (2 * shape[axis],) + shape[axis + 1 :]
    elif isinstance(operand_or_shape, Sequence) and not isinstance(operand_or_shape, (str, bytes)):
        shape = _check_shape(operand_or_shape)
        axis = len(shape) - 1 if axis is None else normalize_axis(axis, len(shape), matrix_only=True)
    else:
        raise TypeError(
            "operand_or_shape must be a torch / numpy / cupy tensor or a sequence of ints; got "
            f"{type(operand_or_shape).__name__}"
        )
    block = BLOCK_SIZES[fmt]
    if shape[axis] % block:
        raise ValueError(
            f"the operand's extent along the block axis {axis} ({shape[axis]}, shape {shape}) must be a "
            f"multiple of the {fmt.value} block size {block}"
        )
    return BlockGeometry(shape, axis, block)


def _check_index(index: Any, geom: BlockGeometry) -> list[Any]:
    if not isinstance(index, Sequence) or isinstance(index, (str, bytes)):
        raise TypeError(f"index must be a tuple of ints or integer tensors; got {type(index).__name__}")
    if len(index) != len(geom.shape):
        raise ValueError(
            f"index {tuple(index)!r} has {len(index)} entries; the operand has shape {geom.shape}"
        )
    out: list[Any] = []
    for i, (value, extent) in enumerate(zip(index, geom.shape, strict=True)):
        if _arrays.is_tensor(value):
            if "int" not in _arrays.dtype_name(value):
                raise TypeError(
                    f"index[{i}] must be an integer tensor; got dtype {_arrays.dtype_name(value)}"
                )
            out.append(value)
            continue
        try:
            v = operator.index(value)
        except TypeError:
            raise TypeError(f"index[{i}] must be an int or an integer tensor; got {value!r}") from None
        if not -extent <= v < extent:
            raise IndexError(f"index[{i}] = {v} is out of range for extent {extent} (shape {geom.shape})")
        out.append(v % extent)
    return out


def scale_offset(index: Any, geom: BlockGeometry) -> Any:
    """The offset in the 1-D scale tensor of the scale of element ``index`` (see the module docstring).

    Args:
        index: one entry per operand dimension: ints (negative ones count from the end) or integer
            tensors (broadcast together; not range-checked).
        geom: the operand's geometry.

    Returns:
        An int, or an integer tensor of the broadcast index shape when tensors are given.

    Raises:
        TypeError: ``index`` is not a sequence of ints / integer tensors.
        ValueError: ``index`` has the wrong length.
        IndexError: an int entry is out of range.
    """
    idx = _check_index(index, geom)
    ndim = len(geom.shape)
    matrix = 0
    for value, extent in zip(idx[:-2], geom.batch_shape, strict=True):
        matrix = matrix * extent + value
    if geom.axis == ndim - 1:
        o, k = idx[-2], idx[-1] // geom.block
    else:
        o, k = idx[-1], idx[-2] // geom.block
    tile = (o // TILE_ROWS) * (geom.padded_blocks // TILE_COLS) + k // TILE_COLS
    within = (o % 32) * 16 + ((o % TILE_ROWS) // 32) * 4 + k % TILE_COLS
    return matrix * geom.matrix_size + tile * TILE_SIZE + within


def block_scale_offset(index: Any, geom: BlockGeometry) -> Any:
    """The offset of the scale of block ``index``: as :func:`scale_offset`, but the block-axis entry
    counts blocks (``K // block`` of them), as nvmath-python's ``get_block_scale_offset`` does.

    Raises:
        TypeError, ValueError: as :func:`scale_offset`.
        IndexError: an int entry out of range (the block-axis one against the block count).
    """
    if not isinstance(index, Sequence) or isinstance(index, (str, bytes)):
        raise TypeError(f"index must be a tuple of ints or integer tensors; got {type(index).__name__}")
    if len(index) != len(geom.shape):
        raise ValueError(
            f"index {tuple(index)!r} has {len(index)} entries; the operand has shape {geom.shape}"
        )
    idx = list(index)
    value = idx[geom.axis]
    if not _arrays.is_tensor(value):
        try:
            value = operator.index(value)
        except TypeError:
            raise TypeError(
                f"index[{geom.axis}] must be an int or an integer tensor; got {value!r}"
            ) from None
        if not -geom.blocks <= value < geom.blocks:
            raise IndexError(
                f"index[{geom.axis}] = {value} is out of range: the block axis of shape {geom.shape} has "
                f"{geom.blocks} blocks of {geom.block} (the entry is a block index)"
            )
        value %= geom.blocks
    idx[geom.axis] = value * geom.block
    return scale_offset(idx, geom)
