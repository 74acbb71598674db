"""RAII wrappers of cuFFTMp objects: a distributed plan (:class:`MpHandle`) and a reshape with its
symmetric scratch and workspace (:class:`MpReshape`).

Every constructor and ``close()`` here is *collective* in cuFFTMp / NVSHMEM (plans allocate their
workspace on the symmetric heap; ``nvshmem_malloc`` / ``nvshmem_free`` are collective): every rank
makes and closes the same objects in the same order. The planner guarantees that (it checks the
ranks agree before making any) and closes them only from explicit ``free()`` calls.

NVSHMEM is started by :func:`nvmath.distributed.initialize`, so plans attach with
``CUFFT_COMM_NONE`` and a null handle (cufftMp.h: "comm_handle should be null and NVSHMEM
bootstrapping is implicit"): cuFFTMp then uses the running NVSHMEM's PEs, which the runtime checked
are the process group's ranks.
"""

from __future__ import annotations

import importlib
import logging
from types import ModuleType
from typing import Any

from nvmath._errors import LibraryNotFoundError

from ._boxes import BOX_SUBFORMATS, BoxFFTTraits, distribution_arguments
from ._layout import ReshapeBoxes, lift_to_3d
from ._traits import SLAB_SUBFORMATS, SlabFFTTraits

__all__ = ["CUFFT_FORWARD", "CUFFT_INVERSE", "MpHandle", "MpReshape", "bindings", "cufft_type"]

logger = logging.getLogger(__name__)

CUFFT_FORWARD = -1
CUFFT_INVERSE = 1

_TYPES = {
    ("C2C", "complex64"): "C2C", ("C2C", "complex128"): "Z2Z",
    ("R2C", "float32"): "R2C", ("R2C", "float64"): "D2Z",
    ("C2R", "complex64"): "C2R", ("C2R", "complex128"): "Z2D",
}  # fmt: skip


def bindings() -> ModuleType:
    """``nvmath.bindings.cufftMp`` with its library loaded.

    Raises:
        ImportError: cuFFTMp is not installed (names the wheel and the ``[distributed]`` extra).
    """
    from nvmath.bindings import _loader

    try:
        _loader.library_info("cufftMp")
    except LibraryNotFoundError as exc:
        raise ImportError(
            f"nvmath.distributed.fft needs cuFFTMp (nvidia-cufftmp-cu13): {exc}. Install it with "
            "`pip install nvmath-kit[distributed]`."
        ) from exc
    return importlib.import_module("nvmath.bindings.cufftMp")


def cufft_type(fft_type: str, operand_dtype: str) -> str:
    """The ``cufftType`` member name of a transform (``"C2C"``, ``"Z2Z"``, ``"R2C"``, ``"D2Z"``...)."""
    return _TYPES[(fft_type, operand_dtype)]


def _subformats(lib: ModuleType, traits: SlabFFTTraits | BoxFFTTraits, direction: int) -> tuple[int, int]:
    """``(subformat_forward, subformat_inverse)``: the input of a forward transform, then the input
    of an inverse one. For slabs the operand is the input of ``direction`` and the other is the
    complementary slab; Box plans always take the boxes' formats (see ``_boxes``)."""
    if isinstance(traits, BoxFFTTraits):
        forward, inverse = BOX_SUBFORMATS
        return int(lib.XtSubFormat["FORMAT_" + forward]), int(lib.XtSubFormat["FORMAT_" + inverse])
    mine = SLAB_SUBFORMATS[traits.partition]
    other = SLAB_SUBFORMATS[1 - traits.partition]
    forward, inverse = (mine, other) if direction == CUFFT_FORWARD else (other, mine)
    return int(lib.XtSubFormat["FORMAT_" + forward]), int(lib.XtSubFormat["FORMAT_" + inverse])


