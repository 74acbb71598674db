"""The optional compiled hot path of the library calls, and its pure-Python twin.

A *caller* holds a C function's address and its whole argument vector of integer-class values
(pointers, handles, enums, sizes) with the positions ("slots") that change per call; ``caller(*values)``
fills the slots, calls the function and returns its int status, or with ``error=`` raises
``error(status)`` for a nonzero one (pass the binding's exception class, e.g.
:class:`nvmath.bindings.cublasLt.cuBLASLtError`: the status-to-name mapping stays the bindings').

:func:`make_caller` returns the compiled ``nvmath._fastcall.FastCall`` when the extension is built and
not disabled, else a :class:`PureCall` (ctypes) with the same arguments, attributes, results and errors.
The choice is made once, at import: ``NVMATH_PURE_PYTHON=1`` in the environment forces the pure path;
:func:`available` and :func:`describe` say which path is active and why (``python -m nvmath`` prints it).

Only integer-class functions returning ``int`` can be called (see ``nvmath/_fastcall.c`` for the ABI
note): every argument of cublasLtMatmul, the cuBLAS gemm calls, cufftXtExec and cuEventRecord is one.
"""

from __future__ import annotations

import ctypes
import logging
import operator
import os
from collections.abc import Sequence
from typing import Any

from nvmath.bindings import _loader

__all__ = [
    "ENV_VAR", "MAX_ARGS", "PureCall", "available", "describe", "driver_symbol_address", "make_caller",
    "symbol_address",
]  # fmt: skip

logger = logging.getLogger(__name__)

ENV_VAR = "NVMATH_PURE_PYTHON"
MAX_ARGS = 24  # nvmath._fastcall.MAX_ARGS: cublasGemmStridedBatchedEx takes 23
_LO, _HI, _MASK = -(2**63), 2**64 - 1, 2**64 - 1

symbol_address = _loader.symbol_address


def _select() -> tuple[Any, str]:
    """(the compiled caller class or None, why this path), from the environment and the extension."""
    forced = os.environ.get(ENV_VAR, "")
    if forced not in ("", "0"):
        return None, f"pure Python (forced by {ENV_VAR}={forced})"
    try:
        from nvmath import _fastcall
    except ImportError as exc:
        return None, (
            f"pure Python (the extension nvmath._fastcall is not built: {exc}; build it with "
            f"`python setup.py build_ext --inplace`, or reinstall with a C compiler)"
        )
    return _fastcall.FastCall, f"compiled (nvmath._fastcall, {_fastcall.ABI} ABI)"


_COMPILED, _WHY = _select()


def available() -> bool:
    """Whether the compiled path is active (built, importable and not disabled by ``NVMATH_PURE_PYTHON``)."""
    return _COMPILED is not None


def describe() -> str:
    """The active path and why, e.g. ``"compiled (nvmath._fastcall, x86_64 System V ABI)"``."""
    return _WHY


def make_caller(
    fn_address: int,
    fixed: Sequence[Any],
    slots: Sequence[int],
    *,
    error: type | None = None,
    release_gil: bool = False,
) -> Any:
    """A caller of the C function at ``fn_address``: compiled when available, else a :class:`PureCall`.

    Args:
        fn_address: the function's address (:func:`symbol_address`, :func:`driver_symbol_address`).
        fixed: the whole argument vector, at most :data:`MAX_ARGS` ints (or objects with ``__index__``)
            in ``[-2**63, 2**64 - 1]``; the values at slot positions are placeholders.
        slots: the argument positions the call's values fill, in call order (distinct).
        error: ``None`` (the call returns the status) or an exception class raised as ``error(status)``
            when the status is nonzero.
        release_gil: release the GIL around the call (see ``nvmath/_fastcall.c``: kept by default).

    Raises:
        TypeError: a non-integer argument, slot or address, or an ``error`` that is not an exception
            class; OverflowError: a value out of range; ValueError: a NULL address, more than
            :data:`MAX_ARGS` arguments, or a slot that is not a distinct argument position.
    """
    cls = _COMPILED if _COMPILED is not None else PureCall
    return cls(fn_address, fixed, slots, error=error, release_gil=release_gil)


def driver_symbol_address(symbol: str) -> int:
    """The address of the CUDA driver entry point ``symbol`` (e.g. ``"cuEventRecord"``) in libcuda.so.1.

    Raises:
        LibraryNotFoundError: no driver; FunctionNotFoundError: it does not export ``symbol``.
    """
    from nvmath._errors import FunctionNotFoundError, LibraryNotFoundError

    try:
        driver = ctypes.CDLL("libcuda.so.1")
    except OSError as exc:
        raise LibraryNotFoundError(f"the CUDA driver (libcuda.so.1) could not be loaded: {exc}") from exc
    try:
        return ctypes.cast(driver[symbol], ctypes.c_void_p).value
    except AttributeError:
        raise FunctionNotFoundError(f"{symbol} is not exported by the loaded CUDA driver") from None


# The pure-Python twin of nvmath._fastcall.FastCall: same checks, messages, attributes and results.


def _type_name(value: Any) -> str:
    return type(value).__name__


