"""Lazy, thread-safe loading of the CUDA math libraries and of their symbols (hand-written).

The generated binding modules never load anything at import time. Each C entry point ``f`` has a
module-global ``_p_f`` that starts as a *stub*: on its first call, the stub (under the library's
lock) loads the library through ``cuda.pathfinder``, resolves the symbol into a ctypes function
with its prototype set once, replaces itself in the module's globals and makes the call. Every
later call goes straight to the ctypes function: no per-call introspection.

A missing library raises :class:`~nvmath._errors.LibraryNotFoundError`; a symbol the loaded
library does not export (usually: the library is older than the headers the bindings were
generated from) raises :class:`~nvmath._errors.FunctionNotFoundError` when that function is
called, never at import or load time.
"""

from __future__ import annotations

import ctypes
import logging
import numbers
import operator
import threading
import types
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from nvmath._errors import FunctionNotFoundError, LibraryNotFoundError

__all__ = [
    "Binder", "binder", "check_argument", "check_integer", "library_info", "loaded_libraries", "share_globals",
    "symbol_address",
]  # fmt: skip

logger = logging.getLogger(__name__)


class _LibrarySpec(NamedTuple):
    """What we need to know about one library to load it and describe it in errors."""

    name: str  # cuda.pathfinder name
    pretty: str  # name in messages
    pip_package: str  # the wheel that ships it
    property_symbol: str  # ``<lib>GetProperty(libraryPropertyType, int*)``: the version query


_SPECS = {
    spec.name: spec
    for spec in (
        _LibrarySpec("cublasLt", "cuBLASLt", "nvidia-cublas", "cublasLtGetProperty"),
        _LibrarySpec("cublas", "cuBLAS", "nvidia-cublas", "cublasGetProperty"),
        _LibrarySpec("cufft", "cuFFT", "nvidia-cufft", "cufftGetProperty"),
        _LibrarySpec("cusolver", "cuSOLVER", "nvidia-cusolver", "cusolverGetProperty"),
        # The distributed engines (the `[distributed]` extra); loaded only by nvmath.distributed.
        _LibrarySpec("nccl", "NCCL", "nvmath-kit[distributed]", ""),
        _LibrarySpec("nvshmem_host", "NVSHMEM", "nvmath-kit[distributed]", ""),
        _LibrarySpec("cublasmp", "cuBLASMp", "nvmath-kit[distributed]", ""),
        _LibrarySpec("cufftMp", "cuFFTMp", "nvmath-kit[distributed]", "cufftGetProperty"),
    )
}


def _pathfinder_load(name: str) -> tuple[str | None, int, str]:
    """Load ``name`` through cuda.pathfinder; returns (absolute path, OS handle, how it was found)."""
    from cuda.pathfinder import load_nvidia_dynamic_lib  # deferred: keeps `import nvmath` cheap

    loaded = load_nvidia_dynamic_lib(name)
    return loaded.abs_path, int(loaded._handle_uint), str(getattr(loaded, "found_via", ""))


# The distributed engines' wheels, relative to a directory of the ``nvidia`` namespace package, and
# the libraries to load first (their DT_NEEDED sonames). They are looked for on sys.path first, in
# sys.path order, as Python finds packages, then through cuda.pathfinder: a wheel installed with
# ``pip install --target DIR`` and put on PYTHONPATH (the GPU machines' way) is not in a site-packages
# directory, and must win over an older one there (NCCL 2.28 comes with torch; cuBLASMp needs 2.29.2).
_WHEEL_LIBS = {
    "nccl": ("nccl/lib/libnccl.so.2", ()),
    "nvshmem_host": ("nvshmem/lib/libnvshmem_host.so.3", ()),
    "cublasmp": ("cublasmp/cu13/lib/libcublasmp.so.0", ("nccl",)),
    "cufftMp": ("cufftmp/cu13/lib/libcufftMp.so.12", ("nvshmem_host",)),
}

# libcufftMp.so exports the whole cuFFT API (cufftCreate, cufftXtExec, cufftMakePlanMany...) and calls
# those entry points of its own through its PLT. Loaded without RTLD_DEEPBIND into a process where the
# single-GPU libcufft.so is already global (nvmath.fft, torch.fft, cuda.pathfinder loads RTLD_GLOBAL),
# cuFFTMp's internal calls bind to *libcufft*'s functions: its plans end up half in one library, half in
# the other (cuda.pathfinder marks cufftMp ``requires_rtld_deepbind`` for this reason). And loaded
# RTLD_GLOBAL it would capture libcufft's own calls in the same way. So cuFFTMp is loaded RTLD_LOCAL |
# RTLD_DEEPBIND. NVMATH_CUFFTMP_DLOPEN=global restores RTLD_GLOBAL without DEEPBIND (diagnosis only).
_DEEPBIND = {"cufftMp"}


