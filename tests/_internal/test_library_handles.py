"""Tests of nvmath._internal.library_handles: one library handle per (thread, device)."""

from __future__ import annotations

import contextlib
import gc
import threading

import pytest

from nvmath._errors import NvmathWarning
from nvmath._internal import devices, library_handles


@pytest.fixture(autouse=True)
def no_driver(monkeypatch):
    """Device contexts are no-ops (no GPU needed)."""
    monkeypatch.setattr(devices, "device_ctx", lambda device_id: contextlib.nullcontext())


def _pool(log, fail_destroy=False):
    counter = iter(range(100, 1000))

    def destroy(handle):
        log.append(("destroy", handle))
        if fail_destroy:
            raise RuntimeError("library unloaded")

    return library_handles.ThreadHandles(
        "fake", lambda: next(counter), destroy, lambda handle: log.append(("forget", handle))
    )


def test_one_handle_per_thread_and_device():
    """The same thread and device get the same handle; another device or thread gets its own."""
    log: list = []
    pool = _pool(log)
    h0 = pool.get(0)
    assert pool.get(0) == h0 and pool.get(1) != h0
    other = []
    t = threading.Thread(target=lambda: other.append(pool.get(0)))
    t.start()
    t.join()
    assert other[0] not in (h0, pool.get(1))
    assert ("forget", h0) in log  # a new handle clears memos keyed by its address


def test_thread_exit_destroys_its_handles():
    """A thread's handles are destroyed when its storage goes away."""
    log: list = []
    pool = _pool(log)
    made = []
    t = threading.Thread(target=lambda: made.append(pool.get(0)))
    t.start()
    t.join()
    del t
    gc.collect()
    assert ("destroy", made[0]) in log


def test_failed_destroy_warns_never_raises():
    """A failing destroy is a NvmathWarning naming the library, not an exception."""
    log: list = []
    pool = _pool(log, fail_destroy=True)
    with pytest.warns(NvmathWarning, match="fake handle"):
        pool.destroy(0, 7)
    assert ("destroy", 7) in log


def test_here_holds_each_threads_handles_for_inline_reads():
    """``pool.here.handles`` is the calling thread's ``{device: handle}`` (what ``get`` returns), absent
    before its first ``get`` and another dict in another thread. (In threads: their handles are
    destroyed at their exit, while the fake context is in place.)"""
    log: list = []
    pool = _pool(log)
    seen = []

    def one(devices_: tuple[int, ...]) -> None:
        before = getattr(pool.here, "handles", None)
        got = {d: pool.get(d) for d in devices_}
        seen.append((before, got, dict(pool.here.handles)))

    for devices_ in ((0, 1), (3,)):
        t = threading.Thread(target=one, args=(devices_,))
        t.start()
        t.join()
    (b1, got1, here1), (b2, got2, here2) = seen
    assert b1 is None and b2 is None and here1 == got1 and here2 == got2 and set(here2) == {3}
    assert got2[3] not in got1.values() and getattr(pool.here, "handles", None) is None
