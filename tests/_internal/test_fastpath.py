"""nvmath._internal.fastpath: the path selection, and the compiled and pure callers behaving identically.

Every caller test runs on both classes (``pure``: ctypes; ``compiled``: nvmath._fastcall, skipped with a
reason when not built) against real C functions: ctypes callbacks that record their arguments, libc
functions, CPython's ``PyGILState_Check`` and, where the NVIDIA wheels are installed, the real
cuBLASLt / cuBLAS / cuFFT entry points called with NULL handles (they answer without a GPU).
"""

from __future__ import annotations

import ctypes
import enum
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from fastcall_probes import (
    CALLERS,
    MASK,
    FastCall,
    Recorder,
    gil_check_address,
    libc_address,
    needs_extension,
)

from nvmath._errors import FunctionNotFoundError, LibraryNotFoundError
from nvmath._internal import fastpath

ROOT = Path(__file__).resolve().parents[2]


class Color(enum.IntEnum):
    RED = 3


# -- calls ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("cls", CALLERS)
@pytest.mark.parametrize("n", range(fastpath.MAX_ARGS + 1))
def test_every_arity_passes_the_vector_with_slots_filled(cls, n):
    """For 0..24 arguments, a call passes the fixed vector with the slots (first, last) replaced."""
    probe = Recorder(n, status=0)
    fixed = [1000 + i for i in range(n)]
    slots = list(dict.fromkeys([n - 1, 0])) if n else []  # last then first: call order is not position order
    caller = cls(probe.address, fixed, slots)
    values = [7 * (k + 1) for k in range(len(slots))]
    assert caller(*values) == 0
    expected = list(fixed)
    for position, value in zip(slots, values):
        expected[position] = value
    assert probe.calls == [tuple(expected)]


@pytest.mark.parametrize("cls", CALLERS)
@pytest.mark.parametrize("status", [0, 1, 7, -1, 2**31 - 1])
def test_the_int_status_is_returned(cls, status):
    """The callee's int return (a library status) is the call's result, negative values included."""
    probe = Recorder(3, status=status)
    assert cls(probe.address, [1, 2, 3], [1])(9) == status
    assert probe.calls == [(1, 9, 3)]


@pytest.mark.parametrize("cls", CALLERS)
def test_negative_and_wide_values_are_passed_as_64_bit_twos_complement(cls):
    """-1 and 2**64-1 are the same 64 bits; an int32 parameter given -5 sees -5 (also on the stack)."""
    wide = Recorder(10)
    cls(wide.address, [-1, 2**64 - 1, -(2**63)] + [0] * 7, [9])(-2)
    assert wide.calls == [(MASK, MASK, 2**63, 0, 0, 0, 0, 0, 0, MASK - 1)]
    narrow = Recorder(10, argtype=ctypes.c_int32)
    cls(narrow.address, [-5] * 10, [8, 9])(-7, 2**31 - 1)
    assert narrow.calls == [(-5,) * 8 + (-7, 2**31 - 1)]


@pytest.mark.parametrize("cls", CALLERS)
def test_index_objects_are_accepted(cls):
    """numpy integers, IntEnum members and bools are integers (``__index__``), as in the bindings."""
    probe = Recorder(4)
    cls(probe.address, [np.int32(-1), Color.RED, True, 0], [3])(np.uint64(2**64 - 1))
    assert probe.calls == [(MASK, 3, 1, MASK)]


@pytest.mark.parametrize("cls", CALLERS)
def test_a_libc_function_is_called_by_address(cls):
    """abs(int) through its address: the int parameter and the int return round-trip."""
    assert cls(libc_address("abs"), [0], [0])(-42) == 42


@pytest.mark.parametrize("cls", CALLERS)
def test_error_class_raises_with_the_status(cls):
    """With error=cuBLASLtError a nonzero status raises cuBLASLtError(status) (the bindings' mapping)."""
    from nvmath.bindings.cublasLt import cuBLASLtError

    probe = Recorder(2, status=7)
    caller = cls(probe.address, [0, 0], [0], error=cuBLASLtError)
    with pytest.raises(cuBLASLtError) as info:
        caller(5)
    reference = cuBLASLtError(7)
    assert (info.value.status, info.value.status_name, str(info.value)) == (
        7,
        reference.status_name,
        str(reference),
    )
    probe.status = 0
    assert caller(5) == 0


