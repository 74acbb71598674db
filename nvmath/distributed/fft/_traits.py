"""Pure planning facts of the distributed FFT on slabs (no GPU, no communication).

:func:`slab_fft_traits` maps a global shape, an operand dtype, a slab (X = partitioned along axis
0, Y = along axis 1) and the options to frozen :class:`SlabFFTTraits`: the transform type, the
global and local shapes of operand and result, and the cuFFTMp data layouts
(``CUFFT_XT_FORMAT_INPLACE`` for X-slabs, ``CUFFT_XT_FORMAT_INPLACE_SHUFFLED`` for Y-slabs). It
encodes cuFFTMp's limits so that a bad request fails here, on every rank alike, before any plan.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from nvmath.fft._traits import resolve_fft_type

__all__ = [
    "ENGINE_DTYPES",
    "SLAB_SUBFORMATS",
    "SlabFFTTraits",
    "check_problem_shape",
    "result_global_shape",
    "slab_extent",
    "slab_fft_traits",
    "slab_shape",
]

ENGINE_DTYPES = ("float32", "float64", "complex64", "complex128")
"""The element types cuFFTMp transforms (single and double precision)."""

# Slab partition axis -> cuFFTMp subformat (cufftXtSubFormat member name).
SLAB_SUBFORMATS = {0: "INPLACE", 1: "INPLACE_SHUFFLED"}
_SLAB_NAMES = {0: "Slab.X", 1: "Slab.Y"}


@dataclass(frozen=True)
class SlabFFTTraits:
    """What a rank needs to plan one slab FFT (identical on every rank except the local shapes)."""

    fft_type: str
    operand_dtype: str
    result_dtype: str
    global_shape: tuple[int, ...]  # the operand's
    global_result_shape: tuple[int, ...]
    partition: int  # the operand's slab axis (0 = X, 1 = Y)
    result_partition: int
    operand_subformat: str
    result_subformat: str
    local_shape: tuple[int, ...]
    local_result_shape: tuple[int, ...]


def slab_extent(n: int, rank: int, nranks: int) -> int:
    """Rank ``rank``'s share of ``n`` indices over ``nranks`` slabs (the first ``n % nranks`` ranks
    get one more)."""
    return n // nranks + (1 if rank < n % nranks else 0)


def slab_shape(global_shape: Sequence[int], partition: int, rank: int, nranks: int) -> tuple[int, ...]:
    """The local shape of rank ``rank`` of a slab partitioned along ``partition``."""
    shape = list(global_shape)
    shape[partition] = slab_extent(shape[partition], rank, nranks)
    return tuple(shape)


def result_global_shape(
    global_shape: tuple[int, ...], fft_type: str, last_axis_parity: str
) -> tuple[int, ...]:
    """The global shape of the result of a transform of an operand of ``global_shape``."""
    last = global_shape[-1]
    if fft_type == "R2C":
        last = last // 2 + 1
    elif fft_type == "C2R":
        last = 2 * (last - 1) if last_axis_parity == "even" else 2 * last - 1
    return (*global_shape[:-1], last)


def check_problem_shape(global_shape: tuple[int, ...], nranks: int) -> None:
    """Raise ValueError unless cuFFTMp can transform an array of ``global_shape`` on ``nranks``
    ranks (2-D or 3-D, the first two extents at least the number of ranks; any distribution)."""
    if len(global_shape) not in (2, 3):
        raise ValueError(f"global shape {global_shape}: the distributed FFT is 2-D or 3-D (cuFFTMp)")
    if any(n < 1 for n in global_shape):
        raise ValueError(f"global shape {global_shape}: every extent must be >= 1")
    if min(global_shape[:2]) < nranks:
        raise ValueError(
            f"global shape {global_shape} on {nranks} ranks: cuFFTMp needs the first two extents "
            f">= the number of ranks ({nranks})"
        )


def slab_fft_traits(
    global_shape: Sequence[int],
    dtype: str,
    partition: int,
    rank: int,
    nranks: int,
    *,
    fft_type: str | None = None,
    redistribute: bool = True,
    last_axis_parity: str = "even",
) -> SlabFFTTraits:
    """Plan facts of a slab FFT.

    Args:
        global_shape: the operand's global shape (for C2R, the complex one).
        dtype: the operand's dtype name (``"complex64"``, ``"float32"``...).
        partition: the operand's slab axis: 0 (``Slab.X``) or 1 (``Slab.Y``).
        rank, nranks: this rank and the number of ranks.
        fft_type, redistribute, last_axis_parity: as in :class:`~nvmath.distributed.fft.FFTOptions`.

    Raises:
        ValueError: a shape, slab or dtype cuFFTMp cannot transform (the message says why).
    """
    global_shape = tuple(global_shape)
    check_problem_shape(global_shape, nranks)
    if partition not in SLAB_SUBFORMATS:
        raise ValueError(
            f"slab axis {partition}: cuFFTMp's slab FFTs take Slab.X (axis 0) or Slab.Y (axis 1); "
            "use Box distributions for other decompositions"
        )
    if dtype not in ENGINE_DTYPES:
        raise ValueError(
            f"operand dtype {dtype!r}: cuFFTMp transforms {', '.join(ENGINE_DTYPES)} (no half precision)"
        )
    fft_type, result_dtype = resolve_fft_type(dtype, fft_type)
    if len(global_shape) == 2 and fft_type in ("R2C", "C2R"):
        wanted = 0 if fft_type == "R2C" else 1
        if partition != wanted:
            raise ValueError(
                f"a 2-D {fft_type} needs a {_SLAB_NAMES[wanted]} operand (cuFFTMp); "
                f"got {_SLAB_NAMES[partition]}"
            )
    result_partition = partition if redistribute else 1 - partition
    global_result_shape = result_global_shape(global_shape, fft_type, last_axis_parity)
    return SlabFFTTraits(
        fft_type=fft_type,
        operand_dtype=dtype,
        result_dtype=result_dtype,
        global_shape=global_shape,
        global_result_shape=global_result_shape,
        partition=partition,
        result_partition=result_partition,
        operand_subformat=SLAB_SUBFORMATS[partition],
        result_subformat=SLAB_SUBFORMATS[result_partition],
        local_shape=slab_shape(global_shape, partition, rank, nranks),
        local_result_shape=slab_shape(global_result_shape, result_partition, rank, nranks),
    )