def dlopen_mode(name: str) -> int:
    """The ``dlopen`` flags a wheel library ``name`` found on sys.path is loaded with."""
    import os

    deepbind = getattr(os, "RTLD_DEEPBIND", 0)
    if name in _DEEPBIND and deepbind and os.environ.get("NVMATH_CUFFTMP_DLOPEN", "deepbind") != "global":
        return os.RTLD_NOW | os.RTLD_LOCAL | deepbind
    return ctypes.RTLD_GLOBAL


def _wheel_on_sys_path(name: str) -> ctypes.CDLL | None:
    """``name`` loaded (:func:`dlopen_mode`) from an ``nvidia/...`` wheel directory on ``sys.path``,
    or None."""
    import os
    import sys

    entry = _WHEEL_LIBS.get(name)
    if entry is None:
        return None
    relative, needs = entry
    for root in sys.path:
        path = os.path.join(root or ".", "nvidia", relative)
        if os.path.isfile(path):
            for dependency in needs:  # so that their sonames resolve to these, not to older copies
                _library(dependency).cdll()
            return ctypes.CDLL(path, mode=dlopen_mode(name))
    return None


class _Library:
    """One shared library: loaded once (double-checked under a lock), then asked for symbols."""

    def __init__(self, spec: _LibrarySpec):
        self.spec = spec
        self.lock = threading.RLock()
        self._cdll: ctypes.CDLL | None = None
        self.path: str | None = None
        self.found_via = ""
        self._version: str | None = None

    def cdll(self) -> ctypes.CDLL:
        """The loaded library (loads it on first use)."""
        cdll = self._cdll
        if cdll is not None:
            return cdll
        with self.lock:
            if self._cdll is None:
                self._cdll = self._load()
            return self._cdll

    def _load(self) -> ctypes.CDLL:
        spec = self.spec
        on_path = _wheel_on_sys_path(spec.name)
        if on_path is not None:
            self.path, self.found_via = on_path._name, "nvidia namespace package on sys.path"
            logger.debug("loaded %s from %s (wheel on sys.path)", spec.pretty, on_path._name)
            return on_path
        try:
            path, handle, found_via = _pathfinder_load(spec.name)
        except Exception as exc:  # DynamicLibNotFoundError and friends
            raise LibraryNotFoundError(
                f"{spec.pretty} (lib{spec.name}) could not be loaded: cuda.pathfinder searched the NVIDIA "
                f"wheels in site-packages, conda, CUDA_PATH/CUDA_HOME and the system library path and "
                f"reported: {exc}. Install it with `pip install {spec.pip_package}`."
            ) from exc
        self.path, self.found_via = path, found_via
        logger.debug("loaded %s from %s (found via %s)", spec.pretty, path, found_via or "?")
        return ctypes.CDLL(path or f"lib{spec.name}.so", handle=handle)

    def version(self) -> str:
        """``major.minor.patch`` of the loaded library (loads it on first use)."""
        if self._version is None:
            cdll = self.cdll()  # loads it even when there is no version query
            query = getattr(cdll, self.spec.property_symbol, None) if self.spec.property_symbol else None
            if query is None:
                return "unknown"
            query.restype, query.argtypes = ctypes.c_int, (ctypes.c_int, ctypes.c_void_p)
            parts = []
            for prop in range(3):  # MAJOR_VERSION, MINOR_VERSION, PATCH_LEVEL
                value = ctypes.c_int()
                if query(prop, ctypes.byref(value)):
                    return "unknown"
                parts.append(str(value.value))
            self._version = ".".join(parts)
        return self._version

    def resolve(self, symbol: str, restype: Any, argtypes: Sequence[Any], declared_by: str) -> Callable:
        """The ctypes function for ``symbol`` with its prototype set.

        Raises:
            FunctionNotFoundError: the loaded library does not export ``symbol``.
        """
        try:
            function = getattr(self.cdll(), symbol)
        except AttributeError:
            raise FunctionNotFoundError(
                f"{symbol} is not exported by {self.path} ({self.spec.pretty} {self.version()} loaded); "
                f"it is declared by the {declared_by} headers these bindings were generated from: "
                f"upgrade {self.spec.pip_package} (pip install -U {self.spec.pip_package})."
            ) from None
        function.restype = restype
        function.argtypes = tuple(argtypes)
        return function


    def address(self, symbol: str) -> int:
        """The address of ``symbol`` (loads the library on first use).

        Looked up as a fresh ctypes function (``cdll[symbol]``): the cached one that :meth:`resolve`
        gives a prototype is left alone.

        Raises:
            FunctionNotFoundError: the loaded library does not export ``symbol``.
        """
        try:
            function = self.cdll()[symbol]
        except AttributeError:
            raise FunctionNotFoundError(
                f"{symbol} is not exported by {self.path} ({self.spec.pretty} {self.version()} loaded): "
                f"upgrade {self.spec.pip_package} (pip install -U {self.spec.pip_package})."
            ) from None
        return ctypes.cast(function, ctypes.c_void_p).value


