"""The recycling of cuBLASLt layouts and descriptors (``_descriptors.HandlePool``), on the CPU.

cuBLASLt's layout and descriptor objects are host-side, so they are created for real here: a recycled
handle must read back exactly the attributes a new one would have, have one owner at a time, and be
destroyed by the pool's ``clear()`` (and when the pool is full).
"""

from __future__ import annotations

import pytest

import nvmath.linalg.advanced as adv
from nvmath._internal import caches
from nvmath.bindings import cublasLt as lt
from nvmath.linalg.advanced import _descriptors as D
from nvmath.linalg.advanced._traits import MatrixLayout as Layout


@pytest.fixture
def pools(monkeypatch):
    """libcublasLt loaded (else skip), and empty pools before and after the test."""
    try:
        lt.get_version()
    except Exception as exc:  # noqa: BLE001
        pytest.skip(f"cuBLASLt not loadable: {exc}")
    D.LAYOUTS.clear()
    D.DESCRIPTORS.clear()
    yield
    D.LAYOUTS.clear()
    D.DESCRIPTORS.clear()


def _counting(monkeypatch, name):
    """Count the successful calls of the C function ``name`` (e.g. cublasLtMatrixLayoutCreate)."""
    real = lt._bind.resolve(name)
    calls = []

    def counted(*args):
        status = real(*args)
        if not status:
            calls.append(args)
        return status

    monkeypatch.setattr(lt, "_p_" + name, counted)
    return calls


def _layout_attrs(ptr):
    get = lambda n: lt.matrix_layout_get(ptr, lt.MatrixLayoutAttribute[n])  # noqa: E731
    return tuple(get(n) for n in ("TYPE", "ROWS", "COLS", "LD", "ORDER", "BATCH_COUNT", "STRIDED_BATCH_OFFSET"))


def test_a_closed_layout_is_reused_with_the_same_attributes(pools, monkeypatch):
    """Closing a layout keeps its handle; the next layout of the same fields takes it without a
    create call and reads back the same attributes; the closed object owns nothing any more."""
    creates = _counting(monkeypatch, "cublasLtMatrixLayoutCreate")
    destroys = _counting(monkeypatch, "cublasLtMatrixLayoutDestroy")
    spec = Layout(5, 7, 8, 1, "bfloat16", 3, 56)  # row order, batched: three attributes set
    reuses = D.LAYOUTS.stats.reuses
    first = D.MatrixLayout(spec)
    ptr, attrs = first.ptr, _layout_attrs(first.ptr)
    assert attrs == (int(lt.CudaDataType.R_16BF), 5, 7, 8, 1, 3, 56)
    first.close()
    assert first.closed and D.LAYOUTS.stats.size == 1 and destroys == []
    second = D.MatrixLayout(Layout(5, 7, 8, 1, "bfloat16", 3, 56))  # an equal, distinct spec
    assert second.ptr == ptr and _layout_attrs(second.ptr) == attrs
    assert len(creates) == 1 and D.LAYOUTS.stats.reuses == reuses + 1
    first.close()  # closing the old owner again touches nothing
    assert not second.closed and D.LAYOUTS.stats.size == 0
    second.close()


def test_a_layout_of_other_fields_is_made_anew(pools, monkeypatch):
    """A pooled handle is never given to a layout of other fields (here: another batch offset)."""
    creates = _counting(monkeypatch, "cublasLtMatrixLayoutCreate")
    D.MatrixLayout(Layout(4, 4, 4, 0, "float32", 2, 16)).close()
    other = D.MatrixLayout(Layout(4, 4, 4, 0, "float32", 2, 32))
    assert len(creates) == 2
    assert _layout_attrs(other.ptr)[-1] == 32
    other.close()


def test_a_plain_descriptor_is_reused_with_its_attributes(pools, monkeypatch):
    """A descriptor whose attributes all came with its construction is recycled under them."""
    creates = _counting(monkeypatch, "cublasLtMatmulDescCreate")
    attrs = (("TRANSA", 1), ("EPILOGUE", int(adv.MatmulEpilog.RELU)))
    desc = D.MatmulDesc(adv.MatmulComputeType.COMPUTE_32F, 0, attrs)
    ptr = desc.ptr
    desc.close()
    again = D.MatmulDesc(adv.MatmulComputeType.COMPUTE_32F, 0, attrs)
    assert again.ptr == ptr and len(creates) == 1
    assert again.get("TRANSA") == 1 and again.get("EPILOGUE") == int(adv.MatmulEpilog.RELU)
    assert again.attributes == dict(attrs)
    other = D.MatmulDesc(adv.MatmulComputeType.COMPUTE_32F, 0, (("TRANSA", 1),))  # fewer attributes
    assert len(creates) == 2 and other.get("EPILOGUE") == int(adv.MatmulEpilog.DEFAULT)
    again.close()
    other.close()


