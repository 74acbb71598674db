"""cufftXtExec's caller (CufftPlan's only caller of it): compiled and pure pass the same arguments (a
recording C function stands in for cuFFT) and raise cuFFTError on a failure status (CPU only)."""

from __future__ import annotations

import ctypes

import pytest
from fastcall_probes import FastCall, needs_extension

from nvmath._internal import fastpath
from nvmath.bindings import cufft
from nvmath.fft import _cufft_plan

PATHS = [pytest.param(True, id="compiled", marks=needs_extension), pytest.param(False, id="pure")]


def _probe(monkeypatch, status=0):
    calls = []
    cfunc = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_int)(
        lambda *args: calls.append(args) or status
    )
    monkeypatch.setattr(cufft, "_p_cufftXtExec", cfunc)
    return calls, cfunc


@pytest.mark.parametrize("compiled", PATHS)
def test_exec_arguments_and_direction(monkeypatch, compiled):
    """(plan handle, input, output, direction) reach cufftXtExec unchanged, both directions."""
    monkeypatch.setattr(fastpath, "_COMPILED", FastCall if compiled else None)
    calls, keep = _probe(monkeypatch)
    call = _cufft_plan._unchecked_exec()
    assert FastCall is None or isinstance(call, FastCall) == compiled
    call(5, 0x1000, 0x2000, -1)
    call(5, 0x1000, 0x2000, 1)
    assert calls == [(5, 0x1000, 0x2000, -1), (5, 0x1000, 0x2000, 1)]


@pytest.mark.parametrize("compiled", PATHS)
def test_exec_failure_raises_cufft_error(monkeypatch, compiled):
    """A nonzero status raises cuFFTError with that status."""
    monkeypatch.setattr(fastpath, "_COMPILED", FastCall if compiled else None)
    _, keep = _probe(monkeypatch, status=5)
    with pytest.raises(cufft.cuFFTError) as info:
        _cufft_plan._unchecked_exec()(5, 1, 2, -1)
    assert info.value.status == 5
