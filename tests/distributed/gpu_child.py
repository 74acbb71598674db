"""Child processes of the distributed GPU lane, hang-proof and diagnosable (imported as ``gpu_child``).

Every GPU check of ``nvmath.distributed`` runs in a fresh Python process (an engine crash or hang
must fail one test, not the suite). This module makes such a child tell *where* it stopped:

* the child's code runs after :data:`HARNESS`: ``faulthandler`` prints every thread's Python stack on
  a crash, and on a hang (``dump_traceback_later(timeout - 15 s, exit=True)``: the child dumps and
  exits before the parent kills it); ``STEP(name)`` prints flushed progress markers to stdout and
  stderr; ``WAIT(name)`` waits for the queued GPU work with a deadline (polling an event), so that a
  kernel that never finishes (an NVSHMEM wait nobody signals) is reported as such; nvmath's
  distributed loggers print at DEBUG level to stderr (every cuFFTMp / NVSHMEM call is logged before
  it is made, so the last line names the engine call that did not return);
* the parent (:func:`run_child`, :func:`run_ranks`) waits with ``communicate(timeout)``, kills a child
  that overruns and fails the test with the child's partial stdout and stderr;
* a hang is recorded (:data:`HANGS`): after :data:`MAX_HANGS` one-process hangs in the session, every
  later child is skipped with the first diagnosis, and after one multi-process hang every later
  multi-process check, so the lane ends within minutes even if every check hangs.
  :func:`canary` runs one tiny check once per session; the GPU modules skip their tests when it hung.

Environment knobs (for the GPU run): ``NVMATH_GPU_CHILD_TIMEOUT`` (seconds, default 90),
``NVMATH_GPU_MAX_HANGS`` (default 2); everything in the parent's environment reaches the child
(``NVMATH_CUFFTMP_DLOPEN``, ``NVMATH_CUFFTMP_EXEC``, ``NVSHMEM_*``).
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TIMEOUT = float(os.environ.get("NVMATH_GPU_CHILD_TIMEOUT", "90"))
MAX_HANGS = int(os.environ.get("NVMATH_GPU_MAX_HANGS", "2"))
CANARY_TIMEOUT = min(TIMEOUT, 60.0)
TAIL = 6000  # characters of each stream shown in a failure

ENV = {
    "NVSHMEM_REMOTE_TRANSPORT": "none",
    "NVSHMEM_DISABLE_NVLS": "1",
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NVSHMEM_SYMMETRIC_SIZE": "1G",
    "NVSHMEM_DEBUG": "WARN",
    "PYTHONUNBUFFERED": "1",
}

HARNESS = """
import faulthandler as _fh, logging as _logging, os as _os, sys as _sys, time as _time
_fh.enable()
_fh.dump_traceback_later({dump}, exit=True)
_T0 = _time.monotonic()
_logging.basicConfig(level=_logging.WARNING, stream=_sys.stderr,
                     format="%(relativeCreated)8.0fms %(name)s: %(message)s")
_logging.getLogger("nvmath.distributed").setLevel(_logging.DEBUG)
_logging.getLogger("nvmath.bindings._loader").setLevel(_logging.DEBUG)

def STEP(what):
    line = f"STEP {{what}} (+{{_time.monotonic() - _T0:.1f}}s)"
    print(line, flush=True)
    print(line, file=_sys.stderr, flush=True)

def WAIT(what="gpu", seconds={wait}):
    import torch
    STEP(f"wait {{what}}")
    event = torch.cuda.Event()
    event.record()
    deadline = _time.monotonic() + seconds
    while not event.query():
        if _time.monotonic() > deadline:
            print(f"HANG: the GPU work queued before '{{what}}' did not complete in {{seconds}} s: a kernel "
                  "spins (an NVSHMEM wait that is never signalled?)", flush=True)
            print(f"HANG: GPU work of '{{what}}' never completed", file=_sys.stderr, flush=True)
            _fh.dump_traceback(all_threads=True)
            _os._exit(3)
        _time.sleep(0.005)
    torch.cuda.synchronize()
    STEP(f"done {{what}}")
"""


@dataclass
class Hang:
    """One child that did not finish: the test, the last STEP it printed, the output tails."""

    test: str
    last_step: str
    detail: str
    several: bool = False  # one of several processes of a multi-rank check


HANGS: list[Hang] = []


def environment(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The child's environment: the parent's, the GPU lane's settings, the checkout on PYTHONPATH."""
    path = os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])
    return {**ENV, **os.environ, "PYTHONPATH": path, **(extra or {})}


def program(code: str, timeout: float) -> str:
    """``code`` (dedented) after :data:`HARNESS` set for ``timeout`` seconds."""
    dump = max(5.0, timeout - 15.0)
    return HARNESS.format(dump=dump, wait=min(30.0, max(5.0, dump - 10.0))) + textwrap.dedent(code)


