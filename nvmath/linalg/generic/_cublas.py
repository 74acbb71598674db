"""GPU execution of one generic matmul problem on cuBLAS: a small program per routine family.

A program is built once from the :class:`~nvmath.linalg.generic._traits.Traits` (every integer
argument precomputed) and launched with the call's pointers, scalars and stream. The routine family
is chosen by a table (:data:`PROGRAMS`):

==========  ===============================================================================
``gemm``    ``cublasGemmEx`` / ``cublasGemmStridedBatchedEx`` (one launch per strided run)
``symm``    ``cublas<t>symm`` per matrix; from :data:`MIRROR_MIN` rows on, the stored triangle is
            mirrored into a scratch matrix and multiplied with ``GemmEx`` (faster on Hopper)
``hemm``    ``cublas<t>hemm`` per matrix (same size rule, mirroring with conjugation)
``trmm``    ``cublas<t>trmm`` per matrix (out of place); with ``c``, ``geam`` adds ``beta * c``
``dgmm``    ``cublas<t>dgmm`` per matrix; ``geam`` applies ``alpha`` and ``beta * c``
==========  ===============================================================================

Compute types (:data:`TYPES`): float16 / bfloat16 / float32 / complex64 accumulate in float32
(``CUBLAS_COMPUTE_32F``), float64 / complex128 in float64; float32 never uses TF32.

Handles: one cuBLAS handle per (thread, device), created on first use; every launch sets the stream
and the workspace (memory from the package allocator, :data:`WORKSPACE_BYTES`) first, so two
planners sharing a thread's handle never see each other's workspace.
"""

from __future__ import annotations

import logging
import sys
import threading
import warnings
from typing import Any, NamedTuple

import numpy as np

from nvmath._internal import devices
from nvmath.bindings import cublas
from nvmath.bindings.cublas import ComputeType, CudaDataType, Operation
from nvmath.linalg.generic._batching import batch_plan
from nvmath.linalg.generic._traits import Traits

__all__ = ["MIRROR_MIN", "PROGRAMS", "TYPES", "WORKSPACE_BYTES", "GpuProgram", "TypeInfo", "bind", "get_handle", "make_program"]

logger = logging.getLogger(__name__)

MIRROR_MIN = 1024
"""symm / hemm with a structured matrix of at least this many rows mirror its stored triangle into a
scratch matrix and run GEMM instead (measured on H200: cuBLAS ssymm 4096 x 1024 takes twice as long
as sgemm; the mirror pass costs one read and one write of the matrix). Smaller ones run symm/hemm."""

WORKSPACE_BYTES = 32 * 1024 * 1024
"""The cuBLAS workspace (the vendor's recommendation for Hopper and Blackwell)."""


class TypeInfo(NamedTuple):
    """cuBLAS types of one dtype."""

    data: int
    compute: int
    scale: Any
    """numpy dtype of alpha / beta."""
    prefix: str
    """BLAS letter (``""`` where cuBLAS has no typed routine)."""


TYPES = {
    "float16": TypeInfo(CudaDataType.R_16F, ComputeType.COMPUTE_32F, np.float32, ""),
    "bfloat16": TypeInfo(CudaDataType.R_16BF, ComputeType.COMPUTE_32F, np.float32, ""),
    "float32": TypeInfo(CudaDataType.R_32F, ComputeType.COMPUTE_32F, np.float32, "s"),
    "float64": TypeInfo(CudaDataType.R_64F, ComputeType.COMPUTE_64F, np.float64, "d"),
    "complex64": TypeInfo(CudaDataType.C_32F, ComputeType.COMPUTE_32F, np.complex64, "c"),
    "complex128": TypeInfo(CudaDataType.C_64F, ComputeType.COMPUTE_64F, np.complex128, "z"),
}
"""dtype -> cuBLAS data type, compute type, scalar type and routine prefix."""

_ALGO = -1  # CUBLAS_GEMM_DEFAULT
_LOCAL = threading.local()


class _ThreadHandles:
    """This thread's cuBLAS handles; destroyed with the thread's storage (never at shutdown)."""

    __slots__ = ("handles",)

    def __init__(self) -> None:
        self.handles: dict[int, int] = {}

    def __del__(self) -> None:
        if sys.is_finalizing():
            return
        handles, self.handles = self.handles, {}
        for device_id, handle in handles.items():
            try:
                with devices.device_ctx(device_id):
                    cublas.destroy(handle)
            except Exception as exc:  # noqa: BLE001 - cleanup failures warn, never raise
                warnings.warn(f"destroying a cuBLAS handle failed: {exc}", RuntimeWarning, stacklevel=2)


def get_handle(device_id: int) -> int:
    """This thread's cuBLAS handle on ``device_id`` (created on first use)."""
    cache = getattr(_LOCAL, "cache", None)
    if cache is None:
        cache = _LOCAL.cache = _ThreadHandles()
    handle = cache.handles.get(device_id)
    if handle is None:
        with devices.device_ctx(device_id):
            handle = cublas.create()
        cache.handles[device_id] = handle
        logger.debug("created cuBLAS handle %#x for device %d", handle, device_id)
    return handle


