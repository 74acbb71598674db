"""The Python cost of ``FFT.execute`` and of a stateless ``nvmath.fft.fft`` hit, measured on the CPU.

torch CPU tensors pose as CUDA tensors of package ``"torch"`` on GPU 0 (``tools/torch_host_cost.py``'s
adapter, and a raw reader for the stateless key that reads them as on GPU 0), so the torch-only fast
paths of the FFT planner run: torch's raw current stream, results made by torch. cuFFT is the fake of
``tests/fft/test_fft_cuda_path.py`` for planning; ``cufftXtExec`` is a C function that does nothing
(``nvmath._fastcall``'s probe when the extension is built, else a ctypes no-op), reached through the same
caller as on the GPU (compiled or pure, as ``NVMATH_PURE_PYTHON`` says). With the extension built, the
driver's context calls are C no-ops too (the current context is the plan's: never switched), so the
one-call launch and the compiled hit (``FFTHit``) run as on the GPU; on the pure path the stream's
context switch is the fake GPU's no-op. On the GPU machine each driver call adds about 0.3-1 us.

Run from the repository root::

    PYTHONPATH=. python tools/fft_host_cost.py [--calls 20000] [--rounds 5] [--size 1024] [--profile ROW]

Prints us per call (best of 5 rounds) per row; ``--profile`` prints a cProfile of one row.
``tools/host_profile.py --fake`` shows the same rows split into steps.
"""

from __future__ import annotations

import argparse
import ctypes
import pathlib
import sys
import time
from collections.abc import Callable
from typing import Any

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "tools")]

_NO_OP = ctypes.CFUNCTYPE(ctypes.c_int, *([ctypes.c_void_p] * 4))


def _no_op_exec() -> Any:
    """A C function of four arguments returning 0: the fake ``cufftXtExec`` while timing."""
    try:
        from nvmath import _fastcall

        return _NO_OP(_fastcall._probe_address(4))
    except ImportError:
        return _NO_OP(lambda *args: 0)


def _no_op_context_calls() -> tuple[int, int] | None:
    """``(cuCtxGetCurrent, cuCtxSetCurrent)`` stand-ins (C functions of one argument returning 0: the
    current context reads as 0, the primary context's stand-in, so it is never switched), or ``None``
    without the extension (the Python launch then runs, as without a driver)."""
    try:
        from nvmath import _fastcall
    except ImportError:
        return None
    return _fastcall._probe_address(1), _fastcall._probe_address(1)


def install(mp: Any) -> None:
    """The fake GPU for the FFT rows (undone by ``mp.undo()``); needs ``torch_host_cost.install`` first."""
    import torch
    import torch_host_cost  # noqa: F401 - (installed by the caller)

    from nvmath._internal import dtypes, stateless, streams
    from nvmath.bindings import cufft
    from nvmath.fft import _cufft_plan, _planner_support

    sys.path.insert(0, str(ROOT / "tests" / "fft"))
    import test_fft_cuda_path as fake_fft

    mp.setattr(streams, "_TORCH_RAW", None)  # looked up again under the fake (and restored after)
    lib = fake_fft.FakeCufft()
    mp.setattr(_cufft_plan, "_cufft", lambda: lib)
    mp.setattr(_cufft_plan, "Workspace", fake_fft.FakeWorkspace)
    mp.setattr(_planner_support, "torch_device", lambda device_id: torch.device("cpu"))
    mp.setattr(cufft, "_p_cufftXtExec", _no_op_exec())
    context_calls = _no_op_context_calls()
    if context_calls is not None:  # the one-call launch (and the compiled hit) run as on the GPU
        from nvmath._internal import devices

        mp.setattr(_cufft_plan, "_context_calls", lambda: context_calls)
        mp.setattr(devices, "primary_context", lambda device_id: 0)

    def read_as_gpu(t: Any) -> Any:
        info = dtypes.KNOWN_TORCH.get(t.dtype)
        if info is None:
            return None
        return ("torch", 0, t.shape, t.stride(), info[0], t.is_conj()), t.data_ptr(), t

    mp.setitem(stateless.READERS, torch.Tensor, read_as_gpu)  # (undone with the rest: no fake reader outlives it)
    from nvmath.fft import _stateless as fft_stateless

    if hasattr(fft_stateless, "_read_torch"):  # the stateless FFT compares torch operands raw, as on the GPU
        mp.setattr(fft_stateless, "_read_torch", read_as_gpu)


_PLANNERS: list[Any] = []


def free_planners() -> None:
    """Free the planners :func:`rows` made (call before the fake is undone: they hold fake cuFFT plans)."""
    while _PLANNERS:
        _PLANNERS.pop().free()


def rows(size: int = 1024) -> dict[str, Callable[[], Any]]:
    """Row name -> a no-argument call (planned by a first call before timing)."""
    import torch

    import nvmath

    sig = torch.randn(size, dtype=torch.complex64)
    fft = nvmath.fft.FFT(sig)
    fft.plan()
    _PLANNERS.append(fft)
    return {
        "FFT.execute": fft.execute,
        "fft.fft (hit)": lambda: nvmath.fft.fft(sig),
        "fft then ifft (hits)": lambda: nvmath.fft.ifft(nvmath.fft.fft(sig)),
        "torch.fft.fft (CPU compute)": lambda: torch.fft.fft(sig),
    }


def measure(fn: Callable[[], Any], calls: int, rounds: int = 5) -> float:
    """Best us per call of ``rounds`` rounds of ``calls`` calls, in this thread's CPU time (the machine is
    shared: time spent descheduled is not counted)."""
    best = float("inf")
    for _ in range(rounds):
        t0 = time.thread_time_ns()
        for _ in range(calls):
            fn()
        best = min(best, (time.thread_time_ns() - t0) / calls / 1e3)
    return best


def print_table(table: dict[str, Callable[[], Any]], args: Any, measure_fn: Callable[..., float]) -> None:
    """Print the call path and each row's us per call (``measure_fn(fn, calls, rounds)``); the row whose
    name holds ``args.profile`` is also profiled with :mod:`cProfile` (25 costliest functions)."""
    import cProfile
    import pstats

    from nvmath._internal import fastpath

    print(f"call path: {fastpath.describe()}")
    for name, fn in table.items():
        fn()
        if args.profile and args.profile in name:
            prof = cProfile.Profile()
            prof.enable()
            for _ in range(args.calls):
                fn()
            prof.disable()
            pstats.Stats(prof).sort_stats("tottime").print_stats(25)
        print(f"{name:30s} {measure_fn(fn, args.calls, args.rounds):7.2f} us/call")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--profile", default=None, help="a row name (substring) to cProfile")
    args = parser.parse_args()
    import torch_host_cost
    from _pytest.monkeypatch import MonkeyPatch

    from nvmath._internal import caches

    mp = MonkeyPatch()
    try:
        torch_host_cost.install(mp)
        install(mp)
        print_table(rows(args.size), args, measure)
    finally:
        free_planners()
        caches.clear_all()
        mp.undo()


if __name__ == "__main__":
    main()
