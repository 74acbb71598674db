"""The unchecked entries (``nvmath.bindings._unchecked.<module>``, generated): one per checked
function, the same C call and return value, a failure status raising the library's typed error,
arguments ctypes refuses handed to the checked function, the checked module's symbols (resolved or
replaced) used at call time, and nothing imported or loaded until a hot path asks. No GPU needed:
the libraries load on the CPU and answer these calls without a device."""

from __future__ import annotations

import importlib
import inspect
import subprocess
import sys

import numpy as np
import pytest

from nvmath.bindings import cublas, cublasLt, cufft, cusolver, cusolverDn

MODULES = ("cublasLt", "cublas", "cufft", "cusolverDn", "cusolver")


def _pair(name: str):
    checked = importlib.import_module(f"nvmath.bindings.{name}")
    return checked, importlib.import_module(f"nvmath.bindings._unchecked.{name}")


def _parameters(fn) -> list[str]:
    code = fn.__code__
    return list(code.co_varnames[: code.co_argcount])


@pytest.mark.parametrize("name", MODULES)
def test_every_checked_function_has_an_unchecked_twin(name: str) -> None:
    """Each function of the checked module (every ``_ARG_KINDS`` entry) has an unchecked function of
    the same name and positional parameters (named, or listed in the docstring of a ``*args`` one),
    and ``__all__`` lists exactly them."""
    checked, unchecked = _pair(name)
    assert unchecked.__all__ == sorted(checked._ARG_KINDS)
    for fname in checked._ARG_KINDS:
        fn, ref = getattr(unchecked, fname), getattr(checked, fname)
        assert fn.__name__ == fname and fn.__module__ == unchecked.__name__
        params = _parameters(ref)
        if fn.__code__.co_flags & inspect.CO_VARARGS:
            assert _parameters(fn) == [] and params, fname
            assert f"({', '.join(params)})" in " ".join(fn.__doc__.split()), fname
        else:
            assert _parameters(fn) == params, fname


@pytest.mark.parametrize("name", MODULES)
def test_unchecked_functions_read_the_checked_module_globals(name: str) -> None:
    """Every unchecked function runs with the checked module's globals, and every module-level name
    its body reads (``_p_<symbol>``, ``_raise``, ``_byref``, ctypes aliases) exists there; the
    fallback ``_checked`` is the checked function."""
    checked, unchecked = _pair(name)
    shared = vars(checked)
    for fname in unchecked.__all__:
        fn = getattr(unchecked, fname)
        assert fn.__globals__ is shared, fname
        missing = [n for n in fn.__code__.co_names if n.startswith("_") and n not in shared]
        assert not missing, (fname, missing)
        if fn.__kwdefaults__:
            assert fn.__kwdefaults__ == {"_checked": getattr(checked, fname)}, fname


@pytest.mark.parametrize(
    ("call", "error", "status_name"),
    [
        (lambda u: u.cublasLt.get_property(99), cublasLt.cuBLASLtError, "CUBLAS_STATUS_INVALID_VALUE"),
        (lambda u: u.cublasLt.matmul(*[0] * 16), cublasLt.cuBLASLtError, "CUBLAS_STATUS_NOT_INITIALIZED"),
        (lambda u: u.cublas.get_property(99), cublas.cuBLASError, "CUBLAS_STATUS_INVALID_VALUE"),
        (lambda u: u.cufft.set_auto_allocation(12345, 0), cufft.cuFFTError, "CUFFT_INVALID_PLAN"),
        (lambda u: u.cusolver.get_property(99), cusolver.cuSOLVERError, "CUSOLVER_STATUS_INVALID_VALUE"),
    ],
    ids=["cublasLt", "cublasLt-matmul", "cublas", "cufft", "cusolver"],
)
def test_failure_status_raises_the_library_error(call, error: type, status_name: str) -> None:
    """A real call returning a failure status raises the same typed error as the checked function
    (cublasLtMatmul with a NULL handle: NOT_INITIALIZED, no GPU needed)."""
    from nvmath.bindings import _unchecked

    for name in MODULES:
        importlib.import_module(f"nvmath.bindings._unchecked.{name}")
    with pytest.raises(error) as info:
        call(_unchecked)
    assert info.value.status_name == status_name


