"""Status -> exception mapping: a failure status raises the library's error with ``.status`` and the
status name in the message."""

from __future__ import annotations

import pickle

import pytest

from nvmath._errors import CudaLibraryError
from nvmath.bindings import cublas, cublasLt, cufft, cusolver, cusolverDn

ERRORS = [
    (cublasLt.cuBLASLtError, 7, "CUBLAS_STATUS_INVALID_VALUE"),
    (cublas.cuBLASError, 15, "CUBLAS_STATUS_NOT_SUPPORTED"),
    (cufft.cuFFTError, 1, "CUFFT_INVALID_PLAN"),
    (cusolver.cuSOLVERError, 9, "CUSOLVER_STATUS_NOT_SUPPORTED"),
]


@pytest.mark.parametrize(("error", "status", "name"), ERRORS)
def test_error_carries_status_and_name(error: type, status: int, name: str) -> None:
    """Each library error is a CudaLibraryError with ``.status``, ``.status_name`` and both in the message."""
    exc = error(status)
    assert isinstance(exc, CudaLibraryError)
    assert exc.status == status and exc.status_name == name
    assert name in str(exc) and f"({status})" in str(exc)


@pytest.mark.parametrize(("error", "status", "name"), ERRORS)
def test_error_pickles(error: type, status: int, name: str) -> None:
    """Errors survive pickling (for multiprocessing) with their status."""
    exc = pickle.loads(pickle.dumps(error(status)))
    assert type(exc) is error and exc.status == status and exc.status_name == name


def test_unknown_status_is_reported_by_number() -> None:
    """A status the headers do not know still raises, reported by its number."""
    exc = cufft.cuFFTError(1234)
    assert exc.status == 1234 and "1234" in str(exc)


def test_cublaslt_error_suggests_logging() -> None:
    """The cuBLASLt message points at CUBLASLT_LOG_LEVEL=5."""
    assert "CUBLASLT_LOG_LEVEL=5" in str(cublasLt.cuBLASLtError(7))


def test_cusolverdn_shares_the_cusolver_error() -> None:
    """cusolverDn raises the cuSOLVERError class of the shared cusolver module."""
    assert cusolverDn.cuSOLVERError is cusolver.cuSOLVERError
    assert cusolverDn.Status is cusolver.Status


@pytest.mark.parametrize(
    ("call", "error", "name"),
    [
        (lambda: cublasLt.get_property(99), cublasLt.cuBLASLtError, "CUBLAS_STATUS_INVALID_VALUE"),
        (lambda: cublas.get_property(99), cublas.cuBLASError, "CUBLAS_STATUS_INVALID_VALUE"),
        (lambda: cufft.set_auto_allocation(12345, 0), cufft.cuFFTError, "CUFFT_INVALID_PLAN"),
        (lambda: cusolver.get_property(99), cusolver.cuSOLVERError, "CUSOLVER_STATUS_INVALID_VALUE"),
    ],
    ids=["cublasLt", "cublas", "cufft", "cusolver"],
)
def test_failing_call_raises_library_error(call, error: type, name: str) -> None:
    """A real call returning a failure status raises the library's error (no GPU needed)."""
    with pytest.raises(error) as info:
        call()
    assert info.value.status_name == name


def test_failing_cusolverdn_call_raises() -> None:
    """A cusolverDn call with an invalid argument raises cuSOLVERError INVALID_VALUE."""
    params = cusolverDn.create_params()
    try:
        with pytest.raises(cusolver.cuSOLVERError) as info:
            cusolverDn.set_adv_options(params, 999, cusolver.AlgMode.ALG_0)
        assert info.value.status == cusolver.Status.INVALID_VALUE
    finally:
        cusolverDn.destroy_params(params)
