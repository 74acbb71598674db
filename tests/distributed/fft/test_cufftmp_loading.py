"""How libcufftMp is loaded next to the single-GPU libcufft (no GPU needed; skipped where either
library is not installed): cuFFTMp exports the cuFFT API and calls those entry points of its own
through its PLT, so they must bind to cuFFTMp itself even when libcufft was loaded (RTLD_GLOBAL, by
nvmath.fft or torch) first. The dynamic linker's own record (``LD_DEBUG=bindings``, everything bound
at load with ``LD_BIND_NOW``) is the reference."""

from __future__ import annotations

import glob
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
INTERNAL = ("cufftCreate", "cufftXtExec", "cufftMakePlanMany", "cufftExecZ2Z", "cufftPlanMany")

CHILD = """
import sys
from nvmath._errors import LibraryNotFoundError
from nvmath.bindings import _loader
try:
    for lib in {order!r}:
        _loader.library_info(lib)
except LibraryNotFoundError as exc:
    print("SKIP:", exc)
"""
FIRST_CUFFT = ("cufft", "nvshmem_host", "cufftMp")  # single-GPU cuFFT first (nvmath.fft, torch.fft)
LAST_CUFFT = ("nvshmem_host", "cufftMp", "cufft")


def _bindings(tmp_path, mode: str | None, order=FIRST_CUFFT, caller="libcufftMp.so") -> dict[str, str]:
    """``{symbol: library it was bound to}`` for the internal calls of :data:`INTERNAL` made by
    ``caller`` when the libraries are loaded in ``order``."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
           "LD_BIND_NOW": "1", "LD_DEBUG": "bindings", "LD_DEBUG_OUTPUT": str(tmp_path / "ld")}  # fmt: skip
    if mode:
        env["NVMATH_CUFFTMP_DLOPEN"] = mode
    done = subprocess.run([sys.executable, "-c", CHILD.format(order=order)], env=env, capture_output=True, text=True, timeout=120)
    if "SKIP:" in done.stdout:
        reason = done.stdout.split("SKIP:", 1)[1][:200]
        pytest.skip(f"libcufft and libcufftMp are not both installed: {reason}")
    assert done.returncode == 0, done.stderr[-3000:]
    bound = {}
    for path in glob.glob(str(tmp_path / "ld.*")):
        for line in Path(path).read_text(errors="replace").splitlines():
            if f"/{caller}" in line.split(" to ")[0] and " to " in line and "normal symbol `" in line:
                symbol = line.split("normal symbol `", 1)[1].split("'", 1)[0]
                if symbol in INTERNAL:
                    bound[symbol] = os.path.basename(line.split(" to ", 1)[1].split(" [", 1)[0])
    for path in glob.glob(str(tmp_path / "ld.*")):
        os.remove(path)
    return bound


def test_cufftmp_internal_calls_bind_to_cufftmp_after_libcufft(tmp_path):
    """With nvmath's loader, cuFFTMp's internal cufftCreate / cufftXtExec / cufftMakePlanMany...
    bind to libcufftMp although libcufft was loaded first; with NVMATH_CUFFTMP_DLOPEN=global (the
    old RTLD_GLOBAL load) they bind to libcufft, which is the bug this load mode prevents."""
    bound = _bindings(tmp_path, None)
    assert bound and set(bound) <= set(INTERNAL)
    assert all(lib.startswith("libcufftMp.so") for lib in bound.values()), bound
    old = _bindings(tmp_path, "global")
    assert old and all(lib.startswith("libcufft.so") for lib in old.values()), old


def test_libcufft_loaded_after_cufftmp_keeps_its_own_calls(tmp_path):
    """Single-GPU libcufft loaded after cuFFTMp (nvmath.fft after a distributed FFT) binds its
    internal calls to itself: cuFFTMp is RTLD_LOCAL (RTLD_GLOBAL, even with DEEPBIND as
    cuda.pathfinder loads it, would capture them)."""
    bound = _bindings(tmp_path, None, LAST_CUFFT, caller="libcufft.so")
    if not bound:  # (the H200 machine's cuFFT 12.0 build: nothing of it can be captured, in either mode)
        pytest.skip("this libcufft binds its internal cuFFT calls directly (no PLT entry to capture)")
    assert all(lib.startswith("libcufft.so") for lib in bound.values()), bound
    old = _bindings(tmp_path, "global", LAST_CUFFT, caller="libcufft.so")
    assert old and all(lib.startswith("libcufftMp.so") for lib in old.values()), old