_LIBRARIES: dict[str, _Library] = {name: _Library(spec) for name, spec in _SPECS.items()}


def _library(name: str) -> _Library:
    try:
        return _LIBRARIES[name]
    except KeyError:
        raise ValueError(f"unknown library {name!r}; known: {sorted(_LIBRARIES)}") from None


def library_info(name: str) -> dict[str, str | None]:
    """Path, version and provenance of a library, loading it if needed.

    Args:
        name: ``"cublasLt"``, ``"cublas"``, ``"cufft"`` or ``"cusolver"``.

    Returns:
        ``{"name", "path", "version", "found_via"}``.

    Raises:
        LibraryNotFoundError: the library cannot be loaded.
    """
    library = _library(name)
    version = library.version()
    return {"name": name, "path": library.path, "version": version, "found_via": library.found_via}


def symbol_address(library: str, symbol: str) -> int:
    """The address of the C entry point ``symbol`` of ``library`` (loading the library if needed), for
    :mod:`nvmath._internal.fastpath`, which calls it without ctypes.

    Raises:
        ValueError: unknown ``library``; LibraryNotFoundError: it cannot be loaded;
        FunctionNotFoundError: it does not export ``symbol``.
    """
    return _library(library).address(symbol)


def loaded_libraries() -> dict[str, dict[str, str | None]]:
    """:func:`library_info` of every library loaded so far (loads nothing)."""
    return {name: library_info(name) for name, lib in _LIBRARIES.items() if lib._cdll is not None}


def _precheck(symbol: str, argtypes: Sequence[Any], args: Sequence[Any]) -> None:
    """Convert the arguments as the ctypes function will, before the library is loaded.

    Raises:
        ctypes.ArgumentError: as the resolved function would (the wrapper's slow path then names
            the parameter).
    """
    for position, (argtype, arg) in enumerate(zip(argtypes, args), 1):
        try:
            argtype.from_param(arg)
        except Exception as exc:  # noqa: BLE001 - re-raised as the ArgumentError ctypes would raise
            raise ctypes.ArgumentError(
                f"argument {position} of {symbol}: {type(exc).__name__}: {exc}"
            ) from None


