"""Moving block scales between the dense per-block grid and cuBLASLt's tiled 1-D layout.

Both directions are one reshape, one axis permutation and one copy (plus zero padding up to whole
128 x 4 tiles), in the scales' own package and on their own device; see :mod:`._geometry` for the
layout. The dense grid has the operand's shape with the block axis divided by the block size.
"""

from __future__ import annotations

from typing import Any

from nvmath.linalg.advanced.helpers import _arrays
from nvmath.linalg.advanced.helpers._geometry import SCALE_DTYPES, BlockGeometry, BlockScalingFormat

__all__ = ["check_scales", "tile", "untile"]

# (batch, row tile, q, r, column tile, c) <-> (batch, row tile, column tile, r, q, c): o = 128 * tile + 32 q + r
_PERMUTATION = (0, 1, 4, 3, 2, 5)


def check_scales(scales: Any, fmt: BlockScalingFormat, name: str, *, also: tuple[str, ...] = ()) -> str:
    """Check that ``scales`` is a tensor of a scale dtype of ``fmt`` (or of ``also``); return its package.

    Raises:
        TypeError: not a torch / numpy / cupy tensor.
        ValueError: a dtype that is not one of ``fmt``'s scale dtypes.
    """
    pkg = _arrays.package_of(scales, name)
    dtype = _arrays.dtype_name(scales)
    allowed = SCALE_DTYPES[fmt] + tuple(a for a in also if a not in SCALE_DTYPES[fmt])
    if dtype not in allowed:
        raise ValueError(
            f"{name} must have dtype {' or '.join(allowed)} for {fmt.value} block scaling; got {dtype}"
        )
    return pkg


def _canonical(dense: Any, geom: BlockGeometry) -> Any:
    """The dense grid as (batch, outer, blocks): the block axis last."""
    ndim = len(geom.shape)
    rows, cols = geom.dense_shape[-2:]
    grid = dense.reshape((geom.batch, rows, cols))
    return _arrays.swap_last(grid) if geom.axis == ndim - 2 else grid


def tile(dense: Any, geom: BlockGeometry, out: Any = None) -> Any:
    """Lay the dense per-block grid ``dense`` out as cuBLASLt's 1-D scale tensor.

    Args:
        dense: scales of shape ``geom.dense_shape``.
        geom: the operand's geometry.
        out: a contiguous 1-D tensor of ``geom.size`` elements, ``dense``'s package, dtype and
            device, to write into (a new one is made otherwise).

    Returns:
        The 1-D scale tensor (``out`` when given). Padding entries are zero.

    Raises:
        ValueError: ``dense`` or ``out`` has the wrong shape, dtype or device.
        TypeError: ``out`` is not a tensor of ``dense``'s package.
    """
    if tuple(dense.shape) != geom.dense_shape:
        raise ValueError(
            f"the scale tensor must have shape {geom.dense_shape} (the operand shape {geom.shape} with "
            f"axis {geom.axis} divided by the block size {geom.block}); got {tuple(dense.shape)}"
        )
    grid = _canonical(dense, geom)
    if (geom.padded_outer, geom.padded_blocks) != (geom.outer, geom.blocks):
        padded = _arrays.zeros(dense, (geom.batch, geom.padded_outer, geom.padded_blocks))
        padded[:, : geom.outer, : geom.blocks] = grid
        grid = padded
    tiled = _arrays.permute(grid.reshape(geom.grid_shape), _PERMUTATION)
    if out is None:
        return tiled.reshape((geom.size,))
    _check_out(out, dense, geom)
    target = out.reshape(geom.tiled_shape)
    if type(out).__module__.startswith("torch"):
        target.copy_(tiled)
    else:
        target[...] = tiled
    return out


def _check_out(out: Any, like: Any, geom: BlockGeometry) -> None:
    if _arrays.package_of(out, "out") != _arrays.package_of(like, "scale_tensor"):
        raise TypeError(f"out must be of the scale tensor's package; got {type(out).__name__}")
    if tuple(out.shape) != (geom.size,):
        raise ValueError(f"out must be 1-D with {geom.size} elements; got shape {tuple(out.shape)}")
    if out.dtype != like.dtype:
        raise ValueError(f"out must have the scale tensor's dtype {like.dtype}; got {out.dtype}")
    if _arrays.device_of(out) != _arrays.device_of(like):
        raise ValueError(
            f"out must be on the scale tensor's device {_arrays.device_of(like)}; got {_arrays.device_of(out)}"
        )
    if _arrays.strides(out) != (1,):
        raise ValueError(f"out must be contiguous; got strides {_arrays.strides(out)}")


def untile(flat: Any, geom: BlockGeometry) -> Any:
    """Read cuBLASLt's 1-D scale tensor ``flat`` back into the dense per-block grid.

    Returns:
        Scales of shape ``geom.dense_shape`` with the block axis contiguous (padding dropped).

    Raises:
        ValueError: ``flat`` is not 1-D with ``geom.size`` elements.
    """
    if tuple(flat.shape) != (geom.size,):
        raise ValueError(
            f"the 1-D scale tensor of an operand of shape {geom.shape} (block axis {geom.axis}, block "
            f"size {geom.block}) must have shape ({geom.size},); got {tuple(flat.shape)}"
        )
    grid = _arrays.permute(flat.reshape(geom.tiled_shape), _PERMUTATION)
    grid = grid.reshape((geom.batch, geom.padded_outer, geom.padded_blocks))[:, : geom.outer, : geom.blocks]
    ndim = len(geom.shape)
    if geom.axis == ndim - 2:
        grid = _arrays.swap_last(grid)
    return grid.reshape(geom.dense_shape)
