"""Tests of DeviceArray: attributes and exports without a GPU; allocation and zero-copy interop on a GPU."""

from __future__ import annotations

import gc

import numpy as np
import pytest

from nvmath._internal import streams
from nvmath._internal.tensors import dlpack, wrap
from nvmath._internal.tensors.device_array import DeviceArray
from nvmath._internal.tensors.copy import copy_into


class _Owner:
    pass


def _fake(shape=(3, 4), strides=(4, 1), dtype="float32"):
    return DeviceArray(0x7F0000000000, shape, strides, dtype, 0, _Owner())


def test_attributes():
    """A DeviceArray is its own tensor, package 'cuda', with the given layout."""
    a = _fake(strides=(1, 3))
    assert a.tensor is a and wrap(a) is a
    assert (a.package, a.device, a.device_id, a.is_conjugate) == ("cuda", "cuda", 0, False)
    assert (a.shape, a.strides, a.dtype, a.itemsize, a.size) == ((3, 4), (1, 3), "float32", 4, 12)


def test_cuda_array_interface():
    """__cuda_array_interface__ v3 reports data, typestr and byte strides (None when C-ordered)."""
    c = _fake().__cuda_array_interface__
    assert c["version"] == 3 and c["typestr"] == "<f4" and c["strides"] is None and c["shape"] == (3, 4)
    assert c["data"] == (0x7F0000000000, False) and c["stream"] is None
    f = _fake(strides=(1, 3)).__cuda_array_interface__
    assert f["strides"] == (4, 12)


def test_cuda_array_interface_stream():
    """The exported stream is the last writer's; the legacy default 0 is exported as 1."""
    a = _fake()
    a.mark_written(streams.StreamHandle(0, 0, "cuda"))
    assert a.__cuda_array_interface__["stream"] == 1
    a.mark_written(streams.StreamHandle(0x1234, 0, "cuda"))
    assert a.__cuda_array_interface__["stream"] == 0x1234


def test_dlpack_export_without_sync():
    """__dlpack__(stream=-1) exports a capsule (legacy or versioned) kept alive by the consumer."""
    a = _fake()
    before = dlpack.live_exports()
    assert a.__dlpack_device__() == (dlpack.KDL_CUDA, 0)
    cap = a.__dlpack__(stream=-1)
    assert "dltensor" in repr(cap) and dlpack.live_exports() == before + 1
    del cap
    gc.collect()
    assert dlpack.live_exports() == before
    assert "dltensor_versioned" in repr(a.__dlpack__(stream=-1, max_version=(1, 1)))


def test_dlpack_export_errors():
    """Copies, other devices, bad stream types and freed arrays are refused."""
    a = _fake()
    with pytest.raises(BufferError):
        a.__dlpack__(stream=-1, copy=True)
    with pytest.raises(BufferError):
        a.__dlpack__(stream=-1, dl_device=(1, 0))
    with pytest.raises(TypeError):
        a.__dlpack__(stream="s")
    a.free()
    with pytest.raises(BufferError, match="freed"):
        a.__dlpack__(stream=-1)


# --------------------------------------------------------------------------------------------- GPU
@pytest.mark.gpu
def test_allocate_and_round_trip_numpy():
    """numpy -> DeviceArray -> numpy keeps values and axis order, for several layouts."""
    base = np.arange(60, dtype=np.float64).reshape(3, 4, 5)
    handle = streams.get_stream(None, device_id=0, package="numpy")
    for view in [base, np.asfortranarray(base), base[:, ::2, ::-1], np.broadcast_to(base[:1], (3, 4, 5))]:
        d = wrap(view).to(0, handle)
        assert isinstance(d, DeviceArray) and d.device_id == 0
        back = d.to("cpu", handle)
        assert np.array_equal(back.tensor, view)
    assert wrap(np.asfortranarray(base)).to(0, handle).strides == (1, 3, 12)


@pytest.mark.gpu
def test_allocate_honours_strides_and_zero_size():
    """DeviceArray.allocate honours strides; zero-size and 0-d arrays allocate and copy back."""
    d = DeviceArray.allocate((2, 3), "complex64", strides=(1, 2), device_id=0)
    assert d.strides == (1, 2) and d.data_ptr % 256 == 0
    assert DeviceArray.allocate((0, 3), "float32", device_id=0).to("cpu").tensor.shape == (0, 3)
    scalar = wrap(np.array(5.0)).to(0)
    assert float(scalar.to("cpu").tensor) == 5.0


@pytest.mark.gpu
def test_torch_and_cupy_import_zero_copy(torch_cuda):
    """torch.from_dlpack sees the DeviceArray's memory and values without a copy."""
    torch = torch_cuda
    d = wrap(np.arange(6, dtype=np.float32).reshape(2, 3)).to(0)
    t = torch.from_dlpack(d)
    assert t.data_ptr() == d.data_ptr and t.tolist() == [[0, 1, 2], [3, 4, 5]]
    del d
    gc.collect()
    assert t.sum().item() == 15  # the tensor keeps the memory alive


@pytest.mark.gpu
def test_cupy_import_via_both_protocols(cupy):
    """cupy imports a DeviceArray through DLPack and through the CUDA array interface."""
    d = wrap(np.arange(6, dtype=np.float32).reshape(2, 3).T).to(0)
    a = cupy.from_dlpack(d)
    b = cupy.asarray(d)
    assert a.data.ptr == b.data.ptr == d.data_ptr
    assert cupy.asnumpy(a).tolist() == cupy.asnumpy(b).tolist() == [[0, 3], [1, 4], [2, 5]]


@pytest.mark.gpu
def test_second_device_round_trip_and_mismatch():
    """On a second GPU, arrays round-trip; copies across GPUs raise ValueError."""
    from nvmath._internal import devices

    if devices.device_count() < 2:
        pytest.skip("needs 2 GPUs")
    host = np.arange(10, dtype=np.float32)
    d1 = wrap(host).to(1)
    assert d1.device_id == 1
    assert np.array_equal(d1.to("cpu").tensor, host)
    with pytest.raises(ValueError, match="between GPUs"):
        d1.to(0)
    d0 = wrap(host).to(0)
    with pytest.raises(ValueError, match="between GPUs"):
        copy_into(d0, d1)
