"""A fake GPU for CPU tests of the generic matmul's cuBLAS path (loaded by path from the test modules).

The device tensors are those of ``tests/linalg/advanced/matmul_fakes.py`` (``FakeTensor``: a
"device" array whose memory is host memory, poisoned with NaN when allocated). :func:`install` routes
the cuBLAS entry points the generic matmul calls (GemmEx, strided-batched, symm, hemm, trmm, dgmm,
geam, the grouped GEMMs, SetStream, SetWorkspace) to numpy emulations that read and write
column-major matrices at the raw addresses, following the cuBLAS documentation: symm / hemm / trmm
read only the stored triangle (the tests poison the other one), beta == 0 never reads C. The mirror
kernel and the pointer upload are emulated too. Every call is recorded, so tests can check which
routine ran.

The generic matmul launches through the unchecked bindings (``nvmath.bindings._unchecked.cublas``),
so the fakes replace the C function pointers those call (``cublas._p_cublasGemmEx``, ...) and check
every argument against the C prototype as the checked binding would have (:func:`check_c_args`: plain
ints in the C type's range, or a ctypes array for an array parameter: ``tests/fake_gpu.py``); the
checked Python functions of those entry points fail the test, so an execute that reached them is caught.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib.util
import pathlib
from typing import Any

import numpy as np

import fake_gpu
from nvmath._internal import devices, streams
from nvmath.bindings import cublas
from nvmath.bindings._unchecked import cublas as cublas_unchecked
from nvmath.linalg.generic import _cublas, _grouped, _kernels, _problem

_spec = importlib.util.spec_from_file_location(
    "matmul_fakes", pathlib.Path(__file__).parents[1] / "advanced" / "matmul_fakes.py"
)
F = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(F)

FakeTensor, FakeHostTensor = F.FakeTensor, F.FakeHostTensor

_DATA = {0: np.float32, 1: np.float64, 2: np.float16, 4: np.complex64, 5: np.complex128}
_SCALE = {0: np.float32, 1: np.float64, 2: np.float32, 4: np.complex64, 5: np.complex128}
_PREFIX = {"s": np.float32, "d": np.float64, "c": np.complex64, "z": np.complex128}


def cm(ptr: int, rows: int, cols: int, ld: int, dtype: Any) -> np.ndarray:
    """A writable column-major view of ``rows x cols`` elements at ``ptr``."""
    dt = np.dtype(dtype)
    if rows == 0 or cols == 0:
        return np.zeros((rows, cols), dt)
    nbytes = ((cols - 1) * ld + rows) * dt.itemsize
    buf = (ctypes.c_char * nbytes).from_address(ptr)
    return np.ndarray((rows, cols), dtype=dt, buffer=buf, strides=(dt.itemsize, ld * dt.itemsize))


def scalar(ptr: int, dtype: Any) -> Any:
    return cm(ptr, 1, 1, 1, dtype)[0, 0]


def op(mat: np.ndarray, o: int) -> np.ndarray:
    return mat if o == 0 else (mat.T if o == 1 else mat.conj().T)


def _store(c: np.ndarray, value: np.ndarray, alpha: Any, beta: Any) -> None:
    value = alpha * value.astype(np.complex128 if np.iscomplexobj(c) else np.float64)
    if beta != 0:
        value = value + beta * c.astype(value.dtype)
    c[...] = value


def triangle(a: np.ndarray, lower: bool, kind: str, unit: bool = False) -> np.ndarray:
    """The full matrix a routine sees from the stored triangle of ``a`` (the rest is never read)."""
    n = a.shape[0]
    mask = np.tril(np.ones((n, n), bool)) if lower else np.triu(np.ones((n, n), bool))
    t = np.where(mask, a, 0).astype(np.complex128 if np.iscomplexobj(a) else np.float64)
    if kind == "tr":
        if unit:
            np.fill_diagonal(t, 1)
        return t
    strict = t - np.diag(np.diag(t))
    other = strict.conj().T if kind == "he" else strict.T
    full = t + other
    if kind == "he":
        full[np.diag_indices(n)] = np.diag(full).real
    return full


class FakeCublas:
    """The emulated entry points and the record of calls (``calls``: routine names in order)."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def gemm_ex(self, h, ta, tb, m, n, k, al, a, at, lda, b, bt, ldb, be, c, ct, ldc, compute, algo):
        self.calls.append("gemm_ex")
        self._gemm(ta, tb, m, n, k, al, a, at, lda, b, ldb, be, c, ldc)

    def _gemm(self, ta, tb, m, n, k, al, a, at, lda, b, ldb, be, c, ldc):
        dt = _DATA[int(at)]
        A = cm(a, *((m, k) if ta == 0 else (k, m)), lda, dt)
        B = cm(b, *((k, n) if tb == 0 else (n, k)), ldb, dt)
        C = cm(c, m, n, ldc, dt)
        s = _SCALE[int(at)]
        _store(
            C,
            op(A, ta).astype(np.complex128) @ op(B, tb).astype(np.complex128)
            if np.iscomplexobj(A)
            else op(A, ta).astype(np.float64) @ op(B, tb).astype(np.float64),
            scalar(al, s),
            scalar(be, s),
        )

    def gemm_strided_batched_ex(
        self, h, ta, tb, m, n, k, al, a, at, lda, sa, b, bt, ldb, sb, be, c, ct, ldc, sc, count, compute, algo
    ):
        self.calls.append("gemm_strided_batched_ex")
        isz = np.dtype(_DATA[int(at)]).itemsize
        for i in range(count):
            self._gemm(
                ta,
                tb,
                m,
                n,
                k,
                al,
                a + i * sa * isz,
                at,
                lda,
                b + i * sb * isz,
                ldb,
                be,
                c + i * sc * isz,
                ldc,
            )

    def symm(self, prefix, kind):
        def fn(h, side, uplo, m, n, al, a, lda, b, ldb, be, c, ldc):
            self.calls.append(prefix + kind)
            dt = _PREFIX[prefix]
            na = m if side == 0 else n
            S = triangle(cm(a, na, na, lda, dt), uplo == 0, "he" if kind == "hemm" else "sy")
            B, C = cm(b, m, n, ldb, dt), cm(c, m, n, ldc, dt)
            _store(C, S @ B if side == 0 else B @ S, scalar(al, dt), scalar(be, dt))

        return fn

    def trmm(self, prefix):
        def fn(h, side, uplo, trans, diag, m, n, al, a, lda, b, ldb, c, ldc):
            self.calls.append(prefix + "trmm")
            dt = _PREFIX[prefix]
            na = m if side == 0 else n
            T = op(triangle(cm(a, na, na, lda, dt), uplo == 0, "tr", diag == 1), trans)
            B, C = cm(b, m, n, ldb, dt), cm(c, m, n, ldc, dt)
            _store(C, T @ B if side == 0 else B @ T, scalar(al, dt), 0)

        return fn

    def dgmm(self, prefix):
        def fn(h, mode, m, n, a, lda, x, incx, c, ldc):
            self.calls.append(prefix + "dgmm")
            dt = _PREFIX[prefix]
            nx = m if mode == 0 else n
            raw = cm(x, 1, (nx - 1) * abs(incx) + 1, 1, dt)[0, :: abs(incx)] if nx else np.zeros(0, dt)
            v = raw[::-1] if incx < 0 else raw
            A, C = cm(a, m, n, lda, dt), cm(c, m, n, ldc, dt)
            _store(C, v[:, None] * A if mode == 0 else A * v[None, :], 1, 0)

        return fn

    def geam(self, prefix):
        def fn(h, ta, tb, m, n, al, a, lda, be, b, ldb, c, ldc):
            self.calls.append(prefix + "geam")
            dt = _PREFIX[prefix]
            A = op(cm(a, *((m, n) if ta == 0 else (n, m)), lda, dt), ta).copy()
            B = op(cm(b, *((m, n) if tb == 0 else (n, m)), ldb, dt), tb).copy()
            cm(c, m, n, ldc, dt)[...] = scalar(al, dt) * A + scalar(be, dt) * B

        return fn

    def grouped(self, dtype, ex):
        def fn(h, ta, tb, ms, ns, ks, al, pa, *rest):
            self.calls.append(
                "gemm_grouped_batched_ex"
                if ex
                else ("s" if dtype is np.float32 else "d") + "gemm_grouped_batched"
            )
            if ex:
                at, lda, pb, _bt, ldb, be, pc, _ct, ldc, count, sizes, _compute = rest
                dcode = int(at)
            else:
                lda, pb, ldb, be, pc, ldc, count, sizes = rest
                dcode = 0 if dtype is np.float32 else 1
            s = _SCALE[dcode]
            total = sum(sizes[g] for g in range(count))
            ptrs = [cm(p, total, 1, total, np.uint64)[:, 0] for p in (pa, pb, pc)]
            j = 0
            for g in range(count):
                for _ in range(sizes[g]):
                    one = np.array(
                        [scalar(al + g * np.dtype(s).itemsize, s), scalar(be + g * np.dtype(s).itemsize, s)],
                        s,
                    )
                    self._gemm(
                        ta[g],
                        tb[g],
                        ms[g],
                        ns[g],
                        ks[g],
                        one.ctypes.data,
                        int(ptrs[0][j]),
                        dcode,
                        lda[g],
                        int(ptrs[1][j]),
                        ldb[g],
                        one.ctypes.data + one.itemsize,
                        int(ptrs[2][j]),
                        ldc[g],
                    )
                    j += 1

        return fn


