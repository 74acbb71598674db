"""A small DLPack exporter (ctypes): turns a pointer + layout into a ``dltensor`` capsule.

Used by :class:`~nvmath._internal.tensors.device_array.DeviceArray` so that any DLPack consumer
(torch, cupy, jax, numpy for host memory) can take nvmath's device buffers without a copy. Both
the legacy ``DLManagedTensor`` (capsule ``"dltensor"``) and ``DLManagedTensorVersioned``
(``"dltensor_versioned"``, DLPack >= 1.0) are produced. The managed tensor keeps ``owner`` alive
until the consumer calls the deleter (or the unconsumed capsule is collected).
"""

from __future__ import annotations

import ctypes
import logging
import threading
from typing import Any

__all__ = ["KDL_CPU", "KDL_CUDA", "KDL_CUDA_HOST", "KDL_CUDA_MANAGED", "live_exports", "make_capsule"]

logger = logging.getLogger(__name__)

KDL_CPU, KDL_CUDA, KDL_CUDA_HOST, KDL_CUDA_MANAGED = 1, 2, 3, 13
EXPORT_VERSION = (1, 0)
_FLAG_READ_ONLY = 1


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", _DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", _DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


_DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class _DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", _DELETER)]


class _DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class _DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [
        ("version", _DLPackVersion),
        ("manager_ctx", ctypes.c_void_p),
        ("deleter", _DELETER),
        ("flags", ctypes.c_uint64),
        ("dl_tensor", _DLTensor),
    ]


# address of the managed struct -> everything that must outlive it
_LIVE: dict[int, tuple[Any, ...]] = {}
_LOCK = threading.Lock()
_NAME = b"dltensor"
_NAME_VERSIONED = b"dltensor_versioned"


def _delete(address: int | None, _live: dict[int, Any] = _LIVE, _lock: Any = _LOCK) -> None:
    """The DLPack deleter: drop what the managed tensor kept alive (any thread; takes the GIL).

    The table and lock are bound as defaults, not read from the module: a consumer can release its
    tensor during interpreter exit, after this module's globals were set to ``None``."""
    if address is None:
        return
    with _lock:
        kept = _live.pop(address, None)
    # dropped outside the lock: releasing what it kept alive can run another managed tensor's deleter
    # (a tensor exported from a tensor we imported), which re-enters here (it deadlocked under the lock)
    del kept


_DELETER_FN = _DELETER(_delete)


def _immortal(obj: Any) -> Any:
    """Keep ``obj`` alive until the process ends. A consumer may call the deleter (or free an
    unconsumed capsule) after this module was wiped at interpreter exit: freeing the ctypes thunks
    (and with them ``_delete`` and the live table it binds) would leave consumers calling freed code
    (a segmentation fault at exit)."""
    ctypes.pythonapi.Py_IncRef(ctypes.py_object(obj))
    return obj


_immortal(_DELETER_FN)

_capi = ctypes.pythonapi
_capi.PyCapsule_New.restype = ctypes.py_object
_capi.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_capi.PyCapsule_IsValid.restype = ctypes.c_int
_capi.PyCapsule_IsValid.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
_capi.PyCapsule_GetPointer.restype = ctypes.c_void_p
_capi.PyCapsule_GetPointer.argtypes = [ctypes.c_void_p, ctypes.c_char_p]

_DESTRUCTOR = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


def _capsule_destructor(capsule: int, _names: tuple[bytes, ...] = (_NAME, _NAME_VERSIONED),
                        _api: Any = _capi, _release: Any = _delete) -> None:  # fmt: skip
    """Free an export the consumer never took (a consumer renames the capsule "used_dltensor").
    Module globals are bound as defaults (see :func:`_delete`)."""
    for name in _names:
        if _api.PyCapsule_IsValid(capsule, name):
            _release(_api.PyCapsule_GetPointer(capsule, name))
            return


_DESTRUCTOR_FN = _immortal(_DESTRUCTOR(_capsule_destructor))
_DESTRUCTOR_ADDR = ctypes.cast(_DESTRUCTOR_FN, ctypes.c_void_p).value


def make_capsule(
    ptr: int,
    shape: tuple[int, ...],
    strides: tuple[int, ...],
    dtype: tuple[int, int, int],
    device: tuple[int, int],
    owner: Any,
    *,
    versioned: bool,
    read_only: bool = False,
) -> Any:
    """Return a DLPack capsule describing memory at ``ptr``.

    Args:
        ptr: address of element 0 (a device address for CUDA memory).
        shape: the shape.
        strides: the strides in elements.
        dtype: ``(code, bits, lanes)`` (see :func:`nvmath._internal.dtypes.dlpack_dtype`).
        device: ``(device_type, device_id)``.
        owner: any object to keep alive while the consumer uses the memory.
        versioned: produce a ``DLManagedTensorVersioned`` / ``"dltensor_versioned"`` capsule.
        read_only: set the read-only flag (versioned only).
    """
    ndim = len(shape)
    shape_arr = (ctypes.c_int64 * max(ndim, 1))(*shape)
    strides_arr = (ctypes.c_int64 * max(ndim, 1))(*strides)
    managed: Any = _DLManagedTensorVersioned() if versioned else _DLManagedTensor()
    t = managed.dl_tensor
    size = 1
    for n in shape:
        size *= n
    t.data = ptr if size else None
    t.device = _DLDevice(*device)
    t.ndim = ndim
    t.dtype = _DLDataType(*dtype)
    t.shape = ctypes.cast(shape_arr, ctypes.POINTER(ctypes.c_int64))
    t.strides = ctypes.cast(strides_arr, ctypes.POINTER(ctypes.c_int64))
    t.byte_offset = 0
    managed.manager_ctx = None
    managed.deleter = _DELETER_FN
    if versioned:
        managed.version = _DLPackVersion(*EXPORT_VERSION)
        managed.flags = _FLAG_READ_ONLY if read_only else 0
    address = ctypes.addressof(managed)
    with _LOCK:
        _LIVE[address] = (managed, shape_arr, strides_arr, owner)
    try:
        return _capi.PyCapsule_New(address, _NAME_VERSIONED if versioned else _NAME, _DESTRUCTOR_ADDR)
    except BaseException:
        _delete(address)
        raise


def live_exports() -> int:
    """Return how many exported tensors are still held by consumers (for tests and leak checks)."""
    return len(_LIVE)