@pytest.mark.parametrize("change", ["pointer", "set"])
def test_a_descriptor_changed_after_construction_is_destroyed(pools, monkeypatch, change):
    """A descriptor that got a pointer attribute or a later set() is destroyed on close, never pooled
    (its state is no longer what its construction arguments say)."""
    destroys = _counting(monkeypatch, "cublasLtMatmulDescDestroy")
    desc = D.MatmulDesc(adv.MatmulComputeType.COMPUTE_32F, 0)
    if change == "pointer":
        desc.pointer("BIAS_POINTER").set(0xDEAD0000)
    else:
        desc.set("TRANSB", 1)
    desc.close()
    assert len(destroys) == 1 and D.DESCRIPTORS.stats.size == 0


def test_pool_is_bounded_and_clear_destroys(pools, monkeypatch):
    """A full pool destroys its oldest handle to keep a new one; clear() destroys every kept one;
    both pools are registered caches (caches.clear_all() empties them)."""
    destroys = _counting(monkeypatch, "cublasLtMatrixLayoutDestroy")
    monkeypatch.setattr(D.LAYOUTS, "maxsize", 2)
    made = [D.MatrixLayout(Layout(n, n, n, 0, "float32", 1, n * n)) for n in (2, 3, 4)]
    ptrs = [layout.ptr for layout in made]
    for layout in made:
        layout.close()
    assert D.LAYOUTS.stats.size == 2 and destroys == [(ptrs[0],)]  # the oldest went
    caches.clear_all()  # (also frees layouts that other cached plans of this process return to the pool)
    assert D.LAYOUTS.stats.size == 0 and {(p,) for p in ptrs} <= set(destroys)
    assert caches.registered()["nvmath.linalg.advanced: matmul descriptors"] is D.DESCRIPTORS


def test_a_pool_of_size_zero_recycles_nothing(pools, monkeypatch):
    """maxsize 0 turns recycling off: every closed layout is destroyed, every new one created."""
    creates = _counting(monkeypatch, "cublasLtMatrixLayoutCreate")
    destroys = _counting(monkeypatch, "cublasLtMatrixLayoutDestroy")
    monkeypatch.setattr(D.LAYOUTS, "maxsize", 0)
    for _ in range(2):
        D.MatrixLayout(Layout(3, 3, 3, 0, "float32", 1, 9)).close()
    assert len(creates) == 2 and len(destroys) == 2 and D.LAYOUTS.stats.size == 0


def test_a_full_pool_after_a_key_was_taken_empty_evicts_a_kept_handle():
    """Taking a key's last handle leaves no empty list behind: a later give() to the full pool evicts a
    handle that is kept (it raised IndexError from a finalizer on the GPU: the oldest key's list was empty)."""
    destroyed = []
    pool = D.HandlePool("test pool", destroyed.append, maxsize=2)
    pool.give("a", 1)
    pool.give("b", 2)
    assert pool.take("a") == 1  # "a" now has no handle kept
    pool.give("c", 3)
    pool.give("d", 4)  # full: the oldest kept handle (b's) makes room
    assert destroyed == [2] and pool.stats.size == 2
    assert pool.take("c") == 3 and pool.take("d") == 4 and pool.take("b") == 0


def test_clear_all_empties_a_pool_refilled_by_a_cache_cleared_after_it():
    """caches.clear_all() leaves a handle pool empty even when clearing a later-registered cache (a plan
    cache freeing its planners) hands handles back to the pool."""
    destroyed = []
    pool = caches.register("test: refilled pool", D.HandlePool("test pool", destroyed.append, maxsize=4))

    class Refiller:
        stats = None
        planners = [7]  # one freed planner's handle, handed back once

        def clear(self) -> None:
            while self.planners:
                pool.give("k", self.planners.pop())

    caches.register("test: refiller", Refiller())
    try:
        caches.clear_all()
        assert pool.stats.size == 0 and 7 in destroyed
    finally:
        caches._REGISTRY.pop("test: refilled pool")
        caches._REGISTRY.pop("test: refiller")
