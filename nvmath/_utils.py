"""Small utilities nvmath-python 1.0 keeps under ``nvmath._utils`` that its published examples import.

* :func:`get_nvrtc_version` -- the NVRTC version as ``(major, minor, patch)``;
* the enums ``ComputeType`` (the general CUDA compute types of cuTENSOR / cuStateVec, as
  ``nvmath.ComputeType`` is in nvmath-python; cuBLAS's is ``nvmath.linalg.advanced.MatmulComputeType``),
  ``CudaDataType`` and ``LibraryPropertyType`` (also ``nvmath.*``).

Nothing here touches a GPU or loads a library at import time.
"""

from __future__ import annotations

import enum
import functools
import importlib.metadata
import re

from nvmath._internal.dtypes import CudaDataType
from nvmath.bindings.cublas import LibraryPropertyType

__all__ = ["ComputeType", "CudaDataType", "LibraryPropertyType", "get_nvrtc_version"]



class ComputeType(enum.IntEnum):
    """CUDA compute types (``cutensorComputeType_t`` bits, shared by cuTensorNet and cuStateVec)."""

    COMPUTE_DEFAULT = 0
    COMPUTE_16F = 1 << 0
    COMPUTE_32F = 1 << 2
    COMPUTE_64F = 1 << 4
    COMPUTE_8U = 1 << 6
    COMPUTE_8I = 1 << 8
    COMPUTE_32U = 1 << 7
    COMPUTE_32I = 1 << 9
    COMPUTE_16BF = 1 << 10
    COMPUTE_TF32 = 1 << 12


_WHEELS = ("nvidia-cuda-nvrtc", "nvidia-cuda-nvrtc-cu13", "nvidia-cuda-nvrtc-cu12")


def _patch_level(major: int, minor: int) -> int:
    """The patch (build) number of the installed NVRTC wheel of that major.minor, else 0."""
    for name in _WHEELS:
        try:
            version = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
        m = re.match(r"(\d+)\.(\d+)\.(\d+)", version)
        if m and (int(m.group(1)), int(m.group(2))) == (major, minor):
            return int(m.group(3))
    return 0


@functools.cache
def get_nvrtc_version() -> tuple[int, int, int]:
    """Return the version of the NVRTC that ``cuda.bindings`` loads, as ``(major, minor, patch)``.

    ``major`` and ``minor`` come from ``nvrtcVersion()``; ``patch`` is the build number of the
    installed NVRTC wheel of that version (0 when NVRTC comes from elsewhere).

    Raises:
        RuntimeError: NVRTC cannot be loaded or reports an error.
    """
    try:
        from cuda.bindings import nvrtc

        err, major, minor = nvrtc.nvrtcVersion()
    except Exception as exc:  # the library is missing or cannot be loaded
        raise RuntimeError(f"NVRTC is not available: {type(exc).__name__}: {exc}") from exc
    if int(err) != 0:
        raise RuntimeError(f"nvrtcVersion() failed: {getattr(err, 'name', err)}")
    return int(major), int(minor), _patch_level(int(major), int(minor))
