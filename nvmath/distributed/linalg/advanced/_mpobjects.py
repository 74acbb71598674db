"""RAII wrappers of cuBLASMp objects: handle, grid, matrix descriptor, matmul descriptor, workspace.

Grids are made over the NCCL communicator :func:`nvmath.distributed.initialize` started; creating
and destroying them (and the handle) is collective in cuBLASMp: every rank makes and closes the
same objects in the same order, which the planner guarantees (one agreement check first).

The device workspace is allocated with ``cublasMpMalloc`` (``ncclMemAlloc`` + ``cublasMpBufferRegister``
on a grid): cuBLASMp overlaps communication with the GEMM only with a registered workspace (else
``DEFAULT`` falls back to no overlap and the explicit overlapped algorithms are NOT_SUPPORTED), and
registration needs memory from ``ncclMemAlloc`` or the VMM APIs, which a caching allocator's block is
not. ``cublasMpFree`` deregisters and frees it (collective, like the allocation).
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

import numpy as np

from nvmath._errors import LibraryNotFoundError

from ._traits import GridArgs, MatrixDescriptorArgs

__all__ = ["MpGrid", "MpHandle", "MpMatmulDesc", "MpMatrix", "MpWorkspace", "bindings"]

OPERATIONS = {"N": 0, "T": 1, "C": 2}
"""``cublasOperation_t`` values."""


def bindings() -> ModuleType:
    """``nvmath.bindings.cublasMp`` with its library loaded.

    Raises:
        ImportError: cuBLASMp is not installed (names the wheel and the ``[distributed]`` extra).
    """
    from nvmath.bindings import _loader

    try:
        _loader.library_info("cublasmp")
    except LibraryNotFoundError as exc:
        raise ImportError(
            f"nvmath.distributed.linalg.advanced needs cuBLASMp (nvidia-cublasmp-cu13): {exc}. Install it "
            "with `pip install nvmath-kit[distributed]`."
        ) from exc
    return importlib.import_module("nvmath.bindings.cublasMp")


class _Closing:
    """An object owning one cuBLASMp resource, released once by :meth:`close`."""

    def __init__(self, lib: ModuleType, value: int, release: str):
        self.lib, self.value, self._release = lib, value, release

    def close(self) -> None:
        value, self.value = self.value, None
        if value is not None:
            getattr(self.lib, self._release)(value)


class MpHandle(_Closing):
    """``cublasMpCreate(stream)``."""

    def __init__(self, lib: ModuleType, stream_ptr: int):
        super().__init__(lib, lib.create(stream_ptr), "destroy")


class MpGrid(_Closing):
    """``cublasMpGridCreate(nprow, npcol, layout, comm)`` (collective)."""

    def __init__(self, lib: ModuleType, grid: GridArgs, nccl_comm: int):
        layout = int(lib.GridLayout[grid.layout])
        super().__init__(lib, lib.grid_create(grid.nprow, grid.npcol, layout, nccl_comm), "grid_destroy")


class MpMatrix(_Closing):
    """``cublasMpMatrixDescriptorCreate`` of one distributed matrix on a grid."""

    def __init__(self, lib: ModuleType, d: MatrixDescriptorArgs, cuda_type: int, grid: MpGrid):
        value = lib.matrix_descriptor_create(
            d.m, d.n, d.mb, d.nb, d.rsrc, d.csrc, d.lld, cuda_type, grid.value
        )
        super().__init__(lib, value, "matrix_descriptor_destroy")


class MpMatmulDesc(_Closing):
    """``cublasMpMatmulDescriptorCreate(compute_type)`` with its transposes and algorithm set."""

    def __init__(self, lib: ModuleType, compute_type: int, transa: str, transb: str, algo: int | None,
                 sm_count: int | None):  # fmt: skip
        super().__init__(lib, lib.matmul_descriptor_create(compute_type), "matmul_descriptor_destroy")
        attr = lib.MatmulDescriptorAttribute
        try:
            self._set(attr.TRANSA, OPERATIONS[transa])
            self._set(attr.TRANSB, OPERATIONS[transb])
            if algo is not None:
                self._set(attr.ALGO_TYPE, algo)
            if sm_count is not None:
                self._set(attr.COMMUNICATION_SM_COUNT, sm_count)
        except BaseException:
            self.close()
            raise

    def _set(self, attribute: Any, value: int, dtype: Any = np.int32) -> None:
        buffer = np.array([value], dtype=dtype)
        self.lib.matmul_descriptor_set_attribute(
            self.value, int(attribute), buffer.ctypes.data, buffer.nbytes
        )

    def set(self, name: str, value: int, dtype: Any = np.int32) -> None:
        """Set the attribute ``name`` (a ``MatmulDescriptorAttribute`` member name) to ``value``
        stored as ``dtype`` (int32 for enums and counts, int64 for leading dimensions, uint64 for
        pointers)."""
        self._set(self.lib.MatmulDescriptorAttribute[name], value, dtype)


class MpWorkspace(_Closing):
    """``cublasMpMalloc(grid, size)``: a device workspace registered with cuBLASMp (collective)."""

    def __init__(self, lib: ModuleType, grid: MpGrid, size: int):
        self.grid, self.size = grid, size
        super().__init__(lib, lib.malloc(grid.value, size), "free")

    @property
    def ptr(self) -> int:
        return int(self.value) if self.value is not None else 0

    def close(self) -> None:
        value, self.value = self.value, None
        if value is not None:
            self.lib.free(self.grid.value, value)
