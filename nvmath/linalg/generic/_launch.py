"""The one place that calls cuBLAS for the generic matmul: :class:`GemmLaunch` and :class:`RoutineLaunch`.

A :class:`~._cublas.GemmProgram` builds one when it is prepared: it holds every argument of the
program's ``cublasGemmEx`` (one matrix per launch) or ``cublasGemmStridedBatchedEx`` (a strided batch)
that does not change between calls -- ops, sizes, leading dimensions, types, compute type, algorithm,
batch strides and count -- and a call gives the handle, the host scalar addresses and the matrix
addresses. The call goes through a compiled ``nvmath._fastcall.FastCall`` when the compiled path is
active and the binding calls C (``nvmath._internal.fastpath.bound_caller``), else through the unchecked
binding (the reference).

:class:`RoutineLaunch` does the same for every other routine the programs call -- the structured ones
(``symm`` / ``hemm``, ``trmm``, ``dgmm``), ``geam`` and the grouped GEMM: it holds the routine's fixed
arguments (enums, sizes, leading dimensions; for the grouped GEMM its C ``int`` arrays, passed to the
compiled caller as their addresses and kept alive by the launch) and a call gives the per-call values
(handle, scalar addresses, matrix addresses). The programs of :mod:`._cublas` and :mod:`._grouped` call
no binding themselves.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Sequence
from typing import Any

from nvmath._internal import fastpath
from nvmath.bindings import cublas
from nvmath.bindings._unchecked import cublas as cublas_unchecked

__all__ = ["GemmLaunch", "RoutineLaunch"]

# per-call positions, in call order (handle, alpha, x1, x2, beta, d)
_GEMM_SLOTS = (0, 6, 7, 10, 13, 14)
_STRIDED_SLOTS = (0, 6, 7, 11, 15, 16)


class GemmLaunch:
    """The fixed arguments of one program's GEMM launches; :meth:`run` makes them.

    Args:
        enums: ``(op1, op2, data type, compute type)`` as ints.
        mnk: ``(m, n, k)``; lds: the leading dimensions of x1, x2 and d.
        strides: the batch strides of x1, x2, d (elements); count: matrices per strided launch
            (1: ``cublasGemmEx``).
        offsets: per launch, ``{"x1", "x2", "d"}`` element offsets of matrix 0; itemsize: bytes per element.
        algo: the cuBLAS algorithm enum.
    """

    __slots__ = ("call", "offsets")

    def __init__(
        self, enums: tuple[int, int, int, int], mnk: tuple[int, int, int], lds: tuple[int, int, int],
        strides: tuple[int, int, int], count: int, offsets: Any, itemsize: int, algo: int,
    ):  # fmt: skip
        self.offsets = tuple((o["x1"] * itemsize, o["x2"] * itemsize, o["d"] * itemsize) for o in offsets)
        self.call: Callable[[int, int, int, int, int, int], Any] = _caller(
            enums, mnk, lds, strides, count, algo
        )

    def run(self, handle: int, p1: int, p2: int, pd: int, alpha: int, beta: int) -> None:
        """Every launch with pointers to matrix 0 (``p1``, ``p2``: x1, x2) and host scalar addresses."""
        call = self.call
        for o1, o2, od in self.offsets:
            call(handle, alpha, p1 + o1, p2 + o2, beta, pd + od)


def _caller(enums: Any, mnk: Any, lds: Any, strides: Any, count: int, algo: int) -> Callable[..., Any]:
    op1, op2, dt, compute = enums
    m, n, k = mnk
    ld1, ld2, ldd = lds
    if count == 1:
        fixed = (0, op1, op2, m, n, k, 0, 0, dt, ld1, 0, dt, ld2, 0, 0, dt, ldd, compute, algo)

        def pure() -> Callable[..., Any]:
            gemm = cublas_unchecked.gemm_ex

            def call(handle: int, alpha: int, q1: int, q2: int, beta: int, qd: int) -> None:
                gemm(
                    handle, op1, op2, m, n, k, alpha, q1, dt, ld1, q2, dt, ld2, beta, qd, dt, ldd, compute,
                    algo,
                )  # fmt: skip

            return call

        return fastpath.bound_caller(
            "cublas", "cublasGemmEx", fixed, _GEMM_SLOTS, error=cublas.cuBLASError, pure=pure
        )
    s1, s2, sd = strides
    fixed = (0, op1, op2, m, n, k, 0, 0, dt, ld1, s1, 0, dt, ld2, s2, 0, 0, dt, ldd, sd, count, compute, algo)

    def pure_strided() -> Callable[..., Any]:
        gemm = cublas_unchecked.gemm_strided_batched_ex

        def call(handle: int, alpha: int, q1: int, q2: int, beta: int, qd: int) -> None:
            gemm(
                handle, op1, op2, m, n, k, alpha, q1, dt, ld1, s1, q2, dt, ld2, s2, beta, qd, dt, ldd, sd,
                count, compute, algo,
            )  # fmt: skip

        return call

    return fastpath.bound_caller(
        "cublas", "cublasGemmStridedBatchedEx", fixed, _STRIDED_SLOTS, error=cublas.cuBLASError,
        pure=pure_strided,
    )  # fmt: skip


class RoutineLaunch:
    """The fixed arguments of one cuBLAS routine's calls; ``call(*values)`` makes one call.

    Args:
        routine: the routine's name in :mod:`nvmath.bindings._unchecked.cublas` (``"ssymm"``, ``"dgeam"``,
            ``"gemm_grouped_batched_ex"``, ...).
        fixed: the whole argument vector; the values at ``slots`` are placeholders. Ints (checked at plan
            time, see :func:`~._cublas.c_int`) or ctypes arrays (the grouped GEMM's per-group arrays).
        slots: the argument positions a call fills, in call order.

    Raises:
        AttributeError: the binding has no such routine (a programming error: the programs pick names of
            the routines their types have).
    """

    __slots__ = ("_keep", "call", "routine")

    def __init__(self, routine: str, fixed: Sequence[Any], slots: Sequence[int]):
        binding = getattr(cublas_unchecked, routine)
        template = list(fixed)
        self.routine = routine
        self._keep = template  # the arrays whose addresses the compiled caller holds

        def pure() -> Callable[..., Any]:
            return _pure_caller(binding, template, tuple(slots))

        ints = tuple(ctypes.addressof(x) if isinstance(x, ctypes.Array) else x for x in template)
        self.call: Callable[..., Any] = fastpath.bound_caller(
            "cublas", _c_symbol(binding), ints, slots, error=cublas.cuBLASError, pure=pure
        )


def _pure_caller(binding: Any, template: list[Any], slots: tuple[int, ...]) -> Callable[..., None]:
    """``call(*values)``: ``binding`` with ``template``'s arguments and ``values`` at ``slots`` (the pure
    path; the launches' 4, 5 and 6 slots get a caller without a loop)."""
    p = slots + (0,) * (6 - len(slots))
    p0, p1, p2, p3, p4, p5 = p[:6]
    if len(slots) == 4:

        def call4(v0: Any, v1: Any, v2: Any, v3: Any) -> None:
            args = template.copy()
            args[p0], args[p1], args[p2], args[p3] = v0, v1, v2, v3
            binding(*args)

        return call4
    if len(slots) == 5:

        def call5(v0: Any, v1: Any, v2: Any, v3: Any, v4: Any) -> None:
            args = template.copy()
            args[p0], args[p1], args[p2], args[p3], args[p4] = v0, v1, v2, v3, v4
            binding(*args)

        return call5
    if len(slots) == 6:

        def call6(v0: Any, v1: Any, v2: Any, v3: Any, v4: Any, v5: Any) -> None:
            args = template.copy()
            args[p0], args[p1], args[p2], args[p3], args[p4], args[p5] = v0, v1, v2, v3, v4, v5
            binding(*args)

        return call6

    def call(*values: Any) -> None:
        args = template.copy()
        for position, value in zip(slots, values):
            args[position] = value
        binding(*args)

    return call


def _c_symbol(binding: Any) -> str:
    """The C symbol an unchecked binding calls (``ssymm`` -> ``cublasSsymm_v2``): the ``_p_<symbol>``
    global its code reads."""
    return next(n for n in binding.__code__.co_names if n.startswith("_p_"))[3:]
