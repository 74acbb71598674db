"""Result tensors: allocation on the ``execute()`` hot path and delivery in the caller's package.

A :class:`ResultMaker` allocates one output (D or an aux output) with the operands' package, on the
execution stream. torch results on the torch current stream take a direct ``torch.empty_strided``
(about 1 us); everything else goes through the adapter's ``empty`` (stream-ordered, any package).
Host operands get device results that :func:`deliver_host` copies back (blocking).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from typing import Any

from nvmath._internal import caches, dtypes, streams
from nvmath._internal.streams import StreamHandle
from nvmath._internal.tensors import TensorAdapter, wrap
from nvmath._internal.tensors.copy import copy_into

__all__ = ["ResultMaker", "deliver", "deliver_host", "deliver_outputs", "empty_sibling"]

_SIBLINGS = caches.memo("nvmath.linalg.advanced: empty result templates", 64)
"""(adapter class, package, device id, dtype) -> an empty tensor of that kind (torch and cupy)."""


def empty_sibling(adapter: TensorAdapter) -> TensorAdapter:
    """An empty (0-element) tensor of ``adapter``'s package, device and dtype: the template a
    :class:`ResultMaker` makes outputs like, never the caller's tensor. torch and cupy ones hold no
    state of the caller and are shared (memoised); other packages' are made anew."""
    package = adapter.package
    if package != "torch" and package != "cupy":
        return adapter.empty((0,), adapter.dtype)
    key = (type(adapter), package, adapter.device_id, adapter.dtype)
    sibling = _SIBLINGS.get(key)
    if sibling is None:
        sibling = _SIBLINGS.put(key, adapter.empty((0,), adapter.dtype))
    return sibling


class ResultMaker:
    """Allocates outputs of one shape, strides and dtype like ``template`` (a device tensor).

    :meth:`new` returns ``(obj, ptr, is_adapter)``: the new tensor (a package tensor, or an adapter
    whose ``unwrap`` gives the caller's object), its device address, and which of the two it is.
    """

    __slots__ = (
        "_device", "_empty", "_raw_stream", "_tdtype", "device_id", "direct", "dtype", "shape", "strides",
        "template",
    )  # fmt: skip

    direct: tuple | None
    """``(torch.empty_strided, shape, strides, torch dtype, torch device)`` for a torch CUDA result, which
    a caller that knows its stream is torch's current one may allocate itself as
    ``empty(shape, strides, dtype=dtype, device=device)`` (what :meth:`new` does then, without its call);
    ``None`` for other results."""

    def __init__(self, template: TensorAdapter, shape: tuple[int, ...], strides: tuple[int, ...], dtype: str):
        self.template = template
        self.shape, self.strides, self.dtype = tuple(shape), tuple(strides), dtype
        self.device_id = template.device_id
        self._raw_stream: Any = None
        self.direct = None
        if template.package == "torch" and template.device == "cuda":
            torch = sys.modules["torch"]
            self._raw_stream = streams.torch_raw_stream()
            self._tdtype = dtypes.to_torch_dtype(dtype)
            self._device = torch.device("cuda", template.device_id)
            self._empty = torch.empty_strided
            self.direct = (self._empty, self.shape, self.strides, self._tdtype, self._device)

    def new(self, stream: StreamHandle, current: bool = False) -> tuple[Any, int, bool]:
        """Allocate one output, first used on ``stream`` (``current``: the caller knows ``stream`` is
        torch's current stream, which saves the query)."""
        raw = self._raw_stream
        if raw is not None and (current or stream.ptr == raw(self.device_id)):
            t = self._empty(self.shape, self.strides, dtype=self._tdtype, device=self._device)
            return t, t.data_ptr(), False
        out = self.template.empty(self.shape, self.dtype, strides=self.strides, stream=stream)
        return out, out.data_ptr, True


def deliver(obj: Any, is_adapter: bool, stream: StreamHandle) -> Any:
    """The caller's object for an output made by :meth:`ResultMaker.new` (GPU operands)."""
    return obj.unwrap(stream) if is_adapter else obj


def deliver_host(host_template: TensorAdapter, obj: Any, is_adapter: bool, stream: StreamHandle) -> Any:
    """Copy a device output to a new host tensor of the caller's package (blocking) and return it."""
    src = obj if is_adapter else wrap(obj)
    dst = host_template.empty(tuple(src.shape), src.dtype, strides=tuple(src.strides), device_id="cpu")
    copy_into(dst, src, stream)
    return dst.unwrap(stream)


def deliver_outputs(
    spec: Any, host_template: TensorAdapter | None, slots: Mapping[str, Any], out: Any, is_adapter: bool,
    aux: Sequence[tuple[str, tuple[Any, int, bool]]] | None, stream: StreamHandle,
) -> Any:  # fmt: skip
    """The caller's ``result`` or ``(result, aux_dict)`` of one execute.

    Args:
        spec: the planner's ``_spec.Spec``.
        host_template: an empty host tensor of the caller's package (host operands), else ``None``.
        slots: the operand slots (an in-place result of host operands is copied into ``c``'s).
        out, is_adapter: D as :meth:`ResultMaker.new` made it (or ``c``'s device adapter in place).
        aux: ``(name, (tensor, address, is_adapter))`` per aux output the caller gets, or ``None``.
        stream: the execution stream (copies back to the host block; ``blocking=True`` synchronizes).
    """
    if spec.host:
        if spec.mm.inplace:
            c = slots["c"]
            copy_into(c.user, c.device, stream)
            result = c.user.unwrap(stream)
        else:
            result = deliver_host(host_template, out, is_adapter, stream)  # type: ignore[arg-type]
        extras = (
            {name: deliver_host(host_template, o, ad, stream) for name, (o, _, ad) in aux}  # type: ignore[arg-type]
            if aux else None
        )  # fmt: skip
    else:
        result = out.unwrap(stream) if is_adapter else out
        extras = {name: deliver(o, ad, stream) for name, (o, _, ad) in aux} if aux else None
        if spec.options.blocking is True:
            streams.synchronize(stream)
    return (result, extras) if extras is not None else result
