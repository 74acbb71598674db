"""Pure planning facts of the distributed FFT on Box distributions (no GPU, no communication).

With Box distributions every rank passes one pair ``(input box, output box)``: the global indices
its operand holds and those its result will hold (cuFFTMp's ``cufftXtSetDistribution``). The boxes
of all ranks must tile the operand's and the result's global arrays; each rank's local array is
its box in C order, dense (real data is *not* padded: cuFFTMp moves the data between the boxes and
its own slabs itself, through its workspace).

* :func:`box_pair`: the ``distribution`` argument -> :class:`BoxPair` (or ``None`` for a slab);
* :func:`box_fft_traits`: every rank's pair (gathered by the planner's one collective) -> this
  rank's frozen :class:`BoxFFTTraits`, or the same error on every rank naming the rank at fault;
* :func:`box_capacity_bytes`: the symmetric buffer size every rank needs (the largest box);
* :func:`distribution_arguments`: the ``cufftXtSetDistribution`` arguments of a plan executed in
  one direction.

The boxes are given to cuFFTMp in the forward transform's orientation: its "input" box is the
input of a *forward* transform (the real one, for R2C and C2R), and the plans' subformats are
``CUFFT_XT_FORMAT_DISTRIBUTED_INPUT`` (forward) / ``..._OUTPUT`` (inverse). A plan executed
inverse therefore gets the result's box as "input" and the operand's as "output".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from nvmath.distributed.distribution._distribution import Box
from nvmath.distributed.distribution._tiling import BoxBounds, as_bounds, check_tiling, global_box_shape
from nvmath.fft._traits import resolve_fft_type

from ._layout import View, c_strides
from ._traits import ENGINE_DTYPES, check_problem_shape, result_global_shape

__all__ = [
    "BOX_SUBFORMATS",
    "BoxFFTTraits",
    "BoxPair",
    "box_capacity_bytes",
    "box_fft_traits",
    "box_pair",
    "box_view",
    "distribution_arguments",
]

BOX_SUBFORMATS = ("DISTRIBUTED_INPUT", "DISTRIBUTED_OUTPUT")
"""``(subformat_forward, subformat_inverse)`` of every Box plan (cufftXtSubFormat member names)."""

_FORWARD = -1  # CUFFT_FORWARD


@dataclass(frozen=True)
class BoxPair:
    """This rank's ``(input box, output box)``: the operand's and the result's global bounds."""

    input: BoxBounds
    output: BoxBounds

    def __repr__(self) -> str:
        return f"(Box{self.input}, Box{self.output})"


def _is_box_like(item: Any) -> bool:
    return isinstance(item, Box) or (isinstance(item, (tuple, list)) and len(item) == 2)


def box_pair(distribution: Any, ndim: int) -> BoxPair | None:
    """The :class:`BoxPair` of a ``distribution`` given as two :class:`Box` es or two ``(lower,
    upper)`` pairs; ``None`` when ``distribution`` is no such pair (a slab, or something wrong).

    Raises:
        ValueError: a box that is not ``ndim``-D, or not a valid box (``lower > upper``...).
        TypeError: box bounds that are not integers.
    """
    if not (isinstance(distribution, (tuple, list)) and len(distribution) == 2):
        return None
    if not all(_is_box_like(item) for item in distribution):
        return None
    bounds = [as_bounds(item, f"distribution[{i}]") for i, item in enumerate(distribution)]
    for i, (lower, _) in enumerate(bounds):
        if len(lower) != ndim:
            raise ValueError(
                f"distribution[{i}] {_text(bounds[i])} is {len(lower)}-D; the operand is {ndim}-D"
            )
    return BoxPair(bounds[0], bounds[1])


@dataclass(frozen=True)
class BoxFFTTraits:
    """What a rank needs to plan one FFT on boxes (identical on every rank except the boxes)."""

    fft_type: str
    operand_dtype: str
    result_dtype: str
    global_shape: tuple[int, ...]  # the operand's
    global_result_shape: tuple[int, ...]
    boxes: BoxPair  # this rank's
    local_shape: tuple[int, ...]
    local_result_shape: tuple[int, ...]