@pytest.mark.parametrize("cls", CALLERS)
@pytest.mark.parametrize("release", [False, True])
def test_the_gil_is_kept_unless_release_gil(cls, release):
    """PyGILState_Check called through the caller sees the GIL held, or released with release_gil=True."""
    caller = cls(gil_check_address(), [], [], release_gil=release)
    assert caller() == (0 if release else 1)
    assert caller.release_gil is release


@pytest.mark.parametrize("cls", CALLERS)
def test_attributes_describe_the_call(cls):
    """address, arity, fixed (unsigned), slots and error describe the caller."""
    probe = Recorder(4)
    caller = cls(probe.address, [1, -1, 0, 4], (2, 0), error=KeyError)
    assert (caller.address, caller.arity, caller.fixed, caller.slots) == (
        probe.address,
        4,
        (1, MASK, 0, 4),
        (2, 0),
    )
    assert caller.error is KeyError and caller.release_gil is False


# -- bad input ------------------------------------------------------------------------------------------

_BAD_CONSTRUCTION = [
    ({"address": 1.5}, TypeError, "address must be an int"),
    ({"address": "0x10"}, TypeError, "address must be an int"),
    ({"address": 0}, ValueError, "nonzero function address"),
    ({"address": -8}, OverflowError, "address -8 is out of range"),
    (
        {"fixed": [1, 2.0, 3]},
        TypeError,
        "fixed argument 1 must be an int (pointer, handle, enum or integer), not float: float-class",
    ),
    (
        {"fixed": [1, "a", 3]},
        TypeError,
        "fixed argument 1 must be an int (pointer, handle, enum or integer) or an object with __index__, not str",
    ),
    ({"fixed": [1, 2, 2**64]}, OverflowError, "fixed argument 2 = 18446744073709551616 is out of range"),
    ({"fixed": [1, 2, None]}, TypeError, "fixed argument 2 must be an int"),
    ({"fixed": 5}, TypeError, "fixed arguments must be a sequence of ints"),
    ({"fixed": [0] * 25, "slots": []}, ValueError, "at most 24 arguments, got 25"),
    ({"slots": [3]}, ValueError, "slot 0 = 3 is not an argument position: allowed 0 .. 2"),
    ({"slots": [-1]}, ValueError, "slot 0 = -1 is not an argument position"),
    ({"slots": [0, 0]}, ValueError, "slot 1 repeats argument position 0"),
    ({"slots": [0, 1.0]}, TypeError, "slot 1 must be an int (an argument position), not float"),
    ({"slots": [0, 1, 2, 0]}, ValueError, "4 slots for 3 arguments"),
    ({"slots": 7}, TypeError, "slots must be a sequence of argument positions"),
    ({"error": ValueError("x")}, TypeError, "error must be None or an exception class, not ValueError"),
    ({"error": int}, TypeError, "error must be None or an exception class, not type"),
]


@pytest.mark.parametrize("cls", CALLERS)
@pytest.mark.parametrize("change, exc, message", _BAD_CONSTRUCTION, ids=lambda v: str(v)[:40])
def test_bad_construction_is_refused_with_the_value_named(cls, change, exc, message):
    """A bad address, argument, slot or error class raises a typed error naming it (same on both paths)."""
    probe = Recorder(3)
    kwargs = {"address": probe.address, "fixed": [1, 2, 3], "slots": [0]} | change
    address, fixed, slots = kwargs.pop("address"), kwargs.pop("fixed"), kwargs.pop("slots")
    with pytest.raises(exc) as info:
        cls(address, fixed, slots, **kwargs)
    assert message in str(info.value)
    assert probe.calls == []


