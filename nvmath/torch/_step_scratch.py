"""One allocation for a training step's small tensors: :func:`carve`.

A step of an FP8 layer makes several small tensors per pass (the groups' amaxes, the scales it
quantized with, the dequantization scales, the partial column sums): each ``torch.empty`` is a torch
dispatch and a caching-allocator call (a few us of host time on the GPU machine), each ``torch.zeros``
also a fill kernel. :func:`carve` makes them as views of one tensor (zero-filled where asked: one fill
for all), each view starting on :data:`ALIGN` bytes (the CUDA caching allocator's blocks start on 512),
so that a kernel's vector loads and stores and cuBLASLt's 16-byte alignment rules hold as for a tensor
of its own.

The views share one storage: it lives while any of them does (keep long-lived and short-lived
tensors in separate carvings where their sizes matter).
"""

from __future__ import annotations

import torch

from nvmath._internal import caches

__all__ = ["ALIGN", "carve"]

ALIGN = 256
"""Bytes every view of :func:`carve` starts on, relative to the allocation's start."""


def carve(
    shapes: tuple[tuple[int, ...], ...], dtype: torch.dtype, device: torch.device, *, zero: bool = False
) -> list[torch.Tensor]:
    """Contiguous tensors of ``shapes`` and ``dtype`` on ``device``, views of one allocation (zeros with
    ``zero``, else uninitialised memory), each on :data:`ALIGN` bytes."""
    key = (shapes, dtype)
    layout = _LAYOUTS.get(key)
    if layout is None:
        layout = _LAYOUTS.put(key, _layout(shapes, dtype))
    total, views = layout
    buf = (torch.zeros if zero else torch.empty)(total, dtype=dtype, device=device)
    return [buf.as_strided(shape, strides, offset) for shape, strides, offset in views]  # (one call each)


_LAYOUTS = caches.memo("nvmath.torch step scratch: view layouts", 1024)
"""``(shapes, dtype)`` -> :func:`_layout` (made once per shapes)."""


def _layout(shapes: tuple[tuple[int, ...], ...], dtype: torch.dtype) -> tuple[int, list[tuple]]:
    """``(elements to allocate, [(shape, contiguous strides, offset in elements)])``, every offset on
    :data:`ALIGN` bytes."""
    step = max(1, ALIGN // dtype.itemsize)
    views, at = [], 0
    for shape in shapes:
        strides, n = [], 1
        for d in reversed(shape):
            strides.append(n)
            n *= d
        views.append((tuple(shape), tuple(reversed(strides)), at))
        at += -(-n // step) * step
    return max(at, 1), views
