"""nvmath._fastcall (nvmath/_fastcall.c): the compiled caller against the C probes built into it.

The probes are plain C functions of 0..24 ``uint64_t`` parameters (and one of alternating ``int32_t`` /
``uint64_t``) that record what they receive: no ctypes on the callee side, so these check the
extension's own calling convention, including arguments passed on the stack. The behaviour shared
with the pure-Python caller is tested in tests/_internal/test_fastpath.py.
"""

from __future__ import annotations

import gc
import sys
import threading
import tracemalloc

import pytest
from fastcall_probes import MASK, NOT_BUILT

fastcall = pytest.importorskip("nvmath._fastcall", reason=NOT_BUILT)
FastCall = fastcall.FastCall


@pytest.fixture(autouse=True)
def _reset_probe():
    fastcall._probe_set_status(0)
    yield
    fastcall._probe_set_status(0)


@pytest.mark.parametrize("n", range(fastcall.MAX_ARGS + 1))
def test_every_arity_reaches_a_c_function_exactly(n):
    """Each of 0..24 arguments arrives in its parameter (registers and stack), slots filled in call order."""
    fixed = [(0xA5A5 << 40) + i for i in range(n)]
    slots = list(range(n - 1, -1, -3))  # every third position, from the last backwards
    values = [2**64 - 1 - k for k in range(len(slots))]
    fastcall._probe_set_status(n + 100)
    assert FastCall(fastcall._probe_address(n), fixed, slots)(*values) == n + 100
    expected = list(fixed)
    for position, value in zip(slots, values):
        expected[position] = value
    assert fastcall._probe_record() == (n, tuple(expected))


def test_narrow_parameters_read_the_low_bits_in_registers_and_on_the_stack():
    """int32_t parameters (positions 0..10, even) see the signed 32-bit value given, as in C."""
    address = fastcall._probe_mixed_address()
    FastCall(address, [-5, 2**64 - 1] * 6, [10, 11])(-(2**31), 2**63)
    arity, record = fastcall._probe_record()
    assert arity == 12
    as_int32 = [v - 2**64 if v >= 2**63 else v for v in record[0::2]]
    assert as_int32 == [-5] * 5 + [-(2**31)]
    assert record[1::2] == (MASK,) * 5 + (2**63,)


def test_module_constants_describe_the_build():
    """MAX_ARGS is 24 (cublasGemmStridedBatchedEx needs 23) and ABI names the calling convention."""
    assert fastcall.MAX_ARGS == 24
    assert fastcall.ABI in ("x86_64 System V", "aarch64 AAPCS64")


def test_probe_address_range_is_checked():
    """The test hook refuses an arity it does not have."""
    with pytest.raises(ValueError, match="no probe of 25 arguments"):
        fastcall._probe_address(25)


def test_calls_and_construction_do_not_leak_references_or_memory():
    """Many creations and calls (also failing ones) keep refcounts and traced memory flat."""
    error, value = KeyError, 2**62 + 12345  # a value that is not a cached small int
    refs = sys.getrefcount(error), sys.getrefcount(value)
    address = fastcall._probe_address(16)

    def churn(rounds):
        for _ in range(rounds):
            caller = FastCall(address, [value] * 16, [2, 5, 10, 15], error=error)
            caller(value, value, value, value)
            with pytest.raises(TypeError):
                caller(value, value, value, 1.5)

    churn(200)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        churn(5000)
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert grown < 64 * 1024, f"{grown} bytes still allocated after 5000 rounds"
    assert (sys.getrefcount(error), sys.getrefcount(value)) == refs


def test_a_caller_in_a_reference_cycle_is_collected():
    """The error class is visited by the GC: a cycle through it is freed."""

    class Failure(Exception):
        pass

    Failure.caller = FastCall(fastcall._probe_address(0), [], [], error=Failure)
    witness = __import__("weakref").ref(Failure)
    del Failure
    gc.collect()
    assert witness() is None


def test_one_caller_is_shared_by_threads():
    """Concurrent calls with the GIL released each pass their own values (the vector is copied per call)."""
    caller = FastCall(fastcall._probe_address(3), [1, 2, 3], [1], release_gil=True)
    failures = []

    def work(k):
        for _ in range(2000):
            if caller(k) != 0:
                failures.append(k)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []
    assert caller.fixed == (1, 2, 3)  # the stored vector is never written by a call


def test_repr_names_the_address_arity_and_slots():
    """repr shows the address, the argument count, the slots and a released GIL."""
    address = fastcall._probe_address(4)
    text = repr(FastCall(address, [0] * 4, (2, 0), release_gil=True))
    assert (
        f"{address:#x}" in text and "4 arguments" in text and "(2, 0)" in text and "releases the GIL" in text
    )


def test_a_caller_is_not_picklable():
    """Pickling a caller (a raw address) is refused rather than silently producing a stale address."""
    import pickle

    with pytest.raises(TypeError):
        pickle.dumps(FastCall(fastcall._probe_address(1), [0], [0]))
