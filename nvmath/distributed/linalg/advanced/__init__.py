"""Distributed matrix multiplication on cuBLASMp: :func:`matmul` and :class:`Matmul`.

``D = alpha * op(A) @ op(B) + beta * C`` over matrices distributed as ``Slab.X`` / ``Slab.Y`` (1-D
row / column splits that divide evenly), :class:`~nvmath.distributed.distribution.BlockNonCyclic`
or :class:`~nvmath.distributed.distribution.BlockCyclic` on 2-D process grids; local blocks in
Fortran or C order (C-ordered ones become transposes cuBLASMp runs); float16, bfloat16, float32,
float64, complex64, complex128, and FP8 (float8_e4m3fn / float8_e5m2) with tensor-wide quantization
scales and ``result_amax``. The epilogs cuBLASMp has (:class:`MatmulEpilog`: bias, ReLU, GELU, their
aux and backward forms, bias gradients) take and return this rank's parts. The workspace is
registered with cuBLASMp, so the overlapped algorithms apply. :func:`matmul` takes and returns torch
DTensors (Shard / Replicate on a 1-D mesh), with autograd through the distributed GEMMs (see
``_dtensor``). Everything here is collective.

Not implemented (raise :class:`NotImplementedError`): ``preferences``, ``block_scaling`` (MXFP8), a
``result_type`` other than the operands' for non-FP8 operands.

Status: CPU-tested against a numpy-computing fake cuBLASMp; on one H200 at one rank the matmul (every
dtype and order), DTensors and the BGRADA / DRELU_BGRAD epilogs passed; FP8 and the other epilogs have
not run on a GPU yet, and nothing on several GPUs.
"""

from __future__ import annotations

from nvmath.linalg.advanced import MatmulComputeType, MatmulQuantizationScales

from ._epilogs import MatmulEpilog
from ._options import MatmulAlgoType, MatmulOptions
from ._planner import InvalidMatmulState, Matmul
from ._stateless import matmul

__all__ = [
    "InvalidMatmulState",
    "Matmul",
    "MatmulAlgoType",
    "MatmulComputeType",
    "MatmulEpilog",
    "MatmulOptions",
    "MatmulQuantizationScales",
    "matmul",
]
