"""Tests of nvmath.linalg.advanced.helpers._arrays: the torch / numpy / cupy shim."""

from __future__ import annotations

import math

import numpy as np
import pytest

from nvmath.linalg.advanced.helpers import _arrays as A

torch = pytest.importorskip("torch")


def test_package_of_names_the_argument_and_the_accepted_kinds():
    """Lists, numpy scalars and foreign objects are not tensors; the error names the argument."""
    assert A.package_of(np.zeros(2), "x") == "numpy" and A.package_of(torch.zeros(2), "x") == "torch"
    for bad in ([1, 2], np.float32(1.0), "abc"):
        with pytest.raises(TypeError, match="scales must be a torch tensor, a numpy array or a cupy array"):
            A.package_of(bad, "scales")


def test_strides_are_in_elements():
    """numpy byte strides become element strides, like torch's."""
    assert A.strides(np.zeros((3, 4), np.float32).T) == (1, 4) == A.strides(torch.zeros(3, 4).T)


def test_exact_pow2_covers_the_ue8m0_range_exactly():
    """2**k is exact for every UE8M0 exponent, in both packages."""
    k = np.arange(-127, 128, dtype=np.int32)
    want = [math.ldexp(1.0, int(e)) for e in k]
    assert A.exact_pow2(k).tolist() == want == A.exact_pow2(torch.from_numpy(k)).tolist()


def test_min_max_of_empty_is_none():
    """An empty tensor has no range."""
    assert A.min_max(np.zeros(0, np.int32)) is None and A.min_max(torch.zeros(0, dtype=torch.int32)) is None
    assert A.min_max(torch.tensor([3, -2, 7])) == (-2, 7)


def test_to_device_checks_what_each_package_can_do():
    """numpy stays on 'cpu'; torch moves with .to; other devices are a ValueError."""
    x = np.zeros(3)
    assert A.to_device(x, None) is x and A.to_device(x, "cpu") is x
    with pytest.raises(ValueError, match="None or 'cpu' for a numpy array"):
        A.to_device(x, "cuda")
    assert A.to_device(torch.zeros(3), "cpu").device.type == "cpu"


def test_as_dtype_reports_missing_dtypes():
    """A dtype the package lacks is a ValueError naming it."""
    with pytest.raises(ValueError, match="no dtype 'float7'"):
        A.as_dtype("torch", "float7")
    with pytest.raises(ValueError, match="no dtype 'float7'"):
        A.as_dtype("numpy", "float7")
