"""Hostile arguments to the checked bindings are refused before the C call: an int subclass with
rigged comparisons is checked by its real value (operator.index), a path with an embedded NUL is a
ValueError (as open()), a second destroy of a handle is a ValueError instead of a process abort,
cuFFT plans of an impossible size or type are refused, and a library status that means "no GPU"
says so. CPU: the C entry points are replaced by stubs where a call must be made."""

from __future__ import annotations

import pytest

from nvmath._errors import CudaLibraryError
from nvmath.bindings import _loader, cublas, cublasLt, cufft, cusolverDn


class Rigged(int):
    """An int that claims to be inside every range."""

    def __le__(self, other):
        return True

    def __ge__(self, other):
        return True

    def __lt__(self, other):
        return False

    def __gt__(self, other):
        return False


@pytest.mark.parametrize("value", [Rigged(-1), Rigged(2**64), Rigged(-(2**70))])
def test_rigged_int_subclass_is_checked_by_its_value(value, monkeypatch):
    """The range check applies to operator.index(value): -1 never reaches C as 2**64 - 1."""
    called = []
    monkeypatch.setattr(cublasLt, "_p_cublasLtDestroy", lambda h: called.append(h) or 0)
    with pytest.raises(OverflowError, match="light_handle"):
        cublasLt.destroy(value)
    assert called == []


def test_int_subclass_in_range_reaches_c_as_a_plain_int(monkeypatch):
    """A well-behaved IntEnum member passes, converted to its int value."""
    seen = []
    monkeypatch.setattr(cufft, "_p_cufftPlan1d", lambda plan, nx, t, b: seen.append((nx, t, b)) or 0)
    monkeypatch.setattr(cufft, "_handles", {"destroy": _loader.HandleRegistry("cufft.destroy")})
    cufft.plan1d(8, cufft.Type.C2C, 1)
    assert seen == [(8, 0x29, 1)] and type(seen[0][1]) is int


@pytest.mark.parametrize("path", ["log\0.txt", b"log\0.txt"])
def test_embedded_nul_in_a_path_is_refused(path, monkeypatch):
    """A str or bytes path with a NUL is a ValueError, as open() does, and never reaches C."""
    monkeypatch.setattr(cublasLt, "_p_cublasLtLoggerOpenFile", lambda p: pytest.fail("reached C"))
    with pytest.raises(ValueError, match="embedded NUL"):
        cublasLt.logger_open_file(path)
    with pytest.raises(ValueError, match="embedded NUL"):
        _loader.c_string(path, "f", "p")


@pytest.mark.parametrize(
    ("module", "symbol", "destroy"),
    [
        (cublasLt, "_p_cublasLtDestroy", "destroy"),
        (cublasLt, "_p_cublasLtMatmulDescDestroy", "matmul_desc_destroy"),
        (cublas, "_p_cublasDestroy_v2", "destroy"),
        (cusolverDn, "_p_cusolverDnDestroy", "destroy"),
        (cufft, "_p_cufftDestroy", "destroy"),
    ],
)
def test_second_destroy_is_refused(module, symbol, destroy, monkeypatch):
    """Destroying a handle twice raises ValueError before the library is called again; a handle the
    module creates again (an address reused) can be destroyed again."""
    calls = []
    monkeypatch.setattr(module, symbol, lambda h: calls.append(h) or 0)
    registry = _loader.HandleRegistry(f"{module.__name__}.{destroy}")
    monkeypatch.setitem(module._handles, destroy, registry)
    fn = getattr(module, destroy)
    fn(4096)
    with pytest.raises(ValueError, match="already destroyed"):
        fn(4096)
    assert calls == [4096]
    registry.created(4096)  # what the create wrapper records
    fn(4096)
    assert calls == [4096, 4096]


def test_every_create_registers_with_its_destroy():
    """Each create/destroy pair of the generated modules shares one registry key."""
    assert set(cublasLt._handles) >= {"destroy", "matmul_desc_destroy", "matrix_layout_destroy"}
    assert set(cusolverDn._handles) >= {"destroy", "destroy_params", "destroy_syevj_info"}
    assert set(cufft._handles) == {"destroy"} and set(cublas._handles) == {"destroy"}


@pytest.mark.parametrize(
    ("args", "match"),
    [
        ((-5, 0x29, 1), "nx=-5 must be at least 1"),
        ((0, 0x29, 1), "nx=0"),
        ((8, 7, 1), "type=7 is not a cufftType"),
        ((8, 0x29, 0), "batch=0"),
    ],
)
def test_fft_plan_arguments_are_refused_before_the_call(args, match, monkeypatch):
    """plan1d of size -5, an invalid type or batch 0: ValueError naming the parameter, no C call."""
    monkeypatch.setattr(cufft, "_p_cufftPlan1d", lambda *a: pytest.fail("reached C"))
    with pytest.raises(ValueError, match=match):
        cufft.plan1d(*args)


@pytest.mark.parametrize("available", [False, True])
def test_no_gpu_hint_only_when_there_is_none(available, monkeypatch):
    """NOT_INITIALIZED / INTERNAL_ERROR say that no GPU or driver was found -- only when that is true;
    the error type and .status are unchanged."""
    from nvmath._internal import devices

    monkeypatch.setattr(devices, "gpu_available", lambda: available)
    for error, status in ((cublasLt.cuBLASLtError, 1), (cusolverDn.cuSOLVERError, 1), (cufft.cuFFTError, 5)):
        exc = error(status)
        assert isinstance(exc, CudaLibraryError) and exc.status == status
        assert ("no NVIDIA GPU or CUDA driver was found" in str(exc)) is not available
    assert "no NVIDIA GPU" not in str(cufft.cuFFTError(2))  # CUFFT_ALLOC_FAILED: not a device problem


@pytest.mark.gpu
def test_double_destroy_of_a_real_handle_is_refused():
    """With a GPU: create, destroy, destroy again -> ValueError, the process lives."""
    for module in (cublasLt, cublas, cusolverDn):
        handle = module.create()
        module.destroy(handle)
        with pytest.raises(ValueError, match="already destroyed"):
            module.destroy(handle)
    plan = cufft.plan1d(16, cufft.Type.C2C, 1)
    cufft.destroy(plan)
    with pytest.raises(ValueError, match="already destroyed"):
        cufft.destroy(plan)
