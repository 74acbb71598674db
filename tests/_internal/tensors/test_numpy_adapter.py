"""Tests of the numpy adapter: pointers, layouts, dtypes, empty() and to()."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from nvmath._internal.tensors import wrap
from nvmath._internal.tensors.host import densify, element_strides, host_empty, view_from_ptr
from nvmath._internal.tensors.numpy_adapter import NumpyAdapter


def _ptr(a: np.ndarray) -> int:
    return a.__array_interface__["data"][0]


def _check(a: np.ndarray, dtype: str):
    w = wrap(a)
    assert isinstance(w, NumpyAdapter) and w.tensor is a
    assert w.data_ptr == _ptr(a)
    assert w.shape == a.shape
    assert w.strides == tuple(s // a.itemsize for s in a.strides)
    assert (w.dtype, w.itemsize, w.size) == (dtype, a.itemsize, a.size)
    assert (w.package, w.device, w.device_id, w.is_conjugate) == ("numpy", "cpu", "cpu", False)
    return w


BASE = np.arange(60, dtype=np.float32).reshape(3, 4, 5)


@pytest.mark.parametrize(
    "view",
    [
        BASE,
        BASE[1:, ::2, 1:4],
        BASE.transpose(2, 0, 1),
        np.asfortranarray(BASE),
        BASE[::-1, :, ::-2],
        np.broadcast_to(BASE[:, :1, :], (3, 7, 5)),
        BASE[1, 2, 3, ...],
        BASE[:0],
    ],
    ids=["c", "sliced", "transposed", "fortran", "negative", "broadcast", "0d", "empty"],
)
def test_views(view):
    """Sliced, transposed, Fortran, negative-stride, broadcast, 0-d and empty views wrap exactly."""
    _check(view, "float32")


def test_broadcast_has_zero_stride():
    """A broadcast axis has stride 0."""
    w = _check(np.broadcast_to(np.arange(3.0), (4, 3)), "float64")
    assert w.strides == (0, 1)


@pytest.mark.parametrize(
    "name", ["float16", "float32", "float64", "complex64", "complex128", "int8", "int32", "uint8"]
)
def test_dtypes(name):
    """Each numpy dtype reports its canonical name."""
    _check(np.zeros((2, 3), dtype=name), name)


@pytest.mark.parametrize("name", ["bfloat16", "float8_e4m3fn", "float8_e5m2"])
def test_ml_dtypes(name):
    """bf16 / fp8 arrays from ml_dtypes report their canonical names."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    _check(np.zeros((2, 3), dtype=getattr(ml_dtypes, name)), name)


def test_subclass_is_numpy():
    """ndarray subclasses use the numpy adapter."""

    class Sub(np.ndarray):
        pass

    a = np.zeros(4).view(Sub)
    assert isinstance(wrap(a), NumpyAdapter)


def test_non_native_byte_order_names_the_operand():
    """A byte-swapped array is rejected with ValueError naming the operand."""
    a = np.zeros(3, dtype=np.dtype("float32").newbyteorder())
    with pytest.raises(ValueError, match="operand 'x'.*byte order"):
        wrap(a, "operand 'x'")


def test_unsupported_dtype():
    """A string array is rejected with ValueError."""
    with pytest.raises(ValueError, match="not supported"):
        wrap(np.array(["a"]))


@pytest.mark.parametrize("strides", [None, (1, 2, 6), (4, 1, 8), (12, 4, 1), (30, 5, 1)])
def test_empty_honours_strides(strides):
    """empty() returns an owned, writable numpy array with exactly the requested element strides."""
    w = wrap(BASE).empty((2, 3, 4), "complex64", strides=strides)
    assert isinstance(w, NumpyAdapter) and w.dtype == "complex64" and w.shape == (2, 3, 4)
    assert w.strides == (strides or (12, 4, 1))
    w.tensor[...] = 1 + 2j
    assert w.tensor.flags.writeable and (w.tensor == 1 + 2j).all()


def test_empty_zero_size_and_0d():
    """empty() handles zero-size and 0-d shapes."""
    assert wrap(BASE).empty((0, 3), "float32").size == 0
    assert wrap(BASE).empty((), "float64").shape == ()


def test_empty_rejects_negative_strides():
    """Negative strides for a new array raise ValueError."""
    with pytest.raises(ValueError, match="non-negative"):
        wrap(BASE).empty((2, 2), "float32", strides=(-2, 1))


def test_to_cpu_is_identity():
    """to('cpu') of a numpy operand returns the same adapter."""
    w = wrap(BASE)
    assert w.to("cpu") is w


def test_element_strides_rejects_misaligned():
    """Byte strides that are not multiples of the item size raise ValueError."""
    with pytest.raises(ValueError, match="multiples"):
        element_strides((6, 3), 4)


def test_densify_keeps_axis_order():
    """densify returns dense arrays unchanged and copies others densely in their axis order."""
    f = np.asfortranarray(BASE)
    assert densify(f) is f
    d = densify(f[:, ::2])
    assert d.flags.f_contiguous and np.array_equal(d, f[:, ::2])
    n = densify(BASE[::-1])
    assert n.flags.c_contiguous and np.array_equal(n, BASE[::-1])


def test_host_empty_and_view_from_ptr():
    """host_empty allocates exact strides; view_from_ptr sees the same memory."""
    a = host_empty((3, 2), (1, 3), "float64")
    a[...] = np.arange(6).reshape(3, 2)
    v = view_from_ptr(_ptr(a), (3, 2), (1, 3), "float64")
    assert np.array_equal(v, a)


@given(
    st.lists(st.integers(1, 5), min_size=1, max_size=3),
    st.lists(st.sampled_from([1, 2, -1, -2]), min_size=3, max_size=3),
    st.sampled_from(["float32", "complex128", "int8"]),
)
def test_pointer_and_strides_match_numpy(shape, steps, dtype):
    """For random strided views, data_ptr and strides agree with numpy's own report."""
    base = np.zeros([n * 2 for n in shape], dtype=dtype)
    view = base[tuple(slice(None, None, s) for s in steps[: len(shape)])]
    _check(view, dtype)
