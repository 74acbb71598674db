"""Distributed matrix multiplication on cuBLASMp: :func:`matmul` and :class:`Matmul`.

``D = alpha * op(A) @ op(B) + beta * C`` over matrices distributed as ``Slab.X`` / ``Slab.Y`` (1-D
row / column splits that divide evenly), :class:`~nvmath.distributed.distribution.BlockNonCyclic`
or :class:`~nvmath.distributed.distribution.BlockCyclic` on 2-D process grids; local blocks in
Fortran or C order (C-ordered ones become transposes cuBLASMp runs); float16, bfloat16, float32,
float64, complex64, complex128. Everything here is collective.

Not implemented yet (raise :class:`NotImplementedError`): epilogs, quantization scales,
``result_amax``, ``block_scaling``, a ``result_type`` other than the operands'. The workspace is
not registered with cuBLASMp (``cublasMpBufferRegister``), so communication may not overlap the GEMM.

Status: CPU-tested against a numpy-computing fake cuBLASMp; not yet run on a GPU.
"""

from __future__ import annotations

from ._options import MatmulAlgoType, MatmulOptions
from ._planner import InvalidMatmulState, Matmul, matmul

__all__ = ["InvalidMatmulState", "Matmul", "MatmulAlgoType", "MatmulOptions", "matmul"]
