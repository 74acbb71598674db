"""GPU execution of one generic matmul problem on cuBLAS: a small program per routine family.

A program is built once from the :class:`~nvmath.linalg.generic._traits.Traits` (every integer
argument precomputed) and launched with the call's pointers, scalars and stream. The routine family
is chosen by a table (:data:`PROGRAMS`):

==========  ===============================================================================
``gemm``    ``cublasGemmEx`` / ``cublasGemmStridedBatchedEx`` (one launch per strided run)
``symm``    ``cublas<t>symm`` per matrix; from :data:`MIRROR_MIN` rows on, the stored triangle is
            mirrored into a scratch matrix and multiplied with ``GemmEx`` (faster on Hopper)
``hemm``    ``cublas<t>hemm`` per matrix (same size rule, mirroring with conjugation)
``trmm``    ``cublas<t>trmm`` per matrix (out of place); with ``c``, ``geam`` adds ``beta * c`` (the
            zero-filled triangle and ``GemmEx`` from :data:`TRMM_GEMM_MIN` rows on: never on H200)
``dgmm``    ``cublas<t>dgmm`` per matrix; ``geam`` applies ``alpha`` and ``beta * c``
==========  ===============================================================================

Compute types (:data:`TYPES`): float16 / bfloat16 / float32 / complex64 accumulate in float32
(``CUBLAS_COMPUTE_32F``), float64 / complex128 in float64; float32 never uses TF32.

Handles: one cuBLAS handle per (thread, device), created on first use; every launch sets the stream
and the workspace (memory from the package allocator, :data:`WORKSPACE_BYTES`) first, so two
planners sharing a thread's handle never see each other's workspace.

Launches go through the launch objects of :mod:`._launch` (:class:`~._launch.GemmLaunch`,
:class:`~._launch.RoutineLaunch`), which call the unchecked bindings
(``nvmath.bindings._unchecked.cublas``, or their C functions through the compiled caller: no per-call
range check, so no wrap-around may reach them): every integer a program passes is checked against its
C type once, when the program is built at plan time (:func:`c_int`: ``ValueError`` naming the value
and the limit); pointers are tensor addresses (plus offsets inside the tensor), handles come from
:func:`get_handle`, streams are bounded to 64 bits by :mod:`nvmath._internal.streams`, the enums are
cuBLAS's own.
"""

from __future__ import annotations

import logging
from typing import Any, NamedTuple

import numpy as np

from nvmath._internal import caches
from nvmath._internal.library_handles import ThreadHandles
from nvmath.bindings import cublas
from nvmath.bindings._unchecked import cublas as cublas_unchecked
from nvmath.bindings.cublas import ComputeType, CudaDataType, Operation
from nvmath.linalg.generic._batching import batch_plan
from nvmath.linalg.generic._launch import GemmLaunch, RoutineLaunch
from nvmath.linalg.generic._traits import Layout, Traits

__all__ = [
    "POOL_GET",
    "MIRROR_MIN",
    "PROGRAMS",
    "TYPES",
    "MIN_WORKSPACE_BYTES",
    "WORKSPACE_BYTES",
    "GpuProgram",
    "TypeInfo",
    "bind",
    "bindings",
    "handles_here",
    "c_int",
    "get_handle",
    "make_program",
]

logger = logging.getLogger(__name__)

MIRROR_MIN = 1024
"""symm / hemm with a structured matrix of at least this many rows mirror its stored triangle into a
scratch matrix and run GEMM instead (measured on H200: cuBLAS ssymm 4096 x 1024 takes twice as long
as sgemm; the mirror pass costs one read and one write of the matrix). Smaller ones run symm/hemm."""

TRMM_GEMM_MIN = 1 << 62
"""trmm with a triangular matrix of at least this many rows would zero-fill the other triangle into a
scratch matrix and run GEMM instead. Measured on H200 (``benchmarks generic``, 2026-12-01): cuBLAS strmm
4096 x 1024 takes 0.55 ms, the zero-fill and GEMM 0.72 ms (torch's full GEMM 0.68 ms), so trmm always
runs natively; the GEMM route stays for a GPU where the measure says otherwise."""