def last_step(out: str) -> str:
    steps = [line for line in out.splitlines() if line.startswith("STEP ")]
    return steps[-1] if steps else "(no STEP printed: before the first marker)"


def _tail(text: str) -> str:
    return text if len(text) <= TAIL else "...[cut]...\n" + text[-TAIL:]


def report(name: str, rc: int | None, out: str, err: str, why: str) -> str:
    """A failure message: why, the last STEP, then the tails of the child's stdout and stderr."""
    return (f"{name}: {why} (rc={rc}); last marker: {last_step(out)}\n"
            f"----- stdout -----\n{_tail(out)}\n----- stderr -----\n{_tail(err)}")  # fmt: skip


def _hung(rc: int | None, out: str, err: str) -> bool:
    return rc is None or "Timeout (" in err or "HANG:" in out


def _skip_after_hangs(several: bool) -> None:
    """Skip when :data:`MAX_HANGS` one-process children hung, or (for a multi-process check) when a
    multi-process check hung already (several processes on one GPU: likely the same cause)."""
    hangs = [h for h in HANGS if not h.several]
    if len(hangs) >= MAX_HANGS:
        pytest.skip(f"{len(hangs)} earlier distributed GPU children hung (NVMATH_GPU_MAX_HANGS={MAX_HANGS}); "
                    f"first: {hangs[0].test} at {hangs[0].last_step}")  # fmt: skip
    groups = [h for h in HANGS if h.several]
    if several and groups:
        pytest.skip(f"an earlier multi-process check hung: {groups[0].test} at {groups[0].last_step}")


@dataclass
class Result:
    """What a finished (or killed) child left."""

    rc: int | None
    out: str
    err: str
    extra: dict = field(default_factory=dict)


def _communicate(procs: list[subprocess.Popen], timeout: float) -> tuple[list[Result], bool]:
    deadline = time.monotonic() + timeout
    results, killed = [], False
    for proc in procs:
        try:
            out, err = proc.communicate(timeout=max(0.1, deadline - time.monotonic()))
            results.append(Result(proc.returncode, out, err))
        except subprocess.TimeoutExpired:
            killed = True
            results.append(Result(None, "", ""))
    if killed:
        for proc, result in zip(procs, results, strict=True):
            if result.rc is None:
                proc.kill()
                try:  # a process stuck in the driver may take a while to go; do not wait forever
                    out, err = proc.communicate(timeout=20)
                except subprocess.TimeoutExpired:
                    out, err = "", "(the killed child did not exit within 20 s: no output collected)"
                result.out, result.err = out or "", err or ""
    return results, killed


def _check(name: str, results: list[Result], killed: bool, timeout: float) -> list[str]:
    for result in results:
        if "SKIP:" in result.out and result.rc == 0:
            pytest.skip(result.out.split("SKIP:", 1)[1].strip().splitlines()[0])
    messages = []
    for rank, result in enumerate(results):
        label = name if len(results) == 1 else f"{name} [rank {rank}]"
        if _hung(result.rc, result.out, result.err):
            why = (f"HUNG: killed after {timeout:.0f} s" if result.rc is None else
                   "HUNG: the child's watchdog fired (faulthandler stacks in stderr)")  # fmt: skip
            HANGS.append(Hang(label, last_step(result.out), why, len(results) > 1))
            messages.append(report(label, result.rc, result.out, result.err, why))
        elif result.rc != 0:
            messages.append(report(label, result.rc, result.out, result.err, "FAILED"))
    if messages:
        pytest.fail("\n\n".join(messages), pytrace=False)
    return [r.out for r in results]


def run_child(code: str, *, name: str | None = None, timeout: float = TIMEOUT,
              env: dict[str, str] | None = None) -> str:  # fmt: skip
    """Run ``code`` in a fresh Python with :data:`HARNESS`; its stdout. A child printing ``SKIP:``
    skips the test; a failure or a hang fails it with the child's output (a hang is recorded)."""
    name = name or os.environ.get("PYTEST_CURRENT_TEST", "child").split(" ")[0]
    _skip_after_hangs(several=False)
    proc = subprocess.Popen([sys.executable, "-c", program(code, timeout)], env=environment(env), text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    results, killed = _communicate([proc], timeout)
    return _check(name, results, killed, timeout)[0]


def run_ranks(code: str, nranks: int = 2, *, name: str | None = None, timeout: float = TIMEOUT) -> list[str]:
    """Run ``code`` as ranks ``0..nranks-1`` (RANK, WORLD_SIZE, MASTER_ADDR/PORT set for gloo), each with
    :data:`HARNESS`; their stdouts. A hang of any rank kills them all and fails with every rank's output."""
    import socket

    name = name or os.environ.get("PYTEST_CURRENT_TEST", "ranks").split(" ")[0]
    _skip_after_hangs(several=True)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    source = program(code, timeout)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", source], text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env=environment({"RANK": str(r), "WORLD_SIZE": str(nranks), "MASTER_ADDR": "127.0.0.1",
                             "MASTER_PORT": str(port)}),
        )  # fmt: skip
        for r in range(nranks)
    ]
    results, killed = _communicate(procs, timeout)
    return _check(name, results, killed, timeout)


