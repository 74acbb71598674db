"""The CPU fake GPU shared by the matmul and FFT tests: "device" memory is host memory.

:func:`install` sets up the device side for one test (undone by ``monkeypatch``): every registered
cache emptied (no plan or memo of another test's fake survives), stream and device contexts that need
no driver, device allocations (``memory.allocate``, so ``Workspace.ensure`` too) made of host
buffers, device 0's library stream, and ``copy_into`` between the given fake packages (and numpy) done
as host copies. The fake libraries go on top of it: cuBLASLt in ``linalg/advanced/matmul_fakes.py``,
cuFFT in ``fft/test_fft_cuda_path.py``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from typing import Any

import numpy as np

from nvmath._internal import caches, devices, memory, streams
from nvmath._internal.tensors import copy as tcopy
from nvmath._internal.tensors.base import TensorAdapter
from nvmath._internal.tensors.host import view_from_ptr


class HostAllocation:
    """Device memory of the fake GPU: a host buffer (what ``memory.allocate`` returns here)."""

    def __init__(self, nbytes: int, **kwargs: Any):
        self.buffer = np.empty(max(nbytes, 1), dtype=np.uint8)
        self.ptr, self.size = self.buffer.ctypes.data, nbytes

    def free(self, stream: Any) -> None:
        self.buffer = None


def host_copy(dst: TensorAdapter, src: TensorAdapter, stream: Any) -> None:
    """``copy_into`` for adapters whose memory is host memory on both sides (fake "device" tensors)."""
    views = [view_from_ptr(a.data_ptr, tuple(a.shape), tuple(a.strides), a.dtype) for a in (dst, src)]
    np.copyto(views[0], views[1])


def install(monkeypatch: Any, packages: Iterable[str] = ()) -> None:
    """Install the fake GPU's device side for one test; ``packages``: the fake packages whose tensors
    ``copy_into`` copies as host memory (with each other and with numpy)."""
    caches.clear_all()
    monkeypatch.setattr(streams, "stream_ctx", lambda handle: contextlib.nullcontext())
    monkeypatch.setattr(devices, "device_ctx", lambda device_id: contextlib.nullcontext())
    monkeypatch.setattr(memory, "allocate", HostAllocation)
    monkeypatch.setitem(streams._LIBRARY_STREAMS, 0, streams.StreamHandle(0, 0, "cuda"))
    # stream handles made under the fake (their mark_done events are fake) must never be found by
    # real GPU code later in the same process (the GPU machine runs fake and real tests together)
    monkeypatch.setattr(streams, "_OBJ_CACHE", {})
    monkeypatch.setattr(streams, "_INT_CACHE", {})
    names = (*packages, "numpy")
    for dst in names:
        for src in names:
            if dst in packages or src in packages:
                monkeypatch.setitem(tcopy.COPIERS, (dst, src), host_copy)
