"""Symmetric memory against fake NVSHMEM bindings: layouts against numpy, the size agreement (and
make_symmetric), explicit collective frees, a warning and no free from garbage collection, and
finalize refusing while allocations live."""

from __future__ import annotations

import gc

import numpy as np
import pytest
from dist_fakes import SingleRank, ThreadGroup

import nvmath.distributed as nd
from nvmath._errors import NvmathWarning
from nvmath._internal.tensors.device_array import DeviceArray
from nvmath.distributed import _symmetric
from nvmath.distributed._symmetric import layout_strides


@pytest.fixture
def as_device_array(monkeypatch):
    """Return nvmath's own DeviceArray instead of a cupy/torch tensor (no GPU here)."""
    monkeypatch.setattr(
        _symmetric, "view_at", lambda address, shape, strides, dtype, device_id, owner, package: DeviceArray(
            address, shape, strides, dtype, device_id, owner)  # fmt: skip
    )


@pytest.mark.parametrize("shape", [(5,), (3, 4), (2, 3, 4), (4, 1, 6, 2)])
def test_layout_strides_match_numpy(shape):
    """'C', 'F' and a permutation give numpy's element strides for the same layout."""
    itemsize = 8
    assert layout_strides(shape, "C") == tuple(s // itemsize for s in np.empty(shape).strides)
    assert layout_strides(shape, "F") == tuple(s // itemsize for s in np.empty(shape, order="F").strides)
    perm = tuple(reversed(range(len(shape))))[::2] + tuple(reversed(range(len(shape))))[1::2]
    expected = np.empty([shape[a] for a in perm]).transpose(np.argsort(perm))
    assert layout_strides(shape, perm) == tuple(s // itemsize for s in expected.strides)


@pytest.mark.parametrize("bad", ["K", (0, 0), (2, 0), [0], None])
def test_layout_strides_rejects_bad_orders(bad):
    """An axis order that is not 'C', 'F' or a permutation raises a ValueError naming it."""
    with pytest.raises(ValueError, match="axis_order"):
        layout_strides((2, 3), bad)


def test_allocate_and_free(fake_runtime, as_device_array):
    """allocate checks sizes agree, mallocs the bytes, views them; free is explicit and once only."""
    group = SingleRank()
    nvshmem, _ = fake_runtime(group)
    nd.initialize(2, group, backends=["nvshmem"])
    group.calls.clear()
    x = nd.allocate_symmetric_memory((3, 5), "cupy", dtype="float32", axis_order="F")
    assert (x.shape, x.strides, x.dtype, x.device_id) == ((3, 5), (1, 3), "float32", 2)
    assert ("malloc", 60) in nvshmem.log and group.calls == ["allreduce_buffer", "allreduce_buffer"]
    with pytest.raises(RuntimeError, match=r"1 symmetric allocation\(s\)"):
        nd.finalize()
    nd.free_symmetric_memory(x)
    assert nvshmem.log[-1] == ("free", x.data_ptr)
    with pytest.raises(ValueError, match="not a live allocation"):
        nd.free_symmetric_memory(x)
    nd.finalize()


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "match"),
    [
        (((2, 2), "numpy"), {}, ValueError, "package='numpy'"),
        (((2, -1), "cupy"), {}, ValueError, "non-negative ints"),
        (((2, 2), "cupy"), {"dtype": "float128x"}, TypeError, "dtype='float128x'"),
        (((2, 2), "cupy"), {"axis_order": "K"}, ValueError, "axis_order='K'"),
    ],
)
def test_allocate_rejects_bad_arguments(fake_runtime, as_device_array, args, kwargs, error, match):
    """Bad package, shape, dtype or order raise before any collective or malloc."""
    group = SingleRank()
    nvshmem, _ = fake_runtime(group)
    nd.initialize(0, group, backends=["nvshmem"])
    group.calls.clear()
    with pytest.raises(error, match=match):
        nd.allocate_symmetric_memory(*args, **kwargs)
    assert group.calls == [] and not [e for e in nvshmem.log if e[0] == "malloc"]
    nd.finalize()


def test_allocate_needs_initialize_and_nvshmem(fake_runtime, as_device_array):
    """Before initialize, or without the nvshmem backend, allocation says what to do."""
    with pytest.raises(RuntimeError, match="not initialized"):
        nd.allocate_symmetric_memory((2,), "cupy")
    group = SingleRank()
    fake_runtime(group)
    nd.initialize(0, group, backends=["nccl"])
    with pytest.raises(RuntimeError, match="'nvshmem' backend"):
        nd.allocate_symmetric_memory((2,), "cupy")
    nd.finalize()


def test_unequal_sizes_raise_on_every_rank_or_are_padded(fake_runtime, as_device_array):
    """Different local sizes raise on every rank naming rank 1; make_symmetric allocates the largest."""
    group = ThreadGroup(2)
    nvshmem, _ = fake_runtime(group, nvshmem_status=2)  # a running NVSHMEM: one context for both thread-ranks
    started = group.run(lambda r: nd.initialize(0, group, backends=["nvshmem"]) if r == 0 else None)
    assert started == [None, None]
    results = group.run(lambda r: nd.allocate_symmetric_memory((4 + r,), "cupy", dtype="float64"))
    assert all(isinstance(e, nd.RankDisagreementError) for e in results), results
    assert all("rank(s) [1]" in str(e) and "bytes: rank 0 has 32, rank 1 has 40" in str(e) for e in results)
    arrays = group.run(
        lambda r: nd.allocate_symmetric_memory((4 + r,), "cupy", dtype="float64", make_symmetric=True)
    )
    assert [a.shape for a in arrays] == [(4,), (5,)]
    assert [e for e in nvshmem.log if e[0] == "malloc"] == [("malloc", 40), ("malloc", 40)]
    group.run(lambda r: nd.free_symmetric_memory(arrays[r]))
    del arrays
    nd.finalize()


def test_garbage_collected_tensor_warns_and_is_not_freed(fake_runtime, as_device_array):
    """Dropping a symmetric tensor warns (no collective from GC): no nvshmem_free, and finalize proceeds."""
    group = SingleRank()
    nvshmem, _ = fake_runtime(group)
    nd.initialize(0, group, backends=["nvshmem"])
    group.calls.clear()
    x = nd.allocate_symmetric_memory((8,), "cupy", skip_symmetric_check=True)
    assert group.calls == []
    with pytest.warns(NvmathWarning, match="NOT freed"):
        del x
        gc.collect()
    assert not [e for e in nvshmem.log if e[0] == "free"]
    nd.finalize()


def test_address_reused_after_free_stays_freeable_when_the_old_tensor_dies_late(
    fake_runtime, as_device_array
):
    """NVSHMEM hands a freed address out again: a tensor freed earlier and dropped only after the
    next allocation at its address (``out = plan.execute()`` in a loop) does not unregister the new
    allocation, which frees normally (on the GPU it raised "not a live allocation")."""
    group = SingleRank()
    nvshmem, _ = fake_runtime(group)
    nvshmem.reuse_freed = True
    nd.initialize(0, group, backends=["nvshmem"])
    out = nd.allocate_symmetric_memory((6,), "cupy", dtype="float32")
    first = out.data_ptr
    for _ in range(3):
        nd.free_symmetric_memory(out)
        out = nd.allocate_symmetric_memory((6,), "cupy", dtype="float32")  # the old one dies here
        gc.collect()
        assert out.data_ptr == first
        assert _symmetric.bytes_from(first) == 24
    nd.free_symmetric_memory(out)
    assert [e for e in nvshmem.log if e[0] == "free"] == [("free", first)] * 4
    assert _symmetric.bytes_from(first) is None
    nd.finalize()