# ------------------------------------------------------------------------------------ the canary
CANARY = """
from nvmath._errors import LibraryNotFoundError
from nvmath.bindings import _loader
for lib in ("nvshmem_host", "cufftMp"):
    try:
        _loader.library_info(lib)
    except LibraryNotFoundError as exc:
        print("SKIP: the [distributed] wheels are not installed here:", exc)
        raise SystemExit(0)
STEP("import")
import numpy as np, torch
import nvmath.distributed as nd
import nvmath.distributed.fft as dfft
from nvmath.distributed import _engines
from nvmath.distributed.distribution import Slab
from nvmath.distributed.fft import _cufftmp

class OneRank(nd.ProcessGroup):
    rank, nranks = 0, 1
    def broadcast_buffer(self, array, *, root=0): pass
    def allreduce_buffer(self, array, *, op): pass

torch.cuda.init()
STEP("initialize")
nd.initialize(0, OneRank(), backends=["nvshmem"])
lib = _cufftmp.bindings()
print("VERSIONS torch", torch.__version__, "cuda", torch.version.cuda, "cufftMp", lib.get_version(),
      "nvshmem host", _engines.nvshmem_host_version(), flush=True)
print("LIBRARIES", {k: v["path"] for k, v in _loader.loaded_libraries().items()}, flush=True)
print("MAPPED", {s: _engines.mapped_libraries(s) for s in ("libcufftMp", "libcufft", "libnvshmem_host")},
      flush=True)
shape = (8, 8)
x = (np.arange(64).reshape(shape) % 7 + 1j).astype(np.complex64)
ref = np.fft.fft2(x.astype(np.complex128))
a = dfft.allocate_operand(shape, torch, input_dtype=torch.complex64, distribution=Slab.X)
for redistribute in (False, True):
    a.copy_(torch.from_numpy(x))
    STEP(f"plan redistribute={redistribute}")
    f = dfft.FFT(a, distribution=Slab.X, options={"redistribute": redistribute})
    f.plan()
    STEP(f"execute redistribute={redistribute}")
    out = f.execute()
    WAIT(f"fft redistribute={redistribute}")
    np.testing.assert_allclose(out.cpu().numpy(), ref, rtol=1e-4, atol=1e-3)
    STEP(f"free redistribute={redistribute}")
    f.free()
STEP("single-GPU cuFFT loaded next to cuFFTMp")
import nvmath.fft
single = nvmath.fft.fft(torch.from_numpy(x).cuda())
WAIT("single-GPU fft")
print("MAPPED after nvmath.fft", {s: _engines.mapped_libraries(s) for s in ("libcufftMp", "libcufft")},
      flush=True)
y = (np.arange(128).reshape(16, 8) % 5 - 2j).astype(np.complex64)  # a new plan: calls not bound yet
b = dfft.allocate_operand(y.shape, torch, input_dtype=torch.complex64, distribution=Slab.X)
b.copy_(torch.from_numpy(y))
STEP("stateless fft (new plan) after nvmath.fft")
out = dfft.fft(b, distribution=Slab.X)
WAIT("stateless fft")
np.testing.assert_allclose(out.cpu().numpy(), np.fft.fft2(y.astype(np.complex128)), rtol=1e-4, atol=1e-3)
STEP("finalize")
nd.free_symmetric_memory(a, b)
nd.finalize()
print("ok", flush=True)
"""


@functools.cache
def _canary() -> tuple[str, str]:
    """``(verdict, detail)`` of the session's canary: ``"ok"``, ``"skip"``, ``"hung"`` or ``"failed"``."""
    try:
        out = run_child(CANARY, name="canary (one-rank 8x8 C2C)", timeout=CANARY_TIMEOUT)
    except pytest.skip.Exception as exc:
        return "skip", str(exc)
    except pytest.fail.Exception as exc:
        return ("hung" if HANGS and HANGS[-1].test.startswith("canary") else "failed"), str(exc)
    return "ok", out


def canary() -> tuple[str, str]:
    """The canary's verdict (run once per session)."""
    return _canary()


def skip_if_canary_hung() -> None:
    """Skip the calling test when the session's canary hung (its diagnosis is the canary test's failure)."""
    verdict, detail = canary()
    if verdict == "hung":
        pytest.skip("the one-rank canary FFT hung; see test_canary_one_rank_fft's failure: "
                    + detail.splitlines()[0][:300])  # fmt: skip


def check_canary() -> None:
    """The canary as a test: skip where it skipped, fail with its output where it failed or hung."""
    verdict, detail = canary()
    if verdict == "skip":
        pytest.skip(detail)
    if verdict != "ok":
        pytest.fail(detail, pytrace=False)
    print(detail)
