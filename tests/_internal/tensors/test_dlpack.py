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


_EXIT_SCRIPT = """
import numpy as np, torch
from nvmath._internal import dtypes
from nvmath._internal.tensors import dlpack
held = []
for i in range(4):
    buf = np.arange(8, dtype=np.float32) + i
    capsule = dlpack.make_capsule(buf.ctypes.data, (8,), (1,), dtypes.dlpack_dtype("float32"),
                                  (dlpack.KDL_CPU, 0), buf, versioned=i % 2 == 1)
    held.append(torch.from_dlpack(capsule))
held.append(dlpack.make_capsule(buf.ctypes.data, (8,), (1,), dtypes.dlpack_dtype("float32"),
                                (dlpack.KDL_CPU, 0), buf, versioned=False))  # never consumed
# torch's module is wiped after ours at interpreter exit: the tensors (and the capsule) die after that
torch._nvmath_test_held = held
print("exported", float(held[3].sum()))
"""


def test_consumers_released_at_interpreter_exit_after_this_module_was_wiped():
    """Tensors a consumer still holds while the interpreter wipes this module's globals (then
    releases them) call the deleter without touching the wiped globals: no "'NoneType' object has
    no attribute 'pop'" and no segmentation fault at exit (both seen in the distributed GPU children)."""
    import os
    import subprocess
    import sys

    pytest.importorskip("torch")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    env = dict(os.environ, PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    done = subprocess.run([sys.executable, "-X", "faulthandler", "-c", _EXIT_SCRIPT], capture_output=True,
                          text=True, timeout=120, env=env, cwd=root)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "exported 52.0" in done.stdout
    assert "Exception ignored" not in done.stderr and "Segmentation" not in done.stderr, done.stderr[-3000:]
