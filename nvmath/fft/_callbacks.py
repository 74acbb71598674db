"""cuFFT LTO callbacks: :class:`DeviceCallable`, :func:`compile_prolog`, :func:`compile_epilog`.

A *prolog* runs when cuFFT loads each input element, an *epilog* when it stores each output element,
fused into the transform kernels through ``cufftXtSetJITCallback`` (cuFFT >= 11.3, linked at plan
time by nvJitLink). The callback code is LTO-IR: :func:`compile_prolog` / :func:`compile_epilog`
produce it from a Python function with numba-cuda (imported only when called); CUDA C++ compiled
with ``nvcc -dlto`` or NVRTC works too.

Signatures (``T`` is the element type, ``U`` the user-info type)::

    def prolog(data_in: CPointer(T), offset: uint64, user_info: CPointer(U), unused: voidptr) -> T
    def epilog(data_out: CPointer(T), offset: uint64, value: T, user_info: CPointer(U), unused: voidptr)

``offset`` counts elements from the start of the buffer cuFFT reads (prolog) or writes (epilog):
the operand (or nvmath's internal copy of it for C2R and host operands, in the operand's axis order
where cuFFT can read that) and the result,
whose layouts :meth:`nvmath.fft.FFT.get_input_layout` and :meth:`~nvmath.fft.FFT.get_output_layout`
report (``FFT.internal_operand_layout`` is the input one).

Symbols: cuFFT links the callback by name. With no name given (``lto_callback_symbol_name`` NULL)
it calls the C++ function of ``cufftXt.h``'s ``cufftJITCallback{Load,Store}{Real,DoubleReal,Complex,
DoubleComplex}`` type, so the LTO-IR must define that function's *mangled* C++ name, e.g.
``_Z28cufftJITCallbackStoreComplexPvy6float2S_S_`` (:func:`callback_symbol`): that is the name
:func:`compile_prolog` / :func:`compile_epilog` give the numba function, and the planner passes no
name. Other names are refused (``NotImplementedError``): on the H200 (cuFFT 12.0) a C++ callback
passed to cuFFT under its own name failed to plan (``CUFFT_INVALID_SIZE``), so nvmath does not offer
what it could not verify; define the callback under cuFFT's default name instead.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import Any, Self

from nvmath._internal.options import MutableOptions, freeze_options
from nvmath.bindings.cufft import cuFFTError

__all__ = [
    "CALLBACK_DTYPES",
    "CallbackMismatchError",
    "CallbackPlanError",
    "CompiledCallback",
    "DeviceCallable",
    "as_device_callable",
    "callback_symbol",
    "compile_epilog",
    "compile_prolog",
    "find_symbol",
]

CALLBACK_DTYPES: tuple[str, ...] = ("float32", "float64", "complex64", "complex128")
"""The element types callbacks can load and store."""

# cuFFT's default callback names as they start in the LTO-IR's string table (the length prefix
# bounds the identifier; the parameters follow).
_MANGLED = re.compile(rb"_Z\d+cufftJITCallback(?:Load|Store)(?:DoubleComplex|DoubleReal|Complex|Real)")

# cuFFT's name of each element type in the callback typedefs, and its Itanium mangling.
_CUFFT_TYPES = {
    "float32": ("Real", "f"),
    "float64": ("DoubleReal", "d"),
    "complex64": ("Complex", "6float2"),
    "complex128": ("DoubleComplex", "7double2"),
}
_MANGLED_NAME = re.compile(r"_Z(\d+)(\w+)")


@dataclasses.dataclass(unsafe_hash=True)
class DeviceCallable(MutableOptions):
    """A device function (LTO-IR) for a prolog or epilog, and its user data.

    A plain mutable dataclass, as nvmath-python's: the fields can be given positionally in this order
    and assigned after construction. Each field is checked when it is set (its kind); the fields
    together (``size`` against ``ltoir``) when the object is made and when an FFT takes it
    (:func:`as_device_callable`, the one validation path of the planner and the stateless functions),
    which uses a validated frozen snapshot, so a later change to the object never reaches a plan.

    Attributes:
        ltoir: the LTO-IR as ``bytes`` (a ``bytearray`` or ``memoryview`` is copied to ``bytes``), or
            the int address of it in host memory (then ``size`` is required); ``None``
            (nvmath-python's default) makes an empty callable that plans and keys as no callback.
        size: the size of the LTO-IR in bytes: required for an address; for ``bytes`` their length
            (filled in when the object is made without it, as in nvmath-python).
        data: an int device pointer passed to the callback as ``user_info``; ``None`` (no user data)
            becomes 0 when the object is made with an ``ltoir``, as in nvmath-python.
        name: ``None`` (the default) or one of cuFFT's default callback names, plain or mangled
            (:func:`callback_symbol`), which :func:`compile_prolog` / :func:`compile_epilog`,
            nvmath-python and ``nvcc -dlto`` of the documented callback names give; checked against
            the transform's kind and element type at plan time. Other names raise
            ``NotImplementedError`` (see the module documentation). Not an nvmath-python field.
    """

    ltoir: bytes | int | None = None
    size: int | None = None
    data: int | None = None
    name: str | None = None

    def _check_field(self, name: str, value: Any) -> Any:
        return _check_callable_field(name, value)

    def __post_init__(self) -> None:
        # nvmath-python's defaults: a bytes LTO-IR's size is its length, user data a null pointer
        if isinstance(self.ltoir, bytes) and self.size is None:
            self.size = len(self.ltoir)
        if self.ltoir is not None and self.data is None:
            self.data = 0
        super().__post_init__()

    def _check_together(self) -> None:
        ltoir, size = self.ltoir, self.size
        if isinstance(ltoir, bytes):
            if not ltoir:
                raise ValueError("DeviceCallable.ltoir is empty")
            if size is not None and size != len(ltoir):
                raise ValueError(f"DeviceCallable.size={size} does not match the {len(ltoir)} bytes of ltoir")
        elif ltoir is not None and (size is None or size <= 0):
            raise ValueError(
                f"DeviceCallable with an address as ltoir ({ltoir!r}) needs a positive int size; got {size!r}"
            )

    def _snapshot(self) -> Any:
        snap = super()._snapshot()
        if isinstance(snap.ltoir, bytes) and snap.size is None:  # what cuFFT is given: the length
            snap.__dict__["size"] = len(snap.ltoir)
        if snap.data is None:  # no user data: a null pointer
            snap.__dict__["data"] = 0
        return snap

    def key(self) -> tuple:
        """What identifies the callback in a plan key (of a snapshot: :func:`as_device_callable`)."""
        return (self.ltoir, self.size, self.data, self.name)


def _check_callable_field(name: str, value: Any) -> Any:
    """Check and normalize one field of :class:`DeviceCallable` (its kind; the rest on use)."""
    if name == "ltoir":
        if value is None or isinstance(value, bytes):
            return value
        if isinstance(value, (bytearray, memoryview)):
            return bytes(value)
        if isinstance(value, int) and not isinstance(value, bool):
            if value <= 0:
                raise ValueError(f"DeviceCallable.ltoir as an address must be positive; got {value!r}")
            return value
        raise TypeError(f"DeviceCallable.ltoir must be bytes or an int address; got {type(value).__name__}")
    if name == "size":
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise TypeError(f"DeviceCallable.size must be an int or None; got {type(value).__name__}: {value!r}")
        return value
    if name == "data":
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
            raise TypeError(f"DeviceCallable.data must be an int device pointer (>= 0) or None; got {value!r}")
        return value
    if name == "name" and value is not None:
        if not isinstance(value, str) or not value:
            raise TypeError(f"DeviceCallable.name must be a non-empty str or None; got {value!r}")
        if not _is_cufft_name(value):
            raise NotImplementedError(
                f"DeviceCallable.name={value!r}: only cuFFT's default callback names are supported "
                "(a C++ callback passed to cuFFT 12.0 under its own name failed to plan); name the "
                "function e.g. cufftJITCallbackStoreComplex (its mangled name is "
                "nvmath.fft._callbacks.callback_symbol('epilog', 'complex64')) and leave name=None"
            )
    return value


def as_device_callable(value: Any, what: str) -> DeviceCallable | None:
    """Return ``value`` as a validated frozen :class:`DeviceCallable` snapshot (``None`` and an empty
    callable give ``None``; a dict gives its fields; ``bytes`` the LTO-IR).

    Raises:
        TypeError: ``value`` is of another kind, a dict has unknown fields, or a field is of the wrong kind.
        ValueError: ``size`` does not fit ``ltoir`` (e.g. after an assignment).
        NotImplementedError: a ``name`` other than cuFFT's default callback names.
    """
    if value is None:
        return None
    if isinstance(value, Mapping):
        fields = {f.name for f in dataclasses.fields(DeviceCallable)}
        unknown = sorted(str(k) for k in value if k not in fields)
        if unknown:
            raise TypeError(
                f"{what}: unknown DeviceCallable field(s) {unknown}; the fields are {sorted(fields)}"
            )
        value = DeviceCallable(**value)
    elif isinstance(value, (bytes, bytearray)):
        value = DeviceCallable(value if isinstance(value, bytes) else bytes(value))  # keeps a CompiledCallback
    elif not isinstance(value, DeviceCallable):
        raise TypeError(
            f"{what} must be a DeviceCallable, a dict of its fields, LTO-IR bytes or None; got {type(value).__name__}"
        )
    snap = freeze_options(value)
    return None if snap.ltoir is None else snap


class CompiledCallback(bytes):
    """LTO-IR from :func:`compile_prolog` / :func:`compile_epilog`: ``bytes`` that remember what they are.

    Attributes:
        kind: ``"prolog"`` or ``"epilog"``.
        element_dtype: the element type it was compiled for.
        symbol: the function's name in the LTO-IR (:func:`callback_symbol`).
    """

    kind: str
    element_dtype: str
    symbol: str

    def __new__(cls, code: bytes, *, kind: str, element_dtype: str, symbol: str) -> Self:
        self = super().__new__(cls, code)
        self.kind, self.element_dtype, self.symbol = kind, element_dtype, symbol
        return self

    def __reduce__(self) -> tuple:
        return _compiled_callback, (bytes(self), self.kind, self.element_dtype, self.symbol)


def _compiled_callback(code: bytes, kind: str, element_dtype: str, symbol: str) -> CompiledCallback:
    """Unpickles a :class:`CompiledCallback`."""
    return CompiledCallback(code, kind=kind, element_dtype=element_dtype, symbol=symbol)


def _callback_name(kind: str, dtype: str) -> str:
    """The unmangled name of cuFFT's callback for ``kind`` and ``dtype``: ``cufftJITCallbackLoadComplex``..."""
    return f"cufftJITCallback{'Load' if kind == 'prolog' else 'Store'}{_CUFFT_TYPES[dtype][0]}"


def _parameter_mangling(kind: str, dtype: str) -> str:
    """The mangled parameter list of the ``cufftXt.h`` callback type (``void*, unsigned long long, ...``)."""
    return "PvyS_S_" if kind == "prolog" else f"Pvy{_CUFFT_TYPES[dtype][1]}S_S_"


def callback_symbol(kind: str, dtype: str) -> str:
    """cuFFT's default callback symbol: the mangled C++ name of its ``kind`` callback on ``dtype`` elements.

    :func:`compile_prolog` (``kind="prolog"``) / :func:`compile_epilog` give the function this name;
    cuFFT links it when no symbol name is passed to ``cufftXtSetJITCallback``. For example
    ``callback_symbol("epilog", "complex64") == "_Z28cufftJITCallbackStoreComplexPvy6float2S_S_"``.
    """
    name = _callback_name(kind, dtype)
    return f"_Z{len(name)}{name}{_parameter_mangling(kind, dtype)}"


class CallbackMismatchError(cuFFTError, ValueError):
    """A prolog / epilog compiled for another kind or element type than the transform's.

    A :class:`~nvmath.bindings.cufft.cuFFTError` (what nvmath-python raises: cuFFT fails to link such
    a callback, ``CUFFT_NVJITLINK_FAILURE``) and a ``ValueError``; raised before cuFFT is called.
    """

    def __init__(self, detail: str = ""):
        super().__init__(_NVJITLINK_FAILURE, "CUFFT_NVJITLINK_FAILURE", detail)

    def __reduce__(self):
        return (type(self), (self.args[0] if self.args else "",))


_NVJITLINK_FAILURE = 19


class CallbackPlanError(cuFFTError, RuntimeError):
    """cuFFT refused to make a plan with the callbacks attached (e.g. ``CUFFT_NOT_SUPPORTED`` for
    sizes with prime factors above 127): the :class:`~nvmath.bindings.cufft.cuFFTError` with cuFFT's
    status (as nvmath-python raises it), whose message names the callbacks and cuFFT's version and
    path; also a ``RuntimeError``."""

    def __reduce__(self):
        return (type(self), (self.status, self.status_name, ""))


def _mismatch(kind: str, dtype: str, what: str) -> CallbackMismatchError:
    make = f"compile_{kind}(function, {dtype!r}, ...)"
    return CallbackMismatchError(
        f"the {kind} must be a callback for {dtype} elements (cuFFT links it as {callback_symbol(kind, dtype)}), "
        f"but {what}; compile it with {make}. A prolog's elements have the operand's dtype, an epilog's the "
        "result's (complex for rfft, real for irfft)"
    )


def find_symbol(callable_: DeviceCallable, kind: str, dtype: str) -> str | None:
    """The ``lto_callback_symbol_name`` to give ``cufftXtSetJITCallback`` for ``callable_``.

    Always ``None`` (cuFFT's default name, :func:`callback_symbol`): the checks are that the callback
    fits ``kind`` and ``dtype``.

    Raises:
        CallbackMismatchError: (a ``cuFFTError`` and a ``ValueError``) the callback was compiled for
            another kind or element type, or its name or the cuFFT-style names visible in its LTO-IR
            do not fit ``kind`` / ``dtype``.
    """
    default = callback_symbol(kind, dtype)
    ltoir = callable_.ltoir
    if isinstance(ltoir, CompiledCallback) and callable_.name is None:
        if (ltoir.kind, ltoir.element_dtype) != (kind, dtype):
            raise _mismatch(kind, dtype, f"this LTO-IR is a {ltoir.kind} for {ltoir.element_dtype} elements")
        return None
    name = callable_.name
    if name is None:
        # NVVM's LTO-IR hides its names; nvcc -dlto output may show them: check what is visible.
        found = set(_MANGLED.findall(ltoir)) if isinstance(ltoir, bytes) else set()
        name = _callback_name(kind, dtype)
        if found and f"_Z{len(name)}{name}".encode() not in found:
            shown = ", ".join(sorted(f.decode() for f in found))
            raise _mismatch(kind, dtype, f"its LTO-IR defines {shown}")
        return None
    if name in (default, _callback_name(kind, dtype)):
        return None
    raise _mismatch(kind, dtype, f"DeviceCallable.name is {name!r}")


def _is_cufft_name(name: str) -> bool:
    """Whether ``name`` is one of cuFFT's default callback names, plain or mangled."""
    match = _MANGLED_NAME.fullmatch(name)
    if match and len(match.group(2)) > int(match.group(1)):
        name = match.group(2)[: int(match.group(1))]
    return name.startswith("cufftJITCallback")


def _as_dtype_name(value: Any) -> str | None:
    """The name of a dtype given as a str, numpy dtype or numpy scalar type; ``None`` otherwise."""
    if isinstance(value, str):
        return value
    import numpy as np

    if isinstance(value, np.dtype) or (isinstance(value, type) and issubclass(value, np.generic)):
        return np.dtype(value).name
    return None


def _dtype_name(value: Any, what: str) -> str:
    name = _as_dtype_name(value)
    if name not in CALLBACK_DTYPES:
        raise ValueError(f"{what} must be one of {', '.join(CALLBACK_DTYPES)}; got {value!r}")
    return name


def _numba() -> tuple[Any, Any]:
    try:
        import numba
        from numba import cuda, types
    except Exception as exc:  # ImportError, or numba failing with this numpy
        raise RuntimeError(
            "compiling FFT callbacks needs numba-cuda (pip install numba-cuda, or the 'callbacks' extra "
            f"of nvmath-kit); importing it failed: {type(exc).__name__}: {exc}"
        ) from exc
    return (numba, cuda), types


def _user_type(types: Any, value: Any) -> Any:
    if isinstance(value, types.Type):
        return value
    if _as_dtype_name(value) is None:
        raise TypeError(f"user_info_dtype must be a dtype name, a numpy dtype or a numba type; got {value!r}")
    return getattr(types, _dtype_name(value, "user_info_dtype"))


def _compute_capability(value: Any) -> tuple[int, int]:
    if value is None:
        try:
            from cuda.core import Device

            major, minor = Device().compute_capability
        except Exception as exc:
            raise RuntimeError(
                f"could not read the current device's compute capability ({type(exc).__name__}: {exc}); "
                "pass compute_capability, e.g. '90'"
            ) from exc
        return int(major), int(minor)
    text = str(value).replace(".", "")
    if not text.isdigit() or len(text) < 2:
        raise ValueError(f"compute_capability must be a string such as '90' or '8.6'; got {value!r}")
    return int(text[:-1]), int(text[-1])


def _compile(
    kind: str,
    function: Any,
    element_dtype: Any,
    user_info_dtype: Any,
    compute_capability: Any,
    representation: str = "ltoir",
) -> bytes:
    if representation != "ltoir":
        raise ValueError(f"representation must be 'ltoir'; got {representation!r}")
    if not callable(function):
        raise TypeError(f"the {kind} must be a Python function; got {type(function).__name__}")
    element = _dtype_name(element_dtype, "element_dtype")
    if _as_dtype_name(user_info_dtype) is not None:
        _dtype_name(user_info_dtype, "user_info_dtype")
    if compute_capability is not None:
        _compute_capability(compute_capability)
    (numba, cuda), types = _numba()
    cc = _compute_capability(compute_capability)
    elt = getattr(types, element)
    info = types.CPointer(_user_type(types, user_info_dtype))
    if kind == "prolog":
        sig = elt(types.CPointer(elt), types.uint64, info, types.voidptr)
    else:
        sig = types.void(types.CPointer(elt), types.uint64, elt, info, types.voidptr)
    symbol = callback_symbol(kind, element)  # cuFFT's default name: the planner passes no name
    try:
        code, _ = cuda.compile(
            function, sig, device=True, abi="c", abi_info={"abi_name": symbol}, output="ltoir", cc=cc
        )
    except Exception as exc:
        import numpy

        raise RuntimeError(
            f"numba {numba.__version__} could not compile the {kind} {getattr(function, '__name__', function)!r} "
            f"to LTO-IR for sm_{cc[0]}{cc[1]} (numpy {numpy.__version__}): {type(exc).__name__}: {exc}"
        ) from exc
    return CompiledCallback(bytes(code), kind=kind, element_dtype=element, symbol=symbol)


def compile_prolog(
    function: Any,
    element_dtype: Any,
    user_info_dtype: Any,
    *,
    name: str | None = None,
    phase: Any = None,
    representation: str = "ltoir",
    compute_capability: str | None = None,
) -> bytes:
    """Compile a Python function into an LTO-IR FFT prolog (a load callback) with numba-cuda.

    Args:
        function: ``f(data_in, offset, user_info, unused) -> element`` (see the module documentation).
        element_dtype: the type of the elements loaded: ``"float32"``, ``"float64"``,
            ``"complex64"`` or ``"complex128"`` (a numpy dtype works too) -- the operand's dtype.
        user_info_dtype: the type ``user_info`` points to: one of the same names, or a numba type.
        name: accepted for compatibility and ignored: the function gets cuFFT's default
            mangled name (:func:`callback_symbol`), which cuFFT links without being told a name.
        phase: accepted for compatibility; unused.
        representation: only ``"ltoir"``.
        compute_capability: the target, such as ``"90"``; default: the current device's.

    Returns:
        The LTO-IR (``bytes``; a :class:`CompiledCallback`), for
        ``FFT.plan(prolog=DeviceCallable(ltoir, data=...))``.

    Raises:
        ValueError: a bad dtype, representation or compute capability.
        RuntimeError: numba-cuda is missing or cannot compile the function.
    """
    return _compile("prolog", function, element_dtype, user_info_dtype, compute_capability, representation)


def compile_epilog(
    function: Any,
    element_dtype: Any,
    user_info_dtype: Any,
    *,
    name: str | None = None,
    phase: Any = None,
    representation: str = "ltoir",
    compute_capability: str | None = None,
) -> bytes:
    """Compile a Python function into an LTO-IR FFT epilog (a store callback) with numba-cuda.

    Args:
        function: ``f(data_out, offset, value, user_info, unused)``; it stores (a function of)
            ``value`` at ``data_out[offset]`` (see the module documentation).
        element_dtype: the type of the elements stored -- the result's dtype.
        user_info_dtype: the type ``user_info`` points to (as for :func:`compile_prolog`).
        name: accepted for compatibility and ignored: the function gets cuFFT's default
            mangled name (:func:`callback_symbol`), which cuFFT links without being told a name.
        phase: accepted for compatibility; unused.
        representation: only ``"ltoir"``.
        compute_capability: the target, such as ``"90"``; default: the current device's.

    Returns:
        The LTO-IR (``bytes``; a :class:`CompiledCallback`), for
        ``FFT.plan(epilog=DeviceCallable(ltoir, data=...))``.

    Raises:
        ValueError: a bad dtype, representation or compute capability.
        RuntimeError: numba-cuda is missing or cannot compile the function.
    """
    return _compile("epilog", function, element_dtype, user_info_dtype, compute_capability, representation)
