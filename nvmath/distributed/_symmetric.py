"""Tensors on the NVSHMEM symmetric heap: :func:`allocate_symmetric_memory`, :func:`free_symmetric_memory`.

``nvshmem_malloc`` and ``nvshmem_free`` are collective (every PE, same size, same order). So
allocation checks the sizes agree (one collective, raising on every rank) and freeing is explicit
and collective. A symmetric tensor that is garbage-collected without
:func:`free_symmetric_memory` is *not* freed (a free reached from the garbage collector would issue
a collective on one rank only and can deadlock): it warns, and its memory stays reserved until
NVSHMEM is finalized.
"""

from __future__ import annotations

import logging
import math
import warnings
import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np

from nvmath._errors import NvmathWarning
from nvmath._internal import dtypes

from . import _runtime
from ._agreement import check_agreement
from .process_group import ReductionOp

__all__ = ["allocate_symmetric_memory", "bytes_from", "dtype_name", "free_symmetric_memory", "view_at"]

logger = logging.getLogger(__name__)

PACKAGES = ("cupy", "torch")


class _Allocation:
    """Bookkeeping of one symmetric allocation; the tensors made on it keep it alive."""

    def __init__(self, address: int, nbytes: int, registry: dict[int, Any]):
        self.address = address
        self.nbytes = nbytes
        self.freed = False
        ref = weakref.ref(self)
        registry[address] = ref
        weakref.finalize(self, _collected, address, nbytes, registry, ref, self.__dict__)


def _collected(address: int, nbytes: int, registry: dict[int, Any], ref: Any, record: dict[str, Any]) -> None:
    # NVSHMEM hands a freed address out again: a later allocation may own this registry entry now
    # (dropping the entry unconditionally made the next free of that allocation raise "not live")
    if registry.get(address) is ref:
        del registry[address]
    if not record.get("freed"):
        warnings.warn(
            f"a symmetric tensor ({nbytes} bytes at {address:#x}) was garbage-collected without "
            "nvmath.distributed.free_symmetric_memory(): it is NOT freed (a free from the garbage "
            "collector would be a collective on one rank only) and stays reserved until finalize. "
            "Free symmetric tensors explicitly, on every rank, in the same order.",
            NvmathWarning,
            stacklevel=2,
        )


def dtype_name(package: str, dtype: Any) -> str:
    if package == "torch":
        import torch

        dtype = torch.get_default_dtype() if dtype is None else dtype
        if not isinstance(dtype, torch.dtype):
            raise TypeError(f"dtype={dtype!r}: expected a torch.dtype for package 'torch'")
        return str(dtype).removeprefix("torch.")
    try:
        return np.dtype("float64" if dtype is None else dtype).name
    except TypeError as exc:
        raise TypeError(f"dtype={dtype!r}: not a dtype numpy/cupy understands") from exc


def _is_permutation(value: Any, ndim: int) -> bool:
    return isinstance(value, Sequence) and not isinstance(value, str) and sorted(value) == list(range(ndim))


def layout_strides(shape: tuple[int, ...], axis_order: Any) -> tuple[int, ...]:
    """Element strides of a dense ``shape`` laid out in ``axis_order``: ``"C"`` (last axis fastest),
    ``"F"`` (first axis fastest) or a permutation of the axes, slowest-varying first."""
    ndim = len(shape)
    if axis_order == "C":
        order = tuple(range(ndim))
    elif axis_order == "F":
        order = tuple(reversed(range(ndim)))
    elif _is_permutation(axis_order, ndim):
        order = tuple(axis_order)
    else:
        raise ValueError(f"axis_order={axis_order!r}: expected 'C', 'F' or a permutation of range({ndim})")
    strides = [0] * ndim
    step = 1
    for axis in reversed(order):
        strides[axis] = step
        step *= shape[axis]
    return tuple(strides)


def _check_shape(shape: Any) -> tuple[int, ...]:
    shape = (shape,) if isinstance(shape, int) and not isinstance(shape, bool) else shape
    if not isinstance(shape, Sequence) or not all(
        isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in shape
    ):
        raise ValueError(f"shape={shape!r}: expected a sequence of non-negative ints")
    return tuple(shape)


def view_at(address: int, shape: tuple[int, ...], strides: tuple[int, ...], dtype: str, device_id: int,
            owner: Any, package: str) -> Any:  # fmt: skip
    """A ``package`` tensor viewing ``address`` (through DLPack; ``owner`` lives as long as it)."""
    from nvmath._internal.tensors.device_array import DeviceArray

    array = DeviceArray(address, shape, strides, dtype, device_id, owner)
    if package == "torch":
        import torch

        return torch.from_dlpack(array)
    import cupy

    return cupy.from_dlpack(array)