class Scalars:
    """Host alpha / beta (and 1, 0) in the scale type; their addresses are passed to cuBLAS."""

    __slots__ = ("alpha", "beta", "buf", "one", "zero")

    def __init__(self, scale: Any):
        self.buf = np.zeros(4, dtype=scale)
        self.buf[2] = 1
        base, size = self.buf.ctypes.data, self.buf.itemsize
        self.alpha, self.beta, self.one, self.zero = base, base + size, base + 2 * size, base + 3 * size

    def set(self, alpha: Any, beta: Any) -> None:
        self.buf[0] = alpha
        self.buf[1] = beta


class GpuProgram:
    """Base of the routine programs: pointers in, launches on the handle's current stream.

    Attributes:
        scratch_bytes: device scratch the program needs besides the cuBLAS workspace.
    """

    scratch_bytes = 0

    def __init__(self, traits: Traits):
        self.traits = traits
        self.types = TYPES[traits.dtype]
        self.itemsize = _ITEMSIZE[traits.dtype]
        self.scalars = Scalars(self.types.scale)
        t = traits
        self.x2 = "a" if t.x1 == "b" else "b"
        self.l1, self.l2, self.ld = t.layouts[t.x1], t.layouts[self.x2], t.layouts["d"]
        self.m, self.n, self.k = t.cm
        self.empty = self.m == 0 or self.n == 0

    def launch(
        self, handle: int, stream: Any, ptrs: dict[str, int], alpha: Any, beta: Any, has_c: bool, scratch: int
    ) -> None:
        """Queue the product on ``stream`` (bound to ``handle``); ``ptrs`` holds ``a``, ``b`` and ``d``
        (``d`` already holds ``c`` when ``has_c``); ``scratch`` has :attr:`scratch_bytes`."""
        raise NotImplementedError


_ITEMSIZE = {"float16": 2, "bfloat16": 2, "float32": 4, "float64": 8, "complex64": 8, "complex128": 16}


class GemmProgram(GpuProgram):
    """``GemmEx`` / ``GemmStridedBatchedEx`` over the collapsed batch."""

    def __init__(self, traits: Traits):
        super().__init__(traits)
        t = traits
        self.plan = batch_plan(
            t.batch, {"x1": self.l1.batch_strides, "x2": self.l2.batch_strides, "d": self.ld.batch_strides}
        )

    def launch(self, handle, stream, ptrs, alpha, beta, has_c, scratch):
        if self.empty:
            return
        s = self.scalars
        s.set(alpha, beta)
        self.run(handle, ptrs[self.traits.x1], ptrs[self.x2], ptrs["d"], s.alpha, s.beta)

    def run(self, handle: int, p1: int, p2: int, pd: int, alpha: int, beta: int) -> None:
        """The launches with pointers to matrix 0 and host scalar addresses."""
        ty, isz, l1, l2, ld = self.types, self.itemsize, self.l1, self.l2, self.ld
        plan = self.plan
        for off in plan.offsets:
            q1, q2, qd = p1 + off["x1"] * isz, p2 + off["x2"] * isz, pd + off["d"] * isz
            if plan.count == 1:
                cublas.gemm_ex(
                    handle, l1.op, l2.op, self.m, self.n, self.k, alpha, q1, ty.data, l1.ld, q2, ty.data, l2.ld,
                    beta, qd, ty.data, ld.ld, ty.compute, _ALGO,
                )  # fmt: skip
            else:
                st = plan.strides
                cublas.gemm_strided_batched_ex(
                    handle, l1.op, l2.op, self.m, self.n, self.k, alpha, q1, ty.data, l1.ld, st["x1"], q2, ty.data,
                    l2.ld, st["x2"], beta, qd, ty.data, ld.ld, st["d"], plan.count, ty.compute, _ALGO,
                )  # fmt: skip


class _PerMatrix(GpuProgram):
    """Structured routines: one launch per matrix of the batch."""

    def __init__(self, traits: Traits):
        super().__init__(traits)
        t = traits
        self.s_name = t.structured
        self.dense = "b" if t.structured == "a" else "a"
        self.ls, self.lx = t.layouts[t.structured], t.layouts[self.dense]
        self.plan = batch_plan(
            t.batch,
            {"s": self.ls.batch_strides, "x": self.lx.batch_strides, "d": self.ld.batch_strides},
            strided=False,
        )
        self.fn = getattr(cublas, f"{self.types.prefix}{self._routine()}", None)
        self.geam = getattr(cublas, f"{self.types.prefix}geam", None)

    def _routine(self) -> str:
        return self.traits.kind

    def matrices(self, ptrs: dict[str, int]):
        isz = self.itemsize
        ps, px, pd = ptrs[self.s_name], ptrs[self.dense], ptrs["d"]
        for off in self.plan.offsets:
            yield ps + off["s"] * isz, px + off["x"] * isz, pd + off["d"] * isz


