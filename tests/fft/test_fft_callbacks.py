"""LTO callbacks without a GPU: DeviceCallable, symbols, compile errors (GPU runs: test_fft_gpu_callbacks).

cuFFT links a callback by name: with a NULL ``lto_callback_symbol_name`` it calls the mangled C++
name of the ``cufftXt.h`` callback type (``_Z28cufftJITCallbackStoreComplexPvy6float2S_S_``); a
name it is given is declared in a C++ shim it compiles, so it gets C++-mangled too. Callbacks
compiled under a plain C name (our old ``nvmath_fft_store_complex64``) therefore never link
(CUFFT_INVALID_SIZE / CUFFT_INTERNAL_ERROR from cuFFT 12).
"""

from __future__ import annotations

import ctypes
import importlib.util
import pickle
import re

import numpy as np
import pytest

import nvmath.fft as nf
from nvmath.fft import DeviceCallable, _cufft_plan
from nvmath.fft._callbacks import (
    CALLBACK_DTYPES,
    CompiledCallback,
    as_device_callable,
    callback_symbol,
    find_symbol,
)


def test_device_callable_from_bytes():
    """bytes give the size when the object is made (nvmath-python's default); data None is 0;
    hashable (plan keys); an empty callable keeps data None."""
    c = DeviceCallable(b"abc")
    assert (c.size, c.data, c.name) == (3, 0, None)
    assert (DeviceCallable().size, DeviceCallable().data) == (None, None)
    assert as_device_callable(c, "prolog").size == 3
    assert hash(c) == hash(DeviceCallable(bytearray(b"abc")))
    assert DeviceCallable(b"abc", data=None).data == 0


def test_device_callable_from_pointer():
    """An address needs an explicit size."""
    c = DeviceCallable(0x1000, size=64, data=0x2000)
    assert (c.ltoir, c.size, c.data) == (0x1000, 64, 0x2000)


@pytest.mark.parametrize(
    "kwargs, error, text",
    [
        ({"ltoir": b""}, ValueError, "empty"),
        ({"ltoir": b"ab", "size": 3}, ValueError, "size=3"),
        ({"ltoir": 10}, ValueError, "got None"),
        ({"ltoir": 10, "size": 0}, ValueError, "got 0"),
        ({"ltoir": "text"}, TypeError, "str"),
        ({"ltoir": b"a", "data": -1}, TypeError, "-1"),
        ({"ltoir": b"a", "data": 1.5}, TypeError, "1.5"),
        ({"ltoir": b"a", "name": ""}, TypeError, "''"),
    ],
)
def test_device_callable_validation(kwargs, error, text):
    """Bad DeviceCallable fields raise with the value in the message."""
    with pytest.raises(error, match=text):
        DeviceCallable(**kwargs)


def test_as_device_callable():
    """None, instances, dicts and bytes are accepted; other kinds and unknown keys are not."""
    assert as_device_callable(None, "prolog") is None
    c = DeviceCallable(b"x")
    snap = as_device_callable(c, "prolog")
    assert snap == DeviceCallable(b"x", size=1) and as_device_callable(c, "prolog") is snap  # one per state
    assert as_device_callable({"ltoir": b"x", "data": 8}, "prolog") == DeviceCallable(b"x", 1, data=8)
    assert as_device_callable(b"x", "prolog") == snap
    assert as_device_callable(DeviceCallable(), "prolog") is None
    compiled = CompiledCallback(b"x", kind="prolog", element_dtype="float32", symbol="s")
    assert as_device_callable(compiled, "prolog").ltoir is compiled  # keeps what it was compiled for
    with pytest.raises(TypeError, match="'code'"):
        as_device_callable({"code": b"x"}, "epilog")
    with pytest.raises(TypeError, match="list"):
        as_device_callable([b"x"], "epilog")


