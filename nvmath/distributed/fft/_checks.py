"""Pure checks of the distributed FFT's inputs (no GPU, no communication).

* :func:`fft_layout`: the distribution argument -> the operand's slab axis, or this rank's
  :class:`~._boxes.BoxPair` (:func:`slab_partition` for slabs only);
* :func:`local_facts` / :func:`global_slab_shape`: what each rank contributes to the one agreement
  collective, and the global shape all ranks derive from everyone's contributions (or the same
  :class:`~nvmath.distributed.RankDisagreementError` on every rank);
* :func:`check_operand_layout`: this rank's operand has the layout cuFFTMp transforms in place;
* :func:`resolve_direction`: the direction of one execution.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nvmath.distributed._agreement import RankDisagreementError, compare_facts
from nvmath.distributed.distribution import Box, Slab
from nvmath.fft._options import FFTDirection, normalize_direction

from ._boxes import BoxPair, box_pair
from ._layout import View, c_strides
from ._traits import ENGINE_DTYPES, slab_extent

__all__ = [
    "check_operand_layout",
    "fft_layout",
    "global_slab_shape",
    "layout_name",
    "local_facts",
    "resolve_direction",
    "slab_partition",
]


def fft_layout(distribution: Any, ndim: int) -> int | BoxPair:
    """The operand's slab axis (0 for ``Slab.X``, 1 for ``Slab.Y``), or this rank's
    :class:`~._boxes.BoxPair` for a pair ``(input Box, output Box)``.

    Raises:
        TypeError: neither a Slab nor a pair of boxes.
        ValueError: a slab along another axis, or boxes or a slab of another dimensionality than
            the operand.
    """
    pair = box_pair(distribution, ndim)
    return slab_partition(distribution, ndim) if pair is None else pair


def layout_name(layout: int | BoxPair) -> str:
    """``"Slab.X"``, ``"Slab.Y"`` or ``"Box"`` (what every rank must agree on)."""
    return "Box" if isinstance(layout, BoxPair) else "Slab." + "XY"[layout]


def slab_partition(distribution: Any, ndim: int) -> int:
    """The slab axis of ``distribution`` (0 for ``Slab.X``, 1 for ``Slab.Y``).

    Raises:
        TypeError: not a Slab.
        ValueError: a slab along another axis, or of another dimensionality than the operand.
    """
    if isinstance(distribution, Slab):
        if distribution.ndim is not None and distribution.ndim != ndim:
            raise ValueError(
                f"distribution {distribution!r} is {distribution.ndim}-D; the operand is {ndim}-D"
            )
        partition = distribution.partition_dim
        if partition not in (0, 1):
            raise ValueError(
                f"distribution {distribution!r}: the distributed FFT takes Slab.X or Slab.Y (cuFFTMp); "
                f"got a slab along axis {partition}"
            )
        return partition
    if isinstance(distribution, Box):
        raise TypeError(
            f"distribution={distribution!r}: a Box distribution is a pair (input Box, output Box) on "
            "each rank (the operand's box and the result's)"
        )
    raise TypeError(
        f"distribution must be Slab.X, Slab.Y or a pair (input Box, output Box); got "
        f"{type(distribution).__name__}: {distribution!r}"
    )


def local_facts(shape: tuple[int, ...], partition: int, agreed: Mapping[str, Any]) -> dict[str, Any]:
    """What this rank contributes: the facts every rank must share (``agreed`` plus the extents off
    the slab axis) and its own extent along it."""
    others = tuple(n for axis, n in enumerate(shape) if axis != partition)
    return {"agreed": {**agreed, "ndim": len(shape), "extents off the slab axis": others},
            "extent": shape[partition]}  # fmt: skip


def global_slab_shape(
    everyone: Mapping[int, Mapping[str, Any]], partition: int, what: str, rank: int
) -> tuple[int, ...]:
    """The global shape from every rank's :func:`local_facts` (the same on every rank).

    Raises:
        RankDisagreementError: the shared facts differ, or the local extents along the slab axis
            are not the slab split of their sum (the first ``n % P`` ranks one larger).
    """
    compare_facts({r: facts["agreed"] for r, facts in everyone.items()}, what, rank)
    nranks = len(everyone)
    extents = [everyone[r]["extent"] for r in range(nranks)]
    total = sum(extents)
    wrong = {r: n for r, n in enumerate(extents) if n != slab_extent(total, r, nranks)}
    if wrong:
        expected = [slab_extent(total, r, nranks) for r in range(nranks)]
        raise RankDisagreementError(
            f"{what}: the local extents along the slab axis {extents} are not a slab split of {total} "
            f"over {nranks} ranks (expected {expected}; rank(s) {sorted(wrong)} differ, seen on rank "
            f"{rank}). Allocate operands with nvmath.distributed.fft.allocate_operand or shape them with "
            "Slab.shape(rank, global_shape).",
            {"extent": {0: extents[0], **wrong}},
        )
    others = list(everyone[0]["agreed"]["extents off the slab axis"])
    others.insert(partition, total)
    return tuple(others)


def check_operand_layout(package: str, device_id: Any, shape: tuple, strides: tuple, dtype: str,
                         expected: View, device: int) -> None:  # fmt: skip
    """Raise unless this rank's operand is a GPU tensor of ``device`` with the ``expected`` layout.

    Raises:
        TypeError: a host (numpy) operand.
        ValueError: another device, shape, dtype or strides (the fix: ``allocate_operand``).
    """
    if device_id == "cpu" or package == "numpy":
        raise TypeError(
            f"the distributed FFT transforms GPU tensors on the NVSHMEM symmetric heap; got a {package} "
            "array in host memory: allocate it with nvmath.distributed.fft.allocate_operand(...)"
        )
    if dtype not in ENGINE_DTYPES:
        raise ValueError(
            f"operand dtype {dtype!r}: cuFFTMp transforms {', '.join(ENGINE_DTYPES)} (no half precision)"
        )
    if device_id != device:
        raise ValueError(
            f"the operand is on device {device_id}, but nvmath.distributed was initialized on device {device}"
        )
    if (tuple(shape), dtype) != (expected.shape, expected.dtype):
        raise ValueError(
            f"this rank's operand is {dtype} {tuple(shape)}, but the FFT needs {expected.dtype} "
            f"{expected.shape} here"
        )
    if any(s != e for s, e, n in zip(strides, expected.strides, shape, strict=True) if n > 1):
        padded = ", last axis padded" if expected.strides != c_strides(shape) else ""
        raise ValueError(
            f"the operand's strides {tuple(strides)} are not the in-place layout cuFFTMp needs "
            f"({expected.strides}, C order{padded}): allocate it with "
            "nvmath.distributed.fft.allocate_operand(...)"
        )


def resolve_direction(direction: Any, fft_type: str) -> FFTDirection:
    """The direction of one execution: the given one, or the transform type's own.

    Raises:
        ValueError: a direction the transform type cannot run (R2C is forward, C2R inverse).
    """
    if direction is None:
        return FFTDirection.INVERSE if fft_type == "C2R" else FFTDirection.FORWARD
    direction = normalize_direction(direction)
    wanted = {"R2C": FFTDirection.FORWARD, "C2R": FFTDirection.INVERSE}.get(fft_type)
    if wanted is not None and direction is not wanted:
        raise ValueError(
            f"a {fft_type} transform runs {wanted.name.lower()} only; got direction={direction.name}"
        )
    return direction
