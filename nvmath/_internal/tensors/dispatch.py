"""``wrap``: user object -> :class:`TensorAdapter`, dispatching on ``type(obj)`` with a cache.

The adapter class of a type is found once (by its module and MRO) and remembered, so wrapping a
tensor costs a dict lookup plus the adapter's attribute reads. torch / cupy are never imported
here: their adapters are loaded when an object whose type comes from torch / cupy shows up.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Mapping
from typing import Any

from nvmath._internal import caches
from nvmath._internal.tensors.base import TensorAdapter

__all__ = ["adapter_class", "check_consistent", "wrap", "wrap_operands"]

logger = logging.getLogger(__name__)

_SUPPORTED = (
    "numpy.ndarray, cupy.ndarray, torch.Tensor, or an array exposing __dlpack__/__dlpack_device__ (jax, ...) "
    "or __cuda_array_interface__ (numba-cuda)"
)
_NATIVE = {
    # top module: (module of the array base type, its attribute, adapter module, adapter class)
    "numpy": ("numpy", "ndarray", "numpy_adapter", "NumpyAdapter"),
    "torch": ("torch", "Tensor", "torch_adapter", "TorchAdapter"),
    "cupy": ("cupy", "ndarray", "cupy_adapter", "CupyAdapter"),
}
_CLASSES = caches.memo("nvmath._internal.tensors: adapter classes", 256)
"""Exact type -> its adapter class (``None``: unsupported)."""


def _load(module: str, name: str) -> type[TensorAdapter]:
    return getattr(importlib.import_module(f"nvmath._internal.tensors.{module}"), name)


def adapter_class(tp: type) -> type[TensorAdapter] | None:
    """Return the adapter class for objects of type ``tp`` (``None`` if unsupported); cached."""
    try:
        return _CLASSES[tp]
    except KeyError:
        pass
    cls = None
    for base in tp.__mro__:
        top = (base.__module__ or "").split(".", 1)[0]
        spec = _NATIVE.get(top)
        if spec is None:
            continue
        array_type = getattr(importlib.import_module(spec[0]), spec[1], None)
        if array_type is not None and issubclass(tp, array_type):
            cls = _load(spec[2], spec[3])
            break
    if cls is None and (
        (hasattr(tp, "__dlpack__") and hasattr(tp, "__dlpack_device__"))
        or hasattr(tp, "__cuda_array_interface__")
    ):
        cls = _load("generic_adapter", "GenericAdapter")
    return _CLASSES.put(tp, cls)


def wrap(obj: Any, name: str = "operand", *, stream: Any = None) -> TensorAdapter:
    """Wrap a user tensor.

    Args:
        obj: the tensor (an adapter is returned unchanged).
        name: the operand's name, used in error messages.
        stream: for producers without a native adapter (DLPack / CUDA array interface), the stream
            the operand is consumed on: a :class:`~nvmath._internal.streams.StreamHandle` or any
            ``stream=`` value (``None`` = that package's default, see ``get_stream``).

    Raises:
        TypeError: the object is of no supported kind (the message names the operand).
        ValueError: its dtype, device or layout is not supported.
    """
    tp = type(obj)
    cls = _CLASSES.get(tp)
    if cls is None:
        if isinstance(obj, TensorAdapter):
            return obj
        cls = adapter_class(tp)
        if cls is None:
            raise TypeError(
                f"{name} is a {tp.__module__}.{tp.__qualname__}, which is not supported; expected {_SUPPORTED}"
            )
    try:
        return cls(obj, stream)
    except (TypeError, ValueError, BufferError, NotImplementedError, RuntimeError) as exc:
        kind = TypeError if isinstance(exc, TypeError) else ValueError
        raise kind(f"{name} ({tp.__qualname__}): {exc}") from exc


def wrap_operands(*, stream: Any = None, **operands: Any) -> dict[str, TensorAdapter]:
    """Wrap named operands (``None`` values are skipped) and check they are consistent.

    Returns:
        A dict name -> adapter, in argument order.

    Raises:
        TypeError: an operand is unsupported or the operands come from different packages.
        ValueError: the operands are on different devices.
    """
    wrapped = {
        name: wrap(obj, f"operand '{name}'", stream=stream)
        for name, obj in operands.items()
        if obj is not None
    }
    check_consistent(wrapped)
    return wrapped


def check_consistent(operands: Mapping[str, TensorAdapter]) -> tuple[str, int | str]:
    """Check that all operands come from one package and live on one device.

    Returns:
        ``(package, device_id)`` of the operands (``device_id`` is an int or "cpu").

    Raises:
        TypeError: two operands come from different packages (both are named).
        ValueError: two operands are on different devices (both are named), or there are none.
    """
    first_name = None
    first: TensorAdapter | None = None
    for name, op in operands.items():
        if first is None:
            first_name, first = name, op
            continue
        if op.package != first.package:
            raise TypeError(
                f"operand '{name}' is {_kind(op)} but '{first_name}' is {_kind(first)}: "
                "all operands must come from one package"
            )
        if op.device_id != first.device_id:
            raise ValueError(
                f"operand '{name}' is on device {op.device_id!r} but '{first_name}' is on device "
                f"{first.device_id!r}: all operands must be on the same device"
            )
    if first is None:
        raise ValueError("no operand was given")
    return first.package, first.device_id


def _kind(op: TensorAdapter) -> str:
    return {
        "numpy": "a numpy array",
        "cupy": "a cupy array",
        "torch": "a torch tensor",
        "cuda": "an nvmath DeviceArray",
    }.get(op.package, f"a {op.package} array")
