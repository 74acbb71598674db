"""Tests of nvmath.fft._planner_support: the planner's stateless helpers."""

from __future__ import annotations

import numpy as np
import pytest

from nvmath._internal.execution import ExecutionCPU, ExecutionCUDA
from nvmath._internal.tensors import wrap
from nvmath.fft import _planner_support as ps
from nvmath.fft._options import FFTOptions

torch = pytest.importorskip("torch")


def test_device_package_host_operands():
    """numpy host operands use cuda.core buffers on the device; torch keeps its own allocator."""
    assert ps.device_package(wrap(np.zeros(4, np.complex64), "x")) == "cuda"
    assert ps.device_package(wrap(torch.zeros(4, dtype=torch.complex64), "x")) == "torch"


def test_resolved_materializes_lazy_conjugation_but_not_in_place():
    """A lazily conjugated torch tensor is resolved (a copy); in place it is refused with the fix."""
    t = torch.tensor([1 + 2j, 3 - 1j], dtype=torch.complex64).conj()
    out = ps.resolved(wrap(t, "operand"), inplace=False)
    assert not out.is_conjugate and torch.equal(out.tensor, t.resolve_conj())
    with pytest.raises(ValueError, match="resolve_conj"):
        ps.resolved(wrap(t, "operand"), inplace=True)
    plain = wrap(torch.zeros(2, dtype=torch.complex64), "operand")
    assert ps.resolved(plain, inplace=True) is plain


def test_make_key_separates_what_decides_the_plan():
    """Keys differ by traits, execution and callbacks; equal inputs give equal keys."""
    a = wrap(np.zeros((4, 8), np.complex64), "x")
    opts = FFTOptions()
    t1 = ps.operand_traits(a, (1,), opts, ExecutionCPU())
    t0 = ps.operand_traits(a, (0,), opts, ExecutionCPU())
    key = ps.make_key(t1, ExecutionCPU(), None, None)
    assert key == ps.make_key(t1, ExecutionCPU(), None, None)
    assert key != ps.make_key(t0, ExecutionCPU(), None, None)
    assert key != ps.make_key(t1, ExecutionCPU(num_threads=2), None, None)
    assert key != ps.make_key(t1, ExecutionCUDA(), None, None)


def test_fast_torch_only_for_torch_gpu_out_of_place():
    """Host operands never take torch.empty_strided results directly."""
    a = wrap(torch.zeros(8, dtype=torch.complex64), "x")
    traits = ps.operand_traits(a, None, FFTOptions(), ExecutionCPU())
    assert not ps.fast_torch(a, traits)


def test_host_array_shares_memory():
    """host_array views the operand's memory (no copy) for numpy and torch CPU tensors."""
    t = torch.zeros(3, dtype=torch.complex64)
    ps.host_array(wrap(t, "x"))[1] = 5
    assert t[1] == 5
    n = np.zeros(3, np.complex128)
    ps.host_array(wrap(n, "x"))[2] = 7
    assert n[2] == 7


class _Stream:
    def __init__(self, ptr):
        self.ptr = ptr


def test_torch_allocator_makes_the_result_on_torchs_current_stream_only(monkeypatch):
    """The allocator returns an uninitialised result of the traits' shape, strides and dtype when the
    stream is torch's current one -- read from torch unless the caller says it is current -- and
    ``None`` on any other stream (the planner then allocates through the adapter, on that stream)."""
    from nvmath._internal import streams

    reads = []
    raw = lambda device_id: reads.append(device_id) or 0x70  # noqa: E731 - torch's raw stream getter
    monkeypatch.setattr(streams, "torch_raw_stream", lambda: raw)
    monkeypatch.setattr(ps, "torch_device", lambda device_id: torch.device("cpu"))
    a = wrap(torch.zeros((4, 6), dtype=torch.float32).t(), "x")  # a transposed (column-major) operand
    traits = ps.operand_traits(a, (0,), FFTOptions(), ExecutionCUDA())
    allocate = ps.torch_allocator(traits, 3)
    out = allocate(_Stream(0x70), False)
    layout = (tuple(out.shape), out.stride(), out.dtype)
    assert layout == (traits.result_shape, traits.result_strides, torch.complex64)
    assert not out.requires_grad and reads == [3]
    assert allocate(_Stream(0x71), False) is None and reads == [3, 3]
    again = allocate(_Stream(0x71), True)  # the caller read the current stream this call: not read again
    assert tuple(again.shape) == traits.result_shape and reads == [3, 3]
    assert again.data_ptr() != out.data_ptr()
