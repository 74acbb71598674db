"""Explicit batches on the GPU: one grouped GEMM launch for a sequence of problems of different shapes.

Each problem of the sequence is one group (its own m, n, k, ops and leading dimensions; an N-D problem
contributes its whole batch to its group). The routine, by dtype:

===========================  ======================================================================
float32 / float64            ``cublasSgemmGroupedBatched`` / ``cublasDgemmGroupedBatched``
float16 / bfloat16           ``cublasGemmGroupedBatchedEx`` (``CUBLAS_COMPUTE_32F``)
complex64 / complex128       cuBLAS has no grouped form: one launch per problem (a loop)
structured qualifiers        symm / hemm / trmm / dgmm have no grouped form: one launch per problem
===========================  ======================================================================

The device pointer arrays are rebuilt on the host and uploaded (one ``cuMemcpyHtoDAsync`` on the
call's stream into the plan's scratch memory) only when an operand address changed.

The launch goes through a :class:`~._launch.RoutineLaunch` built with the program (the only caller of
the grouped routine): the per-group integers (C ``int`` arrays, which ctypes would fill with wrapped
values) and the group count are range-checked when the program is built, and the launch holds them
with the alpha / beta arrays' addresses; a call gives the handle and the three pointer arrays.
"""

from __future__ import annotations

import ctypes
import logging
from typing import Any

import numpy as np

from nvmath._internal import devices
from nvmath.linalg.generic._batching import batch_plan
from nvmath.linalg.generic._cublas import TYPES, c_int
from nvmath.linalg.generic._launch import RoutineLaunch
from nvmath.linalg.generic._traits import Traits

__all__ = ["GroupedProgram", "make_grouped", "upload"]

_PREFIX = {"float32": "s", "float64": "d"}

logger = logging.getLogger(__name__)

_ITEMSIZE = {"float16": 2, "bfloat16": 2, "float32": 4, "float64": 8}


def make_grouped(traits: list[Traits]) -> GroupedProgram | None:
    """The grouped program of a sequence, or ``None`` when it runs as a loop (see the module table)."""
    if any(t.kind != "gemm" for t in traits) or traits[0].dtype not in _ITEMSIZE:
        logger.debug("explicit batch of %d problems runs as a loop of launches", len(traits))
        return None
    return GroupedProgram(traits)


def upload(dst: int, host: np.ndarray, stream: Any) -> None:
    """Queue the copy of ``host`` to device address ``dst`` on ``stream`` (``host`` reusable on return)."""
    drv = devices.driver()
    devices.check(drv.cuMemcpyHtoDAsync(dst, host.ctypes.data, host.nbytes, stream.ptr), "cuMemcpyHtoDAsync")


_ARRAYS = (
    "the op of the first BLAS operand", "the op of the second BLAS operand", "dimension m", "dimension n",
    "dimension k", "the leading dimension of the first BLAS operand",
    "the leading dimension of the second BLAS operand", "the leading dimension of the result",
    "the number of matrices",
)  # fmt: skip
"""What each per-group array of the grouped GEMM holds (for the range-check messages)."""


def _ints(what: str, values: list[int], problems: list[int]) -> Any:
    """A C ``int`` array of ``values`` (one per problem), each checked first (ctypes would store a
    wrapped value)."""
    return (ctypes.c_int * len(values))(
        *(c_int(f"{what} of problem {i} of the sequence", v) for i, v in zip(problems, values))
    )


