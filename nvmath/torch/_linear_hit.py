"""The compiled Linear-layer hit: a planned Linear problem's key check and launch in one C call.

A :class:`~._planners.PlannerCache` whose problems run on addresses keeps, when the compiled path is
active (:mod:`nvmath._internal.fastpath`), a table of them (``nvmath._fastcall.LinearHits``, its
``linear_hits``): ``hits(x, weight, bias, activation)`` compares the tensors with each entry's key
(activation, types, shapes, strides, dtype, device, pointer alignment, the calling thread and torch's
current stream), allocates the result, and calls ``cublasLtMatmul`` with the launch's fixed arguments;
it returns ``None`` on any mismatch, and the Python path runs (every check and error message is
there). :func:`build` makes an entry from a Python hit that ran on addresses; the table never
plans, evicts or frees anything, and an entry whose launch was closed (its planner re-planned or
freed) or whose algorithm changed never runs (see ``nvmath/_fastcall.d/linear_hit.c``).

Entries are made only for the epilogs without aux outputs (inference, and a training forward without
GELU) and for the products of a Linear layer's backward: its input gradient (:data:`PRODUCT`) and its
weight gradient (:data:`WEIGHT_GRAD`, or :data:`WEIGHT_BIAS_GRAD` with the bias gradient fused by
BGRADB: the entry also allocates that output and points the descriptor at it, and the call returns
``(dw, db)``); a backward makes both of its products in one call, ``hits.backward(x, dz, weight,
weight_act, input_act)`` (see :func:`~._kernels.linear_backward`). On the pure-Python path there is no
table (``linear_hits`` is ``None``) and nothing here runs.
"""

from __future__ import annotations

import functools
import logging
import threading
from typing import Any

import torch

from nvmath._internal import compiled_hits, fastpath, streams
from nvmath.linalg.advanced import MatmulEpilog as E
from nvmath.linalg.advanced._launch import twin_arguments
from nvmath.torch import _capture

__all__ = ["ACTIVATION_OF", "CAPACITY", "PRODUCT", "WEIGHT_BIAS_GRAD", "WEIGHT_GRAD", "build", "table"]

logger = logging.getLogger(__name__)

CAPACITY = 64
"""The most problems (per thread and stream) a table holds; beyond it the oldest entry goes."""

ACTIVATION_OF: dict[Any, str | None] = {
    None: None, E.BIAS: None, E.RELU: "relu", E.RELU_BIAS: "relu", E.GELU: "gelu", E.GELU_BIAS: "gelu",
}  # fmt: skip
"""The epilogs a compiled Linear hit runs (no aux output), with the activation a call names them by."""

PRODUCT = "nvmath.torch: plain product"
"""The name of a plain product ``a @ b`` of ``PlannerCache.run`` (a backward's input gradient) in a table:
called as ``hits(a, b, None, PRODUCT)``, an entry of ``a`` and ``b`` with no epilog."""


WEIGHT_GRAD = "nvmath.torch: weight gradient"
"""The name of a Linear layer's weight gradient ``dz.T @ x`` (``PlannerCache.weight_grad`` without bias)
in a table: called as ``hits(x, dz, None, WEIGHT_GRAD)`` -> ``dw`` ((N, K), contiguous)."""

WEIGHT_BIAS_GRAD = "nvmath.torch: weight and bias gradient"
"""The same with the bias gradient (BGRADB): ``hits(x, dz, None, WEIGHT_BIAS_GRAD)`` -> ``(dw, db)``."""

_GRADS = (WEIGHT_GRAD, WEIGHT_BIAS_GRAD)


def table() -> Any:
    """A new empty table, or ``None`` when the compiled path is off (or torch has no CUDA getters)."""
    if not fastpath.available():
        return None
    from nvmath import _fastcall

    return _fastcall.LinearHits(CAPACITY, torch.is_grad_enabled)


def _alignment(ptr: int) -> int:
    return min(ptr & -ptr, 256) if ptr else 256