class Binder:
    """Creates the lazy ``_p_<symbol>`` stubs of one generated module.

    Args:
        library: the pathfinder name of the library exporting the symbols.
        namespace: the module globals the resolved functions are installed into.
        declared_by: e.g. ``"cuBLASLt 13.10.0"``, for the missing-symbol message.
    """

    def __init__(self, library: str, namespace: dict[str, Any], declared_by: str):
        _library(library)
        self.library = library
        self.namespace = namespace
        self.declared_by = declared_by
        self.stubs: dict[str, Callable] = {}
        self.prototypes: dict[str, tuple[Any, Sequence[Any]]] = {}
        # "_p_<symbol>" -> (the function installed there, its C address): every plan asks for the address
        # of the function it calls, and ctypes.cast costs about 3 us
        self._addresses: dict[str, tuple[Any, int]] = {}

    def __call__(self, symbol: str, restype: Any, argtypes: Sequence[Any]) -> Callable:
        """A stub that resolves ``symbol`` on first call and installs it as ``_p_<symbol>``."""
        key = "_p_" + symbol
        namespace = self.namespace
        self.prototypes[symbol] = (restype, tuple(argtypes))

        def stub(*args: Any) -> Any:
            _precheck(symbol, argtypes, args)  # a refused argument never loads the library
            library = _library(self.library)
            with library.lock:
                function = namespace.get(key)
                if function is None or function is stub:
                    function = library.resolve(symbol, restype, argtypes, self.declared_by)
                    namespace[key] = function
            return function(*args)

        stub.__name__ = stub.__qualname__ = key
        self.stubs[key] = stub
        return stub

    def resolve(self, symbol: str) -> Callable:
        """Load the library now and install (and return) the ctypes function of ``symbol``.

        For tools and tests that wrap ``_p_<symbol>`` (a wrapper installed over a stub would be
        replaced by the resolved function on its first call).
        """
        key = "_p_" + symbol
        library = _library(self.library)
        with library.lock:
            function = self.namespace.get(key)
            if function is None or function is self.stubs.get(key):
                restype, argtypes = self.prototypes[symbol]
                function = library.resolve(symbol, restype, argtypes, self.declared_by)
                self.namespace[key] = function
        return function

    def bound_address(self, symbol: str) -> int | None:
        """The C address ``_p_<symbol>`` calls now (the stub resolved first, loading the library), for a
        caller that calls it without ctypes; ``None`` when a Python function replaced it (a test's fake,
        a profiler's wrapper) or it cannot be resolved: such a caller then keeps calling the binding.
        """
        key = "_p_" + symbol
        function = self.namespace.get(key)
        known = self._addresses.get(key)
        if known is not None and known[0] is function:  # the same function as last time (not a stub)
            return known[1]
        try:
            if function is None or function is self.stubs.get(key):
                function = self.resolve(symbol)
            address = ctypes.cast(function, ctypes.c_void_p).value or None
        except Exception:  # noqa: BLE001 - a Python replacement (not a C function) or no library
            return None
        if address is not None:
            self._addresses[key] = (function, address)
        return address

    def unresolve(self) -> None:
        """Put every stub back (the next call of each function resolves it again); for tests."""
        self.namespace.update(self.stubs)


def binder(library: str, namespace: dict[str, Any], declared_by: str) -> Binder:
    """The :class:`Binder` for one generated module."""
    made = Binder(library, namespace, declared_by)
    if namespace.get("__name__") == f"nvmath.bindings.{library}":  # the generated module's (not a test's)
        _BINDERS[library] = made
    return made


_BINDERS: dict[str, Binder] = {}


def bound_address(library: str, symbol: str) -> int | None:
    """:meth:`Binder.bound_address` of the generated module ``nvmath.bindings.<library>`` (``None``: not
    imported)."""
    found = _BINDERS.get(library)
    return found.bound_address(symbol) if found is not None else None


def share_globals(namespace: dict[str, Any], checked: types.ModuleType, names: Sequence[str]) -> None:
    """Give the functions ``names`` of ``namespace`` (an ``nvmath.bindings._unchecked`` module) the
    globals of the ``checked`` module they mirror.

    Their bodies then read ``_p_<symbol>`` (and ``_raise``, ``_byref``, the ctypes aliases) from the
    checked module at call time, with the plain global lookup of the checked wrappers: they call the
    symbol the stub resolved or a test replaced there, with no attribute access per call (a module
    with ``__getattr__``, as the checked ones have, makes ``module.attr`` a slow generic lookup).
    """
    shared = vars(checked)
    for name in names:
        f = namespace[name]
        g = types.FunctionType(f.__code__, shared, f.__name__, f.__defaults__, f.__closure__)
        g.__kwdefaults__, g.__doc__ = f.__kwdefaults__, f.__doc__
        g.__module__, g.__qualname__ = f.__module__, f.__qualname__
        namespace[name] = g


# Argument checks. The generated wrappers range-check their integer, handle and pointer arguments
# inline (one boolean expression) and let ctypes refuse wrong types; whatever fails either test comes
# here, where each argument is checked on its own so the error names the function and the parameter.

_FLOAT_KINDS = frozenset({"f32", "f64"})


def _int_range(kind: str) -> tuple[int, int, str]:
    """(lowest, highest, C type name) of an integer check kind."""
    if kind == "ptr":
        return 0, 2**64 - 1, "an address or handle (uintptr_t)"
    if kind == "bool":
        return 0, 1, "bool"
    bits = int(kind[1:])
    if kind[0] == "i":
        return -(2 ** (bits - 1)), 2 ** (bits - 1) - 1, f"int{bits}_t"
    return 0, 2**bits - 1, f"uint{bits}_t"