# What nvrtc mangles the cufftXt.h callback declarations to (checked with nvrtc + nvJitLink).
CUFFT_SYMBOLS = {
    ("prolog", "float32"): "_Z24cufftJITCallbackLoadRealPvyS_S_",
    ("prolog", "float64"): "_Z30cufftJITCallbackLoadDoubleRealPvyS_S_",
    ("prolog", "complex64"): "_Z27cufftJITCallbackLoadComplexPvyS_S_",
    ("prolog", "complex128"): "_Z33cufftJITCallbackLoadDoubleComplexPvyS_S_",
    ("epilog", "float32"): "_Z25cufftJITCallbackStoreRealPvyfS_S_",
    ("epilog", "float64"): "_Z31cufftJITCallbackStoreDoubleRealPvydS_S_",
    ("epilog", "complex64"): "_Z28cufftJITCallbackStoreComplexPvy6float2S_S_",
    ("epilog", "complex128"): "_Z34cufftJITCallbackStoreDoubleComplexPvy7double2S_S_",
}


@pytest.mark.parametrize("kind, dtype", sorted(CUFFT_SYMBOLS))
def test_callback_symbol_is_cuffts_default_mangled_name(kind, dtype):
    """compile_* name the function as cuFFT's default callback (C++ mangling, unsigned long long offset)."""
    assert callback_symbol(kind, dtype) == CUFFT_SYMBOLS[kind, dtype]


def test_default_symbol_passes_no_name():
    """Callbacks under cuFFT's default name are set with a NULL symbol name (None)."""
    assert find_symbol(DeviceCallable(b"opaque LTO-IR"), "prolog", "complex64") is None
    assert find_symbol(DeviceCallable(0x10, size=4), "epilog", "float32") is None
    visible = b"\x00" + CUFFT_SYMBOLS["prolog", "complex64"].encode() + b"\x00"
    assert find_symbol(DeviceCallable(visible), "prolog", "complex64") is None
    for name in (CUFFT_SYMBOLS["epilog", "float64"], "cufftJITCallbackStoreDoubleReal"):
        assert find_symbol(DeviceCallable(b"x", name=name), "epilog", "float64") is None


@pytest.mark.parametrize("name", ["my_cb", "_Z5my_cbPvyS_S_", "_Z2cbPvy7double2S_S_", "extern_c_cb"])
def test_custom_callback_names_are_refused(name):
    """Names other than cuFFT's defaults raise NotImplementedError when the DeviceCallable is made."""
    with pytest.raises(NotImplementedError, match=r"only cuFFT's default callback names.*cufftJITCallback"):
        DeviceCallable(b"x", name=name)


def test_callback_for_another_dtype_or_kind_is_a_value_error():
    """Compiled for another kind / dtype, or visibly defining another cuFFT callback: a clear ValueError."""
    ep64 = CompiledCallback(b"ir", kind="epilog", element_dtype="complex64", symbol="s")
    assert find_symbol(DeviceCallable(ep64), "epilog", "complex64") is None
    with pytest.raises(
        ValueError, match=r"epilog must be a callback for float32.*epilog for complex64 elements"
    ):
        find_symbol(DeviceCallable(ep64), "epilog", "float32")
    with pytest.raises(ValueError, match=r"compile_prolog\(function, 'complex64'"):
        find_symbol(DeviceCallable(ep64), "prolog", "complex64")
    visible = b"..." + CUFFT_SYMBOLS["epilog", "complex128"].encode() + b"..."
    with pytest.raises(ValueError, match=r"for complex64.*defines _Z34cufftJITCallbackStoreDoubleComplex"):
        find_symbol(DeviceCallable(visible), "epilog", "complex64")
    with pytest.raises(ValueError, match="DeviceCallable.name"):
        find_symbol(DeviceCallable(b"x", name=CUFFT_SYMBOLS["prolog", "float32"]), "prolog", "complex64")


def test_compiled_callback_is_bytes():
    """CompiledCallback is bytes (hashable, comparable, picklable) that keeps its kind and dtype."""
    c = CompiledCallback(b"ir", kind="prolog", element_dtype="float64", symbol="s")
    assert isinstance(c, bytes) and c == b"ir" and hash(c) == hash(b"ir")
    d = DeviceCallable(c)
    assert d.ltoir is c and as_device_callable(d, "prolog").size == 2 and as_device_callable(d, "prolog").ltoir is c
    back = pickle.loads(pickle.dumps(c))
    assert (back, back.kind, back.element_dtype, back.symbol) == (b"ir", "prolog", "float64", "s")