_BAD_CALLS = [
    ((), TypeError, "takes 2 per-call arguments (one per slot), got 0"),
    ((1, 2, 3), TypeError, "takes 2 per-call arguments (one per slot), got 3"),
    ((1.0, 2), TypeError, "per-call argument 0 must be an int (pointer, handle, enum or integer), not float"),
    (
        (1, np.float64(2)),
        TypeError,
        "per-call argument 1 must be an int (pointer, handle, enum or integer), not",
    ),
    (
        (1, None),
        TypeError,
        "per-call argument 1 must be an int (pointer, handle, enum or integer) or an object with __index__, not NoneType",
    ),
    ((1, b"ab"), TypeError, "per-call argument 1 must be an int"),
    ((2**64, 1), OverflowError, "per-call argument 0 = 18446744073709551616 is out of range for a 64-bit"),
    ((1, -(2**63) - 1), OverflowError, "per-call argument 1 = -9223372036854775809 is out of range"),
]


@pytest.mark.parametrize("cls", CALLERS)
@pytest.mark.parametrize("values, exc, message", _BAD_CALLS, ids=lambda v: str(v)[:30])
def test_bad_per_call_values_are_refused_before_the_call(cls, values, exc, message):
    """A wrong count, a non-integer or an out-of-range value raises, naming it, and calls nothing."""
    probe = Recorder(3)
    caller = cls(probe.address, [1, 2, 3], [0, 2])
    with pytest.raises(exc) as info:
        caller(*values)
    assert message in str(info.value)
    assert probe.calls == []


@pytest.mark.parametrize("cls", CALLERS)
def test_keyword_arguments_are_refused(cls):
    """Per-call values are positional only."""
    probe = Recorder(1)
    with pytest.raises(TypeError, match="keyword"):
        cls(probe.address, [0], [0])(value=1)


@needs_extension
def test_compiled_and_pure_callers_agree_on_random_vectors():
    """Random vectors, slots and values: both callers pass the callee exactly the same 64-bit arguments."""
    rng = np.random.default_rng(21)
    for _ in range(50):
        n = int(rng.integers(0, fastpath.MAX_ARGS + 1))
        fixed = [int(v) for v in rng.integers(-(2**63), 2**63, size=n, dtype=np.int64)]
        slots = [int(s) for s in rng.permutation(n)[: int(rng.integers(0, n + 1))]]
        values = [int(v) for v in rng.integers(0, 2**63, size=len(slots), dtype=np.int64)]
        status = int(rng.integers(-5, 5))
        compiled, pure = Recorder(n, status), Recorder(n, status)
        assert FastCall(compiled.address, fixed, slots)(*values) == status
        assert fastpath.pure_caller(pure.address, fixed, slots)(*values) == status
        assert compiled.calls == pure.calls and len(pure.calls) == 1


# -- real library entry points (no GPU: NULL handles answer at once) -------------------------------------


def _address_or_skip(library: str, symbol: str) -> int:
    try:
        return fastpath.symbol_address(library, symbol)
    except LibraryNotFoundError as exc:
        pytest.skip(f"{library} is not installed here (pip install -e .): {exc}")


@pytest.mark.parametrize("cls", CALLERS)
def test_cublaslt_matmul_with_a_null_handle_fails_as_the_binding_does(cls):
    """cublasLtMatmul (16 arguments) with a NULL handle: the same status and cuBLASLtError as the binding."""
    from nvmath.bindings._unchecked import cublasLt as unchecked
    from nvmath.bindings.cublasLt import cuBLASLtError

    address = _address_or_skip("cublasLt", "cublasLtMatmul")
    with pytest.raises(cuBLASLtError) as reference:
        unchecked.matmul(*([0] * 16))
    caller = cls(address, [0] * 16, [3, 5, 10, 15])
    assert caller(0, 0, 0, 0) == reference.value.status
    with pytest.raises(cuBLASLtError) as info:
        cls(address, [0] * 16, [3, 5, 10, 15], error=cuBLASLtError)(0, 0, 0, 0)
    assert (info.value.status, info.value.status_name) == (
        reference.value.status,
        reference.value.status_name,
    )


