"""Pure facts of a redistribution on cuFFTMp's reshape (no GPU, no communication).

:class:`~nvmath.distributed.distribution.Redistribute` gathers one :func:`local_facts` per rank in
one collective; :func:`resolve_reshape` turns everyone's facts into this rank's
:class:`ReshapePlan` -- the global shape, every rank's input and output box, the symmetric size of
the result -- or raises the same error on every rank, naming the rank at fault. Distributions are
a :class:`Box` (or ``(lower, upper)`` pair) per rank, or a :class:`Slab` (the same on every rank,
made into each rank's box here).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from nvmath._internal import dtypes

from ._distribution import Slab
from ._index import slab_interval
from ._tiling import BoxBounds, as_bounds, check_tiling, global_box_shape

__all__ = ["ELEMENT_SIZES", "ReshapePlan", "local_facts", "parse_distribution", "resolve_reshape"]

ELEMENT_SIZES = (4, 8, 16)
"""The element sizes (bytes) cuFFTMp's reshape moves."""

_SIDES = ("input_distribution", "output_distribution")


def parse_distribution(distribution: Any, ndim: int, name: str) -> BoxBounds | Slab:
    """A :class:`Slab` as given, or this rank's box ``(lower, upper)``.

    Raises:
        TypeError: neither a Slab nor a box.
        ValueError: a box or slab that does not fit an ``ndim``-D operand.
    """
    if isinstance(distribution, Slab):
        if distribution.ndim not in (None, ndim) or distribution.partition_dim >= ndim:
            raise ValueError(f"{name}={distribution!r} does not fit the {ndim}-D operand")
        return distribution
    bounds = as_bounds(distribution, name)
    if len(bounds[0]) != ndim:
        raise ValueError(f"{name} {distribution!r} is {len(bounds[0])}-D; the operand is {ndim}-D")
    return bounds


def _kind(layout: BoxBounds | Slab) -> str:
    return layout.name if isinstance(layout, Slab) else "Box"


def local_facts(shape: tuple[int, ...], dtype: str, source: BoxBounds | Slab, target: BoxBounds | Slab,
                problem: str | None) -> dict[str, Any]:  # fmt: skip
    """What this rank contributes to the one agreement collective."""
    agreed = {"dtype": dtype, "ndim": len(shape)}
    agreed.update({side: _kind(layout) for side, layout in zip(_SIDES, (source, target), strict=True)})
    boxes = {side: layout for side, layout in zip(_SIDES, (source, target), strict=True)
             if not isinstance(layout, Slab)}  # fmt: skip
    return {"agreed": agreed, "shape": shape, "boxes": boxes, "problem": problem}


@dataclass(frozen=True)
class ReshapePlan:
    """This rank's redistribution: the global shape, its boxes, and the result's symmetric size."""

    global_shape: tuple[int, ...]
    input_box: BoxBounds
    output_box: BoxBounds
    result_bytes: int  # the same on every rank: the largest output box of any rank

    @property
    def output_shape(self) -> tuple[int, ...]:
        """This rank's local shape of the result."""
        return tuple(u - lo for lo, u in zip(*self.output_box, strict=True))


def _slab_boxes(slab: Slab, shape: tuple[int, ...], nranks: int) -> list[BoxBounds]:
    boxes = []
    for rank in range(nranks):
        start, stop = slab_interval(shape[slab.partition_dim], nranks, rank)
        lower, upper = [0] * len(shape), list(shape)
        lower[slab.partition_dim], upper[slab.partition_dim] = start, stop
        boxes.append((tuple(lower), tuple(upper)))
    return boxes


def _input_boxes(everyone: Mapping[int, Mapping[str, Any]], source: BoxBounds | Slab,
                 what: str) -> tuple[tuple[int, ...], list[BoxBounds]]:  # fmt: skip
    """``(global shape, every rank's input box)``."""
    nranks = len(everyone)
    if not isinstance(source, Slab):
        boxes = [everyone[r]["boxes"][_SIDES[0]] for r in range(nranks)]
        return global_box_shape(boxes), boxes
    axis = source.partition_dim
    shapes = [everyone[r]["shape"] for r in range(nranks)]
    others = {tuple(n for d, n in enumerate(s) if d != axis) for s in shapes}
    if len(others) > 1:
        raise ValueError(
            f"{what}: with input_distribution={source!r} every rank's operand must have the same extents "
            f"off axis {axis}; the local shapes are {dict(enumerate(shapes))}"
        )
    global_shape = list(shapes[0])
    global_shape[axis] = sum(s[axis] for s in shapes)
    boxes = _slab_boxes(source, tuple(global_shape), nranks)
    wrong = [r for r in range(nranks) if shapes[r][axis] != boxes[r][1][axis] - boxes[r][0][axis]]
    if wrong:
        raise ValueError(
            f"{what}: the local extents along axis {axis}, {[s[axis] for s in shapes]}, are no slab split "
            f"of {global_shape[axis]} over {nranks} ranks (rank(s) {wrong} differ; the first n % P ranks "
            "hold one more)"
        )
    return tuple(global_shape), boxes


def resolve_reshape(everyone: Mapping[int, Mapping[str, Any]], source: BoxBounds | Slab,
                    target: BoxBounds | Slab, dtype: str, rank: int, what: str) -> ReshapePlan:  # fmt: skip
    """This rank's :class:`ReshapePlan` from every rank's :func:`local_facts` (the same verdict on
    every rank; the caller compared the ``"agreed"`` facts and raised the ranks' problems).

    Raises:
        ValueError: boxes that do not tile the global array (naming the ranks), local shapes that
            are not the input boxes', or an element size cuFFTMp's reshape cannot move.
    """
    nranks = len(everyone)
    global_shape, inputs = _input_boxes(everyone, source, what)
    check_tiling(inputs, global_shape, f"{what}: the input boxes")
    wrong = [r for r in range(nranks) if tuple(everyone[r]["shape"]) != _shape(inputs[r])]
    if wrong:
        listed = ", ".join(f"rank {r} has {tuple(everyone[r]['shape'])}, its box {_shape(inputs[r])}"
                           for r in wrong)  # fmt: skip
        raise ValueError(
            f"{what}: the operands of rank(s) {wrong} are not of their input box's shape ({listed})"
        )
    if isinstance(target, Slab):
        if target.partition_dim >= len(global_shape):
            raise ValueError(f"{what}: output_distribution={target!r} does not fit the shape {global_shape}")
        outputs = _slab_boxes(target, global_shape, nranks)
    else:
        outputs = [everyone[r]["boxes"][_SIDES[1]] for r in range(nranks)]
    check_tiling(outputs, global_shape, f"{what}: the output boxes (global shape {global_shape})")
    itemsize = dtypes.itemsize(dtype)
    if itemsize not in ELEMENT_SIZES:
        raise ValueError(
            f"{what}: operand dtype {dtype!r} has {itemsize}-byte elements; cuFFTMp's reshape moves "
            f"elements of {', '.join(map(str, ELEMENT_SIZES))} bytes"
        )
    largest = max(math.prod(_shape(box)) for box in outputs) * itemsize
    return ReshapePlan(global_shape, inputs[rank], outputs[rank], max(largest, itemsize))


def _shape(box: BoxBounds) -> tuple[int, ...]:
    return tuple(u - lo for lo, u in zip(*box, strict=True))


def c_strides(shape: Sequence[int]) -> tuple[int, ...]:
    """Element strides of a dense C-order array of ``shape``."""
    strides, step = [0] * len(shape), 1
    for axis in reversed(range(len(shape))):
        strides[axis] = step
        step *= max(shape[axis], 1)
    return tuple(strides)
