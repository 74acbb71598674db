"""Tests of the strided device-copy kernel: axis coalescing (CPU) and copies for every item size (GPU)."""

from __future__ import annotations

import numpy as np
import pytest

from nvmath._internal import streams
from nvmath._internal.tensors import wrap
from nvmath._internal.tensors.kernels import MAX_DIMS, coalesce
from nvmath._internal.tensors.copy import copy_into


def test_coalesce_merges_contiguous_axes():
    """Axes contiguous in both layouts merge; size-1 axes vanish."""
    assert coalesce((2, 3, 4), (12, 4, 1), (12, 4, 1)) == ([24], [1], [1])
    assert coalesce((2, 1, 3), (3, 99, 1), (1, 7, 2)) == ([2, 3], [3, 1], [1, 2])
    assert coalesce((2, 3, 4), (12, 4, 1), (1, 2, 6)) == ([2, 3, 4], [12, 4, 1], [1, 2, 6])
    assert coalesce((), (), ()) == ([], [], [])


def test_coalesce_broadcast_source():
    """A broadcast (stride 0) source axis does not merge with its neighbour."""
    assert coalesce((4, 5), (5, 1), (0, 1)) == ([4, 5], [5, 1], [0, 1])


# --------------------------------------------------------------------------------------------- GPU
@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["int8", "float16", "float32", "float64", "complex128"])
def test_strided_copy_every_itemsize(dtype):
    """A DeviceArray copy between C and permuted layouts is exact for 1-16 byte items."""
    from nvmath._internal.tensors.device_array import DeviceArray

    host = (np.arange(2 * 3 * 4 * 5) % 100).astype(dtype).reshape(2, 3, 4, 5)
    handle = streams.get_stream(None, device_id=0, package="numpy")
    src = wrap(host).to(0, handle)
    dst = DeviceArray.allocate(host.shape, src.dtype, strides=(1, 2, 6, 24), device_id=0, stream=handle)
    copy_into(dst, src, handle)
    assert dst.strides == (1, 2, 6, 24)
    assert np.array_equal(dst.to("cpu", handle).tensor, host)


@pytest.mark.gpu
def test_strided_copy_many_axes_and_broadcast():
    """Copies with up to MAX_DIMS non-mergeable axes work; more raise NotImplementedError."""
    from nvmath._internal.tensors.device_array import DeviceArray
    from nvmath._internal.tensors.kernels import strided_copy

    handle = streams.get_stream(None, device_id=0, package="numpy")
    shape = (2,) * MAX_DIMS
    host = np.arange(2**MAX_DIMS, dtype=np.float32).reshape(shape)
    src = wrap(host).to(0, handle)
    f_strides = tuple(2**i for i in range(MAX_DIMS))
    dst = DeviceArray.allocate(shape, "float32", strides=f_strides, device_id=0, stream=handle)
    copy_into(dst, src, handle)
    assert np.array_equal(dst.to("cpu", handle).tensor, host)
    big = (2,) * (MAX_DIMS + 1)
    with pytest.raises(NotImplementedError, match="axes"):
        strided_copy(
            dst.data_ptr,
            tuple(2**i for i in range(MAX_DIMS + 1)),
            src.data_ptr,
            tuple(2 ** (MAX_DIMS - i) for i in range(MAX_DIMS + 1)),
            big,
            4,
            0,
            handle,
        )
