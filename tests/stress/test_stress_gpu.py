"""Stress on the GPU: long create/plan/execute/free loops, threads, stream ordering, dead streams and
failed plans, for the three planner families (cuBLASLt Matmul, cuFFT FFT, cuSOLVER Cholesky).

Every test is ``gpu`` and ``slow`` (the default GPU run deselects them: ``-m "not slow"``). Each prints
its figures on lines starting with ``STRESS`` (run with ``-s`` to see them):

    PYTHONPATH=. python -m pytest tests/stress -m slow -s -p no:cacheprovider

* Memory: ``torch.cuda.memory_allocated()`` (the caching allocator nvmath draws torch operands'
  memory from) and the device's free memory (``cuMemGetInfo``), after a warm-up and after the loop.
* Handles: every ``Create``/``Destroy`` pair of the C functions (cuBLASLt descriptors, layouts and
  preferences, cuFFT plans, cuSOLVER handles and params, ...) is counted while the test runs
  (``tests/handle_counter.py``); the live count must not grow.
* File descriptors: the entries of ``/proc/self/fd``.
"""

from __future__ import annotations

import gc
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from handle_counter import HandleCounter

from nvmath._internal import nvrtc

pytestmark = [pytest.mark.gpu, pytest.mark.slow]

CYCLES = 10_000
WARMUP = 50


