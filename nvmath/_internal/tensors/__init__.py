"""Tensor adapters: one small protocol over numpy, cupy, torch and any DLPack / CAI producer.

Entry points: :func:`wrap` (one object), :func:`wrap_operands` (named operands, checked for one
package and one device), :func:`check_consistent`, and :class:`DeviceArray` (nvmath's own device
array, exported through DLPack and the CUDA array interface). Adapter modules for torch / cupy are
imported only when such a tensor is wrapped.

The modules form one chain, each importing only those before it: :mod:`.base` (the protocol) ->
:mod:`.host` (numpy views and arrays) -> :mod:`.transfers` (raw host/device memcpy) ->
:mod:`.device_array` -> the package adapters (:mod:`.numpy_adapter`, :mod:`.torch_adapter`,
:mod:`.cupy_adapter`, :mod:`.generic_adapter`; found by :mod:`.dispatch`) -> :mod:`.copy`
(:func:`~.copy.copy_into`, which knows them all).
"""

from __future__ import annotations

from nvmath._internal.tensors.base import (
    TensorAdapter,
    axis_order,
    check_strides,
    dense_strides,
    is_dense,
    span,
)
from nvmath._internal.tensors.device_array import DeviceArray
from nvmath._internal.tensors.dispatch import adapter_class, check_consistent, wrap, wrap_operands

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

