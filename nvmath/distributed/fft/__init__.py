"""Distributed FFTs on cuFFTMp: 2-D and 3-D C2C, R2C and C2R over slab or box distributions.

:func:`fft`, :func:`ifft`, :func:`rfft`, :func:`irfft` (stateless, through a plan cache) and
:class:`FFT` (plan once, execute many times) transform in place an operand on the NVSHMEM
symmetric heap, made with :func:`allocate_operand`; the distribution is ``Slab.X`` or ``Slab.Y``
(``FFTOptions.redistribute`` chooses whether the result comes back in the operand's slab or stays
in the complementary one), or one pair ``(input Box, output Box)`` per rank (cuFFTMp's
``cufftXtSetDistribution``). Everything here is collective: every rank makes the same calls.
:class:`nvmath.distributed.distribution.Redistribute` moves arrays between distributions.

torch DTensors sharded on dimension 0 or 1 go in and come out as DTensors (``_dtensor.py``).

Status: CPU-tested against fake engines; the one-rank slab and Box transforms and two processes on one
GPU passed on one H200 with cuFFTMp 12.1 (the DTensor path not yet run there; nothing on several GPUs).
"""

from __future__ import annotations

from ._allocate import allocate_operand
from ._options import FFTDirection, FFTOptions
from ._planner import FFT, InvalidFFTState
from ._stateless import fft, ifft, irfft, plan_cache, rfft

__all__ = [
    "FFT",
    "FFTDirection",
    "FFTOptions",
    "InvalidFFTState",
    "allocate_operand",
    "fft",
    "ifft",
    "irfft",
    "plan_cache",
    "rfft",
]
