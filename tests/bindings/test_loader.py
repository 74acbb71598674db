"""Lazy loading and symbol resolution: version queries, library info, missing library / symbol
errors, thread-safe first calls, argument conversions and per-call cost."""

from __future__ import annotations

import ctypes
import threading

import numpy as np
import pytest
from call_profile import c_calls, profile_calls, python_calls

from nvmath._errors import FunctionNotFoundError, LibraryNotFoundError
from nvmath.bindings import _loader, cublas, cublasLt, cufft, cusolver, cusolverDn


def test_version_queries() -> None:
    """get_version() of cuBLASLt, cuFFT and cuSOLVER agree with the loaded library's properties."""
    for module, version, scale in (
        (cublasLt, cublasLt.get_version(), (10000, 100)),
        (cufft, cufft.get_version(), (1000, 100)),
        (cusolver, cusolver.get_version(), (1000, 100)),
    ):
        major = module.get_property(module.LibraryPropertyType.MAJOR_VERSION)
        minor = module.get_property(module.LibraryPropertyType.MINOR_VERSION)
        assert version // scale[0] == major
        assert version % scale[0] // scale[1] == minor
    assert cublas.get_property(cublas.LibraryPropertyType.MAJOR_VERSION) >= 12


def test_library_info_and_loaded_libraries() -> None:
    """library_info() loads on demand and reports path and version; loaded_libraries() lists it."""
    info = _loader.library_info("cufft")
    assert info["path"] and "cufft" in info["path"]
    assert info["version"].count(".") == 2 and info["version"].startswith(str(cufft.get_version() // 1000))
    assert "cufft" in _loader.loaded_libraries()
    with pytest.raises(ValueError, match="unknown library"):
        _loader.library_info("cudnn")


@pytest.fixture
def fresh_cufft(monkeypatch: pytest.MonkeyPatch):
    """cuFFT as if never loaded: a fresh library object and unresolved stubs (restored afterwards)."""
    monkeypatch.setitem(_loader._LIBRARIES, "cufft", _loader._Library(_loader._SPECS["cufft"]))
    cufft._bind.unresolve()
    yield
    cufft._bind.unresolve()


def test_missing_library_error(fresh_cufft, monkeypatch: pytest.MonkeyPatch) -> None:
    """A library pathfinder cannot find raises LibraryNotFoundError naming it, the search and the fix."""
    from cuda.pathfinder import DynamicLibNotFoundError

    def not_found(name: str):
        raise DynamicLibNotFoundError(f"Failure finding lib{name}.so: searched site-packages/nvidia/cu13/lib")

    monkeypatch.setattr(_loader, "_pathfinder_load", not_found)
    with pytest.raises(LibraryNotFoundError) as info:
        cufft.get_version()
    message = str(info.value)
    assert "cuFFT" in message and "libcufft" in message
    assert "searched site-packages/nvidia/cu13/lib" in message
    assert "pip install nvidia-cufft" in message
    assert not isinstance(info.value, FunctionNotFoundError)


def test_missing_symbol_error_only_when_called() -> None:
    """A symbol the library lacks fails at call time with FunctionNotFoundError saying what to upgrade."""
    namespace: dict = {}
    bind = _loader.binder("cublasLt", namespace, "cuBLASLt 99.1.0")
    stub = bind("cublasLtNotInThisVersion", ctypes.c_int, ())
    namespace["_p_cublasLtNotInThisVersion"] = stub  # binding creates no error ...
    with pytest.raises(FunctionNotFoundError) as info:  # ... calling does
        stub()
    message = str(info.value)
    loaded = _loader.library_info("cublasLt")
    assert "cublasLtNotInThisVersion" in message
    assert loaded["path"] in message and f"cuBLASLt {loaded['version']} loaded" in message
    assert "cuBLASLt 99.1.0 headers" in message and "nvidia-cublas" in message
    assert isinstance(info.value, LibraryNotFoundError)


def test_first_calls_from_threads_resolve_once(fresh_cufft, monkeypatch: pytest.MonkeyPatch) -> None:
    """8 threads making the first call together load the library once and resolve the symbol once."""
    loads, resolves = [], []
    real_load, real_resolve = _loader._pathfinder_load, _loader._Library.resolve

    def counting_load(name):
        loads.append(name)
        return real_load(name)

    def counting_resolve(self, symbol, *args):
        resolves.append(symbol)
        return real_resolve(self, symbol, *args)

    monkeypatch.setattr(_loader, "_pathfinder_load", counting_load)
    monkeypatch.setattr(_loader._Library, "resolve", counting_resolve)
    barrier = threading.Barrier(8)
    results, errors = [], []

    def first_call():
        barrier.wait()
        try:
            results.append(cufft.get_version())
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=first_call) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors and len(results) == 8 and len(set(results)) == 1
    assert loads == ["cufft"]
    assert resolves.count("cufftGetVersion") == 1


def test_symbols_missing_from_loaded_library_fail_only_when_called() -> None:
    """Bound functions the loaded (older) library lacks raise FunctionNotFoundError when called."""
    for module in (cublasLt, cublas, cufft, cusolverDn):
        library = _loader._library(module._bind.library).cdll()
        symbols = sorted(name[3:] for name in vars(module) if name.startswith("_p_"))
        missing = [symbol for symbol in symbols if not hasattr(library, symbol)]
        for symbol in missing:
            with pytest.raises(FunctionNotFoundError, match=symbol):
                getattr(module, "_p_" + symbol)()  # resolution fails before any argument is used


def test_resolved_function_replaces_the_stub() -> None:
    """After the first call the module global is the ctypes function itself: no per-call indirection."""
    cublasLt.get_version()
    function = cublasLt._p_cublasLtGetVersion
    assert isinstance(function, ctypes._CFuncPtr)
    assert function.restype is ctypes.c_size_t and function.argtypes == ()


def test_pointer_arguments_take_ints_and_index_objects_only() -> None:
    """Handles and pointers are ints (or ``__index__`` objects, or None for NULL); nothing else converts."""
    check = _loader.check_argument
    assert check(5, "ptr", "f(): parameter p") == 5 and check(None, "ptr", "w") == 0
    assert check(np.uint64(7), "ptr", "w") == 7
    for bad in ("x", b"x", 3.5, np.zeros(4), object()):
        with pytest.raises(TypeError, match="f\\(\\): parameter p must be an int"):
            check(bad, "ptr", "f(): parameter p")
    for bad in (-1, 2**64):
        with pytest.raises(OverflowError, match="f\\(\\): parameter p="):
            check(bad, "ptr", "f(): parameter p")


def test_integer_arguments_are_range_checked() -> None:
    """An integer argument outside its C type's range, or a float, is refused (never wrapped or truncated)."""
    check = _loader.check_argument
    assert check(2**31 - 1, "i32", "w") == 2**31 - 1 and check(True, "u8", "w") == 1
    for value, kind in ((2**31, "i32"), (-(2**31) - 1, "i32"), (-1, "u64"), (2**64, "u64"), (256, "u8")):
        with pytest.raises(OverflowError, match="out of range"):
            check(value, kind, "w")
    with pytest.raises(TypeError, match="float"):
        check(3.7, "i64", "w")
    with pytest.raises(TypeError, match="real number"):
        check("1.5", "f64", "w")


def test_wrong_argument_type_raises_type_error() -> None:
    """An argument of the wrong type raises TypeError naming the function and the parameter."""
    with pytest.raises(TypeError, match=r"cublasLt.matrix_layout_destroy\(\): parameter mat_layout"):
        cublasLt.matrix_layout_destroy(object())


def test_input_arrays_and_strings() -> None:
    """Input arrays take a sequence (copied into a C array) or an address; strings are encoded."""
    convert = _loader.int_array(ctypes.c_longlong)
    array = convert([3, 4, 5])
    assert list(array) == [3, 4, 5] and isinstance(array, ctypes.Array)
    assert convert(1234) == 1234 and convert(None) is None
    assert list(convert(np.array([1, 2]))) == [1, 2]
    with pytest.raises(TypeError, match=r"g\(\): parameter n\[1\]"):
        convert([1, 2.5], "g", "n")
    with pytest.raises(OverflowError, match=r"g\(\): parameter n\[0\]"):
        convert([2**63], "g", "n")
    assert _loader.c_string("log.txt") == b"log.txt" and _loader.c_string(None) is None


def test_bound_call_is_the_wrapper_and_the_c_function() -> None:
    """After the first call resolves a symbol, a call is the generated wrapper and the ctypes function
    alone: the lazy stub is replaced, no checking or retry helper runs for valid arguments, and the
    only other C calls are ``operator.index`` of each integer argument (the range check) and the
    ``byref`` of an output parameter. (The per-call cost is measured by the
    benchmarks' overhead/binding-call row.)"""
    cublasLt.get_version()
    assert cublasLt._p_cublasLtGetVersion is not cublasLt._bind.stubs["_p_cublasLtGetVersion"]
    events = profile_calls(lambda: cublasLt.get_version())
    assert python_calls(events) == ["get_version"] and c_calls(events) == []
    layout = cublasLt.matrix_layout_create(cublas.CudaDataType.R_32F, 8, 8, 8)
    try:
        buf = np.zeros(1, np.uint64)
        ptr = buf.ctypes.data
        assert cublasLt.matrix_layout_get_attribute(layout, 2, ptr, 8) == 8
        events = profile_calls(lambda: cublasLt.matrix_layout_get_attribute(layout, 2, ptr, 8))
    finally:
        cublasLt.matrix_layout_destroy(layout)
    assert python_calls(events) == ["matrix_layout_get_attribute"]
    assert c_calls(events) == ["index"] * 4 + ["byref"]
    assert int(buf[0]) == 8  # the attribute read (rows) came back through the pointer


def test_distributed_wheel_found_on_sys_path(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    """An engine wheel installed with --target on PYTHONPATH (the GPU machines' way, invisible to
    cuda.pathfinder) is found under ``nvidia/<wheel>/lib`` of a sys.path entry, ahead of pathfinder;
    with neither, the error names the ``[distributed]`` extra."""
    import ctypes.util
    import shutil
    import sys
    from pathlib import Path

    monkeypatch.setitem(_loader._LIBRARIES, "nccl", _loader._Library(_loader._SPECS["nccl"]))

    def not_found(name: str):
        raise RuntimeError(f"Failure finding lib{name}")

    monkeypatch.setattr(_loader, "_pathfinder_load", not_found)
    # no sys.path entry holds the wheel (the GPU machines have torch's NCCL wheel on the real path)
    monkeypatch.setattr(sys, "path", [str(tmp_path / "empty")])
    with pytest.raises(LibraryNotFoundError, match=r"pip install nvmath-kit\[distributed\]"):
        _loader.library_info("nccl")
    monkeypatch.setitem(_loader._LIBRARIES, "nccl", _loader._Library(_loader._SPECS["nccl"]))
    stand_in = ctypes.util.find_library("m")  # any loadable shared object stands in for libnccl
    if stand_in is None:
        pytest.skip("no libm to stand in for libnccl")
    lib_dir = tmp_path / "nvidia" / "nccl" / "lib"
    lib_dir.mkdir(parents=True)
    source = next(p for d in ("/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib64")
                  if (p := Path(d) / stand_in).exists())  # fmt: skip
    shutil.copy(source, lib_dir / "libnccl.so.2")
    monkeypatch.setattr(sys, "path", [str(tmp_path)])
    info = _loader.library_info("nccl")
    assert info["path"] == str(lib_dir / "libnccl.so.2")
    assert info["found_via"] == "nvidia namespace package on sys.path"


def test_cufftmp_is_loaded_deepbind_and_local(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    """libcufftMp (which exports the whole cuFFT API and calls it through its PLT) is opened
    RTLD_LOCAL | RTLD_DEEPBIND, so that a libcufft already global in the process (nvmath.fft,
    torch.fft) cannot capture cuFFTMp's internal calls, nor cuFFTMp capture libcufft's; its NVSHMEM
    dependency is loaded first; NVMATH_CUFFTMP_DLOPEN=global restores RTLD_GLOBAL; the other engine
    wheels stay RTLD_GLOBAL."""
    import os
    import sys

    if not hasattr(os, "RTLD_DEEPBIND"):
        pytest.skip("no RTLD_DEEPBIND on this platform")
    for name, relative in (("cufftMp", "cufftmp/cu13/lib/libcufftMp.so.12"),
                           ("nvshmem_host", "nvshmem/lib/libnvshmem_host.so.3")):  # fmt: skip
        path = tmp_path / "nvidia" / relative
        path.parent.mkdir(parents=True)
        path.write_bytes(b"")
    opened = []

    class Recorder:
        def __init__(self, path, mode=0, **_):
            self._name = path
            opened.append((os.path.basename(path), mode))

    for name in ("cufftMp", "nvshmem_host"):
        monkeypatch.setitem(_loader._LIBRARIES, name, _loader._Library(_loader._SPECS[name]))
    monkeypatch.setattr(_loader.ctypes, "CDLL", Recorder)
    monkeypatch.setattr(sys, "path", [str(tmp_path)])
    monkeypatch.delenv("NVMATH_CUFFTMP_DLOPEN", raising=False)
    _loader._library("cufftMp").cdll()
    deep = os.RTLD_NOW | os.RTLD_LOCAL | os.RTLD_DEEPBIND
    assert opened == [("libnvshmem_host.so.3", ctypes.RTLD_GLOBAL), ("libcufftMp.so.12", deep)]
    mode = _loader.dlopen_mode("cufftMp")
    assert mode & os.RTLD_DEEPBIND and not mode & os.RTLD_GLOBAL
    monkeypatch.setenv("NVMATH_CUFFTMP_DLOPEN", "global")
    assert _loader.dlopen_mode("cufftMp") == ctypes.RTLD_GLOBAL
    assert _loader.dlopen_mode("nccl") == _loader.dlopen_mode("cublasmp") == ctypes.RTLD_GLOBAL


def test_bound_address_reads_what_the_generated_binding_calls(monkeypatch) -> None:
    """bound_address gives the C address a generated module's ``_p_<symbol>`` calls now (a ctypes
    function put there), ``None`` for a Python replacement; a binder made over another namespace (as
    above) does not replace the generated module's in the registry."""
    from nvmath.bindings import cublasLt

    _loader.binder("cublasLt", {}, "cuBLASLt 99.1.0")  # a test namespace: not registered
    cfunc = ctypes.CFUNCTYPE(ctypes.c_int)(lambda: 0)
    monkeypatch.setattr(cublasLt, "_p_cublasLtMatmul", cfunc)
    assert _loader.bound_address("cublasLt", "cublasLtMatmul") == ctypes.cast(cfunc, ctypes.c_void_p).value
    monkeypatch.setattr(cublasLt, "_p_cublasLtMatmul", lambda *args: 0)
    assert _loader.bound_address("cublasLt", "cublasLtMatmul") is None
    assert _loader.bound_address("not-a-library", "f") is None


def test_bound_address_is_remembered_per_installed_function(monkeypatch) -> None:
    """The address is computed once per function installed at ``_p_<symbol>`` (no ctypes.cast on later
    asks), and computed again when another function is installed there."""
    from nvmath.bindings import cublasLt

    first = ctypes.CFUNCTYPE(ctypes.c_int)(lambda: 0)
    second = ctypes.CFUNCTYPE(ctypes.c_int)(lambda: 1)
    monkeypatch.setattr(cublasLt, "_p_cublasLtMatmul", first)
    expected = ctypes.cast(first, ctypes.c_void_p).value
    assert _loader.bound_address("cublasLt", "cublasLtMatmul") == expected
    casts = []
    cast = ctypes.cast
    monkeypatch.setattr(ctypes, "cast", lambda *args: casts.append(args) or cast(*args))
    assert _loader.bound_address("cublasLt", "cublasLtMatmul") == expected
    assert casts == []
    monkeypatch.setattr(cublasLt, "_p_cublasLtMatmul", second)
    assert _loader.bound_address("cublasLt", "cublasLtMatmul") == cast(second, ctypes.c_void_p).value
    assert len(casts) == 1
    monkeypatch.setattr(cublasLt, "_p_cublasLtMatmul", lambda *args: 0)
    assert _loader.bound_address("cublasLt", "cublasLtMatmul") is None
