"""Tests of the cupy adapter (GPU only: cupy needs a device)."""

from __future__ import annotations

import numpy as np
import pytest

from nvmath._internal import streams
from nvmath._internal.tensors import wrap, wrap_operands
from nvmath._internal.tensors.copy import copy_into


@pytest.mark.gpu
def test_views(cupy):
    """Sliced, transposed, broadcast and negative-stride cupy views wrap exactly."""
    from nvmath._internal.tensors.cupy_adapter import CupyAdapter

    base = cupy.arange(60, dtype=cupy.float32).reshape(3, 4, 5)
    for view in [
        base,
        base[1:, ::2],
        base.transpose(2, 0, 1),
        cupy.broadcast_to(base[:, :1], (3, 6, 5)),
        base[::-1],
    ]:
        w = wrap(view)
        assert isinstance(w, CupyAdapter)
        assert w.data_ptr == view.data.ptr and w.shape == view.shape
        assert w.strides == tuple(s // 4 for s in view.strides)
        assert (w.dtype, w.device, w.device_id, w.package) == ("float32", "cuda", 0, "cupy")


@pytest.mark.gpu
def test_empty_uses_pool_and_honours_strides(cupy):
    """empty() allocates from cupy's pool on the given stream with the requested strides."""
    pool = cupy.get_default_memory_pool()
    before = pool.used_bytes()
    side = cupy.cuda.Stream(non_blocking=True)
    handle = streams.get_stream(side, device_id=0, package="cupy")
    r = wrap(cupy.zeros(1)).empty((64, 64), "complex64", strides=(1, 64), stream=handle)
    assert r.strides == (1, 64) and r.tensor.flags.f_contiguous
    assert pool.used_bytes() >= before + 64 * 64 * 8


@pytest.mark.gpu
def test_round_trip_and_copies(cupy):
    """cupy -> numpy (blocking) and numpy -> cupy copy_into keep the values."""
    a = cupy.arange(12, dtype=cupy.float64).reshape(3, 4)[:, ::-1]
    handle = streams.get_stream(None, device_id=0, package="cupy")
    host = wrap(a).to("cpu", handle)
    assert np.array_equal(host.tensor, cupy.asnumpy(a))
    dst = wrap(cupy.zeros((3, 4)))
    copy_into(dst, host, handle)
    handle.core.sync()
    assert cupy.array_equal(dst.tensor, a)


@pytest.mark.gpu
def test_mixing_with_torch_names_operands(cupy, torch_cuda):
    """cupy and torch operands together raise TypeError naming both."""
    with pytest.raises(TypeError, match="operand 'b' is a cupy array but 'a' is a torch tensor"):
        wrap_operands(a=torch_cuda.zeros(2, device="cuda"), b=cupy.zeros(2))