WORKSPACE_BYTES = 32 * 1024 * 1024
"""The largest cuBLAS workspace a problem gets (the vendor's recommendation for Hopper and Blackwell)."""

MIN_WORKSPACE_BYTES = 64 * 1024
"""The smallest cuBLAS workspace given to a non-empty problem."""


def workspace_bytes(traits: Traits) -> int:
    """The cuBLAS workspace for a problem: room for split-K partial results (eight result-sized
    slices), between :data:`MIN_WORKSPACE_BYTES` and :data:`WORKSPACE_BYTES` -- a 64x64 product asks
    for 64 KiB, not 32 MiB (cuBLAS picks algorithms that fit whatever it is given)."""
    m, n, _ = traits.cm
    need = 8 * m * n * _ITEMSIZE[traits.dtype]
    return min(WORKSPACE_BYTES, max(MIN_WORKSPACE_BYTES, -(-need // 4096) * 4096))


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
_N = int(Operation.N)
_BOUND = caches.memo("nvmath.linalg.generic: cuBLAS handle bindings", 1024)
"""Handle -> the (stream, workspace, bytes) it is bound to (see :func:`bind`)."""


_HANDLES = ThreadHandles(
    "cuBLAS", lambda: cublas.create(), lambda handle: cublas.destroy(handle), lambda handle: _BOUND.pop(handle, None)
)


def get_handle(device_id: int) -> int:
    """This thread's cuBLAS handle on ``device_id`` (created on first use)."""
    return _HANDLES.get(device_id)


POOL_GET = get_handle
"""This module's own :func:`get_handle` (a hot path that reads :data:`handles_here` inline calls
``get_handle`` instead when a test has replaced it)."""
handles_here = _HANDLES.here
"""The handle pool's thread-local storage (``handles_here.handles``: this thread's ``{device: handle}``)."""
bindings = _BOUND
"""Read-only: handle -> the ``(stream, workspace, bytes)`` it is bound to (see :func:`bind`)."""


_LIMITS = {32: (-(2**31), 2**31 - 1), 64: (-(2**63), 2**63 - 1)}


def c_int(what: str, value: int, bits: int = 32) -> int:
    """``value`` as a plain ``int`` after checking it fits cuBLAS's ``bits``-bit signed parameter.

    The launches pass it to the unchecked binding, which would wrap an out-of-range value, so this runs
    once at plan time for every integer a program passes.

    Raises:
        ValueError: the value is out of range; the message names ``what``, the value and the limit.
    """
    low, high = _LIMITS[bits]
    value = int(value)
    if not low <= value <= high:
        limit = high if value > high else low
        raise ValueError(
            f"{what} is {value}, beyond the {bits}-bit limit {limit} of the cuBLAS parameter it is passed "
            "as: split the problem or use smaller / denser operands"
        )
    return value


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
        workspace_bytes: the cuBLAS workspace the program binds (:func:`workspace_bytes`).
    """

    scratch_bytes = 0

    def __init__(self, traits: Traits):
        self.traits = traits
        self.types = TYPES[traits.dtype]
        self.itemsize = _ITEMSIZE[traits.dtype]
        self.scalars = Scalars(self.types.scale)
        self.workspace_bytes = workspace_bytes(traits)
        t = traits
        self.x2 = "a" if t.x1 == "b" else "b"
        self.l1, self.l2, self.ld = t.layouts[t.x1], t.layouts[self.x2], t.layouts["d"]
        self.m, self.n, self.k = t.cm
        self.empty = self.m == 0 or self.n == 0
        if not self.empty:  # (nothing is launched for an empty result)
            names = "NMK" if t.order == "row" else "MNK"
            self.m, self.n, self.k = (c_int(f"dimension {d}", v) for d, v in zip(names, t.cm))

    def _ld(self, name: str, layout: Layout | None = None) -> int:
        """The checked leading dimension of operand ``name`` (``"d"``: the result), of its traits'
        layout or ``layout``."""
        layout = layout or self.traits.layouts[name]
        return c_int(f"the leading dimension of {_operand(name)}", layout.ld)

    def launch(
        self, handle: int, stream: Any, ptrs: dict[str, int], alpha: Any, beta: Any, has_c: bool, scratch: int
    ) -> None:
        """Queue the product on ``stream`` (bound to ``handle``); ``ptrs`` holds ``a``, ``b`` and ``d``
        (``d`` already holds ``c`` when ``has_c``); ``scratch`` has :attr:`scratch_bytes`."""
        raise NotImplementedError


_ITEMSIZE = {"float16": 2, "bfloat16": 2, "float32": 4, "float64": 8, "complex64": 8, "complex128": 16}


def _operand(name: str) -> str:
    return "the result" if name == "d" else f"operand '{name}'"


class GemmProgram(GpuProgram):
    """``GemmEx`` / ``GemmStridedBatchedEx`` over the collapsed batch."""

    def __init__(self, traits: Traits):
        super().__init__(traits)
        t = traits
        self.plan = batch_plan(
            t.batch, {"x1": self.l1.batch_strides, "x2": self.l2.batch_strides, "d": self.ld.batch_strides}
        )
        self.prepare()

    def prepare(self) -> None:
        """Check (once) and keep the integer arguments of the launches (see :meth:`run`)."""
        if self.empty:
            return
        t, plan = self.traits, self.plan
        names = {"x1": t.x1, "x2": self.x2, "d": "d"}
        self.lds = (self._ld(t.x1, self.l1), self._ld(self.x2, self.l2), self._ld("d", self.ld))
        self.strides = tuple(
            c_int(f"the batch stride of {_operand(names[x])}", plan.strides[x], 64) for x in ("x1", "x2", "d")
        )
        self.count = c_int("the batch count of one strided launch", plan.count)
        self.enums = (int(self.l1.op), int(self.l2.op), int(self.types.data), int(self.types.compute))
        self.launcher = GemmLaunch(
            self.enums, (self.m, self.n, self.k), self.lds, self.strides, plan.count, plan.offsets,
            self.itemsize, int(_ALGO),
        )  # fmt: skip

    def launch(self, handle, stream, ptrs, alpha, beta, has_c, scratch):
        if self.empty:
            return
        s = self.scalars
        s.set(alpha, beta)
        self.run(handle, ptrs[self.traits.x1], ptrs[self.x2], ptrs["d"], s.alpha, s.beta)

    def run(self, handle: int, p1: int, p2: int, pd: int, alpha: int, beta: int) -> None:
        """The launches with pointers to matrix 0 and host scalar addresses (:class:`~._launch.GemmLaunch`).

        m, n, k, the leading dimensions, strides and count were range-checked when the program was
        built; the ops, types and algorithm are cuBLAS enums; ``handle`` comes from :func:`get_handle`;
        the pointers are tensor addresses plus offsets inside the tensors.
        """
        self.launcher.run(handle, p1, p2, pd, alpha, beta)


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
        # the launches' integers are checked here, once (see the module docstring)
        if not self.empty:
            self.lds, self.ldx, self.ldd = self._ld(t.structured), self._ld(self.dense), self._ld("d")
            self.side, self.uplo, self.diag = int(t.side), int(t.uplo), int(t.diag)
            self.op_s = int(self.ls.op)

    def _routine_launch(self, fixed: tuple, slots: tuple[int, ...]) -> RoutineLaunch:
        """The launch of this program's routine (``cublas<t><kind>``) with these fixed arguments."""
        return RoutineLaunch(f"{self.types.prefix}{self._routine()}", fixed, slots)

    def _geam_launch(self, lda: int) -> Any:
        """``geam(N, N, m, n, alpha, x, lda, beta, d, ldd, d, ldd)``: per call handle, alpha, x, beta, d."""
        m, n, ldd = self.m, self.n, self.ldd
        fixed = (0, _N, _N, m, n, 0, 0, lda, 0, 0, ldd, 0, ldd)
        launch = RoutineLaunch(f"{self.types.prefix}geam", fixed, (0, 5, 6, 8, 9, 11))
        call = launch.call

        def geam(handle: int, alpha: int, x: int, beta: int, d: int) -> None:
            call(handle, alpha, x, beta, d, d)

        return geam

    def _routine(self) -> str:
        return self.traits.kind

    def matrices(self, ptrs: dict[str, int]):
        isz = self.itemsize
        ps, px, pd = ptrs[self.s_name], ptrs[self.dense], ptrs["d"]
        for off in self.plan.offsets:
            yield ps + off["s"] * isz, px + off["x"] * isz, pd + off["d"] * isz


class _Expanded:
    """The GEMM route of a structured operand: expand it into a full scratch matrix, then GemmEx."""

    def __init__(self, program: _PerMatrix, mode: str, op: int):
        t = program.traits
        self.ns = t.k if t.structured == "a" else t.n
        self.mode, self.scratch_bytes = mode, self.ns * self.ns * program.itemsize
        full = Layout(op, max(self.ns, 1), (), False)
        self.first = t.x1 == t.structured
        gemm = GemmProgram.__new__(GemmProgram)
        GpuProgram.__init__(gemm, t)
        gemm.l1, gemm.l2 = (full, program.lx) if self.first else (program.lx, full)
        gemm.plan = batch_plan((), {"x1": (), "x2": (), "d": ()})
        gemm.prepare()
        self.gemm, self.ld_s, self.uplo, self.dtype = gemm, program.ls.ld, t.uplo, t.dtype

    def run(
        self, handle: int, stream: Any, ps: int, px: int, pd: int, scratch: int, alpha: int, beta: int
    ) -> None:
        from nvmath.linalg.generic import _kernels

        _kernels.expand(scratch, ps, self.ns, self.ld_s, self.uplo, self.mode, self.dtype, stream)
        p1, p2 = (scratch, px) if self.first else (px, scratch)
        self.gemm.run(handle, p1, p2, pd, alpha, beta)


class SymmProgram(_PerMatrix):
    """symm / hemm, or (from :data:`MIRROR_MIN` rows on) the mirrored triangle and GEMM."""

    def __init__(self, traits: Traits):
        super().__init__(traits)
        ns = traits.k if traits.structured == "a" else traits.n
        self.expanded = (
            _Expanded(self, "he" if traits.kind == "hemm" else "sy", Operation.N)
            if ns >= MIRROR_MIN
            else None
        )
        if self.expanded is not None:
            self.scratch_bytes = self.expanded.scratch_bytes
        elif not self.empty:  # symm(side, uplo, m, n, alpha, s, lds, x, ldx, beta, d, ldd)
            fixed = (0, self.side, self.uplo, self.m, self.n, 0, 0, self.lds, 0, self.ldx, 0, 0, self.ldd)
            self.routine = self._routine_launch(fixed, (0, 5, 6, 8, 10, 11)).call

    def launch(self, handle, stream, ptrs, alpha, beta, has_c, scratch):
        if self.empty:
            return
        s = self.scalars
        s.set(alpha, beta)
        ex = self.expanded
        for ps, px, pd in self.matrices(ptrs):
            if ex is not None:
                ex.run(handle, stream, ps, px, pd, scratch, s.alpha, s.beta)
            else:
                self.routine(handle, s.alpha, ps, px, s.beta, pd)


class TrmmProgram(_PerMatrix):
    """trmm (out of place; with ``c`` into scratch, then ``geam`` adds ``beta * c``), or (from
    :data:`TRMM_GEMM_MIN` rows on) the zero-filled triangle and GEMM."""

    def __init__(self, traits: Traits):
        super().__init__(traits)
        ns = traits.k if traits.structured == "a" else traits.n
        mode = "tru" if traits.diag else "tr"
        self.expanded = _Expanded(self, mode, self.ls.op) if ns >= TRMM_GEMM_MIN else None
        self.scratch_bytes = self.expanded.scratch_bytes if self.expanded else self.m * self.n * self.itemsize
        if self.expanded is None and not self.empty:
            # trmm(side, uplo, op, diag, m, n, alpha, s, lds, x, ldx, out, ldo): into d, or into the
            # scratch (ld max(m, 1)) that geam then adds to beta * c
            self.into_d, self.into_scratch = (self._trmm(ldo) for ldo in (self.ldd, max(self.m, 1)))
            self.add_c = self._geam_launch(max(self.m, 1))

    def _trmm(self, ldo: int) -> Any:
        s = self
        fixed = (0, s.side, s.uplo, s.op_s, s.diag, s.m, s.n, 0, 0, s.lds, 0, s.ldx, 0, ldo)
        return self._routine_launch(fixed, (0, 7, 8, 10, 12)).call

    def launch(self, handle, stream, ptrs, alpha, beta, has_c, scratch):
        if self.empty:
            return
        s = self.scalars
        s.set(alpha, beta)
        has_c = has_c and beta != 0  # beta == 0 does not read c (geam is not promised to skip it)
        ex = self.expanded
        for ps, px, pd in self.matrices(ptrs):
            if ex is not None:
                ex.run(handle, stream, ps, px, pd, scratch, s.alpha, s.beta if has_c else s.zero)
            elif has_c:
                self.into_scratch(handle, s.alpha, ps, px, scratch)
                self.add_c(handle, s.one, scratch, s.beta, pd)
            else:
                self.into_d(handle, s.alpha, ps, px, pd)


class DgmmProgram(_PerMatrix):
    """dgmm; ``geam`` applies ``alpha`` (when not 1) and adds ``beta * c``."""

    def __init__(self, traits: Traits):
        super().__init__(traits)
        self.scratch_bytes = self.m * self.n * self.itemsize
        if not self.empty:
            self.incx = c_int(f"the increment of the diagonal of operand '{traits.structured}'", traits.incx)
            # dgmm(side, m, n, x, ldx, s, incx, out, ldo): into d or into the scratch (ld max(m, 1)); geam
            # adds beta * c to alpha * scratch, or scales d in place by alpha
            self.into_d, self.into_scratch = (self._dgmm(ldo) for ldo in (self.ldd, max(self.m, 1)))
            self.add_c, self.scale_d = self._geam_launch(max(self.m, 1)), self._geam_launch(self.ldd)

    def _dgmm(self, ldo: int) -> Any:
        fixed = (0, self.side, self.m, self.n, 0, self.ldx, 0, self.incx, 0, ldo)
        return self._routine_launch(fixed, (0, 4, 6, 8)).call

    def launch(self, handle, stream, ptrs, alpha, beta, has_c, scratch):
        if self.empty:
            return
        s = self.scalars
        s.set(alpha, beta)
        has_c = has_c and beta != 0  # beta == 0 does not read c (geam is not promised to skip it)
        for ps, px, pd in self.matrices(ptrs):
            if has_c:
                self.into_scratch(handle, px, ps, scratch)
                self.add_c(handle, s.alpha, scratch, s.beta, pd)
            else:
                self.into_d(handle, px, ps, pd)
                if alpha != 1:
                    self.scale_d(handle, s.alpha, pd, s.zero, pd)


PROGRAMS: dict[str, type[GpuProgram]] = {
    "gemm": GemmProgram,
    "symm": SymmProgram,
    "hemm": SymmProgram,
    "trmm": TrmmProgram,
    "dgmm": DgmmProgram,
}
"""Routine family -> program class."""


def make_program(traits: Traits, has_c: bool = True) -> GpuProgram:
    """The program of ``traits`` (structured kinds need float32/64 or complex64/128); without ``c``,
    trmm / dgmm write the result directly and need no scratch."""
    if traits.kind != "gemm" and not TYPES[traits.dtype].prefix:
        raise ValueError(
            f"{traits.kind} (a structured qualifier) supports float32, float64, complex64 and complex128; "
            f"got {traits.dtype}: use a general qualifier for float16 / bfloat16"
        )
    program = PROGRAMS[traits.kind](traits)
    if (
        not has_c
        and traits.kind == "dgmm"
        or (traits.kind == "trmm" and not has_c and program.expanded is None)
    ):
        program.scratch_bytes = 0
    return program


def bind(handle: int, stream: Any, workspace: int, workspace_bytes: int) -> None:
    """Point ``handle`` at ``stream`` and the workspace (before every launch).

    The handles are this module's own, so what each is bound to is remembered and an unchanged binding
    costs no library call (``cublasSetStream`` resets the workspace, so both are set together).
    """
    bound = (stream.ptr, workspace, workspace_bytes)
    if _BOUND.get(handle) != bound:  # unchecked: our handle, a bounded stream, our allocation
        cublas_unchecked.set_stream(handle, stream.ptr)
        cublas_unchecked.set_workspace(handle, workspace, workspace_bytes)
        _BOUND.put(handle, bound)
