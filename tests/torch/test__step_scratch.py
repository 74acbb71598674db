"""nvmath.torch._step_scratch.carve: a step's small tensors as views of one allocation -- the shapes and
dtype asked for, each view on 256 bytes from the allocation's start (as a tensor of its own from the
CUDA caching allocator), disjoint, one storage, zero-filled when asked; one torch operation in all."""

from __future__ import annotations

import itertools

import pytest

torch = pytest.importorskip("torch")

from nvmath.torch._step_scratch import ALIGN, carve


@pytest.mark.parametrize("dtype", [torch.float32, torch.float8_e4m3fn, torch.bfloat16], ids=str)
def test_views_aligned_disjoint_one_storage(dtype):
    """Every view has its shape, is contiguous, starts on ALIGN bytes from the first one, does not
    overlap the others, and all share one storage; an empty shape takes no room."""
    shapes = ((3, 5), (7,), (0,), (2, 2, 2), (1,))
    views = carve(shapes, dtype, torch.device("cpu"))
    assert [tuple(v.shape) for v in views] == [tuple(s) for s in shapes]
    base = views[0].data_ptr()
    spans = []
    for v in views:
        assert v.dtype == dtype and v.is_contiguous()
        assert v.untyped_storage().data_ptr() == views[0].untyped_storage().data_ptr()
        if v.numel():  # (an empty tensor's data_ptr() is 0)
            assert (v.data_ptr() - base) % ALIGN == 0
            spans.append((v.data_ptr(), v.data_ptr() + v.numel() * v.element_size()))
    spans.sort()
    assert all(a[1] <= b[0] for a, b in itertools.pairwise(spans))


def test_zero_fill_and_one_operation():
    """``zero=True`` gives zeros everywhere (writes into one view leave the others zero) with one torch
    operation for all the views (the allocation; views are not operations)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    ops = []

    class Count(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if not func.is_view:
                ops.append(func.overloadpacket.__name__)
            return func(*args, **(kwargs or {}))

    with Count():
        a, b, c = carve(((4,), (2, 3), (5,)), torch.float32, torch.device("cpu"), zero=True)
    assert ops == ["zeros"]
    b.fill_(7.0)
    assert not a.any() and not c.any() and bool((b == 7).all())
