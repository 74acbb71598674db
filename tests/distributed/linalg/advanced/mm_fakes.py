"""A fake cuBLASMp that computes on host memory, for the distributed matmul's CPU tests (imported as
``mm_fakes``).

Ranks are threads of a ``ThreadGroup`` (or one ``SingleRank``). At ``cublasMpMatmul`` every rank
hands over its pointers and descriptors; rank 0 assembles each global matrix from the ranks' local
column-major blocks with the ScaLAPACK block-cyclic rule (written here independently of nvmath),
computes ``D = alpha op(A) op(B) + beta C`` in float64/complex128 with numpy, applies the FP8
scales and the epilog the descriptor names (the formulas of cuBLASMp's header, written here from it),
and writes each rank's block of D, of its aux output and of its bias gradient back. The workspace
must come from ``malloc`` (cublasMpMalloc: registered), else ``matmul`` fails the test.
"""

from __future__ import annotations

import ctypes
import enum
import threading
from typing import Any

import ml_dtypes
import numpy as np
from dist_fakes import ThreadGroup

from nvmath._internal.dtypes import to_numpy_dtype
from nvmath._internal.tensors.base import TensorAdapter
from nvmath.distributed.distribution._ownership import rank_ownership

_TYPES = {0: np.float32, 1: np.float64, 2: np.float16, 4: np.complex64, 5: np.complex128,
          14: ml_dtypes.bfloat16, 28: ml_dtypes.float8_e4m3fn, 29: ml_dtypes.float8_e5m2}  # fmt: skip
_POINTERS = ("BIAS_POINTER", "EPILOGUE_AUX_POINTER", "A_SCALE_POINTER", "B_SCALE_POINTER", "D_SCALE_POINTER",
             "AMAX_D_POINTER")  # fmt: skip


def host_view(address: int, shape: tuple, strides: tuple, dtype: Any) -> np.ndarray:
    dtype = np.dtype(dtype)
    if not shape or 0 in shape:
        return np.empty(shape, dtype)
    span = (sum((n - 1) * s for n, s in zip(shape, strides, strict=True)) + 1) * dtype.itemsize
    flat = np.frombuffer((ctypes.c_char * span).from_address(address), dtype=np.uint8)
    return np.ndarray(shape, dtype, buffer=flat, strides=tuple(s * dtype.itemsize for s in strides))


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
        garbage = 0xA5 if str(dtype).startswith(("uint", "int")) else np.nan
        return FakeDevice(np.full(shape, garbage, dtype=to_numpy_dtype(str(dtype)), order=order))

    def to(self, device_id, stream=None):
        raise AssertionError("the distributed matmul copies nothing between memory spaces")


class GridLayout(enum.IntEnum):
    COL_MAJOR = 0
    ROW_MAJOR = 1


class MatmulDescriptorAttribute(enum.IntEnum):  # cublasMpMatmulDescriptorAttribute_t
    TRANSA = 0
    TRANSB = 1
    COMPUTE_TYPE = 2
    ALGO_TYPE = 3
    COMMUNICATION_SM_COUNT = 4
    EPILOGUE = 5
    BIAS_POINTER = 6
    BIAS_DATA_TYPE = 8
    EPILOGUE_AUX_POINTER = 9
    EPILOGUE_AUX_LD = 10
    A_SCALE_POINTER = 16
    B_SCALE_POINTER = 18
    C_SCALE_POINTER = 20
    D_SCALE_POINTER = 22
    AMAX_D_POINTER = 24


def gelu(x):
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3)))


