"""Small utilities nvmath-python 1.0 keeps under ``nvmath._utils`` that its published examples import.

* :func:`get_nvrtc_version` -- the NVRTC version as ``(major, minor, patch)``;
* the enums ``ComputeType``, ``CudaDataType`` and ``LibraryPropertyType`` (also ``nvmath.*``).

Nothing here touches a GPU or loads a library at import time.
"""

from __future__ import annotations

import functools
import importlib.metadata
import re

from nvmath._internal.dtypes import CudaDataType
from nvmath.bindings.cublas import ComputeType, LibraryPropertyType

__all__ = ["ComputeType", "CudaDataType", "LibraryPropertyType", "get_nvrtc_version"]

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
