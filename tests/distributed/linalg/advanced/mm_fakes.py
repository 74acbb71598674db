"""A fake cuBLASMp that computes on host memory, for the distributed matmul's CPU tests (imported as
``mm_fakes``).

Ranks are threads of a ``ThreadGroup`` (or one ``SingleRank``). At ``cublasMpMatmul`` every rank
hands over its pointers and descriptors; rank 0 assembles each global matrix from the ranks' local
column-major blocks with the ScaLAPACK block-cyclic rule (written here independently of nvmath),
computes ``D = alpha op(A) op(B) + beta C`` in float64/complex128 with numpy, and writes each
rank's block of D back.
"""

from __future__ import annotations

import ctypes
import enum
import threading
from typing import Any

import numpy as np

from nvmath._internal.tensors.base import TensorAdapter

_TYPES = {0: np.float32, 1: np.float64, 4: np.complex64, 5: np.complex128}


def host_view(address: int, shape: tuple, strides: tuple, dtype: Any) -> np.ndarray:
    dtype = np.dtype(dtype)
    if not shape or 0 in shape:
        return np.empty(shape, dtype)
    span = (sum((n - 1) * s for n, s in zip(shape, strides, strict=True)) + 1) * dtype.itemsize
    flat = np.frombuffer((ctypes.c_char * span).from_address(address), dtype=np.uint8)
    return np.lib.stride_tricks.as_strided(
        flat.view(dtype), shape, tuple(s * dtype.itemsize for s in strides)
    )


