"""Tests of the public nvmath.memory module: the memory-manager protocols and MemoryPointer."""

from __future__ import annotations

import gc
import logging
import warnings

import pytest

import nvmath.memory
from nvmath.memory import BaseCUDAMemoryManager, BaseCUDAMemoryManagerAsync, MemoryPointer


def test_public_surface():
    """nvmath.memory exports exactly the nvmath-python protocol names."""
    assert sorted(nvmath.memory.__all__) == [
        "BaseCUDAMemoryManager",
        "BaseCUDAMemoryManagerAsync",
        "MemoryPointer",
    ]


def test_subclassing_the_protocol_like_nvmath_python():
    """A user class deriving BaseCUDAMemoryManager with __init__(device_id, logger) works as expected."""

    class MyManager(BaseCUDAMemoryManager):
        def __init__(self, device_id, logger):
            self.device_id = device_id
            self.logger = logger

        def memalloc(self, size):
            return MemoryPointer(0x100, size, None)

    mm = MyManager(0, logging.getLogger("x"))
    assert mm.device_id == 0
    assert mm.memalloc(8).device_ptr == 0x100
    assert isinstance(mm, BaseCUDAMemoryManager)


def test_protocols_are_structural():
    """isinstance checks look for memalloc / memalloc_async, not for inheritance."""

    class Sync:
        def memalloc(self, size):
            return None

    class Async:
        def memalloc_async(self, size, stream):
            return None

    assert isinstance(Sync(), BaseCUDAMemoryManager)
    assert not isinstance(Sync(), BaseCUDAMemoryManagerAsync)
    assert isinstance(Async(), BaseCUDAMemoryManagerAsync)
    assert not isinstance(object(), BaseCUDAMemoryManager)


def test_memory_pointer_second_free_raises():
    """MemoryPointer.free() calls the finalizer once; a second free() raises RuntimeError, as in
    nvmath-python (a pointer without a finalizer frees nothing, any number of times)."""
    calls = []
    mp = MemoryPointer(0x2000, 64, lambda: calls.append(1))
    assert (mp.device_ptr, mp.ptr, mp.size) == (0x2000, 0x2000, 64)
    mp.free()
    with pytest.raises(RuntimeError, match="already been freed"):
        mp.free()
    assert calls == [1]
    bare = MemoryPointer(0x3000, 8, None)
    bare.free()
    bare.free()


def test_memory_pointer_finalizes_on_collection():
    """A MemoryPointer that is garbage collected calls its finalizer."""
    calls = []
    mp = MemoryPointer(0x2000, 64, lambda: calls.append(1))
    del mp
    gc.collect()
    assert calls == [1]


def test_memory_pointer_without_finalizer():
    """MemoryPointer(ptr, size, None) frees nothing and does not fail."""
    mp = MemoryPointer(0, 0, None)
    mp.free()
    assert "MemoryPointer" in repr(mp)


def test_failing_finalizer_warns():
    """A finalizer that raises produces a RuntimeWarning, not an exception."""

    def boom():
        raise OSError("cannot free")

    mp = MemoryPointer(0x10, 8, boom)
    with pytest.warns(RuntimeWarning, match="cannot free"):
        mp.free()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the failed finalizer is not run again: no second warning
        with pytest.raises(RuntimeError, match="already been freed"):
            mp.free()
