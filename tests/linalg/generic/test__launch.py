"""GemmLaunch: the generic matmul's only caller of cublasGemmEx / cublasGemmStridedBatchedEx passes the
same arguments on the compiled and the pure path (a recording C function stands in for cuBLAS), raises
cuBLASError on a failure status, and keeps the pure caller when the binding calls Python (CPU only)."""

from __future__ import annotations

import ctypes

import pytest
from fastcall_probes import MASK, FastCall, needs_extension

from nvmath._internal import fastpath
from nvmath.bindings import cublas
from nvmath.linalg.generic._launch import GemmLaunch

PATHS = [pytest.param(True, id="compiled", marks=needs_extension), pytest.param(False, id="pure")]


class CGemm:
    """A recording C function of ``n`` pointer-sized parameters installed as the binding's ``symbol``."""

    def __init__(self, monkeypatch, symbol: str, n: int, status: int = 0):
        self.calls: list[tuple[int, ...]] = []
        self.status = status
        self.cfunc = ctypes.CFUNCTYPE(ctypes.c_int, *([ctypes.c_uint64] * n))(self._record)
        monkeypatch.setattr(cublas, "_p_" + symbol, self.cfunc)

    def _record(self, *args: int) -> int:
        self.calls.append(args)
        return self.status


def _launch(monkeypatch, compiled: bool, count: int) -> GemmLaunch:
    monkeypatch.setattr(fastpath, "_COMPILED", FastCall if compiled else None)
    offsets = [{"x1": 0, "x2": 0, "d": 0}, {"x1": 100, "x2": 200, "d": 300}]
    return GemmLaunch((1, 0, 0, 68), (4, 5, 6), (4, 6, 4), (24, 30, 20), count, offsets, 4, -1)


@pytest.mark.parametrize("compiled", PATHS)
def test_gemm_ex_arguments(monkeypatch, compiled):
    """One matrix per launch: cublasGemmEx gets the fixed ops/sizes/lds/types/algo and, per launch, the
    handle, scalars and the matrix-0 pointers plus each launch's byte offsets."""
    probe = CGemm(monkeypatch, "cublasGemmEx", 19)
    launch = _launch(monkeypatch, compiled, 1)
    assert isinstance(launch.call, FastCall) == compiled if FastCall is not None else True
    launch.run(9, 0x1000, 0x2000, 0x3000, 0xA0, 0xB0)
    expected = [
        (9, 1, 0, 4, 5, 6, 0xA0, 0x1000 + o1, 0, 4, 0x2000 + o2, 0, 6, 0xB0, 0x3000 + od, 0, 4, 68, MASK)
        for o1, o2, od in ((0, 0, 0), (400, 800, 1200))
    ]
    assert probe.calls == expected


@pytest.mark.parametrize("compiled", PATHS)
def test_strided_batched_arguments(monkeypatch, compiled):
    """A strided batch: cublasGemmStridedBatchedEx gets the batch strides and count as fixed arguments."""
    probe = CGemm(monkeypatch, "cublasGemmStridedBatchedEx", 23)
    _launch(monkeypatch, compiled, 3).run(9, 0x1000, 0x2000, 0x3000, 0xA0, 0xB0)
    assert probe.calls[0] == (
        9, 1, 0, 4, 5, 6, 0xA0, 0x1000, 0, 4, 24, 0x2000, 0, 6, 30, 0xB0, 0x3000, 0, 4, 20, 3, 68, MASK,
    )  # fmt: skip
    assert len(probe.calls) == 2


@pytest.mark.parametrize("compiled", PATHS)
def test_failure_status_raises_cublas_error(monkeypatch, compiled):
    """A nonzero status raises cuBLASError with that status on either path."""
    CGemm(monkeypatch, "cublasGemmEx", 19, status=7)
    with pytest.raises(cublas.cuBLASError) as info:
        _launch(monkeypatch, compiled, 1).run(9, 1, 2, 3, 4, 5)
    assert info.value.status == 7


def test_python_binding_keeps_the_pure_caller(monkeypatch):
    """A Python function in the binding (a fake GPU) keeps the pure caller, which calls it."""
    seen = []
    monkeypatch.setattr(cublas, "_p_cublasGemmEx", lambda *args: seen.append(args) or 0)
    launch = _launch(monkeypatch, FastCall is not None, 1)
    assert FastCall is None or not isinstance(launch.call, FastCall)
    launch.run(9, 1, 2, 3, 4, 5)
    assert len(seen) == 2 and seen[0][0] == 9