class _FakeCufft:
    XtCallbackType = _cufft_plan._cufft().XtCallbackType

    class cuFFTError(Exception):
        pass

    def __init__(self):
        self.calls = []

    def xt_set_jit_callback(self, handle, symbol, ltoir, size, cb_type, caller_info):
        cell = ctypes.c_void_p.from_address(caller_info).value
        self.calls.append((handle, symbol, ltoir, size, int(cb_type), cell))


@pytest.fixture
def fake_cufft(monkeypatch):
    lib = _FakeCufft()
    monkeypatch.setattr(_cufft_plan, "_cufft", lambda: lib)
    monkeypatch.setattr(_cufft_plan, "cufft_info", lambda: {"version": "12.0.0", "path": "/x/libcufft.so.12"})
    return lib


@pytest.mark.parametrize("dtype", CALLBACK_DTYPES)
def test_set_callback_cufft12_passes_null_name_and_type(fake_cufft, monkeypatch, dtype):
    """cuFFT 12: NULL symbol name, the LTO-IR by address (an int: the bindings take no bytes), the
    cufftXt.h callback type, caller_info -> [data]."""
    import ctypes

    monkeypatch.setattr(_cufft_plan, "_check_lto_support", lambda: {"version": "12.0.0", "path": "p"})
    keep = []
    for kind in ("prolog", "epilog"):
        cb = DeviceCallable(CompiledCallback(b"lto", kind=kind, element_dtype=dtype, symbol="s"), data=0x1234)
        assert _cufft_plan._set_callback(7, kind, cb, dtype, keep) == (kind, None, dtype)
    load = {"complex64": 0, "complex128": 1, "float32": 2, "float64": 3}[dtype]
    calls = fake_cufft.calls
    assert [c[:2] + c[3:] for c in calls] == [(7, None, 3, load, 0x1234), (7, None, 3, load + 4, 0x1234)]
    for call in calls:
        assert type(call[2]) is int and ctypes.string_at(call[2], 3) == b"lto"
    assert len(keep) == 4  # the caller_info cells and the LTO-IR buffers stay alive with the plan


def test_set_callback_error_names_the_symbol(fake_cufft, monkeypatch):
    """A refused callback raises RuntimeError naming cuFFT, the linked symbol and the dtype."""
    monkeypatch.setattr(_cufft_plan, "_check_lto_support", lambda: {"version": "12.0.0", "path": "p"})

    def refuse(*args):
        raise RuntimeError("CUFFT_INVALID_VALUE")

    monkeypatch.setattr(fake_cufft, "xt_set_jit_callback", refuse)
    with pytest.raises(
        RuntimeError,
        match=r"cuFFT 12\.0\.0 .*epilog on complex64 elements, linked as "
        + re.escape(CUFFT_SYMBOLS["epilog", "complex64"])
        + ".*CUFFT_INVALID_VALUE",
    ) as info:
        _cufft_plan._set_callback(1, "epilog", DeviceCallable(b"x"), "complex64", [])
    assert isinstance(info.value.__cause__, RuntimeError)
    with pytest.raises(ValueError, match="for float32"):  # before any cuFFT call
        _cufft_plan._set_callback(
            1,
            "epilog",
            DeviceCallable(CompiledCallback(b"x", kind="epilog", element_dtype="complex64", symbol="s")),
            "float32",
            [],
        )


def test_set_callback_cufft11_uses_the_legacy_entry_points(fake_cufft, monkeypatch):
    """cuFFT 11.x exports the 5-argument cufftXtSetJITCallback; names go to __cufftXtSetJITCallback_12_7."""
    from nvmath.bindings import _loader

    monkeypatch.setattr(_cufft_plan, "_check_lto_support", lambda: {"version": "11.4.1", "path": "p"})
    monkeypatch.setattr(_cufft_plan, "_LEGACY_SET_JIT", {})
    calls = []

    class Library:
        def resolve(self, symbol, restype, argtypes, declared_by):
            def function(*args):
                calls.append((symbol, len(argtypes), args[:-1]))
                return 0 if symbol == "cufftXtSetJITCallback" else 5

            return function

    monkeypatch.setattr(_loader, "_library", lambda name: Library())
    _cufft_plan._set_callback(3, "prolog", DeviceCallable(b"ab"), "float32", [])
    assert calls == [("cufftXtSetJITCallback", 5, (3, b"ab", 2, 2))]
    assert not fake_cufft.calls


