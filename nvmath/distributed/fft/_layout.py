"""Pure memory-layout facts of cuFFTMp's in-place slab transforms (no GPU, no communication).

cuFFTMp transforms in place, in the operand's buffer on the NVSHMEM symmetric heap:

* complex data is C-contiguous in the local slab;
* real data (the R2C operand, the C2R result) is C-ordered with the last axis *padded* to
  ``2 * (n // 2 + 1)`` elements, so the complex result fits in the same bytes;
* the engine writes its output in the *complementary* slab (X in, Y out, and the reverse); with
  ``redistribute=True`` nvmath then moves it back to the operand's slab with a cuFFTMp reshape;
* symmetric allocations must have the same size on every rank, so a buffer is sized for the largest
  of every rank's operand, engine output and result (:func:`slab_capacity_bytes`).

Everything here is a function of the global problem and the rank, identical on every rank.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from nvmath._internal import dtypes

from ._traits import ENGINE_DTYPES, SlabFFTTraits, slab_fft_traits, slab_shape

__all__ = [
    "ENGINE_DTYPES",
    "ReshapeBoxes",
    "View",
    "c_strides",
    "engine_output_view",
    "lift_to_3d",
    "local_operand_view",
    "operand_view",
    "padded_extent",
    "reshape_boxes",
    "result_view",
    "slab_capacity_bytes",
    "slab_offset",
]


@dataclass(frozen=True)
class View:
    """A typed view of the symmetric buffer: shape, element strides, dtype (offset 0)."""

    shape: tuple[int, ...]
    strides: tuple[int, ...]
    dtype: str

    @property
    def nbytes(self) -> int:
        """Bytes from the buffer start to the end of the view's last (padded) row."""
        if not self.shape or 0 in self.shape:
            return 0
        return self.shape[0] * self.strides[0] * dtypes.itemsize(self.dtype)