def fake_expand(dst, src, n, ld, uplo, mode, dtype, stream):
    """The expand kernel: the full matrix (column-major, leading dimension n) from the stored triangle."""
    dt = np.dtype(dtype)
    kind = {"sy": "sy", "he": "he" if dt.kind == "c" else "sy", "tr": "tr", "tru": "tr"}[mode]
    full = triangle(cm(src, n, n, ld, dt), uplo == 0, kind, mode == "tru")
    cm(dst, n, n, n, dt)[...] = full


def _fake_copy(tensor, conjugate, layout):
    y = np.conj(tensor.array) if conjugate else tensor.array
    y = np.asfortranarray(y) if layout == "col" and y.ndim == 2 else np.array(y, order="C")
    return FakeTensor(y)


def _fake_host_copy(tensor, conjugate, layout):
    return FakeHostTensor(_fake_copy(tensor, conjugate, layout).array)


def fake_upload(dst, host, stream):
    ctypes.memmove(dst, host.ctypes.data, host.nbytes)


def route(monkeypatch, name: str, emulation) -> None:
    """Route the C entry point of ``cublas.<name>`` to ``emulation`` (see ``tests/fake_gpu.py``)."""
    fake_gpu.route_c(monkeypatch, cublas, cublas_unchecked, name, emulation)


