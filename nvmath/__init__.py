"""nvmath: fast, stateful cuBLASLt / cuFFT / cuSOLVER planners for any DLPack tensor.

Importing nvmath never touches the GPU driver: libraries are loaded and devices are queried on
first use. Subpackages:

* :mod:`nvmath.bindings` -- generated 1:1 bindings for cuBLASLt, cuBLAS, cuFFT and cuSOLVER.
* :mod:`nvmath.linalg` -- matrix multiplication (:mod:`nvmath.linalg.advanced`) and dense solvers.
* :mod:`nvmath.fft` -- FFTs on cuFFT (GPU) and scipy (CPU).
"""

from __future__ import annotations

__version__ = "0.1.0"

from nvmath import _coexist  # noqa: E402

_coexist.check_nvmath_python(__path__[0])  # nvmath-python installed over the same files: refuse
_coexist.install_finder()  # nvmath-python modules we do not provide: an ImportError saying so

from nvmath import _errors as errors  # noqa: E402
from nvmath._errors import (  # noqa: E402
    CudaLibraryError,
    InvalidPlannerState,
    LinAlgError,
    NvmathError,
)

from nvmath import bindings, fft, linalg, memory  # noqa: E402
from nvmath._utils import ComputeType, CudaDataType, LibraryPropertyType  # noqa: E402  (as nvmath-python 1.0)
from nvmath.memory import BaseCUDAMemoryManager, BaseCUDAMemoryManagerAsync, MemoryPointer  # noqa: E402



def __getattr__(name: str) -> object:
    if name == "distributed":  # imported on first use: `import nvmath` stays light (no engine loads either way)
        import importlib

        return importlib.import_module("nvmath.distributed")
    raise _coexist.attribute_error(name)


__all__ = [
    "__version__",
    "bindings",
    "fft",
    "linalg",
    "memory",
    "BaseCUDAMemoryManager",
    "BaseCUDAMemoryManagerAsync",
    "ComputeType",
    "CudaDataType",
    "LibraryPropertyType",
    "MemoryPointer",
    "errors",
    "NvmathError",
    "InvalidPlannerState",
    "CudaLibraryError",
    "LinAlgError",
]