def _type_name(value: Any) -> str:
    cls = type(value)
    return cls.__name__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__qualname__}"


def check_integer(value: Any, kind: str, where: str) -> int:
    """``value`` as a Python int in the range of the C integer type ``kind``.

    Accepts ``int`` (``bool`` included) and objects with ``__index__`` (numpy integers, IntEnum
    members); ``None`` is NULL (0) for ``ptr``. Floats, strings, bytes, arrays and other objects are
    refused, never truncated or passed by address.

    Raises:
        TypeError: not an integer; OverflowError: outside the C type's range. Both name ``where``.
    """
    if value is None and kind == "ptr":
        return 0
    if isinstance(value, (str, bytes, bytearray, memoryview, float, complex)):
        index = None
    else:
        try:
            index = operator.index(value)
        except TypeError:
            index = None
    lo, hi, c_name = _int_range(kind)
    if index is None:
        what = "an int (an address or handle)" if kind == "ptr" else f"an int ({c_name})"
        raise TypeError(f"{where} must be {what} or an object with __index__, not {_type_name(value)}")
    if not lo <= index <= hi:
        raise OverflowError(f"{where}={index} is out of range for {c_name} [{lo}, {hi}]")
    return index


def _check_float(value: Any, where: str) -> Any:
    if isinstance(value, (str, bytes, bytearray, complex)) or not isinstance(value, numbers.Real):
        raise TypeError(f"{where} must be a real number (int or float), not {_type_name(value)}")
    return value


def _check_string(value: Any, where: str) -> Any:
    if isinstance(value, str):
        value = value.encode()
    if value is None:
        return value
    if isinstance(value, bytes):
        if b"\0" in value:
            raise ValueError(f"{where} contains an embedded NUL character (C would see it truncated)")
        return value
    raise TypeError(f"{where} must be a str, bytes or None, not {_type_name(value)}")


def check_argument(value: Any, kind: str, where: str) -> Any:
    """One argument checked (and normalized) for its check kind; see :func:`retry_call`."""
    if kind == "str":
        return _check_string(value, where)
    if kind in _FLOAT_KINDS:
        return _check_float(value, where)
    if kind == "char":
        if isinstance(value, bytes) and len(value) == 1:
            return value
        return check_integer(value, "i8", where)
    if kind.startswith("array:"):
        if isinstance(value, (ctypes.Array, ctypes._Pointer)):
            return value
        return _check_array(value, _ARRAY_CTYPES[kind[6:]], where)
    return check_integer(value, kind, where)


def retry_call(wrapper: Callable, frame_locals: dict[str, Any], kinds: Sequence[str]) -> Any:
    """The slow path of a generated wrapper: check every argument, then call again with clean values.

    ``kinds`` gives, per Python parameter, its check kind: ``ptr`` (address or handle), ``i8`` ...
    ``u64`` (C integer types), ``bool``, ``char``, ``f32``/``f64``, ``str``, ``array:<int kind>``.
    The wrapper's arguments are read back from ``locals()`` by name, so the fast path carries no
    conversion code.

    Raises:
        TypeError: an argument of the wrong type; OverflowError: an integer outside its C type's
            range. The message names the function and the parameter.
    """
    code = wrapper.__code__
    names = code.co_varnames[: code.co_argcount]
    qualified = f"{wrapper.__module__.rsplit('.', 1)[-1]}.{wrapper.__name__}"
    args = [frame_locals[name] for name in names]
    converted = [
        check_argument(arg, kind, f"{qualified}(): parameter {name}")
        for name, arg, kind in zip(names, args, kinds)
    ]
    if all(new is old for new, old in zip(converted, args)):
        bad = ", ".join(f"{name}={_type_name(arg)}" for name, arg in zip(names, args))
        raise TypeError(f"{qualified}(): ctypes refused the arguments ({bad})")
    return wrapper(*converted)


def _check_array(value: Any, ctype: Any, where: str) -> Any:
    """An input integer array: a sequence of ints (copied into a C array), an address, or ``None``."""
    if value is None or isinstance(value, (ctypes.Array, ctypes._Pointer)):
        return value
    if isinstance(value, (str, bytes, bytearray)) or not hasattr(value, "__iter__"):
        if hasattr(value, "__index__"):
            return check_integer(value, "ptr", where)
        raise TypeError(f"{where} must be a sequence of ints or an address (int), not {_type_name(value)}")
    kind = _CTYPE_KINDS[ctype]
    values = [check_integer(v, kind, f"{where}[{i}]") for i, v in enumerate(value)]
    return (ctype * len(values))(*values)


