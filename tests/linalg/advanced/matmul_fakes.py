"""A fake GPU for CPU tests of the matmul planner (loaded by path from the test modules).

* :class:`FakeTensor`: a "device tensor" whose memory is a numpy array (package ``"fake"``, device 0).
* :func:`install`: installs the device side of the shared fake GPU (``tests/fake_gpu.py``), then
  routes cuBLASLt's heuristic, algorithm-check and matmul entry points to numpy emulations that read
  the real cuBLASLt descriptors (creating and querying descriptors, layouts and preferences is
  host-only work that cuBLASLt does without a GPU), and makes handles and device facts available
  without a driver.

The emulated ``cublasLtMatmul`` computes ``epilog(alpha * op(A) op(B) + beta * C)`` per batch from
the layouts (rows, cols, ld, order, batch count and offset), in float64/complex128, with the A / B
scales of every FP8 scale mode (tensor-wide, outer-vector, VEC128, BLK128x128), including the
bias, ReLU/GELU (tanh), aux outputs, backward and bias-gradient epilogues, and writes D through its
layout; so tests can compare planner results with numpy.
"""

from __future__ import annotations

import ctypes
import math
from typing import Any

import numpy as np

import fake_gpu
from nvmath._internal import dtypes, stateless
from nvmath._internal.tensors import dispatch, transfers
from nvmath._internal.tensors.base import TensorAdapter, check_strides
from nvmath._internal.tensors.host import element_strides, host_empty
from nvmath.bindings import cublasLt as lt
from nvmath.linalg.advanced import _device, _handles

HEUR = lt.matmul_heuristic_result_dtype


class FakeTensor:
    """A GPU tensor of the fake package: its memory is ``array`` (host memory)."""

    def __init__(self, array: np.ndarray):
        self.array = array

    @property
    def shape(self):
        return self.array.shape

    def conj(self):
        return FakeTensor(self.array)


class FakeAdapter(TensorAdapter):
    """The adapter of :class:`FakeTensor` (like a cupy array on device 0)."""

    __slots__ = ()
    package = "fake"
    device = "cuda"
    device_id = 0
    is_conjugate = False

    def __init__(self, tensor: FakeTensor, stream: Any = None):
        arr = tensor.array
        self.tensor = tensor
        self.data_ptr = arr.__array_interface__["data"][0]
        self.shape = arr.shape
        self.itemsize = arr.itemsize
        self.strides = element_strides(arr.strides, arr.itemsize)
        self.dtype = dtypes.numpy_dtype_name(arr.dtype)
        self.size = arr.size

    def empty(self, shape, dtype, *, strides=None, device_id=None, stream=None):
        shape = tuple(shape)
        arr = host_empty(shape, check_strides(shape, strides), dtype)
        if arr.dtype.kind in "fc":
            arr[...] = np.nan  # poison
        return FakeAdapter(FakeTensor(arr))

    def to(self, device_id, stream=None):
        if device_id == 0:
            return self
        raise ValueError("the fake GPU has no host copies")



class FakeHostTensor(FakeTensor):
    """A host tensor of the fake package (like a numpy array): planners copy it to the fake GPU."""


class FakeHostAdapter(FakeAdapter):
    """The adapter of :class:`FakeHostTensor`: ``to(0)`` makes a dense device copy, as the real ones do."""

    __slots__ = ()
    package = "fakehost"
    device = "cpu"
    device_id = "cpu"

    def empty(self, shape, dtype, *, strides=None, device_id=None, stream=None):
        out = FakeAdapter.empty(self, shape, dtype, strides=strides)
        if device_id == "cpu" or device_id is None:
            return FakeHostAdapter(FakeHostTensor(out.tensor.array))
        return out

    def to(self, device_id, stream=None):
        if device_id == "cpu":
            return self
        return FakeAdapter(FakeTensor(np.array(self.tensor.array, order="K")))  # dense, same axis order


