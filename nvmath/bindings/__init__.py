"""Raw bindings to the CUDA math libraries: one Python function per C entry point.

``cublasLt``, ``cublas``, ``cufft``, ``cusolverDn`` and ``cusolver`` (the cuSOLVER enums and error
shared by the cuSOLVER APIs) are generated from the C headers by ``tools/gen_bindings.py``. They are
pure Python on ctypes; importing them loads no library and touches no driver: each library is
loaded (through ``cuda.pathfinder``) by the first call of one of its functions.

The host entry points of the distributed engines -- ``nccl``, ``nvshmem``, ``cublasMp`` and
``cufftMp`` (the ``[distributed]`` extra) -- come from the same generator and are imported on first
attribute access (``nvmath.bindings.nccl``), so ``import nvmath.bindings`` does not even read them.
"""

import importlib

from . import cublas, cublasLt, cufft, cusolver, cusolverDn

_DISTRIBUTED = ("cublasMp", "cufftMp", "nccl", "nvshmem")

__all__ = ["cublas", "cublasLt", "cufft", "cusolver", "cusolverDn", *_DISTRIBUTED]


def __getattr__(name: str):
    if name in _DISTRIBUTED:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
