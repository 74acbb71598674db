"""Tests of the ctypes DLPack exporter (on host memory, consumed by numpy and torch)."""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest

from nvmath._internal import dtypes
from nvmath._internal.tensors import dlpack


class _Owner:
    """Keeps a numpy buffer; tracks its own lifetime with a weakref."""

    def __init__(self, array):
        self.array = array


class _HostExport:
    """Exports a layout over an owner's numpy buffer through make_capsule."""

    def __init__(self, owner, shape, strides, dtype="float32"):
        self.owner, self.shape, self.strides, self.dtype = owner, shape, strides, dtype

    def __dlpack_device__(self):
        return (dlpack.KDL_CPU, 0)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        versioned = max_version is not None and max_version[0] >= 1
        return dlpack.make_capsule(
            self.owner.array.ctypes.data,
            self.shape,
            self.strides,
            dtypes.dlpack_dtype(self.dtype),
            (dlpack.KDL_CPU, 0),
            self.owner,
            versioned=versioned,
        )


def _settle():
    gc.collect()
    return dlpack.live_exports()


def test_numpy_consumes_strided_export():
    """numpy.from_dlpack sees the exported shape, strides and data without a copy."""
    base = np.arange(12, dtype=np.float32)
    before = _settle()
    x = np.from_dlpack(_HostExport(_Owner(base), (3, 2), (1, 3)))
    assert x.shape == (3, 2) and x.strides == (4, 12)
    assert x.__array_interface__["data"][0] == base.ctypes.data
    assert np.array_equal(x, base[:6].reshape(2, 3).T)
    del x
    assert _settle() == before


def test_torch_consumes_export(torch):
    """torch.from_dlpack takes the capsule and releases the owner when the tensor dies."""
    owner = _Owner(np.arange(6, dtype=np.float32))
    ref = weakref.ref(owner)
    t = torch.from_dlpack(_HostExport(owner, (2, 3), (3, 1)))
    del owner
    gc.collect()
    assert ref() is not None
    assert t.tolist() == [[0, 1, 2], [3, 4, 5]]
    del t
    gc.collect()
    assert ref() is None


@pytest.mark.parametrize("versioned", [False, True])
def test_unconsumed_capsule_releases_owner(versioned):
    """A capsule nobody consumes frees its managed tensor when collected."""
    owner = _Owner(np.zeros(4, dtype=np.float32))
    ref = weakref.ref(owner)
    before = _settle()
    capsule = _HostExport(owner, (4,), (1,)).__dlpack__(max_version=(1, 0) if versioned else None)
    assert ("dltensor_versioned" if versioned else "dltensor") in repr(capsule)
    assert dlpack.live_exports() == before + 1
    del capsule, owner
    assert _settle() == before and ref() is None


def test_zero_size_and_0d_exports():
    """Zero-size and 0-d layouts export and import."""
    base = np.arange(3, dtype=np.float32)
    assert np.from_dlpack(_HostExport(_Owner(base), (0, 3), (3, 1))).shape == (0, 3)
    scalar = np.from_dlpack(_HostExport(_Owner(base[1:]), (), ()))
    assert scalar.shape == () and float(scalar) == 1.0


def test_a_deleter_that_releases_another_managed_tensor_does_not_deadlock():
    """The DLPack deleter drops what it kept alive outside its lock: when that releases another of our
    managed tensors (nested exports), the second deleter runs instead of waiting on the first's lock
    (it hung at interpreter exit on the GPU machine)."""
    import threading

    from nvmath._internal.tensors import dlpack as dl

    inner, outer = 1_000_001, 1_000_002

    class ReleasesInner:
        def __del__(self) -> None:
            dl._delete(inner)

    dl._LIVE[inner] = (object(),)
    dl._LIVE[outer] = (ReleasesInner(),)
    t = threading.Thread(target=dl._delete, args=(outer,), daemon=True)
    t.start()
    t.join(10)
    assert not t.is_alive(), "the nested deleter deadlocked"
    assert inner not in dl._LIVE and outer not in dl._LIVE