def _view(ptr: int, shape, strides, dtype: str) -> np.ndarray:
    npdt = dtypes.to_numpy_dtype(dtype)
    span = 1 + sum((n - 1) * s for n, s in zip(shape, strides)) if all(shape) else 0
    buf = (ctypes.c_char * max(span * npdt.itemsize, 1)).from_address(ptr)
    return np.ndarray(shape, dtype=npdt, buffer=buf, strides=tuple(s * npdt.itemsize for s in strides))


def _layout(ptr: int) -> dict[str, int]:
    attr = lt.MatrixLayoutAttribute
    names = ("TYPE", "ORDER", "ROWS", "COLS", "LD", "BATCH_COUNT", "STRIDED_BATCH_OFFSET")
    return {n: int(lt.matrix_layout_get(ptr, attr[n])) for n in names}


def _matrix(ptr: int, lay: dict[str, int], i: int) -> np.ndarray:
    dtype = dtypes.from_cuda_data_type(lay["TYPE"])
    rows, cols, ld = lay["ROWS"], lay["COLS"], lay["LD"]
    strides = (1, ld) if lay["ORDER"] == 0 else (ld, 1)
    isz = dtypes.itemsize(dtype)
    return _view(ptr + i * lay["STRIDED_BATCH_OFFSET"] * isz, (rows, cols), strides, dtype)


def _op(mat: np.ndarray, op: int) -> np.ndarray:
    return mat if op == 0 else (mat.T if op == 1 else mat.conj().T)


def gelu_tanh(x):
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))


def gelu_tanh_grad(x):
    k = math.sqrt(2 / math.pi)
    t = np.tanh(k * (x + 0.044715 * x**3))
    return 0.5 * (1 + t) + 0.5 * x * (1 - t**2) * k * (1 + 3 * 0.044715 * x**2)