def int_array(ctype: Any) -> Callable[..., Any]:
    """A converter for an input array of integers: a sequence of ints, or an address (int).

    Called as ``convert(value, function, parameter)``; elements are checked like integer arguments
    (no floats, no wrap-around) and errors name the function and the parameter.
    """

    def convert(value: Any, function: str = "?", parameter: str = "?") -> Any:
        return _check_array(value, ctype, f"{function}(): parameter {parameter}")

    return convert


_CTYPE_KINDS = {
    ctypes.c_int8: "i8", ctypes.c_uint8: "u8", ctypes.c_int16: "i16", ctypes.c_uint16: "u16",
    ctypes.c_int32: "i32", ctypes.c_uint32: "u32", ctypes.c_int64: "i64", ctypes.c_uint64: "u64",
}  # fmt: skip
for _t in (ctypes.c_byte, ctypes.c_ubyte, ctypes.c_short, ctypes.c_ushort, ctypes.c_int, ctypes.c_uint,
           ctypes.c_long, ctypes.c_ulong, ctypes.c_longlong, ctypes.c_ulonglong, ctypes.c_size_t):  # fmt: skip
    _CTYPE_KINDS.setdefault(_t, ("u" if _t(-1).value > 0 else "i") + str(8 * ctypes.sizeof(_t)))
_ARRAY_CTYPES = {kind: ctype for ctype, kind in reversed(list(_CTYPE_KINDS.items()))}


def c_string(value: Any, function: str = "?", parameter: str = "?") -> Any:
    """``str`` encoded to UTF-8 for a ``const char*`` argument; bytes and ``None`` pass unchanged.

    Raises:
        TypeError: anything else (an int would be taken by ctypes as an address).
        ValueError: an embedded NUL character (C would see the string cut there), as ``open()`` does.
    """
    return _check_string(value, f"{function}(): parameter {parameter}")


def check_fft_plan(where: str, types: Any, fft_type: int, sizes: dict[str, int]) -> None:
    """Refuse a cuFFT plan the library would only answer with ``CUFFT_INVALID_VALUE`` / ``INTERNAL_ERROR``.

    Raises:
        ValueError: a size or batch below 1, or a ``type`` that is no ``cufftType`` value.
    """
    for name, value in sizes.items():
        if value < 1:
            raise ValueError(f"{where}(): parameter {name}={value} must be at least 1")
    if fft_type not in types._value2member_map_:
        allowed = ", ".join(f"{m.name}={m.value:#x}" for m in types)
        raise ValueError(f"{where}(): parameter type={fft_type} is not a cufftType ({allowed})")


class HandleRegistry:
    """The handles one binding module's create functions returned, and those its destroy function has
    destroyed: a second destroy of a handle is refused (``ValueError``) instead of reaching the
    library, which may abort the process. Handles the module did not create pass unchecked (raw
    addresses stay the caller's responsibility). The unchecked bindings keep no registry.
    """

    _LIMIT = 1 << 16  # destroyed handles remembered (addresses are reused: a new create forgets one)

    def __init__(self, what: str):
        self.what = what
        self._destroyed: dict[int, None] = {}  # insertion-ordered set; single dict ops are atomic

    def created(self, handle: int) -> None:
        """Record a handle a create function returned."""
        self._destroyed.pop(handle, None)

    def destroying(self, handle: int, where: str) -> None:
        """Refuse a handle already destroyed through this module.

        Raises:
            ValueError: ``handle`` was destroyed before (and not returned by a create since).
        """
        if handle in self._destroyed:
            raise ValueError(
                f"{where}(): handle {handle:#x} was already destroyed; destroying it twice would "
                "corrupt the library's state (or abort the process)"
            )

    def destroyed(self, handle: int) -> None:
        """Record a successful destroy."""
        destroyed = self._destroyed
        destroyed[handle] = None
        if len(destroyed) > self._LIMIT:
            try:
                del destroyed[next(iter(destroyed))]  # the oldest
            except (RuntimeError, KeyError, StopIteration):  # another thread changed it meanwhile
                pass