def _aux_output(maker: Any, attr: Any) -> tuple[Any, tuple[Any]]:
    """``(aux_alloc, attrs)`` of an entry whose plan writes one aux output through the descriptor
    pointer ``attr`` (BGRADB's bias gradient): the output made as ``maker`` (a torch CUDA
    ``ResultMaker``, its ``direct`` layout) makes it, and the attribute to point at it."""
    empty, shape, strides, dtype, device = maker.direct
    template = empty((0,), (1,), dtype=dtype, device=device)  # (no memory: allocates as `empty` does)
    return functools.partial(template.new_empty_strided, shape, strides), (attr,)


def build(key: Any, act: Any, lr: Any, x: Any, w: Any, b: Any) -> Any:
    """The ``LinearHit`` of a planned problem that just ran on addresses, or ``None`` when its next call
    cannot be made in C (see :meth:`~nvmath.linalg.advanced._direct.AddressRun.compiled_parts`; also a
    capture in progress, torch without CUDA getters, a bias pointer not settable from C).

    Args:
        key: the problem's :class:`~._planners.PlannerCache` key; ``act``: the activation of its
            epilog (see :data:`ACTIVATION_OF`), or :data:`PRODUCT`.
        lr: its ``_LinearRun`` or ``_ProductRun`` (``run``: its
            :class:`~nvmath.linalg.advanced._direct.AddressRun`;
            ``shape``, ``strides``, ``template``: the result's layout, dtype and device; ``x_first``;
            ``pinned``: a CUDA graph may replay the planner, so no capture check per call; a weight
            gradient's ``transposed``: the layout of the gradient, the product's transpose).
        x, w, b: the tensors of the call that just ran (``b`` ``None`` without bias; a weight
            gradient's ``x`` and ``dz``).
    """
    raw, device = streams.torch_raw_stream(), streams.torch_device_getter()
    ready = raw is not None and device is not None
    grad = act in _GRADS
    parts = lr.run.compiled_parts(aux=act == WEIGHT_BIAS_GRAD) if ready else None
    if parts is None or (grad and lr.transposed is None) or ("aux" in parts) != (act == WEIGHT_BIAS_GRAD):
        return None
    attrs, aux_alloc = parts["attrs"], None
    if "aux" in parts:  # (the bias gradient: allocated per call, the descriptor pointed at it)
        if attrs or parts["aux"][0].direct is None:
            return None
        aux_alloc, attrs = _aux_output(*parts["aux"])
    set_attr = fastpath.bound_address("cublasLt", "cublasLtMatmulDescSetAttribute") if attrs else 0
    if set_attr is None or len(attrs) != (b is not None or aux_alloc is not None):
        return None
    layout = lr.transposed if grad else (lr.shape, lr.strides)
    capturing = None
    if parts["bound"] is not None and not lr.pinned:
        if _capture.capturing_now():  # (the Python path pins the planner first)
            return None
        capturing = _capture.capturing_now  # (torch's C query from the first call on)
    from nvmath import _fastcall

    handle = parts["handle"]
    return _fastcall.LinearHit(
        key=key, act=act, xtype=type(x), wtype=type(w), btype=type(b) if b is not None else None,
        dtype=x.dtype, device=x.device, xshape=tuple(x.shape), xstrides=x.stride(),
        xalign=_alignment(x.data_ptr()), wshape=tuple(w.shape), wstrides=w.stride(),
        walign=_alignment(w.data_ptr()), bshape=tuple(b.shape) if b is not None else (),
        bstrides=b.stride() if b is not None else (), balign=_alignment(b.data_ptr()) if b is not None else 0,
        thread=threading.get_ident(), raw_stream=raw, get_device=device, capturing=capturing,
        alloc=functools.partial(lr.template.new_empty_strided, *layout), aux_alloc=aux_alloc,
        **twin_arguments(parts["launch"], parts, handle), x_first=lr.x_first, attrs=attrs, set_attr=set_attr,
        **compiled_hits.context_fields(parts["device_id"], device, x),
    )  # fmt: skip