def gelu_grad(x):
    t = np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3))
    return 0.5 * (1 + t) + 0.5 * x * (1 - t**2) * np.sqrt(2 / np.pi) * (1 + 3 * 0.044715 * x**2)


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
        self.registered: dict[int, np.ndarray] = {}
        self.sizes: Any = (4096, 128)  # what matmul_buffer_size answers (device, host bytes), or {rank: that}

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
        kind = {4: np.int32, 8: np.int64}[size]
        value = int(np.frombuffer((ctypes.c_char * size).from_address(buf), dtype=kind)[0])
        self.objects[desc][MatmulDescriptorAttribute(attr).name] = value
        with self.lock:
            self.calls.append((self.group.rank, "set_attribute", MatmulDescriptorAttribute(attr).name, value))

    def matmul_descriptor_destroy(self, h):
        self._drop("matmul_descriptor_destroy", h)

    def malloc(self, grid, size):
        buffer = np.zeros(size, np.uint8)
        with self.lock:
            self.registered[buffer.ctypes.data] = buffer
            self.live.add(buffer.ctypes.data)
            self.calls.append((self.group.rank, "malloc", size))
        return buffer.ctypes.data

    def free(self, grid, ptr):
        with self.lock:
            assert self.registered.pop(ptr, None) is not None, "free of memory malloc did not make"
            self.live.discard(ptr)
            self.calls.append((self.group.rank, "free", ptr))

    def set_stream(self, handle, stream):
        with self.lock:
            self.calls.append((self.group.rank, "set_stream", stream))

    def matmul_buffer_size(self, handle, desc, *args):
        assert len(args) == 21  # m, n, k, alpha, (a, ia, ja, desc) x 2, beta, (c, ...), (d, ...)
        return self._sizes()

    def _sizes(self):
        return self.sizes[self.group.rank] if isinstance(self.sizes, dict) else self.sizes

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
        assert (ia, ja, ib, jb, ic, jc, id_, jd) == (1,) * 8 and (d_size, h_size) == self._sizes()
        assert d_work in self.registered, "the device workspace is not registered (cublasMpMalloc)"
        # cuBLASLt (cuBLASMp's local GEMM): in place (C == D) only with one descriptor (INVALID_VALUE)
        assert c != d or dc == dd, "C and D share memory but have different descriptors (cuBLASLt refuses)"
        with self.lock:
            self.calls.append((self.group.rank, "matmul", m, n, k))
        everyone = self._exchange(((a, da), (b, db), (c, dc), (d, dd), alpha, beta, dict(self.objects[desc])))
        if self.group.rank == 0:
            self._compute(everyone, m, n, k)
        self._exchange(None)

    def _scalar(self, attrs, name, default=1.0):
        ptr = attrs.get(name)
        return default if not ptr else float(host_view(ptr, (1,), (1,), np.float32)[0])

    def _compute(self, everyone, m, n, k):
        attrs = everyone[0][6]
        wide = [self.objects[everyone[0][i][1]][7] for i in (0, 1)]
        scale = np.float32 if wide[0] in (2, 14, 28, 29) else _TYPES[wide[0]]
        al = host_view(everyone[0][4], (1,), (1,), scale)[0]
        be = host_view(everyone[0][5], (1,), (1,), scale)[0]
        ops = {0: lambda x: x, 1: lambda x: x.T, 2: lambda x: x.conj().T}
        A = ops[attrs["TRANSA"]](self._assemble(everyone, 0))
        B = ops[attrs["TRANSB"]](self._assemble(everyone, 1))
        c_type, d_type = (self.objects[everyone[0][i][1]][7] for i in (2, 3))
        if d_type in (28, 29):  # cuBLASLt's FP8 table: an FP8 D goes with a 16-bit C
            assert c_type in (2, 14), f"FP8 D with C of cudaDataType {c_type}"
        C = self._assemble(everyone, 2) if be != 0 else np.zeros((m, n))  # C is not read when beta is 0
        assert A.shape == (m, k) and B.shape == (k, n) and C.shape == (m, n)
        ab = self._scalar(attrs, "A_SCALE_POINTER") * self._scalar(attrs, "B_SCALE_POINTER")
        D = al * ab * (A @ B) + (be * C if be != 0 else 0)
        D, per_rank = self._epilog(everyone, D, A, B)
        for rank, slots in enumerate(everyone):
            rows, cols, local = self._local(*slots[3], rank)
            mine = slots[6]
            if mine.get("AMAX_D_POINTER"):  # this rank's block's amax, before the D scale
                host_view(mine["AMAX_D_POINTER"], (1,), (1,), np.float32)[0] = np.abs(
                    D[np.ix_(rows, cols)]
                ).max()
            local[...] = D[np.ix_(rows, cols)] * self._scalar(mine, "D_SCALE_POINTER")
            per_rank(rank, rows, cols, mine)

    def _epilog(self, everyone, D, A, B):
        """D after the epilog, and a function writing a rank's aux / bias-gradient outputs."""
        attrs = everyone[0][6]
        epilog = attrs.get("EPILOGUE", 0)
        out_type = _TYPES[self.objects[everyone[0][3][1]][7]]
        outputs = {}
        if epilog in (4, 6, 36, 134, 164):  # a bias input, along D's rows
            bias = np.zeros(D.shape[0])
            for rank, slots in enumerate(everyone):
                rows, _, _ = self._local(*slots[3], rank)
                bias[rows] = host_view(slots[6]["BIAS_POINTER"], (len(rows),), (1,), out_type)
            D = D + bias[:, None]
        if epilog in (130, 134, 160, 164):  # forward with an aux output
            outputs["aux"] = (D > 0) if epilog in (130, 134) else D.copy()
        if epilog in (2, 6, 130, 134):
            D = np.maximum(D, 0)
        elif epilog in (32, 36, 160, 164):
            D = gelu(D)
        elif epilog in (136, 152, 192, 208):  # backward: the forward's aux, gathered
            aux = np.zeros(D.shape, dtype=bool if epilog < 192 else np.float64)
            for rank, slots in enumerate(everyone):
                rows, cols, _ = self._local(*slots[3], rank)
                ld, ptr = slots[6]["EPILOGUE_AUX_LD"], slots[6]["EPILOGUE_AUX_POINTER"]
                if epilog < 192:
                    bits = np.unpackbits(host_view(ptr, (ld // 8, len(cols)), (1, ld // 8), np.uint8), axis=0,
                                         bitorder="little")  # fmt: skip
                    aux[np.ix_(rows, cols)] = bits[: len(rows)].astype(bool)
                else:
                    aux[np.ix_(rows, cols)] = host_view(ptr, (len(rows), len(cols)), (1, ld), out_type)
            D = D * aux if epilog < 192 else D * gelu_grad(aux)
            if epilog & 16:
                outputs["bgrad_rows"] = D.sum(axis=1)
        if epilog == 256:
            outputs["bgrad_rows"] = A.sum(axis=1)
        if epilog == 512:
            outputs["bgrad_cols"] = B.sum(axis=0)

        def per_rank(rank, rows, cols, mine):
            if "aux" in outputs:
                ld, ptr = mine["EPILOGUE_AUX_LD"], mine["EPILOGUE_AUX_POINTER"]
                block = outputs["aux"][np.ix_(rows, cols)]
                if epilog in (130, 134):
                    mask = np.zeros((ld, len(cols)), dtype=np.uint8)
                    mask[: len(rows)] = block
                    host_view(ptr, (ld // 8, len(cols)), (1, ld // 8), np.uint8)[...] = np.packbits(
                        mask, axis=0, bitorder="little")  # fmt: skip
                else:
                    host_view(ptr, (len(rows), len(cols)), (1, ld), out_type)[...] = block
            for key, index in (("bgrad_rows", rows), ("bgrad_cols", cols)):
                if key in outputs:
                    host_view(mine["BIAS_POINTER"], (len(index),), (1,), out_type)[...] = outputs[key][index]

        return D, per_rank


# ------------------------------------------------------------------ helpers of the planner tests
class FakeStream:
    def __init__(self, ptr):
        self.ptr, self.device_id, self.ctx, self.mortal, self._done = ptr, 0, None, False, None


def run(group, function):
    if isinstance(group, ThreadGroup):
        results = group.run(function)
    else:
        try:
            results = [function(0)]
        except BaseException as exc:  # noqa: BLE001
            results = [exc]
    return results


def ok(results):
    errors = [r for r in results if isinstance(r, BaseException)]
    first = [e for e in errors if type(e).__name__ != "BrokenBarrierError"]
    if errors:
        raise (first or errors)[0]
    return results


def parts(g, distribution, nranks, order):
    """Every rank's part of ``g`` as a FakeDevice in ``order``."""
    out = []
    for rank in range(nranks):
        rows, cols = (np.concatenate([np.arange(a, b) for a, b in dim] or [np.arange(0)])
                      for dim in rank_ownership(distribution, g.shape, nranks, rank))  # fmt: skip
        block = g[np.ix_(rows, cols)]
        out.append(FakeDevice(np.asfortranarray(block) if order == "F" else np.ascontiguousarray(block)))
    return out, [
        tuple(np.concatenate([np.arange(a, b) for a, b in dim] or [np.arange(0)]) for dim in
              rank_ownership(distribution, g.shape, nranks, r)) for r in range(nranks)
    ]  # fmt: skip


def gather(results, index, shape):
    out = np.full(shape, np.nan, dtype=np.asarray(results[0]).dtype)
    for r, rows_cols in enumerate(index):
        out[np.ix_(*rows_cols)] = np.asarray(results[r])
    return out