class SymmProgram(_PerMatrix):
    """symm / hemm, or mirror + GEMM from :data:`MIRROR_MIN` rows on."""

    def __init__(self, traits: Traits):
        super().__init__(traits)
        t = traits
        self.ns = t.k if t.structured == "a" else t.n
        self.mirror = self.ns >= MIRROR_MIN
        if self.mirror:
            self.scratch_bytes = self.ns * self.ns * self.itemsize
            dense = self.lx
            from nvmath.linalg.generic._traits import Layout

            full = Layout(Operation.N, max(self.ns, 1), (), False)
            l1, l2 = (full, dense) if t.x1 == t.structured else (dense, full)
            self.gemm = GemmProgram.__new__(GemmProgram)
            GpuProgram.__init__(self.gemm, traits)
            self.gemm.l1, self.gemm.l2 = l1, l2
            self.gemm.plan = batch_plan((), {"x1": (), "x2": (), "d": ()})

    def launch(self, handle, stream, ptrs, alpha, beta, has_c, scratch):
        if self.empty:
            return
        s = self.scalars
        s.set(alpha, beta)
        t = self.traits
        for ps, px, pd in self.matrices(ptrs):
            if self.mirror:
                from nvmath.linalg.generic._kernels import mirror

                mirror(scratch, ps, self.ns, self.ls.ld, t.uplo, t.kind == "hemm", t.dtype, stream)
                p1, p2 = (scratch, px) if t.x1 == t.structured else (px, scratch)
                self.gemm.run(handle, p1, p2, pd, s.alpha, s.beta)
            else:
                self.fn(handle, t.side, t.uplo, self.m, self.n, s.alpha, ps, self.ls.ld, px, self.lx.ld, s.beta, pd,
                        self.ld.ld)  # fmt: skip


class TrmmProgram(_PerMatrix):
    """trmm (out of place); with ``c`` the product goes to scratch and ``geam`` adds ``beta * c``."""

    def __init__(self, traits: Traits):
        super().__init__(traits)
        self.scratch_bytes = self.m * self.n * self.itemsize

    def launch(self, handle, stream, ptrs, alpha, beta, has_c, scratch):
        if self.empty:
            return
        s = self.scalars
        s.set(alpha, beta)
        t, m, n = self.traits, self.m, self.n
        for ps, px, pd in self.matrices(ptrs):
            out, ldo = (scratch, max(m, 1)) if has_c else (pd, self.ld.ld)
            self.fn(handle, t.side, t.uplo, self.ls.op, t.diag, m, n, s.alpha, ps, self.ls.ld, px, self.lx.ld, out, ldo)
            if has_c:
                self.geam(handle, Operation.N, Operation.N, m, n, s.one, out, ldo, s.beta, pd, self.ld.ld, pd,
                          self.ld.ld)  # fmt: skip


class DgmmProgram(_PerMatrix):
    """dgmm; ``geam`` applies ``alpha`` (when not 1) and adds ``beta * c``."""

    def __init__(self, traits: Traits):
        super().__init__(traits)
        self.scratch_bytes = self.m * self.n * self.itemsize

    def launch(self, handle, stream, ptrs, alpha, beta, has_c, scratch):
        if self.empty:
            return
        s = self.scalars
        s.set(alpha, beta)
        t, m, n, ldd = self.traits, self.m, self.n, self.ld.ld
        for ps, px, pd in self.matrices(ptrs):
            out, ldo = (scratch, max(m, 1)) if has_c else (pd, ldd)
            self.fn(handle, t.side, m, n, px, self.lx.ld, ps, t.incx, out, ldo)
            if has_c:
                self.geam(handle, Operation.N, Operation.N, m, n, s.alpha, out, ldo, s.beta, pd, ldd, pd, ldd)
            elif alpha != 1:
                self.geam(handle, Operation.N, Operation.N, m, n, s.alpha, pd, ldd, s.zero, pd, ldd, pd, ldd)


PROGRAMS: dict[str, type[GpuProgram]] = {
    "gemm": GemmProgram,
    "symm": SymmProgram,
    "hemm": SymmProgram,
    "trmm": TrmmProgram,
    "dgmm": DgmmProgram,
}
"""Routine family -> program class."""


def make_program(traits: Traits) -> GpuProgram:
    """The program of ``traits`` (structured kinds need float32/64 or complex64/128)."""
    if traits.kind != "gemm" and not TYPES[traits.dtype].prefix:
        raise ValueError(
            f"{traits.kind} (a structured qualifier) supports float32, float64, complex64 and complex128; "
            f"got {traits.dtype}: use a general qualifier for float16 / bfloat16"
        )
    return PROGRAMS[traits.kind](traits)


def bind(handle: int, stream: Any, workspace: int, workspace_bytes: int) -> None:
    """Point ``handle`` at ``stream`` and the workspace (before every launch)."""
    cublas.set_stream(handle, stream.ptr)
    cublas.set_workspace(handle, workspace, workspace_bytes)