def test_results_equal_the_checked_functions() -> None:
    """Outputs and C return values come back as from the checked function: the version, a layout
    created unchecked and read back checked, an attribute read unchecked into our buffer."""
    from nvmath.bindings._unchecked import cublasLt as ult
    from nvmath.bindings._unchecked import cusolverDn as usdn

    assert ult.get_property(0) == cublasLt.get_property(0)
    assert ult.get_version() == cublasLt.get_version()
    assert ult.get_status_name(7) == cublasLt.get_status_name(7) == "CUBLAS_STATUS_INVALID_VALUE"
    layout = ult.matrix_layout_create(int(cublas.CudaDataType.R_32F), 64, 32, 80)
    try:
        assert cublasLt.matrix_layout_get(layout, cublasLt.MatrixLayoutAttribute.ROWS) == 64
        rows = np.zeros(1, np.uint64)
        written = ult.matrix_layout_get_attribute(layout, 3, rows.ctypes.data, 8)  # COLS
        assert (written, int(rows[0])) == (8, 32)
    finally:
        ult.matrix_layout_destroy(layout)
    params = usdn.create_params()
    try:
        usdn.set_adv_options(params, int(cusolverDn.Function.GETRF), int(cusolver.AlgMode.ALG_0))
    finally:
        usdn.destroy_params(params)


def test_arguments_ctypes_refuses_go_to_the_checked_function() -> None:
    """A float for an integer raises the checked function's TypeError naming the parameter; a numpy
    integer for a pointer (which ctypes refuses) is converted by the checked function and works."""
    from nvmath.bindings._unchecked import cublasLt as ult

    with pytest.raises(TypeError, match=r"cublasLt\.matrix_layout_create\(\): parameter rows"):
        ult.matrix_layout_create(0, 2.5, 4, 4)
    with pytest.raises(TypeError, match=r"cublasLt\.get_property\(\): parameter type"):
        ult.get_property("major")
    layout = cublasLt.matrix_layout_create(0, 16, 8, 16)
    try:
        cols = np.zeros(1, np.uint64)
        assert ult.matrix_layout_get_attribute(layout, 3, np.uint64(cols.ctypes.data), 8) == 8
        assert int(cols[0]) == 8
    finally:
        cublasLt.matrix_layout_destroy(layout)


def test_a_symbol_replaced_in_the_checked_module_is_called(monkeypatch: pytest.MonkeyPatch) -> None:
    """The unchecked function calls the checked module's current ``_p_<symbol>`` (what the fake-GPU
    tests replace) with the arguments in order, and maps its status."""
    from nvmath.bindings._unchecked import cublasLt as ult

    calls = []
    monkeypatch.setattr(cublasLt, "_p_cublasLtMatmul", lambda *args: calls.append(args) or 0)
    assert ult.matmul(*range(1, 17)) is None
    assert calls == [tuple(range(1, 17))]
    monkeypatch.setattr(cublasLt, "_p_cublasLtMatmul", lambda *args: 15)
    with pytest.raises(cublasLt.cuBLASLtError, match="CUBLAS_STATUS_NOT_SUPPORTED"):
        ult.matmul(*range(16))


def test_import_is_lazy_and_the_first_call_resolves_the_symbol() -> None:
    """``import nvmath`` imports only the unchecked module a planner uses (cuBLASLt's), loads no
    library, and an unchecked first call resolves the symbol into the checked module."""
    code = (
        "import sys, nvmath\n"
        "from nvmath.bindings import _loader, cublasLt\n"
        "loaded = sorted(m for m in sys.modules if m.startswith('nvmath.bindings._unchecked.'))\n"
        "assert loaded == ['nvmath.bindings._unchecked.cublasLt'], loaded\n"
        "assert _loader.loaded_libraries() == {}\n"
        "from nvmath.bindings._unchecked import cublasLt as ult\n"
        "assert ult.get_version() == cublasLt.get_version() > 0\n"
        "assert type(cublasLt._p_cublasLtGetVersion).__name__ != 'function'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
