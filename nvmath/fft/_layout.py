"""cuFFT's advanced data layout, solved from plain shapes and strides (pure: no GPU, no tensors).

cuFFT describes a batch of rank-``r`` transforms (``r`` = 1, 2 or 3) with ``n``, ``inembed``,
``istride``, ``idist``, ``onembed``, ``ostride``, ``odist`` and ``batch``: element ``(b, x_0, ...,
x_{r-1})`` of the input lives at::

    b * idist + istride * (x_{r-1} + inembed[r-1] * (x_{r-2} + inembed[r-2] * (... x_0)))

(``inembed[0]`` is ignored). So the transformed axes, taken outer to inner, must have strides that
divide each other with quotients at least the inner extents, and all the other (batch) axes must
collapse into one stride. This module turns a buffer's strides into those parameters, and when one
stride cannot hold every batch axis it keeps the largest mergeable group as cuFFT's batch and
*loops* over the rest (one ``cufftXtExec`` per remaining batch index, at an offset). A layout that
cannot be described at all raises :class:`LayoutUnsupported` with the reason.

A :class:`CufftStep` is one cuFFT plan plus its launches. Transforms over more than three axes are
a sequence of steps (see :func:`chunk_axes`).
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Sequence

__all__ = [
    "MAX_OPERAND_LAUNCHES",
    "MAX_RANK",
    "CufftStep",
    "LayoutUnsupported",
    "batch_groups",
    "chunk_axes",
    "fft_embedding",
    "is_non_overlapping",
    "solve_step",
]

MAX_RANK = 3
"""The most axes one cuFFT plan transforms."""

MAX_OPERAND_LAUNCHES = 1024
"""The most launches accepted for a step that reads the user's operand directly; beyond it the
layout counts as unsupported (an internal copy, or the caller's transpose, does better)."""


class LayoutUnsupported(Exception):
    """A layout cuFFT's advanced layout cannot describe; the message says why (internal)."""


@dataclasses.dataclass(frozen=True)
class CufftStep:
    """One cuFFT plan (``cufftXtMakePlanMany`` arguments) and where it reads and writes.

    Attributes:
        kind: ``"C2C"``, ``"R2C"`` or ``"C2R"``.
        axes: the buffer axes transformed, outer to inner (cuFFT's order).
        n: the logical transform sizes along ``axes``.
        inembed, istride, idist: the input layout (elements of the input type).
        onembed, ostride, odist: the output layout (elements of the output type).
        batch: transforms per launch.
        src: the buffer read: ``"operand"``, ``"staging"`` or ``"result"``.
        dst: the buffer written (``src`` for an in-place step).
        offsets: ``(input offset, output offset)`` in elements, one pair per launch.
    """

    kind: str
    axes: tuple[int, ...]
    n: tuple[int, ...]
    inembed: tuple[int, ...]
    istride: int
    idist: int
    onembed: tuple[int, ...]
    ostride: int
    odist: int
    batch: int
    src: str
    dst: str
    offsets: tuple[tuple[int, int], ...] = ((0, 0),)

    @property
    def rank(self) -> int:
        """The number of transformed axes (1 to 3)."""
        return len(self.n)

    @property
    def inplace(self) -> bool:
        """Whether the step reads and writes the same buffer."""
        return self.src == self.dst

    @property
    def launches(self) -> int:
        """``cufftXtExec`` calls per execution."""
        return len(self.offsets)

    def plan_args(self) -> tuple:
        """``(rank, n, inembed, istride, idist, onembed, ostride, odist, batch)`` for the plan call."""
        return (
            self.rank,
            self.n,
            self.inembed,
            self.istride,
            self.idist,
            self.onembed,
            self.ostride,
            self.odist,
            self.batch,
        )


def fft_embedding(
    strides: Sequence[int],
    extents: Sequence[int],
    axes: Sequence[int],
    side: str = "input",
    *,
    overlap_ok: bool = False,
) -> tuple[tuple[int, ...], int]:
    """Return ``(embed, stride)`` describing the transformed ``axes`` (outer to inner) of a buffer.

    Only the innermost axis may have extent 1 (its stride is then irrelevant and taken as 1).
    ``overlap_ok`` (a buffer only read): an outer stride may be a smaller multiple of the inner one
    than the inner extent, i.e. the transformed rows overlap (an embedding smaller than the size, as
    nvmath-python passes cuFFT for such operands).

    Raises:
        LayoutUnsupported: a stride is not positive, or does not divide the next outer one with a
            quotient at least the inner extent (at least 1 with ``overlap_ok``).
    """
    inner = axes[-1]
    stride = strides[inner] if extents[inner] > 1 else 1
    if stride <= 0:
        raise LayoutUnsupported(f"{side} axis {inner} has stride {stride}; cuFFT needs positive strides")
    embed = [extents[axes[0]]]
    for outer, inner in itertools.pairwise(axes):
        so = strides[outer]
        si = strides[inner] if extents[inner] > 1 else 1
        if so <= 0 or so % si or (so // si < extents[inner] and not overlap_ok):
            raise LayoutUnsupported(
                f"{side} strides of transformed axes {outer} and {inner} ({so} and {si}) do not nest: "
                f"cuFFT needs the outer stride to be a multiple of the inner one by at least {extents[inner]}"
            )
        embed.append(so // si)
    return tuple(embed), stride


def batch_groups(
    axes: Sequence[int], extents: Sequence[int], in_strides: Sequence[int], out_strides: Sequence[int]
) -> list[list[int]]:
    """Group the batch ``axes`` (extent > 1) into runs that collapse into one stride on both sides.

    Returns:
        The groups, each outer to inner, ordered by decreasing input stride.

    Raises:
        LayoutUnsupported: a batch axis has a stride <= 0 (a broadcast or reversed view).
    """
    live = [a for a in axes if extents[a] > 1]
    for a in live:
        if in_strides[a] <= 0 or out_strides[a] <= 0:
            raise LayoutUnsupported(
                f"batch axis {a} has stride {in_strides[a]} (input) / {out_strides[a]} (output); "
                "cuFFT needs positive strides"
            )
    live.sort(key=lambda a: (-in_strides[a], -out_strides[a], a))
    groups: list[list[int]] = []
    for a in live:
        if groups:
            outer = groups[-1][-1]
            if (
                in_strides[outer] == in_strides[a] * extents[a]
                and out_strides[outer] == out_strides[a] * extents[a]
            ):
                groups[-1].append(a)
                continue
        groups.append([a])
    return groups


def _batch(
    axes: Sequence[int],
    extents: Sequence[int],
    in_strides: Sequence[int],
    out_strides: Sequence[int],
    max_launches: int | None,
) -> tuple[int, int, int, tuple[tuple[int, int], ...]]:
    """Return ``(batch, idist, odist, offsets)``: the largest group batched, the others looped."""
    groups = batch_groups(axes, extents, in_strides, out_strides)
    if not groups:
        return 1, 0, 0, ((0, 0),)
    counts = [math.prod(extents[a] for a in g) for g in groups]
    main = max(range(len(groups)), key=lambda g: (counts[g], g))
    loops = [g for g in range(len(groups)) if g != main]
    launches = math.prod(counts[g] for g in loops)
    if max_launches is not None and launches > max_launches:
        raise LayoutUnsupported(
            f"the batch axes do not collapse into one stride: this layout would need {launches} cuFFT "
            f"launches (at most {max_launches} are used on an operand)"
        )
    ranges = [range(counts[g]) for g in loops]
    dists = [(in_strides[groups[g][-1]], out_strides[groups[g][-1]]) for g in loops]
    offsets = tuple(
        (sum(i * d[0] for i, d in zip(idx, dists)), sum(i * d[1] for i, d in zip(idx, dists)))
        for idx in itertools.product(*ranges)
    )
    inner = groups[main][-1]
    return counts[main], in_strides[inner], out_strides[inner], offsets


def solve_step(
    kind: str,
    axes: Sequence[int],
    n: Sequence[int],
    src: tuple[str, Sequence[int], Sequence[int]],
    dst: tuple[str, Sequence[int], Sequence[int]],
    *,
    max_launches: int | None = None,
) -> CufftStep:
    """Describe one transform over ``axes`` (outer to inner) from buffer ``src`` to buffer ``dst``.

    Args:
        kind: ``"C2C"``, ``"R2C"`` or ``"C2R"``.
        axes: at most :data:`MAX_RANK` axes; only the innermost may have extent 1.
        n: the logical sizes along ``axes``.
        src: ``(name, extents, strides)`` of the buffer read.
        dst: ``(name, extents, strides)`` of the buffer written (batch extents equal ``src``'s).
        max_launches: the most launches allowed (``None``: no limit).

    Raises:
        LayoutUnsupported: the layout cannot be described.
    """
    (src_name, in_ext, in_str), (dst_name, out_ext, out_str) = src, dst
    # an operand only read may overlap along the transformed axes (an overlapping view)
    read_only = src_name == "operand" != dst_name
    inembed, istride = fft_embedding(in_str, in_ext, axes, "input", overlap_ok=read_only)
    onembed, ostride = fft_embedding(out_str, out_ext, axes, "output")
    transformed = set(axes)
    batch_axes = [a for a in range(len(in_ext)) if a not in transformed]
    batch, idist, odist, offsets = _batch(batch_axes, in_ext, in_str, out_str, max_launches)
    if batch == 1:  # unused by cuFFT, but keep them meaningful: one transform's span
        idist, odist = istride * math.prod(inembed), ostride * math.prod(onembed)
    return CufftStep(
        kind=kind,
        axes=tuple(axes),
        n=tuple(n),
        inembed=inembed,
        istride=istride,
        idist=idist,
        onembed=onembed,
        ostride=ostride,
        odist=odist,
        batch=batch,
        src=src_name,
        dst=dst_name,
        offsets=offsets,
    )


def chunk_axes(axes: Sequence[int], fft_type: str) -> list[tuple[int, ...]]:
    """Split ``axes`` (outer to inner) into groups of at most :data:`MAX_RANK`, in execution order.

    * C2C and R2C: the innermost group first (for R2C it holds the halved axis and is the real-to-
      complex step); the outer groups follow as in-place C2C steps on the result.
    * C2R: the outer groups first (in-place C2C steps on the internal copy of the operand), the
      innermost group last (the complex-to-real step).
    """
    axes = tuple(axes)
    groups = [axes[max(0, end - MAX_RANK) : end] for end in range(len(axes), 0, -MAX_RANK)]
    if fft_type == "C2R":
        groups.reverse()
    return groups


_EXACT_OVERLAP_LIMIT = 1 << 22
"""Up to this many elements, a layout whose strides do not nest is checked element by element."""


def is_non_overlapping(extents: Sequence[int], strides: Sequence[int]) -> bool:
    """Whether no two elements of the layout share memory.

    Nested strides (each at least the reach of the smaller ones) never overlap; other layouts of a
    sliced or reshaped operand may still not overlap, and are checked exactly up to
    :data:`_EXACT_OVERLAP_LIMIT` elements (beyond, they count as overlapping).
    """
    live = sorted((abs(strides[a]), extents[a]) for a in range(len(extents)) if extents[a] > 1)
    reach = 1
    nested = True
    for stride, extent in live:
        if stride == 0:
            return False
        if stride < reach:
            nested = False
        reach = max(reach, stride * extent)
    if nested:
        return True
    count = math.prod(extent for _, extent in live)
    if count > _EXACT_OVERLAP_LIMIT:
        return False
    import numpy as np

    offsets = np.zeros(1, dtype=np.int64)
    for stride, extent in live:
        offsets = (offsets[:, None] + np.arange(extent, dtype=np.int64)[None, :] * stride).ravel()
    return int(np.unique(offsets).size) == count
