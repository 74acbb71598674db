"""Raw bindings to the CUDA math libraries: one Python function per C entry point.

``cublasLt``, ``cublas``, ``cufft``, ``cusolverDn`` and ``cusolver`` (the cuSOLVER enums and error
shared by the cuSOLVER APIs) are generated from the C headers by ``tools/gen_bindings.py``. They are
pure Python on ctypes; importing them loads no library and touches no driver: each library is
loaded (through ``cuda.pathfinder``) by the first call of one of its functions.
"""

from . import cublas, cublasLt, cufft, cusolver, cusolverDn

__all__ = ["cublas", "cublasLt", "cufft", "cusolver", "cusolverDn"]
