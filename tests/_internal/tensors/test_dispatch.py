"""Tests of nvmath._internal.tensors.dispatch: wrap, wrap_operands, check_consistent."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

from nvmath._internal.tensors import TensorAdapter, adapter_class, check_consistent, wrap, wrap_operands
from nvmath._internal.tensors.numpy_adapter import NumpyAdapter


class _Fake(TensorAdapter):
    """A stub adapter to test consistency checks without devices."""

    __slots__ = ("device", "device_id", "is_conjugate", "package")

    def __init__(self, package, device_id):
        self.package, self.device_id = package, device_id
        self.device = "cpu" if device_id == "cpu" else "cuda"

    def empty(self, *a, **k):  # pragma: no cover - not used
        raise NotImplementedError

    def to(self, *a, **k):  # pragma: no cover - not used
        raise NotImplementedError


def test_adapter_class_is_cached():
    """The adapter class of a type is resolved once and then read from the cache."""
    from nvmath._internal.tensors import dispatch

    assert adapter_class(np.ndarray) is NumpyAdapter
    assert dispatch._CLASSES[np.ndarray] is NumpyAdapter


@pytest.mark.parametrize("obj", [[1, 2], 3.0, "abc", None, {"a": 1}])
def test_unsupported_object_names_operand(obj):
    """An object of an unsupported type raises TypeError naming the operand and the accepted kinds."""
    with pytest.raises(TypeError, match="operand 'b' is a .*not supported.*numpy.ndarray"):
        wrap(obj, "operand 'b'")


def test_adapter_passes_through():
    """Wrapping an adapter returns it unchanged."""
    w = wrap(np.zeros(2))
    assert wrap(w) is w


def test_wrap_operands_skips_none_and_keeps_order():
    """wrap_operands wraps the given operands in order and skips None."""
    out = wrap_operands(a=np.zeros(2), c=None, b=np.ones(2))
    assert list(out) == ["a", "b"] and all(isinstance(v, NumpyAdapter) for v in out.values())


def test_package_mixing_names_both_operands(torch):
    """Operands from different packages raise TypeError naming both and their packages."""
    with pytest.raises(TypeError, match="operand 'b' is a numpy array but 'a' is a torch tensor"):
        wrap_operands(a=torch.zeros(2), b=np.zeros(2))


def test_unsupported_operand_in_wrap_operands():
    """An unsupported operand among others raises TypeError naming it."""
    with pytest.raises(TypeError, match="operand 'c'"):
        wrap_operands(a=np.zeros(2), c=[1.0])


def test_device_mixing_names_both_operands():
    """Operands on different devices raise ValueError naming both devices."""
    with pytest.raises(ValueError, match="operand 'b' is on device 1 but 'a' is on device 0"):
        check_consistent({"a": _Fake("cupy", 0), "b": _Fake("cupy", 1)})
    with pytest.raises(ValueError, match="'cpu'"):
        check_consistent({"a": _Fake("torch", 0), "b": _Fake("torch", "cpu")})


def test_check_consistent_returns_package_and_device():
    """check_consistent returns the common (package, device_id); no operand is an error."""
    assert check_consistent({"a": _Fake("jax", 2), "b": _Fake("jax", 2)}) == ("jax", 2)
    with pytest.raises(ValueError, match="no operand"):
        check_consistent({})


def test_wrapping_numpy_imports_no_other_package():
    """Wrapping numpy arrays never imports torch, cupy, jax or cuda.core."""
    code = textwrap.dedent(
        """
        import sys, numpy
        from nvmath._internal.tensors import wrap, wrap_operands
        wrap_operands(a=numpy.zeros((2, 2)), b=numpy.ones(3))
        bad = [m for m in ("torch", "cupy", "jax", "cuda.core") if m in sys.modules]
        assert not bad, bad
        print("ok")
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
