"""What a solver planner holds after ``free()`` (no GPU): the non-finite flags and the ``info`` status
live in the plan's GpuContext memory, so ``free()`` (and a new GPU plan) releases them and nothing
keeps the closed context alive or reads its freed memory later; N plan/free cycles of a context with
its flags free every allocation they make."""

from __future__ import annotations

import gc
import weakref
from types import SimpleNamespace

import numpy as np
import pytest

import nvmath
import nvmath.linalg as L
from nvmath._internal import memory
from nvmath._internal.streams import StreamHandle
from nvmath.linalg._solvers import _gpu
from nvmath.linalg._solvers._nonfinite import NonFiniteGuard


@pytest.fixture
def counted(monkeypatch):
    """``memory.allocate`` (what GpuContext.alloc calls) replaced by host buffers that count allocations
    and frees; synchronization before release is a no-op."""
    tally = SimpleNamespace(allocated=0, freed=0, live=set())

    class Allocation:
        def __init__(self, nbytes):
            self.buffer = np.empty(nbytes, dtype=np.uint8)
            self.ptr = self.buffer.ctypes.data
            tally.allocated += 1
            tally.live.add(self.ptr)

        def free(self, stream):
            tally.freed += 1
            tally.live.discard(self.ptr)

    monkeypatch.setattr(memory, "allocate", lambda nbytes, **kw: Allocation(nbytes))
    monkeypatch.setattr(_gpu.streams, "synchronize", lambda stream: None)
    monkeypatch.setattr(_gpu.streams, "survivor", lambda stream: stream)
    return tally


def _context() -> _gpu.GpuContext:
    return _gpu.GpuContext(0, "torch", StreamHandle(0x10, 0, "torch"))


def test_flags_are_allocated_once_per_context(counted):
    """allocate() at plan time makes the flags once; a second call for as many matrices is a no-op, a
    new context gets its own."""
    guard, ctx = NonFiniteGuard(), _context()
    guard.allocate(ctx, 4)
    guard.allocate(ctx, 4)
    assert counted.allocated == 1
    other = _context()
    guard.allocate(other, 4)
    assert counted.allocated == 2
    ctx.close()
    other.close()
    assert counted.freed == 2 and not counted.live


def test_cycles_free_every_allocation_and_keep_no_context(counted):
    """1000 create / allocate / close / release cycles: every allocation is freed, and the guard keeps
    no closed context alive (it used to hold the last one, with its freed flags, until the next plan)."""
    guard = NonFiniteGuard()
    for _ in range(1000):
        ctx = _context()
        guard.allocate(ctx, 4)
        ctx.close()
        guard.release()
    assert counted.allocated == counted.freed == 1000 and not counted.live
    dead = weakref.ref(ctx)
    del ctx
    gc.collect()
    assert dead() is None
    assert guard.host_mask() is None


def test_release_forgets_the_last_scan():
    """After release() no flag of the previous input is reported (host scan shown; device alike)."""
    guard = NonFiniteGuard()
    a = np.eye(3)[None].repeat(2, axis=0)
    a[1, 0, 0] = np.nan
    guard.scan_host(a)
    assert guard.host_mask().tolist() == [False, True]
    guard.release()
    assert guard.host_mask() is None
    assert guard.merge(np.zeros(2, dtype=np.int32)).tolist() == [0, 0]


def test_free_drops_the_last_status():
    """check() after free() reports nothing: the status (on the GPU, device memory of the freed plan)
    is released with the plan, never read from freed memory."""
    a = np.eye(4)[None].repeat(3, axis=0)
    a[1, 2, 2] = np.nan
    planner = L.Cholesky(a, options={"check": False})
    planner.plan()
    planner.execute()
    with pytest.raises(nvmath.LinAlgError):
        planner.check()
    planner.free()
    assert planner.check() is None