def test_compile_rejects_bad_arguments_before_numba():
    """Bad dtypes and representations raise ValueError whether or not numba is installed."""
    with pytest.raises(ValueError, match="element_dtype.*'float16'"):
        nf.compile_prolog(lambda *a: 0, "float16", "float32")
    with pytest.raises(ValueError, match="user_info_dtype.*'int8'"):
        nf.compile_epilog(lambda *a: 0, "complex64", "int8")
    with pytest.raises(ValueError, match="'ptx'"):
        nf.compile_prolog(lambda *a: 0, "complex64", "float32", representation="ptx")
    with pytest.raises(ValueError, match="compute_capability"):
        nf.compile_prolog(lambda *a: 0, np.complex64, np.float32, compute_capability="sm90")


@pytest.mark.skipif(importlib.util.find_spec("numba") is not None, reason="numba is installed here")
def test_compile_without_numba_says_what_to_install():
    """Without numba-cuda, compiling raises RuntimeError naming the package to install."""
    with pytest.raises(RuntimeError, match="numba-cuda"):
        nf.compile_prolog(lambda d, o, u, x: d[o], "complex64", "float32", compute_capability="90")


def _numba_cuda_compiles() -> str:
    """'' when numba-cuda can compile callbacks here, else why not (CI has no numba-cuda)."""
    if importlib.util.find_spec("numba") is None:
        return "numba-cuda is not installed (pip install -e '.[callbacks]')"
    try:
        nf.compile_prolog(lambda d, o, u, x: d[o], "float32", "float32", compute_capability="90")
    except Exception as exc:  # noqa: BLE001 - any failure means: cannot check here
        return f"numba-cuda cannot compile here: {exc}"
    return ""


@pytest.fixture(scope="module")
def numba_cuda():
    reason = _numba_cuda_compiles()
    if reason:
        pytest.skip(reason)
    from numba import cuda

    return cuda


def _scale_epilog(data_out, offset, value, user_info, unused):
    data_out[offset] = value * user_info[0]


def _scale_prolog(data_in, offset, user_info, unused):
    return data_in[offset] * user_info[0]


@pytest.mark.parametrize("dtype", CALLBACK_DTYPES)
@pytest.mark.parametrize("kind", ["prolog", "epilog"])
def test_compiled_callback_defines_cuffts_symbol(numba_cuda, monkeypatch, kind, dtype):
    """The numba function is a visible device function named as cuFFT's default callback, C signature."""
    seen = {}
    real_compile = numba_cuda.compile

    def spy(function, sig, **kwargs):
        seen["ptx"] = real_compile(function, sig, **{**kwargs, "output": "ptx"})[0]
        seen["kwargs"] = kwargs
        return real_compile(function, sig, **kwargs)

    monkeypatch.setattr(numba_cuda, "compile", spy)
    function = _scale_prolog if kind == "prolog" else _scale_epilog
    ltoir = getattr(nf, f"compile_{kind}")(function, dtype, dtype, compute_capability="90")
    symbol = CUFFT_SYMBOLS[kind, dtype]
    assert isinstance(ltoir, CompiledCallback) and len(ltoir) > 100
    assert (ltoir.kind, ltoir.element_dtype, ltoir.symbol) == (kind, dtype, symbol)
    assert seen["kwargs"]["abi"] == "c" and seen["kwargs"]["output"] == "ltoir"
    header = re.search(r"\.visible \.func\s*(\([^)]*\))?\s*(\w+)\(([^)]*)\)", seen["ptx"])
    assert header and header.group(2) == symbol
    params = header.group(3).count(".param")
    # (data, offset, [element: 1 scalar or 2 halves], user_info, unused)
    assert params == 4 + (kind == "epilog") * (1 + dtype.startswith("complex"))
    assert find_symbol(DeviceCallable(ltoir), kind, dtype) is None


