"""Tests of tensors.copy (copy_into / to across packages and memory spaces)."""

from __future__ import annotations

import numpy as np
import pytest

from nvmath._internal import streams
from nvmath._internal.tensors import wrap
from nvmath._internal.tensors.copy import copy_into

BASE = np.arange(24, dtype=np.float32).reshape(2, 3, 4)


def test_numpy_to_numpy_across_layouts():
    """copy_into between host arrays of different layouts copies the values."""
    dst = wrap(np.zeros((4, 3, 2), dtype=np.float32, order="F"))
    copy_into(dst, wrap(BASE.transpose(2, 1, 0)))
    assert np.array_equal(dst.tensor, BASE.transpose(2, 1, 0))


def test_numpy_into_torch_cpu(torch):
    """copy_into from numpy into a strided CPU torch tensor goes through host views."""
    t = torch.zeros(4, 6)[:, ::2]
    copy_into(wrap(t), wrap(BASE.reshape(4, 6)[:, 1::2].copy()))
    assert np.array_equal(t.numpy(), BASE.reshape(4, 6)[:, 1::2])


def test_conjugated_torch_source_is_resolved(torch):
    """Copying a lazily conjugated torch tensor into numpy gives the conjugated values."""
    z = torch.tensor([1 + 2j, 3 - 4j], dtype=torch.complex64)
    out = wrap(np.zeros(2, dtype=np.complex64))
    copy_into(out, wrap(z.conj()))
    assert np.array_equal(out.tensor, np.array([1 - 2j, 3 + 4j], dtype=np.complex64))


def test_torch_to_torch_cpu(torch):
    """torch-to-torch copies use torch's own copy (conjugation included)."""
    dst = wrap(torch.zeros(2, 3))
    src = torch.arange(6.0).reshape(3, 2).T
    copy_into(dst, wrap(src))
    assert torch.equal(dst.tensor, src)


def test_mismatch_errors():
    """Different shapes or dtypes raise ValueError; zero-size copies do nothing."""
    with pytest.raises(ValueError, match="shape"):
        copy_into(wrap(np.zeros(3)), wrap(np.zeros(4)))
    with pytest.raises(ValueError, match="no casting"):
        copy_into(wrap(np.zeros(3)), wrap(np.zeros(3, dtype=np.float32)))
    copy_into(wrap(np.zeros((0, 2))), wrap(np.zeros((0, 2))))


# --------------------------------------------------------------------------------------------- GPU
@pytest.mark.gpu
@pytest.mark.parametrize("layout", ["c", "f", "sliced", "negative"])
def test_host_device_copies_into_existing(layout):
    """copy_into numpy -> DeviceArray -> numpy into existing arrays of another layout keeps values."""
    from nvmath._internal.tensors.device_array import DeviceArray

    src = {"c": BASE, "f": np.asfortranarray(BASE), "sliced": BASE[:, ::2], "negative": BASE[::-1, :, ::-1]}[
        layout
    ]
    handle = streams.get_stream(None, device_id=0, package="numpy")
    dev = DeviceArray.allocate(
        src.shape,
        "float32",
        strides=(1, src.shape[0], src.shape[0] * src.shape[1]),
        device_id=0,
        stream=handle,
    )
    copy_into(dev, wrap(src), handle)
    out = wrap(np.zeros(src.shape, dtype=np.float32))
    copy_into(out, dev, handle)
    assert np.array_equal(out.tensor, src)


@pytest.mark.gpu
def test_device_to_device_strided_copy():
    """A DeviceArray-to-DeviceArray copy between different layouts keeps the values."""
    from nvmath._internal.tensors.device_array import DeviceArray

    handle = streams.get_stream(None, device_id=0, package="numpy")
    src = wrap(BASE).to(0, handle)
    dst = DeviceArray.allocate(BASE.shape, "float32", strides=(1, 2, 6), device_id=0, stream=handle)
    copy_into(dst, src, handle)
    assert np.array_equal(dst.to("cpu", handle).tensor, BASE)


@pytest.mark.gpu
def test_numpy_into_sliced_torch_cuda(torch_cuda):
    """copy_into from numpy into a sliced CUDA tensor leaves the gaps untouched."""
    torch = torch_cuda
    full = torch.full((4, 6), -1.0, device="cuda")
    view = full[:, ::2]
    handle = streams.get_stream(None, device_id=0, package="torch")
    copy_into(wrap(view), wrap(np.ones((4, 3), dtype=np.float32)), handle)
    torch.cuda.synchronize()
    assert full[:, ::2].eq(1).all() and full[:, 1::2].eq(-1).all()


@pytest.mark.gpu
def test_copy_is_ordered_after_producer_work(torch_cuda):
    """A slow producer kernel on the caller's stream, then our copy on it: right data, no host sync."""
    torch = torch_cuda
    side = torch.cuda.Stream(0)
    handle = streams.get_stream(side, device_id=0, package="torch")
    x = torch.zeros(1 << 22, device="cuda")
    with torch.cuda.stream(side):
        torch.cuda._sleep(100_000_000)
        x.fill_(7.0)
    out = wrap(np.zeros(1 << 22, dtype=np.float32))
    copy_into(out, wrap(x), handle)  # blocking into host memory, ordered on `side`
    assert (out.tensor == 7.0).all()


@pytest.mark.gpu
def test_numpy_result_flow_matches_planner_use():
    """The planner flow for numpy operands: to(device) -> empty on device -> copy_ -> to('cpu')."""
    handle = streams.get_stream(None, device_id=0, package="numpy")
    a = wrap(np.asfortranarray(BASE))
    dev = a.to(0, handle)
    result = a.empty(BASE.shape, "float32", device_id=0, stream=handle)
    copy_into(result, dev, handle)
    host = result.to("cpu", handle)
    assert np.array_equal(host.tensor, BASE)
