"""Layout primitives of the cuBLASLt matmul: operand specs, matrix views, batch collapsing.

Pure functions on shapes and strides (in elements). Two questions are answered here:

* Can a (rows x cols) matrix with given row/column strides be described to cuBLASLt as a
  column-major matrix with some leading dimension (possibly after transposing it)? See
  :class:`MatrixView`.
* Can the batch dimensions of all operands, broadcast against each other as numpy does, be walked
  with a single stride per operand (stride 0 for a broadcast operand)? See :func:`collapse_batch`.
"""

from __future__ import annotations

import dataclasses
import enum
import math
from collections.abc import Sequence
from typing import NamedTuple

__all__ = [
    "BatchTraits",
    "MatrixView",
    "Op",
    "OperandSpec",
    "Order",
    "broadcast_batch_shapes",
    "check_operand_spec",
    "collapse_batch",
    "dense_batch_strides",
    "tile_stride",
]


class Order(enum.IntEnum):
    """Matrix storage order (``cublasLtOrder_t`` values; member names as the bindings')."""

    COL = 0
    ROW = 1


class Op(enum.IntEnum):
    """Matrix operation (``cublasOperation_t`` values; member names as the bindings')."""

    N = 0
    T = 1
    C = 2


class OperandSpec(NamedTuple):
    """What the traits need to know of a tensor.

    Attributes:
        shape: the extents.
        strides: the strides, in elements.
        dtype: the canonical dtype name (``"float32"``, ``"bfloat16"``, ...).
        is_conjugate: torch's lazy-conjugation bit.
    """

    shape: tuple[int, ...]
    strides: tuple[int, ...]
    dtype: str
    is_conjugate: bool = False


def check_operand_spec(name: str, spec: OperandSpec, *, min_ndim: int = 1) -> OperandSpec:
    """Validate and normalize an operand spec (tuples of ints, positive extents, strides >= 0).

    Raises:
        TypeError: ``spec`` is not an :class:`OperandSpec` (or a tuple of its fields).
        ValueError: too few dimensions, a zero or negative extent, a negative stride, or a
            strides/shape length mismatch.
    """
    if not isinstance(spec, tuple) or len(spec) not in (3, 4):
        raise TypeError(f"operand {name!r} must be an OperandSpec; got {type(spec).__name__}: {spec!r}")
    spec = OperandSpec(*spec)
    shape, strides = tuple(int(s) for s in spec.shape), tuple(int(s) for s in spec.strides)
    if len(shape) < min_ndim:
        raise ValueError(f"operand {name!r} must have at least {min_ndim} dimension(s); got shape {shape}")
    if len(strides) != len(shape):
        raise ValueError(f"operand {name!r}: strides {strides} do not match shape {shape}")
    if any(e <= 0 for e in shape):
        raise ValueError(
            f"operand {name!r}: every extent must be positive (no empty matmuls); got shape {shape}"
        )
    if any(s < 0 for s in strides):
        raise ValueError(
            f"operand {name!r}: negative strides {strides} are not supported; pass a copy (e.g. .contiguous())"
        )
    return OperandSpec(shape, strides, str(spec.dtype), bool(spec.is_conjugate))


@dataclasses.dataclass(frozen=True)
class MatrixView:
    """A logical (rows x cols) matrix in memory: element (i, j) at ``i*row_stride + j*col_stride``."""

    rows: int
    cols: int
    row_stride: int
    col_stride: int

    @property
    def t(self) -> MatrixView:
        """The transposed view of the same memory."""
        return MatrixView(self.cols, self.rows, self.col_stride, self.row_stride)

    def col_ld(self, *, allow_zero_ld: bool = False) -> int | None:
        """Return the leading dimension that describes this matrix as column-major, or ``None``.

        Extents of 1 make a stride irrelevant, so vectors are column-major with any stride along
        their length (``ld >= rows`` always holds for the returned value). ``allow_zero_ld`` accepts
        a matrix whose columns all alias (``col_stride == 0``), i.e. a column broadcast.
        """
        r, c, rs, cs = self.rows, self.cols, self.row_stride, self.col_stride
        if r == 1 and c == 1:
            return 1
        if c == 1:
            return r if rs == 1 else None
        if r > 1 and rs != 1:
            return None
        if cs == 0:
            return 0 if allow_zero_ld else None
        return cs if cs >= r else None

    def hint(self, *, allow_zero_ld: bool = False) -> Order | None:
        """The order this matrix is unambiguously stored in, ``None`` if both (or neither) fit."""
        col = self.col_ld(allow_zero_ld=allow_zero_ld) is not None
        row = self.t.col_ld() is not None
        if col == row:
            return None
        return Order.COL if col else Order.ROW


def broadcast_batch_shapes(named_shapes: Sequence[tuple[str, tuple[int, ...]]]) -> tuple[int, ...]:
    """Broadcast batch shapes as numpy does (right-aligned; equal extents or 1).

    Raises:
        ValueError: two extents differ and neither is 1, naming the operands and shapes.
    """
    ndim = max((len(s) for _, s in named_shapes), default=0)
    result = [1] * ndim
    owner = [""] * ndim
    for name, shape in named_shapes:
        for i, extent in enumerate(shape, start=ndim - len(shape)):
            if extent == 1:
                continue
            if result[i] not in (1, extent):
                shapes = ", ".join(f"{n}: {s}" for n, s in named_shapes)
                raise ValueError(
                    f"batch dimensions do not broadcast: {owner[i]!r} has {result[i]} and {name!r} has {extent} "
                    f"at batch axis {i - ndim}; batch shapes {shapes}"
                )
            result[i], owner[i] = extent, name
    return tuple(result)