def padded_extent(n: int) -> int:
    """The padded last extent of real data in an in-place R2C/C2R of real length ``n``."""
    return 2 * (n // 2 + 1)


def c_strides(shape: Sequence[int], last: int | None = None) -> tuple[int, ...]:
    """C-order element strides of ``shape`` whose last axis occupies ``last`` elements (padding)."""
    strides, step = [0] * len(shape), 1
    for axis in reversed(range(len(shape))):
        strides[axis] = step
        step *= shape[axis] if (axis != len(shape) - 1 or last is None) else last
    return tuple(strides)


def _view(shape: tuple[int, ...], dtype: str, real_length: int | None) -> View:
    """``real_length``: the global real last extent when the view holds padded real data."""
    padded = None if real_length is None else padded_extent(real_length)
    return View(shape, c_strides(shape, padded), dtype)


def _real_length(traits: SlabFFTTraits) -> int:
    """The global real last extent of the transform (the R2C operand's, the C2R result's)."""
    shape = traits.global_shape if traits.fft_type == "R2C" else traits.global_result_shape
    return shape[-1]


def local_operand_view(shape: tuple[int, ...], dtype: str) -> View:
    """The layout a rank's operand of local ``shape`` must have, knowable before the global shape
    (real operands are R2C inputs, padded along the last axis, which is never the slab axis of a
    valid R2C)."""
    return _view(shape, dtype, shape[-1] if dtype.startswith("float") else None)


def operand_view(traits: SlabFFTTraits) -> View:
    """The layout this rank's operand must have."""
    real = _real_length(traits) if traits.fft_type == "R2C" else None
    return _view(traits.local_shape, traits.operand_dtype, real)


def result_view(traits: SlabFFTTraits) -> View:
    """The layout of this rank's result (in the same buffer)."""
    real = _real_length(traits) if traits.fft_type == "C2R" else None
    return _view(traits.local_result_shape, traits.result_dtype, real)


def engine_output_view(traits: SlabFFTTraits, rank: int, nranks: int) -> View:
    """Where cuFFTMp leaves the result: always the complementary slab of the operand."""
    shape = slab_shape(traits.global_result_shape, 1 - traits.partition, rank, nranks)
    real = _real_length(traits) if traits.fft_type == "C2R" else None
    return _view(shape, traits.result_dtype, real)


def slab_offset(n: int, rank: int, nranks: int) -> int:
    """The first global index of rank ``rank``'s slab of ``n`` indices."""
    return rank * (n // nranks) + min(rank, n % nranks)


@dataclass(frozen=True)
class ReshapeBoxes:
    """``cufftMpMakeReshape`` arguments of one rank: global boxes ``[lower, upper)`` and local
    element strides of the input and output, and the element size."""

    element_size: int
    lower_input: tuple[int, ...]
    upper_input: tuple[int, ...]
    strides_input: tuple[int, ...]
    lower_output: tuple[int, ...]
    upper_output: tuple[int, ...]
    strides_output: tuple[int, ...]


def lift_to_3d(boxes: ReshapeBoxes) -> ReshapeBoxes:
    """The same reshape on 3-D boxes (cuFFTMp's reshapes are 3-D): leading axes of extent 1 added
    (bounds ``[0, 1)``, strides of the whole local array, which never step)."""
    missing = 3 - len(boxes.lower_input)
    if missing <= 0:
        return boxes

    def lift(lower: tuple, upper: tuple, strides: tuple) -> tuple[tuple, tuple, tuple]:
        span = max([1] + [(u - lo) * s for lo, u, s in zip(lower, upper, strides, strict=True)])
        return (0,) * missing + lower, (1,) * missing + upper, (span,) * missing + strides

    lo_in, up_in, st_in = lift(boxes.lower_input, boxes.upper_input, boxes.strides_input)
    lo_out, up_out, st_out = lift(boxes.lower_output, boxes.upper_output, boxes.strides_output)
    return ReshapeBoxes(boxes.element_size, lo_in, up_in, st_in, lo_out, up_out, st_out)


def _box(global_shape: tuple[int, ...], partition: int, rank: int, nranks: int) -> tuple[tuple, tuple]:
    lower, upper = [0] * len(global_shape), list(global_shape)
    lower[partition] = slab_offset(global_shape[partition], rank, nranks)
    upper[partition] = lower[partition] + slab_shape(global_shape, partition, rank, nranks)[partition]
    return tuple(lower), tuple(upper)


def reshape_boxes(traits: SlabFFTTraits, rank: int, nranks: int) -> ReshapeBoxes:
    """The reshape that moves the engine's output (complementary slab) to the result's slab
    (``redistribute=True``)."""
    shape = traits.global_result_shape
    lower_in, upper_in = _box(shape, 1 - traits.partition, rank, nranks)
    lower_out, upper_out = _box(shape, traits.result_partition, rank, nranks)
    return ReshapeBoxes(
        element_size=dtypes.itemsize(traits.result_dtype),
        lower_input=lower_in,
        upper_input=upper_in,
        strides_input=engine_output_view(traits, rank, nranks).strides,
        lower_output=lower_out,
        upper_output=upper_out,
        strides_output=result_view(traits).strides,
    )


def slab_capacity_bytes(
    global_shape: Sequence[int], dtype: str, partition: int, nranks: int, *, fft_type: str | None = None,
    last_axis_parity: str = "even",
) -> int:  # fmt: skip
    """Bytes every rank's symmetric buffer needs for any slab FFT of this operand (either
    ``redistribute`` setting): the largest operand, engine output or result over all ranks.

    Raises:
        ValueError: as :func:`~._traits.slab_fft_traits` (a problem cuFFTMp cannot transform).
    """
    largest = 1
    for rank in range(nranks):
        traits = slab_fft_traits(global_shape, dtype, partition, rank, nranks, fft_type=fft_type,
                                 redistribute=True, last_axis_parity=last_axis_parity)  # fmt: skip
        views = (operand_view(traits), result_view(traits), engine_output_view(traits, rank, nranks))
        largest = max(largest, *(v.nbytes for v in views))
    return largest