def allocate_symmetric_memory(
    shape: Sequence[int] | int,
    package: Any,
    *,
    dtype: Any = None,
    axis_order: Any = "C",
    make_symmetric: bool = False,
    skip_symmetric_check: bool = False,
    logger: logging.Logger | None = None,
) -> Any:
    """A ``package`` tensor of ``shape`` on the NVSHMEM symmetric heap of this rank's device
    (collective: every rank calls it, in the same order).

    Args:
        shape: this rank's local shape.
        package: ``"cupy"`` or ``"torch"`` (or the module itself).
        dtype: the element type (default: the package's default float type).
        axis_order: ``"C"``, ``"F"`` or a permutation of the axes, slowest-varying first.
        make_symmetric: allocate the largest size of all ranks on every rank (when the local shapes
            differ, as with uneven slabs).
        skip_symmetric_check: trust that every rank asks for the same size (saves one collective).
        logger: a :class:`logging.Logger` (default: this module's).

    Raises:
        RuntimeError: not initialized, or NVSHMEM not among the backends.
        RankDisagreementError: the sizes differ between ranks (on every rank, naming them).
        MemoryError: the symmetric heap is exhausted (raise ``NVSHMEM_SYMMETRIC_SIZE``).
    """
    log = logger or globals()["logger"]
    package = getattr(package, "__name__", package)
    if package not in PACKAGES:
        raise ValueError(f"package={package!r}: expected one of {list(PACKAGES)} (GPU tensors)")
    shape = _check_shape(shape)
    name = dtype_name(package, dtype)
    strides = layout_strides(shape, axis_order)
    nvshmem = _runtime.engine("nvshmem")
    context = _runtime.context()
    group = context.process_group
    nbytes = math.prod(shape) * dtypes.itemsize(name)
    size = nbytes
    if make_symmetric:
        largest = np.array([nbytes], dtype=np.int64)
        group.allreduce_buffer(largest, op=ReductionOp.MAX)
        size = int(largest[0])
    elif not skip_symmetric_check:
        check_agreement(group, "allocate_symmetric_memory", {"bytes": nbytes})
    address = nvshmem.malloc(max(size, 1)) or 0
    if not address:
        raise MemoryError(
            f"nvshmem_malloc({size}) failed on rank {group.rank}: the symmetric heap is exhausted; "
            "set NVSHMEM_SYMMETRIC_SIZE larger before initialize()"
        )
    owner = _Allocation(address, size, _runtime.symmetric_registry())
    log.debug("symmetric allocation of %d bytes at %#x (%s %s %s)", size, address, package, shape, name)
    return view_at(address, shape, strides, name, context.device_id, owner, package)


def bytes_from(address: int) -> int | None:
    """Bytes from ``address`` to the end of the live symmetric allocation of this process holding it,
    or ``None`` when no allocation of :func:`allocate_symmetric_memory` holds it (torch's own
    symmetric memory, or not symmetric at all)."""
    for start, ref in list(_runtime.symmetric_registry().items()):
        record = ref()
        if record is not None and not record.freed and start <= address < start + max(record.nbytes, 1):
            return start + record.nbytes - address
    return None


def _address_of(tensor: Any) -> int:
    if hasattr(tensor, "data_ptr") and callable(tensor.data_ptr):
        return int(tensor.data_ptr())  # torch
    data = getattr(tensor, "data", None)
    if hasattr(data, "ptr"):
        return int(data.ptr)  # cupy
    if isinstance(getattr(tensor, "data_ptr", None), int):
        return tensor.data_ptr  # nvmath's own DeviceArray
    raise TypeError(f"free_symmetric_memory: {type(tensor).__name__} is not a cupy or torch tensor")


def free_symmetric_memory(*tensors: Any) -> None:
    """Free tensors made by :func:`allocate_symmetric_memory` (collective: every rank frees its
    tensors in the same order). Views are not accepted: pass the tensor the allocation returned.

    Raises:
        ValueError: a tensor is not (the start of) a live symmetric allocation of this process.
    """
    nvshmem = _runtime.engine("nvshmem")
    registry = _runtime.symmetric_registry()
    records = []
    for tensor in tensors:
        address = _address_of(tensor)
        ref = registry.get(address)
        record = ref() if ref is not None else None
        if record is None or record.freed:
            raise ValueError(
                f"free_symmetric_memory: the tensor at {address:#x} is not a live allocation of "
                "allocate_symmetric_memory() on this process (already freed, a view, or not symmetric)"
            )
        records.append(record)
    for record in records:
        nvshmem.free(record.address)
        record.freed = True
        registry.pop(record.address, None)