class FakeDevice(TensorAdapter):
    """A host numpy array posing as a tensor on CUDA device 0."""

    __slots__ = ("device_id",)
    package = "fakegpu"
    device = "cuda"
    is_conjugate = False

    def __init__(self, array: np.ndarray):
        self.tensor = array
        self.data_ptr = array.__array_interface__["data"][0]
        self.shape, self.itemsize, self.size = array.shape, array.itemsize, array.size
        self.strides = tuple(s // array.itemsize for s in array.strides)
        self.dtype = array.dtype.name
        self.device_id = 0

    def empty(self, shape, dtype, *, strides=None, device_id=None, stream=None):
        order = "F" if strides is None or len(shape) < 2 or strides[0] == 1 else "C"
        return FakeDevice(np.full(shape, np.nan, dtype=dtype, order=order))

    def to(self, device_id, stream=None):
        raise AssertionError("the distributed matmul copies nothing between memory spaces")


class GridLayout(enum.IntEnum):
    COL_MAJOR = 0
    ROW_MAJOR = 1


class MatmulDescriptorAttribute(enum.IntEnum):
    TRANSA = 0
    TRANSB = 1
    COMPUTE_TYPE = 2
    ALGO_TYPE = 3
    COMMUNICATION_SM_COUNT = 4


def owned(extent: int, block: int, first: int, nprocs: int, coord: int) -> list[int]:
    return [i for i in range(extent) if (i // block + first) % nprocs == coord]


class FakeCublasMp:
    """The fake ``nvmath.bindings.cublasMp`` (see the module docstring)."""

    GridLayout, MatmulDescriptorAttribute = GridLayout, MatmulDescriptorAttribute

    def __init__(self, group):
        self.group, self.n = group, group.nranks
        self.calls: list[tuple] = []
        self.objects: dict[int, Any] = {}
        self.live: set[int] = set()
        self.lock = threading.Lock()
        self.barrier = threading.Barrier(self.n, timeout=10)
        self.slots: dict[int, Any] = {}
        self.next = 1000

    def _new(self, kind, value):
        with self.lock:
            self.next += 1
            handle = self.next
            self.objects[handle] = value
            self.live.add(handle)
            self.calls.append((self.group.rank, kind, handle))
        return handle

    def _drop(self, kind, handle):
        with self.lock:
            self.live.discard(handle)
            self.calls.append((self.group.rank, kind, handle))

    def create(self, stream):
        return self._new("create", {"stream": stream})

    def destroy(self, h):
        self._drop("destroy", h)

    def grid_create(self, nprow, npcol, layout, comm):
        return self._new("grid_create", (nprow, npcol, GridLayout(layout).name, comm))

    def grid_destroy(self, h):
        self._drop("grid_destroy", h)

    def matrix_descriptor_create(self, m, n, mb, nb, rsrc, csrc, lld, cuda_type, grid):
        assert lld >= 1
        return self._new("matrix_descriptor_create", (m, n, mb, nb, rsrc, csrc, lld, cuda_type, grid))

    def matrix_descriptor_destroy(self, h):
        self._drop("matrix_descriptor_destroy", h)

    def matmul_descriptor_create(self, compute_type):
        return self._new("matmul_descriptor_create", {"compute": compute_type})

    def matmul_descriptor_set_attribute(self, desc, attr, buf, size):
        value = int(np.frombuffer((ctypes.c_char * size).from_address(buf), dtype=np.int32)[0])
        self.objects[desc][MatmulDescriptorAttribute(attr).name] = value
        with self.lock:
            self.calls.append((self.group.rank, "set_attribute", MatmulDescriptorAttribute(attr).name, value))

    def matmul_descriptor_destroy(self, h):
        self._drop("matmul_descriptor_destroy", h)

    def set_stream(self, handle, stream):
        with self.lock:
            self.calls.append((self.group.rank, "set_stream", stream))

    def matmul_buffer_size(self, handle, desc, *args):
        assert len(args) == 21  # m, n, k, alpha, (a, ia, ja, desc) x 2, beta, (c, ...), (d, ...)
        return 4096, 128

    def _exchange(self, value):
        self.slots[self.group.rank] = value
        self.barrier.wait()
        values = [self.slots[r] for r in range(self.n)]
        self.barrier.wait()
        return values

    def _coords(self, grid, rank):
        nprow, npcol, layout, _ = self.objects[grid]
        return (rank % nprow, rank // nprow) if layout == "COL_MAJOR" else (rank // npcol, rank % npcol)

    def _local(self, ptr, d, rank):
        m, n, mb, nb, rsrc, csrc, lld, cuda_type, grid = self.objects[d]
        nprow, npcol = self.objects[grid][:2]
        pr, pc = self._coords(grid, rank)
        rows, cols = owned(m, mb, rsrc, nprow, pr), owned(n, nb, csrc, npcol, pc)
        return rows, cols, host_view(ptr, (len(rows), len(cols)), (1, lld), _TYPES[cuda_type])

    def _assemble(self, everyone, index):
        d = everyone[0][index][1]
        m, n, cuda_type = self.objects[d][0], self.objects[d][1], self.objects[d][7]
        full = np.zeros((m, n), dtype=np.complex128 if cuda_type in (4, 5) else np.float64)
        for rank, slots in enumerate(everyone):
            rows, cols, local = self._local(*slots[index], rank)
            full[np.ix_(rows, cols)] = local
        return full

    def matmul(self, handle, desc, m, n, k, alpha, a, ia, ja, da, b, ib, jb, db, beta, c, ic, jc, dc, d,
               id_, jd, dd, d_work, d_size, h_work, h_size):  # fmt: skip
        assert (ia, ja, ib, jb, ic, jc, id_, jd) == (1,) * 8 and d_size == 4096 and h_size == 128 and d_work
        with self.lock:
            self.calls.append((self.group.rank, "matmul", m, n, k))
        everyone = self._exchange(((a, da), (b, db), (c, dc), (d, dd), alpha, beta))
        if self.group.rank == 0:
            attrs = self.objects[desc]
            scale = _TYPES[self.objects[da][7]]
            al = host_view(alpha, (1,), (1,), scale)[0]
            be = host_view(beta, (1,), (1,), scale)[0]
            ops = {0: lambda x: x, 1: lambda x: x.T, 2: lambda x: x.conj().T}
            A = ops[attrs["TRANSA"]](self._assemble(everyone, 0))
            B = ops[attrs["TRANSB"]](self._assemble(everyone, 1))
            C = self._assemble(everyone, 2)
            assert A.shape == (m, k) and B.shape == (k, n) and C.shape == (m, n)
            D = al * (A @ B) + (be * C if be != 0 else 0)
            for rank, slots in enumerate(everyone):
                rows, cols, local = self._local(*slots[3], rank)
                local[...] = D[np.ix_(rows, cols)]
        self._exchange(None)