_CXX_TYPES = {"float32": "float", "float64": "double", "complex64": "float2", "complex128": "double2"}


def _link_like_cufft(kind: str, dtype: str, ltoir: bytes) -> tuple[bool, str]:
    """nvJitLink ``ltoir`` with a kernel calling cuFFT's callback as cufftXt.h declares it (nvrtc)."""
    try:
        from cuda.bindings import nvjitlink, nvrtc

        nvjitlink.version()
    except Exception as exc:  # noqa: BLE001
        pytest.skip(f"nvrtc / nvJitLink unavailable: {exc}")
    t = _CXX_TYPES[dtype]
    name = re.match(r"_Z\d+(cufftJITCallback[A-Za-z]+?)Pvy", callback_symbol(kind, dtype)).group(1)
    if kind == "prolog":
        src = (
            f"extern __device__ {t} {name}(void*, unsigned long long, void*, void*);\n"
            f'extern "C" __global__ void k({t}* in, {t}* out, void* info) '
            f"{{ out[threadIdx.x] = {name}(in, threadIdx.x, info, 0); }}\n"
        )
    else:
        src = (
            f"extern __device__ void {name}(void*, unsigned long long, {t}, void*, void*);\n"
            f'extern "C" __global__ void k({t}* out, {t} v, void* info) {{ {name}(out, threadIdx.x, v, info, 0); }}\n'
        )
    err, prog = nvrtc.nvrtcCreateProgram(src.encode(), b"caller.cu", 0, [], [])
    opts = [b"-dlto", b"-rdc=true", b"-arch=compute_90"]
    (err,) = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
    assert err == nvrtc.nvrtcResult.NVRTC_SUCCESS, err
    _, size = nvrtc.nvrtcGetLTOIRSize(prog)
    caller = bytearray(size)  # NVRTC writes into it: never a bytes object (one-byte bytes are shared)
    nvrtc.nvrtcGetLTOIR(prog, caller)
    caller = bytes(caller)
    nvrtc.nvrtcDestroyProgram(prog)
    handle = nvjitlink.create(2, ["-arch=sm_90", "-lto"])
    try:
        for i, blob in enumerate((caller, bytes(ltoir))):
            nvjitlink.add_data(handle, nvjitlink.InputType.LTOIR, blob, len(blob), f"in{i}")
        try:
            nvjitlink.complete(handle)
        except Exception:  # noqa: BLE001
            log = bytearray(nvjitlink.get_error_log_size(handle))
            nvjitlink.get_error_log(handle, log)
            return False, bytes(log).decode(errors="replace")
        return True, ""
    finally:
        nvjitlink.destroy(handle)


@pytest.mark.parametrize("dtype", CALLBACK_DTYPES)
@pytest.mark.parametrize("kind", ["prolog", "epilog"])
def test_compiled_callback_links_like_cufft(numba_cuda, kind, dtype):
    """What cuFFT does at plan time: a C++ caller of the cufftXt.h callback links with our LTO-IR."""
    function = _scale_prolog if kind == "prolog" else _scale_epilog
    ltoir = getattr(nf, f"compile_{kind}")(function, dtype, dtype, compute_capability="90")
    linked, log = _link_like_cufft(kind, dtype, ltoir)
    assert linked, log
    # A C-named function (what we used to compile) leaves cuFFT's call unresolved.
    plain = numba_cuda.compile(
        function,
        _signature(kind, dtype),
        device=True,
        abi="c",
        abi_info={"abi_name": f"nvmath_fft_{kind}_{dtype}"},
        output="ltoir",
        cc=(9, 0),
    )[0]
    linked, log = _link_like_cufft(kind, dtype, plain)
    assert not linked and "Unresolved extern function" in log and CUFFT_SYMBOLS[kind, dtype] in log


def _signature(kind: str, dtype: str):
    from numba import types

    elt = getattr(types, dtype)
    if kind == "prolog":
        return elt(types.CPointer(elt), types.uint64, types.CPointer(elt), types.voidptr)
    return types.void(types.CPointer(elt), types.uint64, elt, types.CPointer(elt), types.voidptr)
