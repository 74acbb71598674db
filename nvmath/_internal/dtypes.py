"""Canonical dtype names and their mappings to CUDA, DLPack, numpy and torch.

Every tensor adapter reports its element type as one *canonical name* (a ``str`` such as
``"float32"``, ``"bfloat16"``, ``"complex32"`` or ``"float8_e4m3fn"``). This module maps those names
to item sizes, to ``cudaDataType`` values (``library_types.h``), to DLPack type codes and to the
dtype objects of numpy (``ml_dtypes`` for bfloat16 / fp8, imported only when needed) and torch.

The package-specific tables are built lazily on first use and are plain ``dict`` lookups afterwards,
so the hot path (wrapping a tensor) costs one dictionary access. Nothing here imports torch; the
torch table is built from the ``torch`` module the caller already holds.
"""

from __future__ import annotations

import enum
import logging
import sys
from typing import Any

__all__ = [
    "DTYPE_NAMES",
    "KNOWN_NUMPY",
    "KNOWN_TORCH",
    "CudaDataType",
    "check_dtype_name",
    "cuda_data_type",
    "dlpack_dtype",
    "from_cuda_data_type",
    "from_dlpack_dtype",
    "is_complex",
    "is_float8",
    "is_floating",
    "is_real",
    "itemsize",
    "numpy_dtype_name",
    "to_complex",
    "to_numpy_dtype",
    "to_real",
    "to_torch_dtype",
    "torch_dtype_info",
]

logger = logging.getLogger(__name__)


class CudaDataType(enum.IntEnum):
    """``cudaDataType_t`` values, as in ``library_types.h`` of CUDA 13."""

    CUDA_R_16F = 2
    CUDA_C_16F = 6
    CUDA_R_16BF = 14
    CUDA_C_16BF = 15
    CUDA_R_32F = 0
    CUDA_C_32F = 4
    CUDA_R_64F = 1
    CUDA_C_64F = 5
    CUDA_R_4I = 16
    CUDA_C_4I = 17
    CUDA_R_4U = 18
    CUDA_C_4U = 19
    CUDA_R_8I = 3
    CUDA_C_8I = 7
    CUDA_R_8U = 8
    CUDA_C_8U = 9
    CUDA_R_16I = 20
    CUDA_C_16I = 21
    CUDA_R_16U = 22
    CUDA_C_16U = 23
    CUDA_R_32I = 10
    CUDA_C_32I = 11
    CUDA_R_32U = 12
    CUDA_C_32U = 13
    CUDA_R_64I = 24
    CUDA_C_64I = 25
    CUDA_R_64U = 26
    CUDA_C_64U = 27
    CUDA_R_8F_E4M3 = 28
    CUDA_R_8F_E5M2 = 29
    CUDA_R_8F_UE8M0 = 30
    CUDA_R_6F_E2M3 = 31
    CUDA_R_6F_E3M2 = 32
    CUDA_R_4F_E2M1 = 33
    CUDA_R_8F_UE5M3 = 34


# name: (itemsize, kind, cudaDataType or None, (DLPack code, bits))
# kind: "f" real floating, "c" complex, "f8" 8-bit float, "i" signed int, "u" unsigned int, "b" bool
_DL_INT, _DL_UINT, _DL_FLOAT, _DL_BFLOAT, _DL_COMPLEX, _DL_BOOL = 0, 1, 2, 4, 5, 6
_DL_F8_E4M3FN, _DL_F8_E5M2 = 10, 12
_C = CudaDataType
_TABLE: dict[str, tuple[int, str, int | None, tuple[int, int]]] = {
    "float16": (2, "f", _C.CUDA_R_16F, (_DL_FLOAT, 16)),
    "bfloat16": (2, "f", _C.CUDA_R_16BF, (_DL_BFLOAT, 16)),
    "float32": (4, "f", _C.CUDA_R_32F, (_DL_FLOAT, 32)),
    "float64": (8, "f", _C.CUDA_R_64F, (_DL_FLOAT, 64)),
    "complex32": (4, "c", _C.CUDA_C_16F, (_DL_COMPLEX, 32)),
    "complex64": (8, "c", _C.CUDA_C_32F, (_DL_COMPLEX, 64)),
    "complex128": (16, "c", _C.CUDA_C_64F, (_DL_COMPLEX, 128)),
    "float8_e4m3fn": (1, "f8", _C.CUDA_R_8F_E4M3, (_DL_F8_E4M3FN, 8)),
    "float8_e5m2": (1, "f8", _C.CUDA_R_8F_E5M2, (_DL_F8_E5M2, 8)),
    "int8": (1, "i", _C.CUDA_R_8I, (_DL_INT, 8)),
    "int16": (2, "i", _C.CUDA_R_16I, (_DL_INT, 16)),
    "int32": (4, "i", _C.CUDA_R_32I, (_DL_INT, 32)),
    "int64": (8, "i", _C.CUDA_R_64I, (_DL_INT, 64)),
    "uint8": (1, "u", _C.CUDA_R_8U, (_DL_UINT, 8)),
    "uint32": (4, "u", _C.CUDA_R_32U, (_DL_UINT, 32)),
    "bool": (1, "b", None, (_DL_BOOL, 8)),
}
del _C