class GroupedProgram:
    """One grouped GEMM over the problems (see the module docstring)."""

    def __init__(self, traits: list[Traits]):
        live = [i for i, t in enumerate(traits) if t.cm[0] and t.cm[1] and t.batch_count]
        self.live = live
        self.dtype = traits[0].dtype
        self.isz = _ITEMSIZE[self.dtype]
        ty = TYPES[self.dtype]
        self.types = ty
        self.offsets = []  # per live problem: (x1 name, list of (off1, off2, offd))
        sizes, ta, tb, ms, ns, ks, l1s, l2s, lds = [], [], [], [], [], [], [], [], []
        for i in live:
            t = traits[i]
            x2 = "a" if t.x1 == "b" else "b"
            l1, l2, ld = t.layouts[t.x1], t.layouts[x2], t.layouts["d"]
            plan = batch_plan(
                t.batch, {"1": l1.batch_strides, "2": l2.batch_strides, "d": ld.batch_strides}, False
            )
            self.offsets.append((t.x1, x2, [(o["1"], o["2"], o["d"]) for o in plan.offsets]))
            sizes.append(len(plan.offsets))
            ta.append(int(l1.op))
            tb.append(int(l2.op))
            ms.append(t.cm[0])
            ns.append(t.cm[1])
            ks.append(t.cm[2])
            l1s.append(l1.ld)
            l2s.append(l2.ld)
            lds.append(ld.ld)
        self.total = sum(sizes)
        self.count = c_int("the number of problems of the sequence", len(live))
        arrays = (ta, tb, ms, ns, ks, l1s, l2s, lds, sizes)
        self.args = [_ints(what, v, live) for what, v in zip(_ARRAYS, arrays)]
        self.enums = (int(ty.data), int(ty.compute))
        self.scratch_bytes = 3 * self.total * 8
        self.alphas = np.zeros(max(self.count, 1), dtype=ty.scale)
        self.betas = np.zeros(max(self.count, 1), dtype=ty.scale)
        self._pointers = np.zeros(3 * self.total, dtype=np.uint64)
        self._call = self._routine().call if self.count else None

    def _routine(self) -> RoutineLaunch:
        """The grouped GEMM's launch: per call the handle and the addresses of the a, b, c pointer arrays."""
        ta, tb, ms, ns, ks, l1s, l2s, lds, sizes = self.args
        al, be = self.alphas.ctypes.data, self.betas.ctypes.data
        # (handle, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc, count, sizes); Ex: types, compute
        if self.dtype in ("float32", "float64"):
            fixed = (0, ta, tb, ms, ns, ks, al, 0, l1s, 0, l2s, be, 0, lds, self.count, sizes)
            return RoutineLaunch(f"{_PREFIX[self.dtype]}gemm_grouped_batched", fixed, (0, 7, 9, 12))
        dt, compute = self.enums
        count = self.count
        fixed = (0, ta, tb, ms, ns, ks, al, 0, dt, l1s, 0, dt, l2s, be, 0, dt, lds, count, sizes, compute)
        return RoutineLaunch("gemm_grouped_batched_ex", fixed, (0, 7, 10, 14))

    def _fill(self, ptrs: list[dict[str, int]]) -> None:
        isz, out, total = self.isz, self._pointers, self.total
        j = 0
        for (x1, x2, offs), i in zip(self.offsets, self.live):
            p = ptrs[i]
            p1, p2, pd = p[x1], p[x2], p["d"]
            for o1, o2, od in offs:
                out[j] = p1 + o1 * isz
                out[total + j] = p2 + o2 * isz
                out[2 * total + j] = pd + od * isz
                j += 1

    def launch(
        self,
        handle: int,
        stream: Any,
        ptrs: list[dict[str, int]],
        alphas: list[Any],
        betas: list[Any],
        has_c: bool,
        scratch: int,
    ) -> None:
        """Upload the pointer arrays (if changed) and queue the grouped GEMM on ``stream``."""
        if not self.count:
            return
        self._fill(ptrs)
        # always upload: the scratch is shared by every planner of the device in the plan cache, so
        # an unchanged (address, pointers) pair does not mean the scratch still holds this program's
        # arrays (another grouped program may have written it since: a stale array is a wild launch)
        upload(scratch, self._pointers, stream)
        for j, i in enumerate(self.live):
            self.alphas[j] = alphas[i]
            self.betas[j] = betas[i]
        self._call(handle, scratch, scratch + 8 * self.total, scratch + 16 * self.total)  # type: ignore[misc]
