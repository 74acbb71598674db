"""N-D FFTs on cuFFT (GPU) and scipy (CPU), call-compatible with nvmath-python 1.0's ``nvmath.fft``.

* Stateless: :func:`fft`, :func:`ifft`, :func:`rfft`, :func:`irfft`, backed by a bounded, thread-safe
  plan cache (:data:`plan_cache`).
* Stateful: :class:`FFT` -- plan once (:meth:`FFT.plan`), execute many times, swap operands with
  :meth:`FFT.reset_operand`.
* :class:`FFTOptions`, :class:`FFTDirection`, :class:`ExecutionCUDA` / :class:`ExecutionCPU`,
  :class:`UnsupportedLayoutError`, LTO callbacks (:func:`compile_prolog`, :func:`compile_epilog`,
  :class:`DeviceCallable`) and :func:`estimate_workspace_size`.

Transforms are unnormalized in both directions (``ifft(fft(x)) == N * x``), as cuFFT's. Host
operands (numpy, torch CPU) run on the CPU by default; pass ``execution="cuda"`` to run them on a GPU.
Beyond nvmath-python: any number of axes, layouts whose batch axes do not collapse into one stride,
``FFTOptions(layout_fallback="copy")``, repeatable C2R execution, and the plan cache.
"""

from __future__ import annotations

from typing import Any

from nvmath._errors import UnsupportedLayoutError
from nvmath._internal.execution import ExecutionCPU, ExecutionCUDA
from nvmath.fft._callbacks import DeviceCallable, compile_epilog, compile_prolog
from nvmath.fft._options import FFTDirection, FFTOptions
from nvmath.fft._planner import FFT
from nvmath.fft._stateless import fft, ifft, irfft, plan_cache, rfft

__all__ = [
    "FFT",
    "DeviceCallable",
    "ExecutionCPU",
    "ExecutionCUDA",
    "FFTDirection",
    "FFTOptions",
    "UnsupportedLayoutError",
    "compile_epilog",
    "compile_prolog",
    "estimate_workspace_size",
    "fft",
    "ifft",
    "irfft",
    "plan_cache",
    "rfft",
]

_TECHNIQUES = ("default", "refined")


def estimate_workspace_size(key: tuple, *, technique: str = "default", handle: int | None = None) -> int:
    """The cuFFT workspace (bytes) a plan with this key needs.

    Args:
        key: from :meth:`FFT.create_key`, :meth:`FFT.create_key_from_metadata` or :meth:`FFT.get_key`.
        technique: ``"default"`` (cuFFT's size query, no plan is made) or ``"refined"`` (the plans are
            made and destroyed: the exact size).
        handle: a cuFFT handle to use (one is created otherwise): the ``"default"`` query runs on it,
            and the ``"refined"`` plan is made on it (it is not destroyed).

    Returns:
        The size in bytes (0 for CPU execution).

    Raises:
        ValueError: ``key`` is not an FFT key (as nvmath-python), or an unknown ``technique``.
    """
    if not (isinstance(key, tuple) and len(key) == 5 and key[0] == "nvmath.fft"):
        raise ValueError(
            f"key must come from FFT.create_key / create_key_from_metadata / get_key; got {key!r}"
        )
    if technique not in _TECHNIQUES:
        raise ValueError(f"technique must be one of {', '.join(map(repr, _TECHNIQUES))}; got {technique!r}")
    from nvmath.fft._cufft_plan import workspace_size
    from nvmath.fft._traits import FFTTraits, PlanKey

    traits = key[1].traits if isinstance(key[1], PlanKey) else FFTTraits(*key[1])
    execution: Any = key[4]
    if execution[0] != "cuda":
        return 0
    return workspace_size(traits, device_id=execution[1], technique=technique, handle=handle)