def _to_u64(value: Any, what: str, position: int) -> int:
    """``value`` as an unsigned 64-bit int (two's complement for negatives), checked as FastCall does."""
    if isinstance(value, (float, complex)):
        raise TypeError(
            f"FastCall {what} {position} must be an int (pointer, handle, enum or integer), not "
            f"{_type_name(value)}: float-class arguments are not supported (pass floating-point scalars "
            f"by address)"
        )
    try:
        index = operator.index(value)
    except TypeError:
        raise TypeError(
            f"FastCall {what} {position} must be an int (pointer, handle, enum or integer) or an object "
            f"with __index__, not {_type_name(value)}"
        ) from None
    if not _LO <= index <= _HI:
        raise OverflowError(
            f"FastCall {what} {position} = {index!r} is out of range for a 64-bit integer-class argument "
            f"[-2**63, 2**64 - 1]"
        )
    return index & _MASK


def _address(value: Any) -> int:
    if isinstance(value, float):
        index = None
    else:
        try:
            index = operator.index(value)
        except TypeError:
            index = None
    if index is None:
        raise TypeError(f"FastCall address must be an int (a function address), not {_type_name(value)}")
    if not 0 <= index <= _HI:
        raise OverflowError(f"FastCall address {index!r} is out of range [1, 2**64 - 1]")
    if index == 0:
        raise ValueError("FastCall address must be a nonzero function address, not 0 (NULL)")
    return index


def _sequence(value: Any, message: str) -> list[Any]:
    if isinstance(value, (list, tuple)):
        return list(value)
    try:
        return list(value)
    except TypeError:
        raise TypeError(message) from None


def _slots(slots: Any, nargs: int) -> tuple[int, ...]:
    items = _sequence(slots, "FastCall slots must be a sequence of argument positions (ints)")
    if len(items) > nargs:
        raise ValueError(f"FastCall has {len(items)} slots for {nargs} arguments")
    seen: list[int] = []
    for i, item in enumerate(items):
        if not isinstance(item, int):
            raise TypeError(
                f"FastCall slot {i} must be an int (an argument position), not {_type_name(item)}"
            )
        if not 0 <= item < nargs:
            raise ValueError(
                f"FastCall slot {i} = {item!r} is not an argument position: allowed 0 .. {nargs - 1}"
            )
        if item in seen:
            raise ValueError(f"FastCall slot {i} repeats argument position {int(item)}")
        seen.append(int(item))
    return tuple(seen)


class PureCall:
    """The pure-Python caller (ctypes): :func:`make_caller`'s result without the extension.

    Same constructor, attributes (``address``, ``arity``, ``fixed``, ``slots``, ``error``,
    ``release_gil``), results and exceptions as ``nvmath._fastcall.FastCall``.
    """

    __slots__ = ("_address", "_error", "_fixed", "_function", "_release_gil", "_slots")

    def __init__(
        self,
        address: int,
        fixed: Sequence[Any],
        slots: Sequence[int],
        *,
        error: type | None = None,
        release_gil: bool = False,
    ) -> None:
        if error is not None and not (isinstance(error, type) and issubclass(error, BaseException)):
            raise TypeError(f"FastCall error must be None or an exception class, not {_type_name(error)}")
        self._address = _address(address)
        values = _sequence(fixed, "FastCall fixed arguments must be a sequence of ints")
        if len(values) > MAX_ARGS:
            raise ValueError(
                f"FastCall takes at most {MAX_ARGS} arguments, got {len(values)} fixed arguments"
            )
        self._fixed = [_to_u64(v, "fixed argument", i) for i, v in enumerate(values)]
        self._slots = _slots(slots, len(values))
        self._error = error
        self._release_gil = bool(release_gil)
        # CFUNCTYPE releases the GIL around the call, PYFUNCTYPE keeps it (as FastCall does by default).
        # Every parameter is declared void*: a 64-bit register or stack slot as for uint64_t, and ctypes
        # converts an int to void* about 2.5x faster than to any of its integer types.
        prototype = ctypes.CFUNCTYPE if release_gil else ctypes.PYFUNCTYPE
        self._function = prototype(ctypes.c_int, *([ctypes.c_void_p] * len(values)))(self._address)

    def __call__(self, *values: Any) -> int:
        slots = self._slots
        if len(values) != len(slots):
            n = len(slots)
            raise TypeError(f"FastCall takes {n} per-call argument{'' if n == 1 else 's'} (one per slot), "
                            f"got {len(values)}")  # fmt: skip
        args = self._fixed.copy()
        for i, value in enumerate(values):
            if type(value) is not int or not _LO <= value <= _HI:
                value = _to_u64(value, "per-call argument", i)
            args[slots[i]] = value  # a negative one is passed as its two's complement by ctypes (void*)
        status = self._function(*args)
        if status and self._error is not None:
            raise self._error(status)
        return status

    address = property(lambda self: self._address, doc="The function's address.")
    arity = property(lambda self: len(self._fixed), doc="The number of arguments of the function.")
    fixed = property(lambda self: tuple(self._fixed), doc="The argument vector as unsigned 64-bit values.")
    slots = property(lambda self: self._slots, doc="The argument positions filled by each call.")
    error = property(lambda self: self._error, doc="The exception class raised with a nonzero status.")
    release_gil = property(lambda self: self._release_gil, doc="Whether the call releases the GIL.")

    def __repr__(self) -> str:
        gil = ", releases the GIL" if self._release_gil else ""
        return f"<PureCall {self._address:#x}: {len(self._fixed)} arguments, slots {self._slots}{gil}>"
