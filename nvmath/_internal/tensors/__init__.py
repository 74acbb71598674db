"""Tensor adapters: one small protocol over numpy, cupy, torch and any DLPack / CAI producer.

Entry points: :func:`wrap` (one object), :func:`wrap_operands` (named operands, checked for one
package and one device), :func:`check_consistent`, and :class:`DeviceArray` (nvmath's own device
array, exported through DLPack and the CUDA array interface). Adapter modules for torch / cupy are
imported only when such a tensor is wrapped.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from nvmath._internal.tensors.base import (
    TensorAdapter,
    axis_order,
    check_strides,
    dense_strides,
    is_dense,
    span,
)
from nvmath._internal.tensors.dispatch import adapter_class, check_consistent, wrap, wrap_operands

if TYPE_CHECKING:
    from nvmath._internal.tensors.device_array import DeviceArray

__all__ = [
    "DeviceArray",
    "TensorAdapter",
    "adapter_class",
    "axis_order",
    "check_consistent",
    "check_strides",
    "dense_strides",
    "is_dense",
    "span",
    "wrap",
    "wrap_operands",
]


def __getattr__(name: str) -> Any:
    if name == "DeviceArray":  # lazy: it pulls in cuda-side modules
        from nvmath._internal.tensors.device_array import DeviceArray

        return DeviceArray
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
