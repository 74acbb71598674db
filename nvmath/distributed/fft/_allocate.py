""":func:`allocate_operand`: a distributed FFT operand on the NVSHMEM symmetric heap, sized and laid
out for cuFFTMp's in-place transforms (collective)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from nvmath.distributed import _runtime, _symmetric
from nvmath.distributed._agreement import compare_facts, gather_by_rank

from ._boxes import BoxPair, box_capacity_bytes, box_fft_traits, box_view
from ._checks import fft_layout, global_slab_shape, layout_name, local_facts
from ._layout import View, local_operand_view, slab_capacity_bytes
from ._traits import ENGINE_DTYPES

__all__ = ["allocate_operand"]

_WHAT = "nvmath.distributed.fft.allocate_operand"


def _check_local_shape(shape: Any) -> tuple[int, ...]:
    if isinstance(shape, int) or not isinstance(shape, Sequence) or not all(
        isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in shape
    ):  # fmt: skip
        raise ValueError(
            f"shape={shape!r}: expected this rank's local shape, a sequence of non-negative ints"
        )
    return tuple(shape)


def _capacity(
    global_shape: tuple[int, ...], dtype: str, partition: int, nranks: int, fft_type: str | None
) -> int:
    """Bytes for any transform of this operand (both C2R parities, both redistribute settings)."""
    parities = ("even", "odd") if fft_type == "C2R" else ("even",)
    return max(
        slab_capacity_bytes(global_shape, dtype, partition, nranks, fft_type=fft_type, last_axis_parity=p)
        for p in parities
    )


def _box_capacity(everyone: dict[int, Any], dtype: str, fft_type: str | None, rank: int) -> int:
    """Bytes for a transform on these boxes (same verdict on every rank; a C2R's output boxes may
    suit either last-axis parity)."""
    compare_facts({r: facts["agreed"] for r, facts in everyone.items()}, _WHAT, rank)
    pairs = {r: facts["boxes"] for r, facts in everyone.items()}
    errors: list[ValueError] = []
    for parity in ("even", "odd") if fft_type == "C2R" else ("even",):
        try:
            traits = box_fft_traits(pairs, dtype, rank, fft_type=fft_type, last_axis_parity=parity,
                                    what=_WHAT)  # fmt: skip
        except ValueError as exc:
            errors.append(exc)
            continue
        return box_capacity_bytes(pairs, traits.operand_dtype, traits.result_dtype)
    raise errors[0]


def _plan_memory(shape: tuple[int, ...], layout: int | BoxPair, agreed: dict[str, Any], dtype: str,
                 fft_type: str | None) -> tuple[int, View]:  # fmt: skip
    """``(symmetric bytes, this rank's view)`` after the one agreement collective."""
    group = _runtime.context().process_group
    if isinstance(layout, BoxPair):
        view = box_view(tuple(u - lo for lo, u in zip(*layout.input, strict=True)), dtype)
        problem = None if view.shape == shape else f"shape {shape} is not its input box's {view.shape}"
        facts = {"agreed": {**agreed, "ndim": len(shape)}, "boxes": layout, "problem": problem}
        everyone = gather_by_rank(group, facts)
        problems = {r: f["problem"] for r, f in everyone.items() if f["problem"]}
        if problems:
            raise ValueError(f"{_WHAT}: on rank(s) {sorted(problems)} (seen on rank {group.rank}): "
                             + "; ".join(f"rank {r}: {p}" for r, p in sorted(problems.items())))  # fmt: skip
        return _box_capacity(everyone, dtype, fft_type, group.rank), view
    everyone = gather_by_rank(group, local_facts(shape, layout, agreed))
    global_shape = global_slab_shape(everyone, layout, _WHAT, group.rank)
    return _capacity(global_shape, dtype, layout, group.nranks, fft_type), local_operand_view(shape, dtype)


def allocate_operand(
    shape: Sequence[int],
    package: Any,
    *,
    input_dtype: Any = None,
    distribution: Any,
    memory_space: str | None = None,
    fft_type: str | None = None,
    logger: logging.Logger | None = None,
) -> Any:
    """A ``package`` tensor of this rank's local ``shape`` on the NVSHMEM symmetric heap, ready for
    an in-place distributed FFT (collective: every rank calls it, in the same order).

    The buffer has the same size on every rank (cuFFTMp and NVSHMEM need it) and room for the
    transform's output in either slab, or in any rank's output box; a real (R2C) slab operand has
    its last axis padded to ``2 * (n // 2 + 1)`` elements (box operands are dense). Free it with
    :func:`nvmath.distributed.free_symmetric_memory`.

    Args:
        shape: this rank's local shape (``Slab.X.shape(rank, global_shape)``, the input box's shape).
        package: ``cupy`` or ``torch`` (the module or its name).
        input_dtype: the operand's dtype (default: the package's default float type, so R2C).
        distribution: ``Slab.X`` or ``Slab.Y``, or this rank's pair ``(input Box, output Box)``.
        memory_space: ``None``, ``"cuda"`` or ``"gpu"`` (symmetric memory is device memory).
        fft_type: ``"C2C"``, ``"R2C"`` or ``"C2R"`` (``None``: R2C for real dtypes, C2C for complex).
        logger: a :class:`logging.Logger`.

    Raises:
        RuntimeError: not initialized, or without the NVSHMEM backend.
        RankDisagreementError: the ranks' shapes are no slab split, or other arguments differ.
        ValueError: a problem cuFFTMp cannot transform, boxes that do not tile the global arrays
            (naming the rank), a shape that is not the input box's, or another memory space.
    """
    if memory_space not in (None, "cuda", "gpu", "device"):
        raise ValueError(
            f"memory_space={memory_space!r}: symmetric memory is GPU memory (use None or 'cuda')"
        )
    shape = _check_local_shape(shape)
    package_name = getattr(package, "__name__", package)
    if package_name not in _symmetric.PACKAGES:
        raise ValueError(f"package={package!r}: expected one of {list(_symmetric.PACKAGES)} (GPU tensors)")
    dtype = _symmetric.dtype_name(package_name, input_dtype)
    if dtype not in ENGINE_DTYPES:
        raise ValueError(f"input_dtype {dtype!r}: cuFFTMp transforms {', '.join(ENGINE_DTYPES)}")
    if fft_type is not None:
        if not isinstance(fft_type, str) or fft_type.upper() not in ("C2C", "R2C", "C2R"):
            raise ValueError(f"fft_type={fft_type!r}: expected 'C2C', 'R2C', 'C2R' or None")
        fft_type = fft_type.upper()
    layout = fft_layout(distribution, len(shape))
    agreed = {"dtype": dtype, "distribution": layout_name(layout), "fft_type": fft_type}
    capacity, view = _plan_memory(shape, layout, agreed, dtype, fft_type)
    flat = _symmetric.allocate_symmetric_memory(
        (-(-capacity // _itemsize(dtype)),), package_name, dtype=input_dtype, skip_symmetric_check=True,
        logger=logger,
    )  # fmt: skip
    return _as_strided(flat, view.shape, view.strides, package_name)


def _itemsize(dtype: str) -> int:
    from nvmath._internal import dtypes

    return dtypes.itemsize(dtype)


def _as_strided(flat: Any, shape: tuple[int, ...], strides: tuple[int, ...], package: str) -> Any:
    """A strided view at the start of ``flat`` (the view's address is the allocation's, so
    ``free_symmetric_memory`` accepts it)."""
    if package == "torch":
        return flat.as_strided(shape, strides)
    from cupy.lib.stride_tricks import as_strided

    return as_strided(flat, shape, tuple(s * flat.itemsize for s in strides))
