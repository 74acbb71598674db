"""The stateful Matmul: lifecycle (plan once, execute, reset, release, free, context manager), the
bad inputs refused before any GPU work, and the signatures of nvmath-python 1.0."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import nvmath.linalg as la
from nvmath.linalg.generic import MatmulStateError


@pytest.fixture
def ops():
    rng = np.random.default_rng(0)
    return rng.standard_normal((6, 4)), rng.standard_normal((4, 3)), rng.standard_normal((6, 3))


def test_signatures_match_nvmath_python():
    """matmul / Matmul / methods have nvmath-python 1.0's parameters."""
    expected = ["a", "b", "c", "alpha", "beta", "qualifiers", "options", "execution", "stream"]
    assert list(inspect.signature(la.matmul).parameters) == expected
    assert list(inspect.signature(la.Matmul).parameters) == expected
    assert inspect.signature(la.matmul).parameters["a"].kind is inspect.Parameter.POSITIONAL_ONLY
    assert inspect.signature(la.matmul).parameters["alpha"].kind is inspect.Parameter.KEYWORD_ONLY
    for method in ("plan", "execute", "execute_unchecked"):
        assert list(inspect.signature(getattr(la.Matmul, method)).parameters) == ["self", "stream"]
    params = list(inspect.signature(la.Matmul.reset_operands).parameters)
    assert params == ["self", "a", "b", "c", "alpha", "beta", "stream"]
    assert la.generic.matmul is la.matmul and la.generic.Matmul is la.Matmul


def test_lifecycle(ops):
    """plan once, execute, reset operands and scalars, release (ValueError), reset all, free (state error)."""
    a, b, c = ops
    mm = la.Matmul(a, b, c, alpha=1.0, beta=0.5)
    with pytest.raises(la.InvalidMatmulState, match="before plan"):
        mm.execute()
    mm.plan()
    mm.plan()
    np.testing.assert_allclose(mm.execute(), a @ b + 0.5 * c)
    a2 = a + 1
    mm.reset_operands(a=a2, alpha=2.0)
    np.testing.assert_allclose(mm.execute(), 2 * a2 @ b + 0.5 * c)
    mm.release_operands()
    with pytest.raises(ValueError, match="release_operands"):
        mm.execute()
    with pytest.raises(ValueError, match=r"missing \['b', 'c'\]"):
        mm.reset_operands(a=a)
    mm.reset_operands(a=a, b=b, c=c)
    np.testing.assert_allclose(mm.execute_unchecked(), 2 * a @ b + 0.5 * c)
    mm.free()
    mm.free()
    with pytest.raises(la.InvalidMatmulState, match="after free"):
        mm.execute()
    with pytest.raises(MatmulStateError, match="create a new Matmul"):
        mm.reset_operands(a=a)


def test_context_manager(ops):
    """with Matmul(...) as mm: frees on exit."""
    a, b, _ = ops
    with la.Matmul(a, b) as mm:
        mm.plan()
        np.testing.assert_allclose(mm.execute(), a @ b)
    with pytest.raises(la.InvalidMatmulState):
        mm.execute()


def test_reset_checks_the_kind(ops):
    """reset_operands refuses operands of another shape, dtype, layout or package, naming what differs."""
    a, b, c = ops
    mm = la.Matmul(a, b)
    mm.plan()
    with pytest.raises(ValueError, match="shape"):
        mm.reset_operands(a=np.ones((5, 4)))
    with pytest.raises(ValueError, match="dtype"):
        mm.reset_operands(a=a.astype(np.float32))
    with pytest.raises(ValueError, match="strides"):
        mm.reset_operands(a=np.asfortranarray(a))
    with pytest.raises(ValueError, match="c was not given"):
        mm.reset_operands(c=c)
    mm.free()


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda a, b, c: la.matmul(a, b.astype(np.float32)), ValueError, "dtypes must match"),
        (lambda a, b, c: la.matmul(a, a), ValueError, "inner dimensions"),
        (lambda a, b, c: la.matmul(a, b, c[:, :2], beta=1.0), ValueError, "result's shape"),
        (lambda a, b, c: la.matmul(a, b, c), ValueError, "beta must be given"),
        (lambda a, b, c: la.matmul(a[::-1], b), ValueError, "negative strides"),
        (lambda a, b, c: la.matmul(a, {"b": b}), TypeError, "not supported"),
        (lambda a, b, c: la.matmul(a, b, alpha="2"), TypeError, "alpha must be a number"),
        (lambda a, b, c: la.matmul(a, b, alpha=1j), ValueError, "complex"),
        (lambda a, b, c: la.matmul(a, b, options={"nope": 1}), TypeError, "nope"),
        (lambda a, b, c: la.matmul(a, b, execution="tpu"), ValueError, "tpu"),
        (lambda a, b, c: la.matmul(a, b, options={"inplace": True}), ValueError, "needs c"),
        (
            lambda a, b, c: la.matmul(
                a,
                b,
                qualifiers=np.array(
                    [la.DiagonalMatrixQualifier.create(), la.GeneralMatrixQualifier.create()]
                ),
            ),
            ValueError,
            "1-D vector",
        ),
        (lambda a, b, c: la.matmul([a, a], [b, b, b]), ValueError, "one length"),
        (lambda a, b, c: la.matmul([a, a], [b], alpha=[1.0, 2.0, 3.0]), ValueError, "alpha has 3"),
        (
            lambda a, b, c: la.matmul([a, a.astype(np.float32)], [b, b.astype(np.float32)]),
            ValueError,
            "one dtype",
        ),
    ],
)
def test_bad_inputs(ops, call, error, match):
    """Each bad input is a typed error naming the value."""
    with pytest.raises(error, match=match):
        call(*ops)


def test_mixed_packages(torch, ops):
    """Operands from two packages are a TypeError naming both."""
    a, b, _ = ops
    with pytest.raises(TypeError, match="one package"):
        la.matmul(a, torch.from_numpy(b))


def test_gpu_operands_refuse_cpu_execution(fake_gpu):
    """GPU operands with execution='cpu' contradict: a ValueError before any work."""
    import cublas_fakes

    x = cublas_fakes.fake(np.ones((2, 2)))
    with pytest.raises(ValueError, match="GPU operands run on their device"):
        la.matmul(x, x, execution="cpu")


def test_beta_without_c_warns(ops):
    """beta without c is ignored with a warning (as nvmath-python)."""
    a, b, _ = ops
    with pytest.warns(UserWarning, match="beta"):
        np.testing.assert_allclose(la.matmul(a, b, beta=2.0), a @ b)


def test_repr(ops):
    """The repr names the problem count, kind, space and state."""
    a, b, _ = ops
    mm = la.Matmul(a, b)
    assert "gemm" in repr(mm) and "CPU" in repr(mm) and "CREATED" in repr(mm)
