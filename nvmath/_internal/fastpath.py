"""The optional compiled hot path of the library calls, and its pure-Python twin.

A *caller* holds a C function's address and its whole argument vector of integer-class values
(pointers, handles, enums, sizes) with the positions ("slots") that change per call; ``caller(*values)``
fills the slots, calls the function and returns its int status, or with ``error=`` raises
``error(status)`` for a nonzero one (pass the binding's exception class, e.g.
:class:`nvmath.bindings.cublasLt.cuBLASLtError`: the status-to-name mapping stays the bindings').

:func:`make_caller` returns the compiled ``nvmath._fastcall.FastCall`` when the extension is built and
not disabled, else :func:`pure_caller`'s function (ctypes) with the same arguments, attributes, results
and errors. The choice is made once, at import: ``NVMATH_PURE_PYTHON=1`` in the environment forces the pure path;
:func:`available` and :func:`describe` say which path is active and why (``python -m nvmath`` prints it).

Only integer-class functions returning ``int`` can be called (see ``nvmath/_fastcall.c`` for the ABI
note): every argument of cublasLtMatmul, the cuBLAS gemm calls, cufftXtExec and cuEventRecord is one.
"""

from __future__ import annotations

import ctypes
import logging
import operator
import os
from collections.abc import Callable, Sequence
from typing import Any

from nvmath.bindings import _loader

__all__ = [
    "ENV_VAR", "MAX_ARGS", "available", "describe", "driver_symbol_address", "is_compiled", "make_caller",
    "pure_caller", "bound_address", "bound_caller", "symbol_address",
]  # fmt: skip

logger = logging.getLogger(__name__)

ENV_VAR = "NVMATH_PURE_PYTHON"
MAX_ARGS = 24  # nvmath._fastcall.MAX_ARGS: cublasGemmStridedBatchedEx takes 23
_LO, _HI, _MASK = -(2**63), 2**64 - 1, 2**64 - 1

symbol_address = _loader.symbol_address


def bound_address(library: str, symbol: str) -> int | None:
    """The address a launch's compiled caller should call for ``symbol`` of ``library``: what the
    binding calls now (a test may have put a recording C function there), or ``None`` when the compiled
    path is off, the binding calls a Python function (a fake, a wrapper) or the library is missing --
    the launch then uses its pure-Python caller, which calls the binding.
    """
    if _COMPILED is None:
        return None
    return _loader.bound_address(library, symbol)


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


def bound_caller(
    library: str, symbol: str, fixed: Sequence[Any], slots: Sequence[int], *, error: type,
    pure: Callable[[], Callable[..., Any]],
) -> Callable[..., Any]:  # fmt: skip
    """A launch's caller of ``symbol``: compiled (:func:`make_caller` at :func:`bound_address`) when the
    compiled path is active and the binding calls C, else ``pure()`` (the reference over the binding).

    Both take the slot values in ``slots`` order; the compiled one raises ``error(status)`` as the
    binding does. The caller holds the raw values of ``fixed``: keep their owners alive with it.
    """
    address = bound_address(library, symbol)
    if address is None:
        return pure()
    return make_caller(address, fixed, slots, error=error)  # type: ignore[no-any-return]


def available() -> bool:
    """Whether the compiled path is active (built, importable and not disabled by ``NVMATH_PURE_PYTHON``)."""
    return _COMPILED is not None


def is_compiled(caller: Any) -> bool:
    """Whether ``caller`` is a compiled ``FastCall`` (a compiled twin may call its function directly)."""
    return _COMPILED is not None and type(caller) is _COMPILED


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
    """A caller of the C function at ``fn_address``: compiled when available, else :func:`pure_caller`'s.

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
    factory = _COMPILED if _COMPILED is not None else pure_caller
    return factory(fn_address, fixed, slots, error=error, release_gil=release_gil)


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


def _count_error(n: int, got: int) -> TypeError:
    return TypeError(f"FastCall takes {n} per-call argument{'' if n == 1 else 's'} (one per slot), got {got}")


def _call_source(fixed: list[int], slots: tuple[int, ...]) -> str:
    """The source of the pure call: the fixed values inlined as int literals, the slots as locals.

    Generated once per caller (as ``collections.namedtuple`` does) so that a call costs what the
    spelled-out ctypes call costs: no list copy, no loop, no method dispatch.
    """
    n = len(slots)
    names = {position: f"v{i}" for i, position in enumerate(slots)}
    arguments = ", ".join(names.get(position, str(value)) for position, value in enumerate(fixed))
    lines = [
        "def pure_call(*values):",
        f"    if len(values) != {n}:",
        f"        raise _count_error({n}, len(values))",
    ]
    if n:
        lines.append(f"    {', '.join(names[p] for p in slots)}, = values")
    for i in range(n):
        lines.append(f"    if type(v{i}) is not int or not {_LO} <= v{i} <= {_HI}:")
        lines.append(f"        v{i} = _to_u64(v{i}, 'per-call argument', {i})")
    lines += [f"    status = _function({arguments})", "    if status and _error is not None:"]
    lines += ["        raise _error(status)", "    return status"]
    return "\n".join(lines)


def pure_caller(
    address: int,
    fixed: Sequence[Any],
    slots: Sequence[int],
    *,
    error: type | None = None,
    release_gil: bool = False,
) -> Callable[..., int]:
    """The pure-Python caller (ctypes): :func:`make_caller`'s result without the extension.

    Same arguments, checks, exceptions and results as ``nvmath._fastcall.FastCall``; the function returned
    carries the same read-only-by-convention attributes (``address``, ``arity``, ``fixed``, ``slots``,
    ``error``, ``release_gil``).
    """
    if error is not None and not (isinstance(error, type) and issubclass(error, BaseException)):
        raise TypeError(f"FastCall error must be None or an exception class, not {_type_name(error)}")
    address = _address(address)
    values = _sequence(fixed, "FastCall fixed arguments must be a sequence of ints")
    if len(values) > MAX_ARGS:
        raise ValueError(f"FastCall takes at most {MAX_ARGS} arguments, got {len(values)} fixed arguments")
    vector = [_to_u64(v, "fixed argument", i) for i, v in enumerate(values)]
    positions = _slots(slots, len(vector))
    # CFUNCTYPE releases the GIL around the call, PYFUNCTYPE keeps it (as FastCall does by default).
    # Every parameter is declared void*: a 64-bit register or stack slot as for uint64_t, and ctypes
    # converts an int to void* about 2.5x faster than to any of its integer types (a negative int is
    # passed as its two's complement).
    prototype = ctypes.CFUNCTYPE if release_gil else ctypes.PYFUNCTYPE
    function = prototype(ctypes.c_int, *([ctypes.c_void_p] * len(vector)))(address)
    namespace = {"_function": function, "_error": error, "_to_u64": _to_u64, "_count_error": _count_error}
    exec(_call_source(vector, positions), namespace)  # noqa: S102 - validated ints and fixed names only
    call = namespace["pure_call"]
    call.address, call.arity, call.fixed, call.slots = address, len(vector), tuple(vector), positions
    call.error, call.release_gil = error, bool(release_gil)
    return call