@pytest.fixture(scope="module")
def torch():
    """torch with CUDA (skip otherwise)."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA device")
    return torch


# ----------------------------------------------------------------------------- the three families
class Case:
    """One small problem of a family: its operands, a planner factory, the stateless call, a reference."""

    def __init__(self, operands: list[Any], make: Callable, stateless: Callable, reference: Callable):
        self.operands, self.make, self.stateless, self.reference = operands, make, stateless, reference


def _matmul_case(torch, seed: int = 0) -> Case:
    """A 96x64 @ 64x80 float32 matmul (cuBLASLt)."""
    import nvmath.linalg.advanced as adv

    g = torch.Generator(device="cuda").manual_seed(seed)
    a = torch.rand(96, 64, device="cuda", generator=g) + 0.5
    b = torch.rand(64, 80, device="cuda", generator=g) + 0.5
    return Case(
        [a, b],
        lambda: adv.Matmul(a, b),
        lambda stream=None: adv.matmul(a, b, stream=stream),
        lambda: (a.double() @ b.double()).float(),
    )


def _fft_case(torch, seed: int = 0) -> Case:
    """A batch of 32 complex64 FFTs of length 256 (cuFFT)."""
    import nvmath.fft as nf

    g = torch.Generator(device="cuda").manual_seed(seed)
    x = torch.randn(32, 256, device="cuda", generator=g, dtype=torch.complex64)
    return Case(
        [x],
        lambda: nf.FFT(x, axes=[1]),
        lambda stream=None: nf.fft(x, axes=[1], stream=stream),
        lambda: torch.fft.fft(x.to(torch.complex128), dim=1).to(torch.complex64),
    )


def _solver_case(torch, seed: int = 0) -> Case:
    """Cholesky of a batch of 4 SPD float64 matrices of order 32 (cuSOLVER)."""
    from nvmath import linalg

    g = torch.Generator(device="cuda").manual_seed(seed)
    m = torch.randn(4, 32, 32, device="cuda", generator=g, dtype=torch.float64)
    a = m @ m.transpose(-1, -2) + 32 * torch.eye(32, device="cuda", dtype=torch.float64)
    return Case(
        [a],
        lambda: linalg.Cholesky(a, lower=True),
        lambda stream=None: linalg.cholesky(a, lower=True, stream=stream),
        lambda: torch.linalg.cholesky(a),
    )


CASES = {"matmul": _matmul_case, "fft": _fft_case, "cholesky": _solver_case}


def _close(torch, got, want) -> None:
    tol = 1e-10 if want.dtype == torch.float64 else 1e-4
    torch.testing.assert_close(got, want, rtol=tol, atol=tol)


# ----------------------------------------------------------------------------- counters
def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _memory(torch) -> tuple[int, int]:
    """``(torch allocated, device free)`` bytes, after a garbage collection.

    The collection matters: a failed test's traceback keeps its frames, and so its tensors, in a
    reference cycle; the cyclic collector frees them at some arbitrary point of the next test's loop
    (on the H200, after the Cholesky test failed, the FFT test saw exactly its 32 KiB ``a`` go, and the
    matmul test the FFT test's 64 KiB ``x``). Collecting before each reading pins that down.
    ``device free`` is device-wide (``cuMemGetInfo``): another process on the GPU moves it too.
    """
    gc.collect()
    torch.cuda.synchronize()
    return torch.cuda.memory_allocated(), torch.cuda.mem_get_info()[0]


def _raw_cufft_cycles(torch, planner: Any, cycles: int) -> int:
    """The device memory (bytes) that ``cycles`` bare cufftCreate / cufftXtMakePlanMany / cufftDestroy
    cycles of ``planner``'s plan retain: cuFFT's own share, with nothing of nvmath around it."""
    from nvmath.bindings import cufft
    from nvmath.fft._cufft_plan import _plan_args

    traits = planner.traits
    args = [_plan_args(traits, step) for step in traits.steps]
    _, free0 = _memory(torch)
    for _ in range(cycles):
        handles = []
        for step_args in args:
            handle = cufft.create()
            handles.append(handle)
            cufft.set_auto_allocation(handle, 0)
            cufft.xt_make_plan_many(handle, *step_args)
        for handle in handles:
            cufft.destroy(handle)
    _, free1 = _memory(torch)
    return free0 - free1


# ----------------------------------------------------------------------------- tests
@pytest.mark.parametrize("family", sorted(CASES))
def test_create_plan_execute_free_cycles_stay_flat(torch, monkeypatch, family):
    """10,000 create/plan/execute/free cycles leave GPU memory, live library handles and open file
    descriptors where they were after a short warm-up, and the last result is still right."""
    case = CASES[family](torch)
    make, reference = case.make, case.reference
    counter = HandleCounter(monkeypatch)

    def cycle():
        with make() as planner:
            planner.plan()
            return planner.execute()

    for _ in range(WARMUP):
        cycle()
    allocated0, free0 = _memory(torch)
    handles0, fds0 = counter.snapshot(), _fds()
    modules0 = len(nvrtc._CACHE)  # NVRTC programs compiled and loaded (once per device and source)
    start = time.perf_counter()
    for _ in range(CYCLES):
        out = cycle()
        del out
    elapsed = time.perf_counter() - start
    allocated1, free1 = _memory(torch)
    handles1, fds1 = counter.snapshot(), _fds()
    modules1 = len(nvrtc._CACHE)
    reserved = torch.cuda.memory_reserved()
    library = 0  # what the library itself retains over as many bare cycles (cuFFT only)
    if family == "fft":
        with make() as planner:
            library = _raw_cufft_cycles(torch, planner, CYCLES)
    print(
        f"\nSTRESS {family}: {CYCLES} cycles in {elapsed:.1f} s ({elapsed / CYCLES * 1e6:.0f} us/cycle); "
        f"torch allocated {allocated0} -> {allocated1} B (reserved {reserved >> 20} MiB); device free "
        f"{free0 >> 20} -> {free1 >> 20} MiB; retained by {CYCLES} bare library cycles: {library >> 20} MiB; "
        f"live handles {handles0} -> {handles1}; fds {fds0} -> {fds1}; "
        f"NVRTC modules {modules0} -> {modules1}"
    )
    _close(torch, cycle(), reference())
    assert allocated1 == allocated0
    assert handles1 == handles0
    assert modules1 == modules0
    # nvmath adds nothing to what the library retains by itself (cuFFT 12.0 keeps some per plan made).
    # The device's free memory is shared with every other process on the GPU, so one drop proves
    # nothing by itself: a leak drops it again over a second loop as long, a neighbour's allocation
    # (most likely) does not. Only a drop seen over both loops fails.
    limit = (32 << 20) + max(library, 0)
    drop = free0 - free1
    if drop >= limit:
        _, again0 = _memory(torch)
        for _ in range(CYCLES):
            out = cycle()
            del out
        _, again1 = _memory(torch)
        print(f"STRESS {family}: a second loop: device free {again0 >> 20} -> {again1 >> 20} MiB")
        drop = min(drop, again0 - again1)
    assert drop < limit, (
        f"{family}: device free memory fell by {drop >> 20} MiB over each of two {CYCLES}-cycle loops "
        "(device-wide: run tests/stress alone on the GPU to rule out other processes)"
    )
    assert fds1 <= fds0


@pytest.mark.parametrize("family", sorted(CASES))
def test_eight_threads_with_own_planners_and_streams_match_serial_bit_for_bit(torch, family):
    """8 threads, each with its own planner, inputs and stream, repeating execute(): every result is
    bit-identical to the same problem run serially on the main thread."""
    threads, repeats = 8, 25
    cases = [CASES[family](torch, seed) for seed in range(threads)]
    serial = []
    for case in cases:
        with case.make() as planner:
            planner.plan()
            serial.append(planner.execute().clone())
    torch.cuda.synchronize()
    results: list[list[Any]] = [[] for _ in range(threads)]
    errors: list[BaseException] = []
    barrier = threading.Barrier(threads)

    def work(i: int) -> None:
        try:
            stream = torch.cuda.Stream()
            make = cases[i].make
            barrier.wait()
            with torch.cuda.stream(stream), make() as planner:
                planner.plan(stream=stream)
                for _ in range(repeats):
                    results[i].append(planner.execute(stream=stream))
            stream.synchronize()
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    pool = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    assert not errors, errors
    mismatches = sum(not torch.equal(r, serial[i]) for i in range(threads) for r in results[i])
    print(f"\nSTRESS {family}: {threads} threads x {repeats} executions, {mismatches} differ from serial")
    assert mismatches == 0


@pytest.mark.parametrize("family", sorted(CASES))
def test_work_is_ordered_after_a_long_producer_on_the_callers_stream(torch, family):
    """A ~50 ms producer kernel, then the operand written on the caller's stream, then our call on
    that stream with no host synchronization in between: the result uses the written operand."""
    case = CASES[family](torch, seed=7)
    want = case.reference()
    saved = [t.clone() for t in case.operands]
    for t in case.operands:
        t.zero_()
    stream = torch.cuda.Stream()
    torch.cuda.synchronize()
    with torch.cuda.stream(stream):
        torch.cuda._sleep(50_000_000)  # ~50 ms on the caller's stream
        for t, s in zip(case.operands, saved):
            t.copy_(s)  # the operands are right only after the sleep
        got = case.stateless(stream=stream)
    stream.synchronize()
    _close(torch, got, want)


_DEAD_STREAMS_SCRIPT = """
import sys
sys.path[:0] = [{tests!r}, {root!r}]
import torch
from cuda.bindings import driver
import test_stress_gpu as T

torch.cuda.init()
case = T.CASES[{family!r}](torch)
want = case.reference()
torch.cuda.synchronize()
for i in range(50):
    err, handle = driver.cuStreamCreate(driver.CUstream_flags.CU_STREAM_NON_BLOCKING)
    assert int(err) == 0, err
    got = case.stateless(stream=int(handle))
    (err,) = driver.cuStreamSynchronize(handle)
    assert int(err) == 0, err
    T._close(torch, got, want)
    (err,) = driver.cuStreamDestroy(handle)
    assert int(err) == 0, err
T._close(torch, case.stateless(), want)  # the current stream, after all the dead ones
with case.make() as planner:
    err, first = driver.cuStreamCreate(driver.CUstream_flags.CU_STREAM_NON_BLOCKING)
    planner.plan(stream=int(first))
    out = planner.execute(stream=int(first))
    driver.cuStreamSynchronize(first)
    T._close(torch, out, want)
    driver.cuStreamDestroy(first)
    err, second = driver.cuStreamCreate(driver.CUstream_flags.CU_STREAM_NON_BLOCKING)
    out = planner.execute(stream=int(second))  # re-bound from a destroyed stream
    driver.cuStreamSynchronize(second)
    T._close(torch, out, want)
    driver.cuStreamDestroy(second)
torch.cuda.synchronize()
print("ok")
"""


@pytest.mark.parametrize("family", sorted(CASES))
def test_destroyed_streams_do_not_poison_cached_plans(torch, family):
    """Stateless calls on raw streams destroyed right after each call (the cached plan outlives them;
    the driver may hand the same handle to the next stream), then a planner moved from a destroyed
    stream to a new one: every result is right and nothing touches a dead stream. Runs in a
    subprocess, so a use of a destroyed stream (undefined behaviour: an error or a crash) fails this
    test instead of ending the whole run."""
    import subprocess
    import sys

    here = Path(__file__).resolve().parent
    script = _DEAD_STREAMS_SCRIPT.format(tests=str(here), root=str(here.parent), family=family)
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join([str(here.parents[1]), os.environ.get("PYTHONPATH", "")])
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300, check=False
    )
    print(f"\nSTRESS {family}: dead streams subprocess exit {proc.returncode}")
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), (
        f"exit {proc.returncode}: {proc.stdout[-1000:]}{proc.stderr[-3000:]}"
    )


def _settled(counter: HandleCounter) -> dict[str, int]:
    """The live handles once the matmul recycling pools (which own what they keep, and would let a plan
    skip the create call that is made to fail) are emptied."""
    from nvmath.linalg.advanced import _descriptors

    _descriptors.LAYOUTS.clear()
    _descriptors.DESCRIPTORS.clear()
    return counter.snapshot()


FAILURE_POINTS = {
    "matmul": ("cublasLt", "matrix_layout_create"),  # after the descriptor exists
    "fft": ("cufft", "xt_make_plan_many"),  # after cufftCreate
    "cholesky": ("cusolverDn", "xpotrf_buffer_size"),  # after the params object exists (looped kernels)
}


@pytest.mark.parametrize("family", sorted(CASES))
def test_failed_plan_leaves_the_planner_usable(torch, monkeypatch, family):
    """A library failure in the middle of plan() raises, leaks no handle, and the same planner then
    plans and executes correctly."""
    import importlib

    case = CASES[family](torch)
    if family == "cholesky":  # the looped kernels size their workspace in plan(): a call that can fail
        from nvmath import linalg

        a = case.operands[0]
        case.make = lambda: linalg.Cholesky(a, lower=True, options={"algorithm": "looped"})
    module_name, function = FAILURE_POINTS[family]
    module = importlib.import_module(f"nvmath.bindings.{module_name}")
    real = getattr(module, function)
    errors = {"cublasLt": "cuBLASLtError", "cufft": "cuFFTError", "cusolverDn": "cuSOLVERError"}
    error = getattr(module, errors[module_name])
    counter = HandleCounter(monkeypatch)
    with case.make() as warm:  # per-thread handles and caches exist before the count starts
        warm.plan()
        warm.execute()
    torch.cuda.synchronize()
    calls = {"n": 0}

    def failing(*args: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 1:
            raise error(13)  # an internal error of the library, once
        return real(*args)

    monkeypatch.setattr(module, function, failing)
    before = _settled(counter)
    planner = case.make()
    with pytest.raises(error):
        planner.plan()
    after_failure = _settled(counter)
    planner.plan()
    _close(torch, planner.execute(), case.reference())
    planner.free()
    torch.cuda.synchronize()
    after = _settled(counter)
    print(
        f"\nSTRESS {family}: live handles before {before}, after the failed plan {after_failure}, "
        f"after free {after}"
    )
    assert calls["n"] >= 2
    assert after_failure == before  # the failed plan() destroyed what it had created
    assert after == before