def _shape(box: BoxBounds) -> tuple[int, ...]:
    return tuple(u - lo for lo, u in zip(*box, strict=True))


def _text(box: BoxBounds) -> str:
    return f"[{list(box[0])}, {list(box[1])})"


def _check_outputs(outputs: Sequence[BoxBounds], result_shape: tuple[int, ...], fft_type: str,
                   what: str) -> None:  # fmt: skip
    reached = global_box_shape(outputs)
    if fft_type == "C2R" and reached[:-1] == result_shape[:-1] and reached[-1] != result_shape[-1]:
        raise ValueError(
            f"{what}: the output boxes reach a real last extent of {reached[-1]}, but the C2R result has "
            f"{result_shape[-1]} (global result shape {result_shape}): set "
            "FFTOptions.last_axis_parity to match the output boxes"
        )
    check_tiling(outputs, result_shape, f"{what}: the output boxes (result shape {result_shape})")


def box_fft_traits(
    pairs: Mapping[int, BoxPair], dtype: str, rank: int, *, fft_type: str | None, last_axis_parity: str,
    what: str,
) -> BoxFFTTraits:  # fmt: skip
    """This rank's plan facts from every rank's boxes (the same verdict on every rank).

    Args:
        pairs: ``{rank: BoxPair}`` of every rank.
        dtype: the operand's dtype name.
        rank: this rank.
        fft_type, last_axis_parity: as in :class:`~nvmath.distributed.fft.FFTOptions`.
        what: the operation, for the messages.

    Raises:
        ValueError: boxes that do not tile the operand's or the result's global array (naming the
            ranks), or a problem cuFFTMp cannot transform.
    """
    nranks = len(pairs)
    inputs = [pairs[r].input for r in range(nranks)]
    global_shape = global_box_shape(inputs)
    check_tiling(inputs, global_shape, f"{what}: the input boxes")
    check_problem_shape(global_shape, nranks)
    if dtype not in ENGINE_DTYPES:
        raise ValueError(
            f"operand dtype {dtype!r}: cuFFTMp transforms {', '.join(ENGINE_DTYPES)} (no half precision)"
        )
    fft_type, result_dtype = resolve_fft_type(dtype, fft_type)
    result_shape = result_global_shape(global_shape, fft_type, last_axis_parity)
    _check_outputs([pairs[r].output for r in range(nranks)], result_shape, fft_type, what)
    mine = pairs[rank]
    return BoxFFTTraits(
        fft_type=fft_type,
        operand_dtype=dtype,
        result_dtype=result_dtype,
        global_shape=global_shape,
        global_result_shape=result_shape,
        boxes=mine,
        local_shape=_shape(mine.input),
        local_result_shape=_shape(mine.output),
    )


def box_view(shape: tuple[int, ...], dtype: str) -> View:
    """A rank's array on a box: dense, C order."""
    return View(tuple(shape), c_strides(shape), dtype)


def box_capacity_bytes(pairs: Mapping[int, BoxPair], operand_dtype: str, result_dtype: str) -> int:
    """Bytes every rank's symmetric buffer needs: the largest input or output box of any rank."""
    largest = 1
    for pair in pairs.values():
        for box, dtype in ((pair.input, operand_dtype), (pair.output, result_dtype)):
            largest = max(largest, box_view(_shape(box), dtype).nbytes)
    return largest


def distribution_arguments(traits: BoxFFTTraits, direction: int) -> tuple[tuple[int, ...], ...]:
    """``(lower_input, upper_input, lower_output, upper_output, strides_input, strides_output)`` of
    ``cufftXtSetDistribution`` for a plan executed in ``direction`` (see the module docstring)."""
    operand, result = traits.boxes.input, traits.boxes.output
    first, second = (operand, result) if direction == _FORWARD else (result, operand)
    return (*first, *second, c_strides(_shape(first)), c_strides(_shape(second)))