class MpHandle:
    """One cuFFTMp plan (``cufftHandle``) for ``traits`` executed in ``direction`` (collective);
    Box traits set the plan's distribution (``cufftXtSetDistribution``) before planning."""

    def __init__(self, lib: ModuleType, traits: SlabFFTTraits | BoxFFTTraits, direction: int):
        self.lib = lib
        self.direction = direction
        sizes = traits.global_result_shape if traits.fft_type == "C2R" else traits.global_shape
        kind = int(lib.Type[cufft_type(traits.fft_type, traits.operand_dtype)])
        handle = lib.create()
        try:
            lib.attach_comm(handle, int(lib.CommType.NONE), 0)
            if isinstance(traits, BoxFFTTraits):
                lib.xt_set_distribution(handle, len(sizes), *distribution_arguments(traits, direction))
            lib.xt_set_subformat_default(handle, *_subformats(lib, traits, direction))
            if len(sizes) == 2:
                self.workspace_bytes = lib.make_plan2d(handle, *sizes, kind)
            else:
                self.workspace_bytes = lib.make_plan3d(handle, *sizes, kind)
        except BaseException:
            lib.destroy(handle)
            raise
        self.handle: int | None = handle
        logger.debug("cuFFTMp plan %s %s %s direction %d", handle, sizes, traits.fft_type, direction)

    def execute(self, address: int, stream_ptr: int) -> None:
        """Transform the buffer at ``address`` in place, on the stream ``stream_ptr``."""
        self.lib.set_stream(self.handle, stream_ptr)
        self.lib.xt_exec(self.handle, address, address, self.direction)

    def close(self) -> None:
        """Destroy the plan (collective; idempotent)."""
        handle, self.handle = self.handle, None
        if handle is not None:
            self.lib.destroy(handle)


class MpReshape:
    """A cuFFTMp reshape (``cufftMpMakeReshape``) with its symmetric workspace and, when
    ``scratch_bytes`` > 0, a symmetric scratch buffer for in-place use (:meth:`execute`: reshape into
    the scratch, then copy back into the operand's buffer); :meth:`run` reshapes out of place.
    Boxes of fewer than 3 dimensions are given to cuFFTMp as 3-D boxes with leading extents of 1.

    Args:
        lib: the cuFFTMp bindings.
        nvshmem: the NVSHMEM bindings (for the symmetric scratch and workspace).
        boxes: this rank's reshape (:func:`~._layout.reshape_boxes`).
        scratch_bytes: the symmetric scratch capacity (equal on every rank; 0: no scratch).
        agree_max: ``f(n) -> max of n over the ranks`` (a collective; the workspace size may differ
            between ranks, symmetric allocations may not).
    """

    def __init__(self, lib: ModuleType, nvshmem: ModuleType, boxes: ReshapeBoxes, scratch_bytes: int,
                 agree_max: Any):  # fmt: skip
        self.lib, self.nvshmem = lib, nvshmem
        self.scratch = self.workspace = 0
        boxes = lift_to_3d(boxes)
        handle = lib.create_reshape()
        self.handle: int | None = handle
        try:
            lib.make_reshape_11_4(
                handle, boxes.element_size, len(boxes.lower_input), boxes.lower_input, boxes.upper_input,
                boxes.strides_input, boxes.lower_output, boxes.upper_output, boxes.strides_output, 0,
                int(lib.CommType.NONE),
            )  # fmt: skip
            workspace_bytes = max(int(agree_max(lib.get_reshape_size(handle))), 1)
            if scratch_bytes:
                self.scratch = self._malloc(scratch_bytes)
            self.workspace = self._malloc(workspace_bytes)
        except BaseException:
            self.close()
            raise
        self.workspace_bytes = workspace_bytes + scratch_bytes

    def _malloc(self, nbytes: int) -> int:
        address = self.nvshmem.malloc(max(nbytes, 1)) or 0
        if not address:
            raise MemoryError(
                f"nvshmem_malloc({nbytes}) failed for a cuFFTMp reshape (the FFT's redistribution or "
                "Redistribute): the symmetric heap is exhausted; set NVSHMEM_SYMMETRIC_SIZE larger before "
                "initialize() (or use FFTOptions(redistribute=False))"
            )
        return address

    def run(self, out: int, inp: int, stream_ptr: int) -> None:
        """Reshape the symmetric buffer at ``inp`` into the symmetric buffer at ``out`` (out of place)."""
        self.lib.exec_reshape_async(self.handle, out, inp, self.workspace, stream_ptr)

    def execute(self, address: int, nbytes: int, stream: Any, memcpy: Any) -> None:
        """Reshape the buffer at ``address`` into the scratch, then copy ``nbytes`` back (on ``stream``,
        a StreamHandle; ``memcpy(kind, dst, src, nbytes, stream)``)."""
        self.run(self.scratch, address, stream.ptr)
        # every rank's reshape has read this rank's buffer before it is overwritten below
        self.nvshmem.sync_all_on_stream(stream.ptr)
        if nbytes:
            memcpy("DtoD", address, self.scratch, nbytes, stream)

    def close(self) -> None:
        """Destroy the reshape and free its symmetric memory (collective; idempotent)."""
        handle, self.handle = self.handle, None
        if handle is not None:
            self.lib.destroy_reshape(handle)
        for name in ("workspace", "scratch"):
            address = getattr(self, name)
            if address:
                setattr(self, name, 0)
                self.nvshmem.free(address)
