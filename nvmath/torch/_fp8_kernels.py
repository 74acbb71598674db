"""One-pass FP8 quantization of CUDA tensors: ``q = fp8(x * scale)`` and ``amax = max |x|`` together.

The kernel is the library's FP8 aux quantization (:mod:`nvmath.linalg.advanced._aux_quantize`):
``cvt.rn.satfinite`` (round to nearest even, finite values saturated, NaN kept) of the float32
product, and the amax of the wide values by ``atomicMax`` on their float bits (a NaN wins). It reads
the scale from the device, so it needs no host synchronisation; it runs on torch's current stream.
Compared with torch's ``x.float() * s``, ``clamp``, cast and a separate amax reduction (four or five
passes over the tensor), it is one pass; the values are the same for finite inputs (an infinite
input saturates here -- the layers then poison the dequantization scale instead, see
:mod:`._fp8`).

The kernels are compiled (NVRTC) on first use per device and dtype pair: do that outside a CUDA graph
capture (a warm-up step). If compiling or loading them fails, :func:`available` turns false for the
process (logged once) and the layers use torch's operations instead.
"""

from __future__ import annotations

import logging
from typing import Any

import torch

__all__ = ["available", "fused_quantize"]

logger = logging.getLogger(__name__)

_WIDE = {torch.bfloat16: "bfloat16", torch.float16: "float16", torch.float32: "float32"}
_FP8 = {torch.float8_e4m3fn: "float8_e4m3fn", torch.float8_e5m2: "float8_e5m2"}
_kernels: dict[tuple, tuple[Any, Any]] = {}
_broken: list[str] = []


def available(x: torch.Tensor) -> bool:
    """Whether ``x`` can be quantized by :func:`fused_quantize` (a contiguous CUDA tensor of a wide
    dtype, and the kernels did not fail to build in this process)."""
    return x.is_cuda and x.dtype in _WIDE and x.is_contiguous() and x.numel() > 0 and not _broken


def _kernels_for(wide: torch.dtype, fp8: torch.dtype, device_id: int) -> tuple[Any, Any]:
    key = (wide, fp8, device_id)
    found = _kernels.get(key)
    if found is None:
        from nvmath.linalg.advanced import _aux_quantize

        found = _kernels[key] = _aux_quantize.kernels(_WIDE[wide], _FP8[fp8], device_id)
    return found


def fused_quantize(
    x: torch.Tensor, scale: torch.Tensor, dtype: torch.dtype
) -> tuple[torch.Tensor, torch.Tensor] | None:
    """``(q, amax)``: ``q = fp8(x * scale)`` (``dtype``), ``amax`` a float32 scalar tensor; ``None``
    when the kernels cannot be built here (then :func:`available` is false from now on)."""
    from nvmath._internal import devices, streams
    from nvmath.linalg.advanced import _aux_quantize

    device_id = x.device.index if x.device.index is not None else torch.cuda.current_device()
    try:
        kernel, zero = _kernels_for(x.dtype, dtype, device_id)
    except Exception as exc:  # noqa: BLE001 (NVRTC or the driver refused: train on torch's kernels)
        _broken.append(repr(exc))
        logger.warning("FP8 quantization kernels unavailable (%s); using torch operations instead", exc)
        return None
    q = torch.empty(x.shape, dtype=dtype, device=x.device)
    amax = torch.empty(1, dtype=torch.float32, device=x.device)
    s = scale.reshape(1).to(torch.float32).contiguous()
    n = x.numel()
    stream = streams.current_stream(device_id, "torch")
    # the launch needs the device's context current in this thread: torch's autograd engine runs the
    # backward in its own thread, where no driver context need be current
    with devices.device_ctx(device_id):
        _aux_quantize.quantize(
            kernel, zero, x.data_ptr(), q.data_ptr(), s.data_ptr(), amax.data_ptr(), rows=n, ld=n, total=n,
            stream=stream,
        )  # fmt: skip
    return q, amax[0]