@pytest.mark.parametrize("cls", CALLERS)
def test_cublas_gemm_strided_batched_ex_takes_23_arguments(cls):
    """cublasGemmStridedBatchedEx_64 (23 arguments) with a NULL handle returns the binding's status."""
    from nvmath.bindings._unchecked import cublas as unchecked
    from nvmath.bindings.cublas import cuBLASError

    address = _address_or_skip("cublas", "cublasGemmStridedBatchedEx_64")
    with pytest.raises(cuBLASError) as reference:
        unchecked.gemm_strided_batched_ex_64(*([0] * 23))
    assert cls(address, [0] * 23, [7, 11, 16])(0, 0, 0) == reference.value.status


def test_symbol_address_names_a_missing_symbol():
    """An unknown library is a ValueError; a symbol the library lacks a FunctionNotFoundError."""
    with pytest.raises(ValueError, match="unknown library 'cuNothing'"):
        fastpath.symbol_address("cuNothing", "f")
    _address_or_skip("cublasLt", "cublasLtMatmul")
    with pytest.raises(FunctionNotFoundError, match="cublasLtNoSuchFunction is not exported"):
        fastpath.symbol_address("cublasLt", "cublasLtNoSuchFunction")


def test_driver_symbol_address_without_a_driver_is_library_not_found():
    """Without libcuda.so.1, driver_symbol_address raises LibraryNotFoundError naming the driver."""
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:
        with pytest.raises(LibraryNotFoundError, match="libcuda.so.1"):
            fastpath.driver_symbol_address("cuEventRecord")
    else:
        assert fastpath.driver_symbol_address("cuEventRecord") > 0
        with pytest.raises(FunctionNotFoundError, match="cuNoSuchEntryPoint"):
            fastpath.driver_symbol_address("cuNoSuchEntryPoint")


# -- path selection ------------------------------------------------------------------------------------

_PROBE = "from nvmath._internal import fastpath as f; print(f.available(), type(f.make_caller(1, [], [])).__name__, f.describe())"

_BLOCK = (
    "import sys, importlib.abc\n"
    "class Block(importlib.abc.MetaPathFinder):\n"
    "    def find_spec(self, name, path=None, target=None):\n"
    "        if name == 'nvmath._fastcall': raise ImportError('blocked by the test')\n"
    "sys.meta_path.insert(0, Block())\n"
)


def _run(code: str, **env: str) -> str:
    environ = {k: v for k, v in os.environ.items() if k != fastpath.ENV_VAR} | env
    environ["PYTHONPATH"] = str(ROOT)
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=environ, check=True, cwd=ROOT
    )
    return proc.stdout.strip()


def test_environment_variable_forces_the_pure_path():
    """NVMATH_PURE_PYTHON=1 selects the pure caller (a generated function) and says so."""
    assert (
        _run(_PROBE, NVMATH_PURE_PYTHON="1") == "False function pure Python (forced by NVMATH_PURE_PYTHON=1)"
    )


def test_a_missing_extension_selects_the_pure_path_and_says_why():
    """Without nvmath._fastcall, the pure path is chosen and described as 'not built' with the fix."""
    out = _run(_BLOCK + _PROBE)
    assert out.startswith(
        "False function pure Python (the extension nvmath._fastcall is not built: blocked by the test"
    )
    assert "build_ext --inplace" in out


@needs_extension
@pytest.mark.parametrize("value", ["", "0"])
def test_the_compiled_path_is_chosen_when_built(value):
    """With the extension built and the variable unset (or 0), make_caller returns a FastCall."""
    assert _run(_PROBE, NVMATH_PURE_PYTHON=value).startswith("True FastCall compiled (nvmath._fastcall, ")


def test_make_caller_returns_the_active_class():
    """make_caller builds the class the selection reports (this process's environment)."""
    caller = fastpath.make_caller(libc_address("abs"), [0], [0])
    if fastpath.available():
        assert type(caller) is FastCall
    else:
        assert caller.__name__ == "pure_call" and caller.fixed == (0,)
    assert caller(-3) == 3
