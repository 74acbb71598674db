""":func:`allocate_operand`: a distributed FFT operand on the NVSHMEM symmetric heap, sized and laid
out for cuFFTMp's in-place transforms (collective)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from nvmath.distributed import _runtime, _symmetric
from nvmath.distributed._agreement import gather_by_rank

from ._checks import global_slab_shape, local_facts, slab_partition
from ._layout import local_operand_view, slab_capacity_bytes
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
    transform's output in either slab; a real (R2C) operand has its last axis padded to
    ``2 * (n // 2 + 1)`` elements. Free it with :func:`nvmath.distributed.free_symmetric_memory`.

    Args:
        shape: this rank's local shape (``Slab.X.shape(rank, global_shape)``...).
        package: ``cupy`` or ``torch`` (the module or its name).
        input_dtype: the operand's dtype (default: the package's default float type, so R2C).
        distribution: ``Slab.X`` or ``Slab.Y``.
        memory_space: ``None``, ``"cuda"`` or ``"gpu"`` (symmetric memory is device memory).
        fft_type: ``"C2C"``, ``"R2C"`` or ``"C2R"`` (``None``: R2C for real dtypes, C2C for complex).
        logger: a :class:`logging.Logger`.

    Raises:
        RuntimeError: not initialized, or without the NVSHMEM backend.
        RankDisagreementError: the ranks' shapes are no slab split, or other arguments differ.
        ValueError: a problem cuFFTMp cannot transform, or another memory space.
        NotImplementedError: Box distributions (not implemented yet).
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
    partition = slab_partition(distribution, len(shape))
    group = _runtime.context().process_group
    agreed = {"dtype": dtype, "distribution": "Slab." + "XY"[partition], "fft_type": fft_type}
    everyone = gather_by_rank(group, local_facts(shape, partition, agreed))
    global_shape = global_slab_shape(everyone, partition, _WHAT, group.rank)
    capacity = _capacity(global_shape, dtype, partition, group.nranks, fft_type)
    view = local_operand_view(shape, dtype)
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
