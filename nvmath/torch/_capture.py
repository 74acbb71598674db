"""CUDA graph capture: detect it cheaply and refuse what a capture cannot hold.

A capture records kernel launches; planning (heuristic queries, descriptor creation), autotuning
(timing with events and host synchronisation) and allocations outside torch's allocator would be
run once at capture time and never again (or invalidate the capture). nvmath.torch therefore plans
every problem before a capture (the warm-up iterations ``torch.cuda.graph`` needs anyway) and refuses
first-time planning inside one with the fix in the message.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import torch

__all__ = ["CaptureError", "capturing", "capturing_now", "evict", "pin_if_capturing", "refuse_planning"]


class CaptureError(RuntimeError):
    """A capture-unsafe operation (planning, autotuning) was asked for while a CUDA graph is captured."""


_is_capturing = getattr(torch._C, "_cuda_isCurrentStreamCapturing", None)


def _first_query() -> bool:
    """:data:`capturing_now` until its first call: then torch's C query itself, or ``bool`` (always
    ``False``) where torch has no CUDA or the query fails (a CUDA build of torch without a GPU, whose
    CPU tensors pose as CUDA tensors in the fake-GPU tests)."""
    global capturing_now
    query = getattr(torch._C, "_cuda_isCurrentStreamCapturing", None)  # (torch's, not a test's _is_capturing)
    try:
        now = bool(query()) if query is not None else False
    except RuntimeError:
        capturing_now = bool
        return False
    capturing_now = query if query is not None else bool
    return now


capturing_now: Any = _first_query
"""``capturing_now()``: whether the current CUDA stream is capturing a graph, as :func:`capturing` for a
planned problem's hit (its operands are CUDA tensors): from the first call on torch's C query itself, no
Python frame."""


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


def evict(planners: OrderedDict, pinned: set, maxsize: int) -> None:
    """Free the least recently used planners beyond ``maxsize``, never a ``pinned`` one (a planner run
    inside a CUDA graph capture: the graph replays its workspace and descriptors) nor the most recent
    one (the planner just made, about to run)."""
    for key in [k for k in list(planners)[:-1] if k not in pinned][: max(0, len(planners) - maxsize)]:
        planners.pop(key).free()


def pin_if_capturing(pinned: set, key: Any, t: torch.Tensor) -> None:
    """Pin ``key``'s planner when a CUDA graph is being captured on ``t``'s device (see :func:`evict`)."""
    if key not in pinned and capturing(t):
        pinned.add(key)