DTYPE_NAMES: tuple[str, ...] = tuple(_TABLE)
"""Every canonical dtype name known to nvmath."""

_REAL_TO_COMPLEX = {"float16": "complex32", "float32": "complex64", "float64": "complex128"}
_COMPLEX_TO_REAL = {v: k for k, v in _REAL_TO_COMPLEX.items()}
_FROM_CUDA = {int(v[2]): k for k, v in _TABLE.items() if v[2] is not None}
_FROM_DLPACK = {v[3]: k for k, v in _TABLE.items()}
# ml_dtypes names that are canonical names too (numpy has no native type for them)
_ML_DTYPES_NAMES = ("bfloat16", "float8_e4m3fn", "float8_e5m2")


def check_dtype_name(name: str) -> str:
    """Return ``name`` if it is a canonical dtype name, else raise ``ValueError`` listing them."""
    if name not in _TABLE:
        raise ValueError(f"unknown dtype {name!r}; the known dtypes are {', '.join(DTYPE_NAMES)}")
    return name


def itemsize(name: str) -> int:
    """Return the size in bytes of one element of dtype ``name``."""
    return _TABLE[check_dtype_name(name)][0]


def is_complex(name: str) -> bool:
    """Return whether ``name`` is a complex dtype."""
    return _TABLE[check_dtype_name(name)][1] == "c"


def is_real(name: str) -> bool:
    """Return whether ``name`` is a real (not complex) dtype; integers and bool count as real."""
    return _TABLE[check_dtype_name(name)][1] != "c"


def is_float8(name: str) -> bool:
    """Return whether ``name`` is an 8-bit floating-point dtype."""
    return _TABLE[check_dtype_name(name)][1] == "f8"


def is_floating(name: str) -> bool:
    """Return whether ``name`` is a real floating-point dtype (fp8 included)."""
    return _TABLE[check_dtype_name(name)][1] in ("f", "f8")


def to_complex(name: str) -> str:
    """Return the complex dtype whose real and imaginary parts have dtype ``name``.

    A complex dtype is returned unchanged. Raises ``ValueError`` for dtypes with no complex
    counterpart (bfloat16, fp8, integers).
    """
    if is_complex(name):
        return name
    try:
        return _REAL_TO_COMPLEX[name]
    except KeyError:
        raise ValueError(
            f"dtype {name!r} has no complex counterpart; allowed: {', '.join(_REAL_TO_COMPLEX)}"
        ) from None


def to_real(name: str) -> str:
    """Return the real dtype of the parts of complex dtype ``name``; a real float is unchanged."""
    if not is_complex(name):
        if is_floating(name):
            return name
        raise ValueError(f"dtype {name!r} is neither complex nor real floating")
    return _COMPLEX_TO_REAL[name]


def cuda_data_type(name: str) -> int:
    """Return the ``cudaDataType`` value of dtype ``name`` (``ValueError`` if it has none)."""
    value = _TABLE[check_dtype_name(name)][2]
    if value is None:
        raise ValueError(f"dtype {name!r} has no cudaDataType")
    return int(value)


def from_cuda_data_type(value: int) -> str:
    """Return the canonical name of ``cudaDataType`` value ``value``."""
    try:
        return _FROM_CUDA[int(value)]
    except KeyError:
        raise ValueError(f"cudaDataType {value!r} has no nvmath dtype") from None


def dlpack_dtype(name: str) -> tuple[int, int, int]:
    """Return the DLPack ``(code, bits, lanes)`` triple of dtype ``name``."""
    code, bits = _TABLE[check_dtype_name(name)][3]
    return code, bits, 1


def from_dlpack_dtype(code: int, bits: int, lanes: int = 1) -> str:
    """Return the canonical name of a DLPack data type (``ValueError`` if unsupported)."""
    name = _FROM_DLPACK.get((int(code), int(bits))) if lanes == 1 else None
    if name is None:
        raise ValueError(f"DLPack dtype (code={code}, bits={bits}, lanes={lanes}) is not supported")
    return name


# --------------------------------------------------------------------------------------- numpy
_NUMPY_TO_NAME: dict[Any, str] = {}
KNOWN_NUMPY = _NUMPY_TO_NAME
"""numpy dtype -> name of the dtypes met so far (filled as they are met; read-only to other modules:
the hot paths' lookup without a function call)."""
_NAME_TO_NUMPY: dict[str, Any] = {}


def _build_numpy_tables() -> None:
    import numpy as np

    for name in _TABLE:
        if name in _ML_DTYPES_NAMES or name == "complex32":
            continue
        dt = np.dtype(name)
        _NUMPY_TO_NAME[dt] = name
        _NAME_TO_NUMPY[name] = dt
    _add_ml_dtypes(import_it=False)


