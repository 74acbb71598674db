"""C functions to call through the fast-path callers in tests, without a GPU.

:class:`Recorder` is a ctypes callback (a real C function pointer) of ``n`` parameters that records the
arguments it receives and returns a chosen status; it needs no compiled extension, so it tests the
pure-Python caller too. ``CALLERS`` parametrizes a test over both caller factories (the compiled one is
skipped with a reason when ``nvmath._fastcall`` is not built).
"""

from __future__ import annotations

import ctypes
from typing import Any

import pytest

from nvmath._internal.fastpath import pure_caller

try:
    from nvmath import _fastcall
except ImportError:  # not built: the compiled cases skip
    _fastcall = None

NOT_BUILT = "nvmath._fastcall is not built (python setup.py build_ext --inplace, or make ext)"
needs_extension = pytest.mark.skipif(_fastcall is None, reason=NOT_BUILT)
FastCall = _fastcall.FastCall if _fastcall is not None else None

CALLERS = [
    pytest.param(pure_caller, id="pure"),
    pytest.param(FastCall, id="compiled", marks=needs_extension),
]

MASK = 2**64 - 1


class Recorder:
    """A C function ``int f(argtype x0, ..., argtype x{n-1})`` recording its calls (a ctypes callback)."""

    def __init__(self, n: int, status: int = 0, argtype: Any = ctypes.c_uint64) -> None:
        self.calls: list[tuple[int, ...]] = []
        self.status = status
        self._cfunc = ctypes.CFUNCTYPE(ctypes.c_int, *([argtype] * n))(self._record)
        self.address = ctypes.cast(self._cfunc, ctypes.c_void_p).value

    def _record(self, *args: int) -> int:
        self.calls.append(args)
        return self.status


def libc_address(symbol: str) -> int:
    """The address of a C library function of this process."""
    return ctypes.cast(ctypes.CDLL(None)[symbol], ctypes.c_void_p).value


def gil_check_address() -> int:
    """The address of ``int PyGILState_Check(void)``: 1 when the calling thread holds the GIL."""
    return ctypes.cast(ctypes.pythonapi.PyGILState_Check, ctypes.c_void_p).value
