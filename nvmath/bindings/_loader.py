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
import threading
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from nvmath._errors import FunctionNotFoundError, LibraryNotFoundError

__all__ = ["Binder", "binder", "library_info", "loaded_libraries"]

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
    )
}


def _pathfinder_load(name: str) -> tuple[str | None, int, str]:
    """Load ``name`` through cuda.pathfinder; returns (absolute path, OS handle, how it was found)."""
    from cuda.pathfinder import load_nvidia_dynamic_lib  # deferred: keeps `import nvmath` cheap

    loaded = load_nvidia_dynamic_lib(name)
    return loaded.abs_path, int(loaded._handle_uint), str(getattr(loaded, "found_via", ""))


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
            query = getattr(self.cdll(), self.spec.property_symbol, None)
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


_CArgObject = type(ctypes.byref(ctypes.c_int()))

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


def loaded_libraries() -> dict[str, dict[str, str | None]]:
    """:func:`library_info` of every library loaded so far (loads nothing)."""
    return {name: library_info(name) for name, lib in _LIBRARIES.items() if lib._cdll is not None}


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

    def __call__(self, symbol: str, restype: Any, argtypes: Sequence[Any]) -> Callable:
        """A stub that resolves ``symbol`` on first call and installs it as ``_p_<symbol>``."""
        key = "_p_" + symbol
        namespace = self.namespace

        def stub(*args: Any) -> Any:
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

    def unresolve(self) -> None:
        """Put every stub back (the next call of each function resolves it again); for tests."""
        self.namespace.update(self.stubs)


def binder(library: str, namespace: dict[str, Any], declared_by: str) -> Binder:
    """The :class:`Binder` for one generated module."""
    return Binder(library, namespace, declared_by)


def as_pointer(value: Any) -> Any:
    """An address for a pointer argument: ints, ``None`` and ctypes objects pass unchanged.

    Also accepted: numpy arrays (``.ctypes.data``), objects with ``__cuda_array_interface__`` or
    ``__array_interface__``, ``__cuda_stream__`` objects, objects with a ``handle`` or with
    ``__int__`` (``cuda.core`` buffers and streams, ``cuda.bindings`` handles, numpy integers).
    """
    if value is None or isinstance(
        value, (int, bytes, _CArgObject, ctypes._SimpleCData, ctypes.Array, ctypes._Pointer)
    ):
        return value
    if isinstance(value, numbers.Integral):  # numpy integers
        return int(value)
    ctypes_info = getattr(value, "ctypes", None)
    if ctypes_info is not None and hasattr(ctypes_info, "data"):
        return ctypes_info.data
    if hasattr(value, "__cuda_stream__"):
        return int(value.__cuda_stream__()[1])
    for protocol in ("__cuda_array_interface__", "__array_interface__"):
        interface = getattr(value, protocol, None)
        if interface is not None:
            return int(interface["data"][0])
    handle = getattr(value, "handle", None)
    if handle is not None:
        return int(handle)
    if hasattr(value, "__int__") or hasattr(value, "__index__"):
        return int(value)
    return value


def retry_call(wrapper: Callable, frame_locals: dict[str, Any]) -> Any:
    """Call ``wrapper`` again after a ctypes ``ArgumentError``, its arguments passed through :func:`as_pointer`.

    The generated wrappers call this from their ``except ctypes.ArgumentError`` clause with
    ``locals()``: the wrapper's parameters are read back by name, so the fast path carries no
    conversion code at all.

    Raises:
        TypeError: an argument has a type that cannot be passed; the message names the C function.
    """
    code = wrapper.__code__
    names = code.co_varnames[: code.co_argcount]
    args = [frame_locals[name] for name in names]
    converted = [as_pointer(arg) for arg in args]
    if all(new is old for new, old in zip(converted, args)):
        bad = ", ".join(f"{name}={type(arg).__name__}" for name, arg in zip(names, args))
        raise TypeError(
            f"{wrapper.__name__}: an argument cannot be passed to C ({bad}); see {wrapper.__doc__.split(chr(10))[0]}"
        )
    return wrapper(*converted)


def int_array(ctype: Any) -> Callable[[Any], Any]:
    """A converter for an input array of integers: a sequence, or an address passed as is."""

    def convert(value: Any) -> Any:
        if value is None or type(value) is int:
            return value
        if isinstance(value, (ctypes.Array, ctypes._Pointer)):
            return value
        values = [int(v) for v in value]
        return (ctype * len(values))(*values)

    return convert


def c_string(value: Any) -> Any:
    """``str`` encoded to UTF-8 for a ``const char*`` argument; bytes and ``None`` pass unchanged."""
    return value.encode() if isinstance(value, str) else value