def _add_ml_dtypes(import_it: bool) -> bool:
    """Add the ml_dtypes types to the numpy tables; return whether ml_dtypes is available."""
    mod = sys.modules.get("ml_dtypes")
    if mod is None and import_it:
        try:
            import ml_dtypes as mod
        except ImportError:
            return False
    if mod is None:
        return False
    import numpy as np

    for name in _ML_DTYPES_NAMES:
        dt = np.dtype(getattr(mod, name))
        _NUMPY_TO_NAME[dt] = name
        _NAME_TO_NUMPY[name] = dt
    return True


def numpy_dtype_name(dtype: Any) -> str:
    """Return the canonical name of a numpy (or cupy) dtype object, ``ValueError`` if unknown.

    A dict lookup for known dtypes; non-native byte orders are rejected.
    """
    name = _NUMPY_TO_NAME.get(dtype)
    if name is not None:
        return name
    if not _NUMPY_TO_NAME:
        _build_numpy_tables()
    else:
        _add_ml_dtypes(import_it=False)
    import numpy as np

    dt = np.dtype(dtype)
    name = _NUMPY_TO_NAME.get(dt)
    if name is None:
        if not dt.isnative:
            raise ValueError(f"dtype {dt.str!r} has a non-native byte order; use a native-order array")
        raise ValueError(f"dtype {dt} is not supported; the known dtypes are {', '.join(DTYPE_NAMES)}")
    if dtype is not dt:
        _NUMPY_TO_NAME[dtype] = name
    return name


def to_numpy_dtype(name: str) -> Any:
    """Return the numpy dtype of canonical dtype ``name`` (bf16 / fp8 through ``ml_dtypes``).

    Raises ``ValueError`` for complex32 (numpy has none) and ``ImportError`` with a hint when
    ``ml_dtypes`` is needed but missing.
    """
    dt = _NAME_TO_NUMPY.get(name)
    if dt is not None:
        return dt
    if not _NAME_TO_NUMPY:
        _build_numpy_tables()
    check_dtype_name(name)
    if name == "complex32":
        raise ValueError("dtype 'complex32' has no numpy equivalent")
    if name in _ML_DTYPES_NAMES and name not in _NAME_TO_NUMPY and not _add_ml_dtypes(import_it=True):
        raise ImportError(f"dtype {name!r} needs the 'ml_dtypes' package on the host: pip install ml-dtypes")
    return _NAME_TO_NUMPY[name]


# --------------------------------------------------------------------------------------- torch
# torch dtype -> (name, itemsize, is_complex); built from the caller's torch module
_TORCH_TO_INFO: dict[Any, tuple[str, int, bool]] = {}
KNOWN_TORCH = _TORCH_TO_INFO
"""torch dtype -> (name, itemsize, is_complex) of the dtypes met so far (filled when the first tensor of
a dtype is wrapped; read-only to other modules: the hot paths' lookup without a function call)."""
_NAME_TO_TORCH: dict[str, Any] = {}
_TORCH_ATTRS = {
    "float16": "float16",
    "bfloat16": "bfloat16",
    "float32": "float32",
    "float64": "float64",
    "complex32": "complex32",
    "complex64": "complex64",
    "complex128": "complex128",
    "float8_e4m3fn": "float8_e4m3fn",
    "float8_e5m2": "float8_e5m2",
    "int8": "int8",
    "int16": "int16",
    "int32": "int32",
    "int64": "int64",
    "uint8": "uint8",
    "uint32": "uint32",
    "bool": "bool",
}


def _build_torch_tables(torch: Any) -> None:
    for name, attr in _TORCH_ATTRS.items():
        tdt = getattr(torch, attr, None)
        if tdt is None:
            continue
        _TORCH_TO_INFO[tdt] = (name, _TABLE[name][0], _TABLE[name][1] == "c")
        _NAME_TO_TORCH[name] = tdt


def torch_dtype_info(dtype: Any) -> tuple[str, int, bool]:
    """Return ``(name, itemsize, is_complex)`` for a torch dtype (``ValueError`` if unsupported)."""
    info = _TORCH_TO_INFO.get(dtype)
    if info is not None:
        return info
    _build_torch_tables(sys.modules["torch"])
    info = _TORCH_TO_INFO.get(dtype)
    if info is None:
        raise ValueError(
            f"torch dtype {dtype} is not supported; the known dtypes are {', '.join(DTYPE_NAMES)}"
        )
    return info


def to_torch_dtype(name: str) -> Any:
    """Return the torch dtype of canonical dtype ``name`` (imports torch: callers hold it already)."""
    tdt = _NAME_TO_TORCH.get(name)
    if tdt is not None:
        return tdt
    import torch

    _build_torch_tables(torch)
    check_dtype_name(name)
    try:
        return _NAME_TO_TORCH[name]
    except KeyError:
        raise ValueError(f"dtype {name!r} has no torch equivalent in torch {torch.__version__}") from None
