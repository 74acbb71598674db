"""CUDA graph capture: detect it cheaply and refuse what a capture cannot hold.

A capture records kernel launches; planning (heuristic queries, descriptor creation), autotuning
(timing with events and host synchronisation) and allocations outside torch's allocator would be
run once at capture time and never again (or invalidate the capture). nvmath.torch therefore plans
every problem before a capture (the warm-up iterations ``torch.cuda.graph`` needs anyway) and refuses
first-time planning inside one with the fix in the message.
"""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["CaptureError", "capturing", "capturing_now", "refuse_planning"]


class CaptureError(RuntimeError):
    """A capture-unsafe operation (planning, autotuning) was asked for while a CUDA graph is captured."""


_is_capturing = getattr(torch._C, "_cuda_isCurrentStreamCapturing", None)

capturing_now: Any = _is_capturing if _is_capturing is not None else bool
"""``capturing_now()``: whether the current CUDA stream is capturing a graph, as :func:`capturing` for a
tensor already known to be a CUDA tensor (a planned problem's hit): torch's C query itself, no Python
frame (without CUDA, ``bool()``: ``False``)."""


def capturing(tensor: Any) -> bool:
    """Whether the current CUDA stream (of ``tensor``'s device) is capturing a graph (cheap: one C call)."""
    if not tensor.is_cuda or _is_capturing is None:
        return False
    return bool(_is_capturing())


def refuse_planning(what: str, tensor: Any) -> None:
    """Raise :class:`CaptureError` when ``what`` (a planning step) would run inside a graph capture."""
    if capturing(tensor):
        raise CaptureError(
            f"{what} while a CUDA graph is being captured: planning queries cuBLASLt and allocates, which a "
            "graph cannot replay. Run the same call (same shapes, dtypes, strides) once before the capture "
            "(a warm-up iteration), so the planner is cached, then capture."
        )