class FakeLt:
    """The emulated cuBLASLt entry points and a record of the calls."""

    def __init__(
        self, count: int = 3, workspace: int = 0, wide: int = 0, wide_workspace: int = 48 << 20, narrow: int = 0
    ):  # fmt: skip
        self.count = count
        self.workspace = workspace
        self.wide = wide  # extra candidates (markers 200, 201, ...) offered when the cap exceeds 32 MiB
        self.wide_workspace = wide_workspace
        self.narrow = narrow  # extra candidates (markers 300, ...; no workspace) offered under a <= 1 MiB cap
        self.heuristic_calls = 0
        self.matmul_calls: list[dict[str, Any]] = []
        self.preferences: list[dict[str, int]] = []

    # ctypes-level signatures (see nvmath/bindings/cublasLt.py)
    def get_heuristic(self, handle, desc, a, b, c, d, pref, requested, results, count_ref):
        self.heuristic_calls += 1
        names = ("MAX_WORKSPACE_BYTES", "MIN_ALIGNMENT_A_BYTES", "MIN_ALIGNMENT_B_BYTES")
        self.preferences.append(
            {n: int(lt.matmul_preference_get(pref, lt.MatmulPreferenceAttribute[n])) for n in names}
        )
        cap = self.preferences[-1]["MAX_WORKSPACE_BYTES"]
        wide = cap > 32 << 20
        extra = self.wide if wide else (self.narrow if cap <= 1 << 20 else 0)
        n = min(requested, self.count + extra)
        recs = np.frombuffer((ctypes.c_char * (requested * HEUR.itemsize)).from_address(results), dtype=HEUR)
        for i in range(n):
            extra_one = i >= self.count
            # a marker in an unused word; extra candidates also differ in their configuration
            recs[i]["algo"]["data"][7] = (200 if wide else 300) + i - self.count if extra_one else 100 + i
            if extra_one:
                attr = "SPLITK_NUM" if wide else "STAGES_ID"
                lt.matmul_algo_config_set(
                    results + i * HEUR.itemsize, int(lt.MatmulAlgoConfigAttribute[attr]), 2 + i
                )
            recs[i]["workspace_size"] = self.wide_workspace if extra_one and wide else self.workspace
            recs[i]["state"] = 0
        count_ref._obj.value = n
        return 0

    def algo_check(self, handle, desc, a, b, c, d, algo, result):
        rec = np.frombuffer((ctypes.c_char * HEUR.itemsize).from_address(result), dtype=HEUR)
        rec[0]["workspace_size"] = self.workspace
        rec[0]["state"] = 0
        return 0

    def get_ids(self, handle, compute, scale, at, bt, ct, dt, requested, ids, count_ref):
        arr = np.frombuffer((ctypes.c_int32 * requested).from_address(ids), dtype=np.int32)
        n = min(requested, 4)
        arr[:n] = np.arange(n) + 10
        count_ref._obj.value = n
        return 0

    def matmul(
        self, handle, desc, alpha, a, adesc, b, bdesc, beta, c, cdesc, d, ddesc, algo, ws, ws_size, stream
    ):
        args = (handle, desc, alpha, a, adesc, b, bdesc, beta, c, cdesc, d, ddesc, algo, ws, ws_size, stream)
        check_c_args("cublasLtMatmul", args)
        get = lambda name: int(lt.matmul_desc_get(desc, lt.MatmulDescAttribute[name]))
        scale = dtypes.from_cuda_data_type(get("SCALE_TYPE"))
        al, be = _view(alpha, (1,), (1,), scale)[0], _view(beta, (1,), (1,), scale)[0]
        la, lb, lc, ld = (_layout(p) for p in (adesc, bdesc, cdesc, ddesc))
        algo_marker = int(np.frombuffer((ctypes.c_char * 64).from_address(algo), dtype=np.uint64)[7])
        epilogue = get("EPILOGUE")
        aux = tuple(get(n) for n in ("EPILOGUE_AUX_POINTER", "EPILOGUE_AUX_LD", "EPILOGUE_AUX_BATCH_STRIDE"))
        self.matmul_calls.append(
            {"stream": stream, "algo": algo_marker, "ws": ws, "ws_size": ws_size, "c": c, "d": d, "aux": aux,
             "handle": handle}
        )
        # the H200's cuBLASLt reads a batched DRELU's aux input wrongly with batch stride 0 (no error)
        assert not (epilogue in (136, 152, 192, 208) and ld["BATCH_COUNT"] > 1 and aux[2] == 0), (
            "a batched backward epilog was given an aux batch stride of 0, which cuBLASLt does not honour"
        )
        for i in range(ld["BATCH_COUNT"]):
            A = _op(_matrix(a, la, i if la["BATCH_COUNT"] > 1 else 0), get("TRANSA")).astype(np.complex128)
            B = _op(_matrix(b, lb, i if lb["BATCH_COUNT"] > 1 else 0), get("TRANSB")).astype(np.complex128)
            sa, sb = operand_scale(get, "A", *A.shape), operand_scale(get, "B", *B.T.shape).T
            acc = complex(al) * ((A * sa) @ (B * sb))
            if be != 0:
                acc = acc + complex(be) * _matrix(c, lc, i)
            acc = self._epilog(get, epilogue, acc, A, B, i, ld)
            out = _matrix(d, ld, i)
            out[...] = acc if out.dtype.kind == "c" else acc.real
        return 0

    def _vector(self, get, name_ptr, length, i, dtype):
        ptr = get(name_ptr)
        stride = get("BIAS_BATCH_STRIDE")
        return _view(ptr + i * stride * dtypes.itemsize(dtype), (length,), (1,), dtype)

    def _epilog(self, get, epilogue, acc, A, B, i, ld):
        m, n = acc.shape
        d_dtype = dtypes.from_cuda_data_type(ld["TYPE"])
        bias_type = get("BIAS_DATA_TYPE")
        bias_dtype = dtypes.from_cuda_data_type(bias_type) if bias_type != -1 else d_dtype
        if epilogue & 4:  # BIAS
            acc = acc + self._vector(get, "BIAS_POINTER", m, i, bias_dtype)[:, None]
        aux_ptr, aux_ld, aux_bs = (
            get("EPILOGUE_AUX_POINTER"),
            get("EPILOGUE_AUX_LD"),
            get("EPILOGUE_AUX_BATCH_STRIDE"),
        )
        if epilogue in (130, 134):  # RELU_AUX(_BIAS): write the bitmask
            bits = np.zeros((aux_ld, n), dtype=np.uint8)
            bits[:m] = acc.real > 0
            packed = np.packbits(bits, axis=0, bitorder="little")
            _view(aux_ptr + i * aux_bs // 8, (aux_ld // 8, n), (1, aux_ld // 8), "uint8")[...] = packed
        if epilogue in (160, 164):  # GELU_AUX(_BIAS): write the pre-activation
            _view(aux_ptr + i * aux_bs * ld_isz(d_dtype), (m, n), (1, aux_ld), d_dtype)[...] = acc.real
        if epilogue & 2 and epilogue < 136:  # RELU
            acc = np.where(acc.real > 0, acc, 0)
        if epilogue & 32 and epilogue < 192:  # GELU
            acc = gelu_tanh(acc.real)
        if epilogue in (136, 152):  # DRELU(_BGRAD)
            packed = _view(aux_ptr + i * aux_bs // 8, (aux_ld // 8, n), (1, aux_ld // 8), "uint8")
            mask = np.unpackbits(np.ascontiguousarray(packed), axis=0, bitorder="little")[:m]
            acc = acc * mask
        if epilogue in (192, 208):  # DGELU(_BGRAD)
            pre = _view(aux_ptr + i * aux_bs * ld_isz(d_dtype), (m, n), (1, aux_ld), d_dtype)
            acc = acc * gelu_tanh_grad(pre.astype(np.float64))
        if epilogue in (152, 208):
            self._vector(get, "BIAS_POINTER", m, i, d_dtype)[...] = acc.real.sum(axis=1)
        if epilogue == 256:  # BGRADA: sum of A over K
            self._vector(get, "BIAS_POINTER", m, i, d_dtype)[...] = A.real.sum(axis=1)
        if epilogue == 512:  # BGRADB: sum of B over K
            self._vector(get, "BIAS_POINTER", n, i, d_dtype)[...] = B.real.sum(axis=0)
        return acc


def check_c_args(symbol: str, args: tuple) -> None:
    """Assert what the checked binding would have enforced: the planner calls the unchecked one
    (``nvmath.bindings._unchecked``), so every argument must be a plain int address / size in
    ``[0, 2**64)`` (ctypes would wrap anything larger, a str would become a pointer to its text)."""
    bad = [(i, x) for i, x in enumerate(args) if type(x) is not int or not 0 <= x < 2**64]
    assert not bad, f"{symbol}: arguments (position, value) that are not uint64 ints: {bad}"


def operand_scale(get, which: str, rows: int, k: int) -> np.ndarray:
    """The scale of each element of op(A) (``rows`` x K) or op(B)^T, as cuBLASLt reads it: the
    ``*_SCALE_MODE`` of the descriptor and the layouts of ``nvmath.linalg.advanced._scaling``
    (outer vector: contiguous; VEC128: strides (1, rows); BLK128x128: strides (L4, 1))."""
    ptr = get(f"{which}_SCALE_POINTER")
    if not ptr:
        return np.ones((1, 1))
    mode, kb = get(f"{which}_SCALE_MODE"), -(-k // 128)
    r, kk = np.arange(rows)[:, None], np.arange(k)[None, :]
    if mode == 0:  # SCALAR_32F
        return _view(ptr, (1, 1), (1, 1), "float32").astype(np.float64)
    if mode == 3:  # OUTER_VEC_32F
        return _view(ptr, (rows, 1), (1, 1), "float32").astype(np.float64)
    if mode == 4:  # VEC128_32F
        return _view(ptr, (rows, kb), (1, rows), "float32").astype(np.float64)[r, kk // 128]
    assert mode == 5, mode  # BLK128x128_32F
    l4 = -(-kb // 4) * 4
    return _view(ptr, (-(-rows // 128), kb), (l4, 1), "float32").astype(np.float64)[r // 128, kk // 128]


def ld_isz(dtype: str) -> int:
    return dtypes.itemsize(dtype)


def aligned(x: np.ndarray) -> np.ndarray:
    """A C-order copy of ``x`` whose data pointer is 256-byte aligned, like GPU allocations."""
    raw = np.empty(x.nbytes + 256, dtype=np.uint8)
    start = -raw.ctypes.data % 256
    out = raw[start : start + x.nbytes].view(x.dtype).reshape(x.shape)
    out[...] = x
    return out


def install(monkeypatch, fake: FakeLt | None = None) -> FakeLt:
    """Install the fake GPU for one test (undone by ``monkeypatch``); return the :class:`FakeLt`."""
    fake = fake or FakeLt()
    fake_gpu.install(monkeypatch, packages=("fake", "fakehost"))  # the device side: tests/fake_gpu.py
    monkeypatch.setattr(lt, "_p_cublasLtMatmulAlgoGetHeuristic", fake.get_heuristic)
    monkeypatch.setattr(lt, "_p_cublasLtMatmulAlgoCheck", fake.algo_check)
    monkeypatch.setattr(lt, "_p_cublasLtMatmulAlgoGetIds", fake.get_ids)
    monkeypatch.setattr(lt, "_p_cublasLtMatmul", fake.matmul)
    monkeypatch.setattr(_handles, "get_handle", lambda device_id: 0x1234)
    monkeypatch.setattr(transfers, "memcpy", host_memcpy)
    info = _device.DeviceInfo("Fake GPU", (9, 0), 80 << 30)
    monkeypatch.setattr(_device, "device_info", lambda device_id: info)
    monkeypatch.setitem(dispatch._CLASSES, FakeTensor, FakeAdapter)
    monkeypatch.setitem(dispatch._CLASSES, FakeHostTensor, FakeHostAdapter)
    return fake


def host_memcpy(kind: str, dst: int, src: int, nbytes: int, stream: Any) -> None:
    """``transfers.memcpy`` on the fake GPU (every "device" address is host memory)."""
    assert kind in ("HtoD", "DtoH", "DtoD") and nbytes >= 0, (kind, nbytes)
    ctypes.memmove(dst, src, nbytes)


def read_fake(t: FakeTensor) -> tuple:
    """The raw reader of fake tensors (as ``nvmath._internal.stateless`` reads torch tensors): the
    same head as :class:`FakeAdapter` / :class:`FakeHostAdapter` give, the address, the tensor."""
    arr = t.array
    host = type(t) is FakeHostTensor
    head = (
        "fakehost" if host else "fake", "cpu" if host else 0, arr.shape,
        element_strides(arr.strides, arr.itemsize), dtypes.numpy_dtype_name(arr.dtype), False,
    )  # fmt: skip
    return head, arr.__array_interface__["data"][0], t


def register_readers(monkeypatch) -> None:
    """Let the stateless ``matmul`` read fake tensors raw (its hot path), for one test."""
    monkeypatch.setitem(stateless.READERS, FakeTensor, read_fake)
    monkeypatch.setitem(stateless.READERS, FakeHostTensor, read_fake)


def fake(array) -> FakeTensor:
    """A fake GPU tensor holding (a view of) ``array``."""
    return FakeTensor(np.asarray(array) if not isinstance(array, np.ndarray) else array)