def install(monkeypatch) -> FakeCublas:
    """Install the fake GPU for one test (undone by ``monkeypatch``); return the :class:`FakeCublas`."""
    F.install(monkeypatch)
    fake = FakeCublas()
    monkeypatch.setattr(_cublas, "get_handle", lambda device_id: 0x1234)
    route(monkeypatch, "set_stream", lambda h, s: None)
    route(monkeypatch, "set_workspace", lambda h, p, n: None)
    route(monkeypatch, "gemm_ex", fake.gemm_ex)
    route(monkeypatch, "gemm_strided_batched_ex", fake.gemm_strided_batched_ex)
    for p in "sdcz":
        route(monkeypatch, p + "symm", fake.symm(p, "symm"))
        route(monkeypatch, p + "trmm", fake.trmm(p))
        route(monkeypatch, p + "dgmm", fake.dgmm(p))
        route(monkeypatch, p + "geam", fake.geam(p))
    for p in "cz":
        route(monkeypatch, p + "hemm", fake.symm(p, "hemm"))
    route(monkeypatch, "sgemm_grouped_batched", fake.grouped(np.float32, False))
    route(monkeypatch, "dgemm_grouped_batched", fake.grouped(np.float64, False))
    route(monkeypatch, "gemm_grouped_batched_ex", fake.grouped(np.float16, True))
    monkeypatch.setattr(_kernels, "expand", fake_expand)
    monkeypatch.setattr(_grouped, "upload", fake_upload)
    monkeypatch.setattr(devices, "device_ctx", lambda device_id: contextlib.nullcontext())
    monkeypatch.setattr(streams, "synchronize", lambda handle: None)
    monkeypatch.setitem(_problem.MATERIALIZERS, "fake", _fake_copy)
    monkeypatch.setitem(_problem.MATERIALIZERS, "fakehost", _fake_host_copy)
    return fake


def fake(array: np.ndarray) -> FakeTensor:
    """A fake GPU tensor holding ``array``."""
    return FakeTensor(array)
