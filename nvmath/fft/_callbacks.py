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
the operand (or nvmath's internal copy of it for C2R, laid out as ``"optimized"``) and the result,
whose layout :meth:`nvmath.fft.FFT.get_output_layout` reports.

The function is compiled under a fixed symbol per callback kind and element type (see
:func:`callback_symbol`), which is how the planner finds it in the LTO-IR. LTO-IR from elsewhere
names its symbol with ``DeviceCallable(..., name=...)``.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import Any

__all__ = [
    "CALLBACK_DTYPES",
    "DeviceCallable",
    "as_device_callable",
    "callback_symbol",
    "compile_epilog",
    "compile_prolog",
    "find_symbol",
]

CALLBACK_DTYPES: tuple[str, ...] = ("float32", "float64", "complex64", "complex128")
"""The element types callbacks can load and store."""

_MANGLED = re.compile(rb"_Z\d+cufftJITCallback(?:Load|Store)\w*")


@dataclasses.dataclass(frozen=True, kw_only=False)
class DeviceCallable:
    """A device function (LTO-IR) for a prolog or epilog, and its user data.

    Attributes:
        ltoir: the LTO-IR as ``bytes``, or the int address of it in host memory (then ``size``
            is required).
        size: the size of the LTO-IR in bytes (required for an address; taken from ``bytes``).
        data: an int device pointer passed to the callback as ``user_info`` (0 when unused).
        name: the callback's symbol in the LTO-IR; ``None`` finds it (the names
            :func:`compile_prolog` / :func:`compile_epilog` use, or nvmath-python's). Not an
            nvmath-python field.
    """

    ltoir: bytes | int
    size: int | None = None
    data: int | None = 0
    name: str | None = None

    def __post_init__(self) -> None:
        ltoir = self.ltoir
        if isinstance(ltoir, (bytearray, memoryview)):
            ltoir = bytes(ltoir)
            object.__setattr__(self, "ltoir", ltoir)
        if isinstance(ltoir, bytes):
            if not ltoir:
                raise ValueError("DeviceCallable.ltoir is empty")
            if self.size is not None and self.size != len(ltoir):
                raise ValueError(
                    f"DeviceCallable.size={self.size} does not match the {len(ltoir)} bytes of ltoir"
                )
            object.__setattr__(self, "size", len(ltoir))
        elif isinstance(ltoir, int) and not isinstance(ltoir, bool):
            if ltoir <= 0 or not isinstance(self.size, int) or isinstance(self.size, bool) or self.size <= 0:
                raise ValueError(
                    f"DeviceCallable with an address as ltoir ({ltoir!r}) needs a positive int size; got {self.size!r}"
                )
        else:
            raise TypeError(
                f"DeviceCallable.ltoir must be bytes or an int address; got {type(ltoir).__name__}"
            )
        data = 0 if self.data is None else self.data
        if isinstance(data, bool) or not isinstance(data, int) or data < 0:
            raise TypeError(
                f"DeviceCallable.data must be an int device pointer (>= 0) or None; got {self.data!r}"
            )
        object.__setattr__(self, "data", data)
        if self.name is not None and (not isinstance(self.name, str) or not self.name):
            raise TypeError(f"DeviceCallable.name must be a non-empty str or None; got {self.name!r}")

    def key(self) -> tuple:
        """What identifies the callback in a plan key."""
        return (self.ltoir, self.size, self.data, self.name)


def as_device_callable(value: Any, what: str) -> DeviceCallable | None:
    """Return ``value`` as a :class:`DeviceCallable` (``None`` stays ``None``; a dict gives its fields).

    Raises:
        TypeError: ``value`` is of another kind, or a dict has unknown fields.
    """
    if value is None or isinstance(value, DeviceCallable):
        return value
    if isinstance(value, Mapping):
        fields = {f.name for f in dataclasses.fields(DeviceCallable)}
        unknown = sorted(str(k) for k in value if k not in fields)
        if unknown:
            raise TypeError(
                f"{what}: unknown DeviceCallable field(s) {unknown}; the fields are {sorted(fields)}"
            )
        return DeviceCallable(**value)
    if isinstance(value, (bytes, bytearray)):
        return DeviceCallable(bytes(value))
    raise TypeError(
        f"{what} must be a DeviceCallable, a dict of its fields, LTO-IR bytes or None; got {type(value).__name__}"
    )


def callback_symbol(kind: str, dtype: str) -> str:
    """The symbol :func:`compile_prolog` (``kind="prolog"``) / :func:`compile_epilog` give a callback."""
    return f"nvmath_fft_{'load' if kind == 'prolog' else 'store'}_{dtype}"


def find_symbol(callable_: DeviceCallable, kind: str, dtype: str) -> str:
    """The callback's symbol: its ``name``, our fixed name, or a cuFFT-style mangled name in the LTO-IR."""
    if callable_.name is not None:
        return callable_.name
    ours = callback_symbol(kind, dtype)
    if isinstance(callable_.ltoir, bytes) and ours.encode() not in callable_.ltoir:
        found = sorted(set(_MANGLED.findall(callable_.ltoir)))
        if len(found) == 1:
            return found[0].decode()
    return ours


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
    kind: str, function: Any, element_dtype: Any, user_info_dtype: Any, compute_capability: Any
) -> bytes:
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
    symbol = callback_symbol(kind, element)
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
    return bytes(code)


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
        name: accepted for compatibility; the symbol is fixed (see :func:`callback_symbol`).
        phase: accepted for compatibility; unused.
        representation: only ``"ltoir"``.
        compute_capability: the target, such as ``"90"``; default: the current device's.

    Returns:
        The LTO-IR, for ``FFT.plan(prolog=DeviceCallable(ltoir, data=...))``.

    Raises:
        ValueError: a bad dtype, representation or compute capability.
        RuntimeError: numba-cuda is missing or cannot compile the function.
    """
    if representation != "ltoir":
        raise ValueError(f"representation must be 'ltoir'; got {representation!r}")
    return _compile("prolog", function, element_dtype, user_info_dtype, compute_capability)


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
        name: accepted for compatibility; the symbol is fixed (see :func:`callback_symbol`).
        phase: accepted for compatibility; unused.
        representation: only ``"ltoir"``.
        compute_capability: the target, such as ``"90"``; default: the current device's.

    Returns:
        The LTO-IR, for ``FFT.plan(epilog=DeviceCallable(ltoir, data=...))``.

    Raises:
        ValueError: a bad dtype, representation or compute capability.
        RuntimeError: numba-cuda is missing or cannot compile the function.
    """
    if representation != "ltoir":
        raise ValueError(f"representation must be 'ltoir'; got {representation!r}")
    return _compile("epilog", function, element_dtype, user_info_dtype, compute_capability)
