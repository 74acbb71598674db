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


# ------------------------------------------------------------------------------------ RoutineLaunch
def _symm(monkeypatch, compiled: bool):
    from nvmath.linalg.generic._launch import RoutineLaunch

    monkeypatch.setattr(fastpath, "_COMPILED", FastCall if compiled else None)
    # ssymm(handle, side, uplo, m, n, alpha, a, lda, b, ldb, beta, c, ldc): per call handle, alpha, a, b,
    # beta, c
    return RoutineLaunch("ssymm", (0, 1, 0, 4, 5, 0, 0, 4, 0, 4, 0, 0, 4), (0, 5, 6, 8, 10, 11))


@pytest.mark.parametrize("compiled", PATHS)
def test_routine_launch_fills_the_slots_of_its_fixed_arguments(monkeypatch, compiled):
    """A structured routine's launch (ssymm here) passes its fixed arguments with the call's values in the
    slot positions, on the compiled and the pure path alike, once per call."""
    probe = CGemm(monkeypatch, "cublasSsymm_v2", 13)
    launch = _symm(monkeypatch, compiled)
    assert isinstance(launch.call, FastCall) == compiled if FastCall is not None else True
    launch.call(9, 0xA0, 0x1000, 0x2000, 0xB0, 0x3000)
    launch.call(8, 0xA0, 0x1100, 0x2100, 0xB0, 0x3100)
    assert probe.calls == [
        (9, 1, 0, 4, 5, 0xA0, 0x1000, 4, 0x2000, 4, 0xB0, 0x3000, 4),
        (8, 1, 0, 4, 5, 0xA0, 0x1100, 4, 0x2100, 4, 0xB0, 0x3100, 4),
    ]


@pytest.mark.parametrize("compiled", PATHS)
def test_routine_launch_failure_status_raises_cublas_error(monkeypatch, compiled):
    """A nonzero status of the routine raises cuBLASError with that status on either path."""
    CGemm(monkeypatch, "cublasSsymm_v2", 13, status=13)
    with pytest.raises(cublas.cuBLASError) as info:
        _symm(monkeypatch, compiled).call(9, 1, 2, 3, 4, 5)
    assert info.value.status == 13


def _grouped(monkeypatch, compiled: bool):
    from nvmath.linalg.generic._launch import RoutineLaunch

    monkeypatch.setattr(fastpath, "_COMPILED", FastCall if compiled else None)
    ints = [(ctypes.c_int * 2)(v, v + 1) for v in (10, 20, 30, 40, 50, 60, 70, 80, 90)]
    ta, tb, ms, ns, ks, l1s, l2s, lds, sizes = ints
    fixed = (0, ta, tb, ms, ns, ks, 0xAA, 0, l1s, 0, l2s, 0xBB, 0, lds, 2, sizes)
    return RoutineLaunch("sgemm_grouped_batched", fixed, (0, 7, 9, 12)), ints


@needs_extension
def test_grouped_launch_passes_its_arrays_by_address_when_compiled(monkeypatch):
    """The grouped GEMM's launch gives the compiled caller its C int arrays as their addresses (the launch
    keeps the arrays alive) and the call's handle and pointer-array addresses in their slots."""
    probe = CGemm(monkeypatch, "cublasSgemmGroupedBatched", 16)
    launch, ints = _grouped(monkeypatch, True)
    assert isinstance(launch.call, FastCall)
    del ints[:]  # the launch holds the arrays
    import gc

    gc.collect()
    launch.call(9, 0x1000, 0x2000, 0x3000)
    (args,) = probe.calls
    assert (args[0], args[6], args[7], args[9], args[11], args[12], args[14]) == (
        9, 0xAA, 0x1000, 0x2000, 0xBB, 0x3000, 2,
    )  # fmt: skip
    arrays = [args[i] for i in (1, 2, 3, 4, 5, 8, 10, 13, 15)]
    seen = [tuple((ctypes.c_int * 2).from_address(a)) for a in arrays]
    assert seen == [(v, v + 1) for v in (10, 20, 30, 40, 50, 60, 70, 80, 90)]


def test_grouped_launch_pure_path_passes_the_arrays(monkeypatch):
    """On the pure path (a Python function in the binding) the grouped launch passes the ctypes arrays
    themselves, with the call's values in the slots."""
    seen = []
    monkeypatch.setattr(cublas, "_p_cublasSgemmGroupedBatched", lambda *args: seen.append(args) or 0)
    launch, ints = _grouped(monkeypatch, FastCall is not None)
    assert FastCall is None or not isinstance(launch.call, FastCall)
    launch.call(9, 0x1000, 0x2000, 0x3000)
    (args,) = seen
    assert args[0] == 9 and (args[7], args[9], args[12]) == (0x1000, 0x2000, 0x3000)
    assert args[1] is ints[0] and args[15] is ints[8]


def test_routine_launch_of_an_unknown_routine_raises():
    """A routine the binding does not have is an AttributeError when the launch is built, not at a call."""
    from nvmath.linalg.generic._launch import RoutineLaunch

    with pytest.raises(AttributeError):
        RoutineLaunch("nosuchgemm", (0,), (0,))


@pytest.mark.parametrize("count", [1, 3, 4, 5, 6, 7])
def test_pure_caller_places_each_value_at_its_slot(count):
    """The pure path's caller (any number of slots; 4, 5 and 6 have loop-free callers) passes the fixed
    arguments with the call's values at the slot positions, and leaves the template unchanged for the
    next call."""
    from nvmath.linalg.generic._launch import _pure_caller

    seen = []
    template = list(range(100, 112))
    slots = tuple(range(1, 12, 2))[:count] if count <= 6 else (0, 2, 3, 5, 7, 9, 11)
    call = _pure_caller(lambda *args: seen.append(args), template, slots)
    for base in (0, 50):
        call(*(base + i for i in range(len(slots))))
    for base, args in zip((0, 50), seen):
        expected = list(range(100, 112))
        for i, position in enumerate(slots):
            expected[position] = base + i
        assert list(args) == expected
    assert template == list(range(100, 112))