def _aligned_strides(
    name: str, shape: tuple[int, ...], strides: tuple[int, ...], target: tuple[int, ...]
) -> list[int]:
    """Per-axis strides of a batch (shape, strides) broadcast to ``target`` (0 where broadcast)."""
    if len(shape) > len(target):
        raise ValueError(
            f"{name!r}: batch shape {shape} has more dimensions than the problem's batch shape {target}"
        )
    out = [0] * len(target)
    for i, (e, s) in enumerate(zip(shape, strides), start=len(target) - len(shape)):
        if e == target[i]:
            out[i] = s if e > 1 else 0
        elif e != 1:
            raise ValueError(
                f"{name!r}: batch shape {shape} does not broadcast to the problem's batch shape {target}"
            )
    return out


def _tile(strides: list[int], shape: tuple[int, ...], order: tuple[int, ...]) -> int | None:
    """The single stride S walking ``order`` (outer -> inner) over these strides, else ``None``."""
    if not order:
        return 0
    unit = strides[order[-1]]
    span = 1
    for axis in reversed(order):
        if strides[axis] != unit * span:
            return None
        span *= shape[axis]
    return unit


@dataclasses.dataclass(frozen=True)
class BatchTraits:
    """The collapsed batch of a matmul problem.

    Attributes:
        shape: the broadcast batch shape (the result's leading extents).
        count: the number of matrices (``prod(shape)``).
        order: the batch axes of extent > 1 (indices into ``shape``), outer to inner, in the order
            the single batch index walks them (the operands' memory order).
        strides: ``(operand name, single batch stride in elements)`` pairs (0: broadcast).
    """

    shape: tuple[int, ...]
    count: int
    order: tuple[int, ...]
    strides: tuple[tuple[str, int], ...]

    def stride(self, name: str) -> int:
        """Return the batch stride of operand ``name`` (``KeyError`` if unknown)."""
        for key, value in self.strides:
            if key == name:
                return value
        raise KeyError(name)


def _candidate_orders(shape: tuple[int, ...], aligned: list[list[int]]) -> list[tuple[int, ...]]:
    axes = [i for i, e in enumerate(shape) if e > 1]
    candidates: list[tuple[int, ...]] = []
    for strides in aligned:
        if any(strides[i] for i in axes):
            order = tuple(sorted(axes, key=lambda i: -strides[i]))
            if order not in candidates:
                candidates.append(order)
    if tuple(axes) not in candidates:
        candidates.append(tuple(axes))
    return candidates


def collapse_batch(operands: Sequence[tuple[str, tuple[int, ...], tuple[int, ...]]]) -> BatchTraits:
    """Broadcast the batch dimensions of the operands and collapse them to one strided batch.

    Args:
        operands: ``(name, batch_shape, batch_strides)`` per operand (strides in elements).

    Returns:
        The :class:`BatchTraits`; each operand gets one batch stride (0 when broadcast).

    Raises:
        ValueError: the shapes do not broadcast, or an operand's batch axes cannot be walked with a
            single stride in an order shared by all operands (the message names the operand and
            suggests making it contiguous).
    """
    shape = broadcast_batch_shapes([(n, s) for n, s, _ in operands])
    aligned = [_aligned_strides(n, s, st, shape) for n, s, st in operands]
    for order in _candidate_orders(shape, aligned):
        tiles = [_tile(st, shape, order) for st in aligned]
        if all(t is not None for t in tiles):
            strides = tuple((n, int(t)) for (n, _, _), t in zip(operands, tiles))
            return BatchTraits(shape, math.prod(shape), order, strides)
    order = _candidate_orders(shape, aligned)[0]
    for (name, s, st), al in zip(operands, aligned):
        own = _candidate_orders(shape, [al])[0]
        if _tile(al, shape, own) is None or _tile(al, shape, order) is None:
            raise ValueError(
                f"operand {name!r}: its batch dimensions (shape {s}, strides {st}) cannot be expressed as a "
                f"single strided batch over the broadcast batch shape {shape} together with the other operands "
                "(mixed broadcast and real batch axes, padding between batch axes, or a batch axis order that "
                "differs between operands); make it contiguous (e.g. .contiguous()) or reshape the batch "
                "dimensions into one"
            )
    raise AssertionError("unreachable: some operand must fail to tile")  # pragma: no cover


def tile_stride(name: str, shape: tuple[int, ...], strides: tuple[int, ...], batch: BatchTraits) -> int:
    """Return the single batch stride of an extra tensor (e.g. a bias) in the problem's batch order.

    Raises:
        ValueError: the batch shape does not broadcast to ``batch.shape`` or cannot be walked with
            one stride in ``batch.order``.
    """
    aligned = _aligned_strides(name, shape, strides, batch.shape)
    unit = _tile(aligned, batch.shape, batch.order)
    if unit is None:
        raise ValueError(
            f"{name!r}: batch dimensions (shape {shape}, strides {strides}) cannot be walked with a single "
            f"stride in the problem's batch order; make it contiguous (e.g. .contiguous())"
        )
    return unit


def dense_batch_strides(batch: BatchTraits, block: int) -> tuple[int, ...]:
    """Strides of the batch axes of a dense tensor whose matrices hold ``block`` elements.

    The axes are laid out in ``batch.order`` (outer to inner), so the tensor is walked with the
    single batch stride ``block``; axes of extent 1 get the stride of the whole batch.
    """
    strides = [block * batch.count] * len(batch.shape)
    span = block
    for axis in reversed(batch.order):
        strides[axis] = span
        span *= batch.shape[axis]
    if batch.order == tuple(i for i, e in enumerate(batch.shape) if e > 1):
        span = block
        for axis in reversed(range(len(batch.shape))):
            strides[axis] = span
            span *= batch.shape[axis]
    return tuple(strides)
