"""Helpers for setups: run each library on the harness stream, random never-zero data, input rotation."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import Any

from benchmarks.registry import Skip

__all__ = [
    "cupy_on_ctx_stream",
    "cupy_random",
    "require_gpu",
    "rotate",
    "torch_on_ctx_stream",
    "torch_random",
]


def require_gpu(ctx: Any) -> None:
    """Raise :class:`Skip` when the context has no GPU."""
    if not ctx.has_gpu:
        raise Skip(ctx.no_gpu_reason or "no CUDA device")


def torch_on_ctx_stream(ctx: Any) -> Any:
    """Import torch, make the harness stream its current stream on the device, and return torch."""
    import torch

    if not torch.cuda.is_available():
        raise Skip("torch has no CUDA device")
    if "torch_stream" not in ctx.extras:
        previous = torch.cuda.current_stream(ctx.device_id)
        ctx.extras.setdefault("restore", []).append(lambda: torch.cuda.set_stream(previous))
        torch.cuda.set_device(ctx.device_id)
        stream = torch.cuda.ExternalStream(ctx.stream_handle, device=torch.device("cuda", ctx.device_id))
        torch.cuda.set_stream(stream)
        torch.manual_seed(ctx.settings.seed)
        ctx.extras["torch_stream"] = stream
    return torch


def cupy_on_ctx_stream(ctx: Any) -> Any:
    """Import cupy, make the harness stream its current stream on the device, and return cupy."""
    import cupy

    if "cupy_stream" not in ctx.extras:
        cupy.cuda.Device(ctx.device_id).use()
        previous = cupy.cuda.get_current_stream()
        ctx.extras.setdefault("restore", []).append(previous.use)
        stream = cupy.cuda.ExternalStream(ctx.stream_handle, ctx.device_id)
        stream.use()
        cupy.random.seed(ctx.settings.seed)
        ctx.extras["cupy_stream"] = stream
    return cupy


def torch_random(torch: Any, shape: Sequence[int], dtype: Any, device: str = "cuda") -> Any:
    """Uniform values of magnitude in [0.5, 1.5) with random signs (never zero)."""
    magnitude = torch.rand(tuple(shape), device=device, dtype=torch.float32) + 0.5
    sign = torch.randint(0, 2, tuple(shape), device=device, dtype=torch.int8).float() * 2 - 1
    return (magnitude * sign).to(dtype)


def cupy_random(cupy: Any, shape: Sequence[int], dtype: Any) -> Any:
    """Uniform values of magnitude in [0.5, 1.5) with random signs (never zero)."""
    magnitude = cupy.random.random_sample(tuple(shape), dtype=cupy.float32) + 0.5
    sign = cupy.random.randint(0, 2, tuple(shape)).astype(cupy.float32) * 2 - 1
    return (magnitude * sign).astype(dtype)


def rotate(calls: Sequence[Callable[[], Any]]) -> Callable[[], Any]:
    """One callable that runs ``calls`` in turn (round robin); the single call itself if only one."""
    if not calls:
        raise ValueError("rotate needs at least one callable")
    if len(calls) == 1:
        return calls[0]
    it = itertools.cycle(calls)
    return lambda: next(it)()
