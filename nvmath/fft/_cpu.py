"""CPU execution of FFTs through ``scipy.fft`` (pocketfft), for host operands or ``ExecutionCPU``.

The transform is unnormalized in both directions, as on the GPU. Single precision stays single
precision (float32 -> complex64 and back). The input is never written (``overwrite_x=False``), so
C2R leaves the operand intact. The result gets the layout the traits ask for without an extra copy:
the operand is viewed with its axes in the result's memory order, transformed (scipy returns a
C-ordered array) and viewed back.

``ExecutionCPU.num_threads`` maps to scipy's ``workers``; ``None`` uses half the CPUs this process
may run on (at least one), as nvmath-python does.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from nvmath._internal.tensors.base import axis_order, span
from nvmath.fft._traits import FFTTraits

__all__ = ["default_threads", "execute_on_host", "scipy_fft"]

_SCIPY: Any = None


def default_threads() -> int:
    """Half the CPUs this process may run on, at least 1."""
    try:
        count = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        count = os.cpu_count() or 1
    return max(1, count // 2)


def scipy_fft() -> Any:
    """Return ``scipy.fft`` (imported on first use).

    Raises:
        RuntimeError: scipy is not installed.
    """
    global _SCIPY
    if _SCIPY is None:
        from nvmath._internal.optional import import_scipy

        _SCIPY = import_scipy("fft", "CPU execution of FFTs", RuntimeError)
    return _SCIPY


def _inverse(perm: tuple[int, ...]) -> tuple[int, ...]:
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return tuple(inv)


def _with_strides(y: np.ndarray, shape: tuple[int, ...], strides: tuple[int, ...]) -> np.ndarray:
    """``y`` with exactly ``strides`` (elements): a view when only extent-1 strides differ, else a copy."""
    itemsize = y.itemsize
    wanted = tuple(s * itemsize for s in strides)
    if y.strides == wanted:
        return y
    if all(a == b or n == 1 for a, b, n in zip(y.strides, wanted, shape)):
        return np.lib.stride_tricks.as_strided(y, shape=shape, strides=wanted)
    # the buffer covers every offset the strides reach (in-place layouts of sliced operands may
    # leave gaps, so y.size elements can be too few)
    _, hi = span(tuple(shape), tuple(strides))
    buffer = np.empty(max(hi + 1, 1), dtype=y.dtype)
    out = np.lib.stride_tricks.as_strided(buffer, shape=shape, strides=wanted)
    np.copyto(out, y)
    return out


def execute_on_host(x: np.ndarray, traits: FFTTraits, direction: int, workers: int) -> np.ndarray:
    """Transform the host array ``x`` as ``traits`` describe; return a new array.

    Args:
        x: the operand (shape ``traits.operand_shape``), any strides.
        traits: the transform's traits (``execution == "cpu"``).
        direction: -1 (forward) or 1 (inverse); C2C only (R2C is forward, C2R inverse).
        workers: scipy's ``workers``.

    Returns:
        The result with ``traits.result_shape``, dtype and strides (for an in-place transform the
        caller copies it into the operand).
    """
    sfft = scipy_fft()
    order = axis_order(traits.result_shape, traits.result_strides)
    xt = x.transpose(order)
    axes = [order.index(a) for a in traits.axes]
    if traits.fft_type == "C2C":
        if direction < 0:
            y = sfft.fftn(xt, axes=axes, workers=workers)
        else:
            y = sfft.ifftn(xt, axes=axes, norm="forward", workers=workers)
    elif traits.fft_type == "R2C":
        y = sfft.rfftn(xt, axes=axes, workers=workers)
    else:
        y = sfft.irfftn(xt, s=list(traits.fft_shape), axes=axes, norm="forward", workers=workers)
    y = y.transpose(_inverse(order))
    if y.dtype.name != traits.result_dtype:  # pragma: no cover - scipy keeps the precision
        y = y.astype(traits.result_dtype)
    return _with_strides(y, traits.result_shape, traits.result_strides)
