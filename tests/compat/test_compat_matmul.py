"""Advanced matmul calls written for nvmath-python 1.0 run unchanged (CPU, on the fake cuBLASLt GPU).

Covers: ``c`` as a length-M vector, bias-gradient epilogs on operands in either memory order,
``reset_operands`` misuse exception types, ``release_operands`` dropping every reference,
``MatmulNumericalImplFlags`` names and the ``Algorithm`` constructor.
"""

from __future__ import annotations

import gc
import sys

import numpy as np
import pytest

import nvmath.linalg.advanced as adv
from nvmath.bindings import cublasLt as lt
from nvmath.linalg.advanced import MatmulEpilog as E


def _rand(rng, shape, order="C"):
    x = (rng.uniform(0.5, 1.5, shape) * rng.choice([-1, 1], shape)).astype(np.float32)
    return np.asfortranarray(x) if order == "F" else np.ascontiguousarray(x)


def _close(got, want):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    assert got.shape == want.shape
    assert np.linalg.norm(got - want) <= 2e-5 * np.linalg.norm(want)


def test_c_as_length_m_vector_is_broadcast(fake_gpu, rng):
    """``c`` of shape (M,) is added to every column, as nvmath-python does."""
    a, b, c = _rand(rng, (6, 4)), _rand(rng, (4, 5)), _rand(rng, (6,))
    out = adv.matmul(fake_gpu.fake(a), fake_gpu.fake(b), fake_gpu.fake(c), beta=0.5)
    _close(out.array, a.astype(np.float64) @ b + 0.5 * c[:, None])


def test_c_vector_of_wrong_length_is_value_error(fake_gpu, rng):
    """A 1-D ``c`` whose length is not M raises ValueError before any GPU work."""
    a, b = _rand(rng, (6, 4)), _rand(rng, (4, 5))
    with pytest.raises(ValueError, match="length M"):
        adv.Matmul(fake_gpu.fake(a), fake_gpu.fake(b), fake_gpu.fake(_rand(rng, (5,))), beta=1)


@pytest.mark.parametrize(("epilog", "name"), [(E.BGRADA, "bgrada"), (E.BGRADB, "bgradb")])
@pytest.mark.parametrize("orders", ["CC", "CF", "FC", "FF"])
def test_bias_gradient_epilogs_take_either_memory_order(fake_gpu, rng, epilog, name, orders):
    """BGRADA / BGRADB give the right values for every memory order of both operands (a reduced
    operand in the order cuBLASLt refuses is read from a dense copy; see test_compat_gpu)."""
    a, b = _rand(rng, (6, 4), orders[0]), _rand(rng, (4, 5), orders[1])
    out, aux = adv.matmul(fake_gpu.fake(a), fake_gpu.fake(b), epilog=epilog)
    _close(out.array, a.astype(np.float64) @ b)
    want = a.sum(axis=1) if epilog == E.BGRADA else b.sum(axis=0)
    _close(aux[name].array.reshape(-1), want)


def _planned(fake_gpu, rng, with_c=False):
    a, b = fake_gpu.fake(_rand(rng, (6, 4))), fake_gpu.fake(_rand(rng, (4, 5)))
    c = fake_gpu.fake(_rand(rng, (6, 5))) if with_c else None
    mm = adv.Matmul(a, b, c, beta=1.0 if with_c else None)
    mm.plan()
    return mm


@pytest.mark.parametrize(
    ("name", "kwargs", "exc"),
    [
        ("another package", lambda F, rng: {"a": _rand(rng, (6, 4))}, TypeError),
        ("another dtype", lambda F, rng: {"a": F.fake(_rand(rng, (6, 4)).astype(np.float64))}, ValueError),
        ("another shape", lambda F, rng: {"a": F.fake(_rand(rng, (6, 3)))}, ValueError),
        ("another layout", lambda F, rng: {"a": F.fake(_rand(rng, (6, 4), "F"))}, ValueError),
        ("c not in the problem", lambda F, rng: {"c": F.fake(_rand(rng, (6, 5)))}, ValueError),
        ("nothing given", lambda F, rng: {}, ValueError),
        ("alpha not a number", lambda F, rng: {"alpha": "x"}, (TypeError, ValueError)),
    ],
)
def test_reset_operands_misuse_exception_types(fake_gpu, rng, name, kwargs, exc):
    """reset_operands: an operand of another package is TypeError, every other mismatch ValueError."""
    with _planned(fake_gpu, rng) as mm:
        with pytest.raises(exc):
            mm.reset_operands(**kwargs(fake_gpu, rng))


def test_reset_operands_after_release_needs_every_operand(fake_gpu, rng):
    """After release_operands(), a partial reset is a ValueError naming what is missing."""
    with _planned(fake_gpu, rng) as mm:
        mm.release_operands()
        with pytest.raises(ValueError):
            mm.reset_operands(a=fake_gpu.fake(_rand(rng, (6, 4))))


def test_reset_operands_is_keyword_only(fake_gpu, rng):
    """``reset_operands(a)`` positionally is a TypeError, as in nvmath-python 0.9+."""
    with _planned(fake_gpu, rng) as mm:
        with pytest.raises(TypeError):
            mm.reset_operands(fake_gpu.fake(_rand(rng, (6, 4))))  # type: ignore[misc]


def test_release_operands_drops_every_reference(fake_gpu, rng):
    """release_operands() returns the reference counts of the operands, epilog inputs and results."""
    a = fake_gpu.fake(_rand(rng, (6, 4)))
    b = fake_gpu.fake(_rand(rng, (4, 5)))
    c = fake_gpu.fake(_rand(rng, (6, 5), "F"))
    bias = fake_gpu.fake(_rand(rng, (6,)))
    gc.collect()
    before = [sys.getrefcount(x) for x in (a, b, c, bias)]
    mm = adv.Matmul(a, b, c, beta=1.0)
    mm.plan(epilog=E.BIAS, epilog_inputs={"bias": bias})
    result = mm.execute()
    result_refs = sys.getrefcount(result)
    mm.release_operands()
    gc.collect()
    assert [sys.getrefcount(x) for x in (a, b, c, bias)] == before
    assert sys.getrefcount(result) == result_refs
    del result
    gc.collect()
    mm.free()


def test_numerical_impl_flags_carry_nvmath_python_names():
    """MatmulNumericalImplFlags has INPUT_TYPE_16F ... INPUT_TYPE_MASK with cuBLASLt's bit values."""
    F = adv.MatmulNumericalImplFlags
    names = ["INPUT_TYPE_16F", "INPUT_TYPE_16BF", "INPUT_TYPE_TF32", "INPUT_TYPE_32F", "INPUT_TYPE_64F",
             "INPUT_TYPE_8I", "INPUT_TYPE_8F_E4M3", "INPUT_TYPE_8F_E5M2"]  # fmt: skip
    assert [int(F[n]) for n in names] == [1 << (16 + i) for i in range(8)]
    assert int(F.INPUT_TYPE_MASK) == 0xFF << 16
    assert F(1 << 16).name == "INPUT_TYPE_16F"


def test_algorithm_constructed_from_a_heuristic_record():
    """``Algorithm(record)`` as nvmath-python's constructor: one record, 0-d or shape (1,)."""
    rec = np.zeros((1,), dtype=lt.matmul_heuristic_result_dtype)
    rec["workspace_size"] = 4096
    alg = adv.Algorithm(rec)
    assert alg.workspace_size == 4096
    again = adv.Algorithm.from_numpy(alg.as_numpy())
    assert again.workspace_size == 4096
    assert adv.Algorithm(algorithm=rec.reshape(())).workspace_size == 4096
    with pytest.raises(TypeError):
        adv.Algorithm(np.zeros(2, dtype=lt.matmul_heuristic_result_dtype))


def test_algorithm_attribute_is_the_heuristic_record():
    """``Algorithm.algorithm`` (nvmath-python's attribute) is the wrapped heuristic result record."""
    rec = np.zeros((), dtype=lt.matmul_heuristic_result_dtype)
    rec["workspace_size"] = 2048
    alg = adv.Algorithm(rec)
    assert alg.algorithm.dtype == lt.matmul_heuristic_result_dtype
    assert int(alg.algorithm["workspace_size"]) == 2048
    assert bytes(alg.algorithm.tobytes()) == bytes(alg.as_numpy().tobytes())


def test_lifecycle_misuse_exception_types(fake_gpu, rng):
    """execute() before plan() and after release_operands() raise RuntimeError; after free(),
    InvalidMatmulState (nvmath-python's types; ours subclass RuntimeError)."""
    from nvmath._errors import InvalidMatmulState

    a, b = fake_gpu.fake(_rand(rng, (6, 4))), fake_gpu.fake(_rand(rng, (4, 5)))
    mm = adv.Matmul(a, b)
    with pytest.raises(RuntimeError):
        mm.execute()
    mm.plan()
    mm.release_operands()
    with pytest.raises(RuntimeError):
        mm.execute()
    mm.free()
    with pytest.raises(InvalidMatmulState):
        mm.plan()


def test_beta_without_c_warns_and_c_without_beta_raises(fake_gpu, rng):
    """beta without c is ignored with a warning; c without beta is a ValueError (nvmath-python)."""
    a, b = fake_gpu.fake(_rand(rng, (6, 4))), fake_gpu.fake(_rand(rng, (4, 5)))
    with pytest.warns(UserWarning, match="beta"):
        adv.Matmul(a, b, beta=2.0).free()
    with pytest.raises(ValueError, match="beta"):
        adv.Matmul(a, b, fake_gpu.fake(_rand(rng, (6, 5))))


def test_execute_with_foreign_algorithm_is_value_error(fake_gpu, rng):
    """execute(algorithm=...) with an algorithm not in .algorithms raises ValueError."""
    with _planned(fake_gpu, rng) as mm:
        stranger = adv.Algorithm(np.zeros((), dtype=lt.matmul_heuristic_result_dtype))
        with pytest.raises(ValueError):
            mm.execute(algorithm=stranger)


def _aligned(x):
    """A copy of ``x`` (same strides) at a 256-byte aligned address (resets keep the plan's alignment)."""
    raw = np.empty(x.nbytes + 256, np.uint8)
    off = -raw.ctypes.data % 256
    y = np.ndarray(x.shape, x.dtype, raw[off : off + x.nbytes], 0, x.strides)
    y[...] = x
    return y


@pytest.mark.parametrize(
    ("epilog", "orders", "name", "order"), [(E.BGRADA, "CC", "a", "col"), (E.BGRADB, "FF", "b", "row")]
)
def test_bias_gradient_reduced_operand_copy_is_refreshed(fake_gpu, rng, epilog, orders, name, order):
    """A reduced operand in the memory order cuBLASLt refuses for BGRADA/BGRADB is read from one
    planner-owned dense copy (never ORDER_ROW), refreshed on every execute and after reset_operands."""
    from nvmath.linalg.advanced._layout import Order

    a, b = _aligned(_rand(rng, (6, 4), orders[0])), _aligned(_rand(rng, (4, 5), orders[1]))
    fa, fb = fake_gpu.fake(a), fake_gpu.fake(b)
    with adv.Matmul(fa, fb) as mm:
        mm.plan(epilog=epilog)
        p = mm._plan.problem
        assert p.staged == (name, order)
        assert p.a.order == Order.COL if name == "a" else p.b.order == Order.COL
        staged = mm._staged
        for _ in range(2):
            src = a if name == "a" else b
            src *= 2  # in place: the next execute sees it
            out, aux = mm.execute()
            _close(out.array, a.astype(np.float64) @ b)
            want = a.sum(axis=1) if epilog == E.BGRADA else b.sum(axis=0)
            _close(aux[epilog.name.lower()].array.reshape(-1), want)
        a2, b2 = _aligned(_rand(rng, (6, 4), orders[0])), _aligned(_rand(rng, (4, 5), orders[1]))
        mm.reset_operands(a=fake_gpu.fake(a2), b=fake_gpu.fake(b2))
        out, aux = mm.execute()
        _close(out.array, a2.astype(np.float64) @ b2)
        want = a2.sum(axis=1) if epilog == E.BGRADA else b2.sum(axis=0)
        _close(aux[epilog.name.lower()].array.reshape(-1), want)
        assert mm._staged is staged  # one buffer, reused across executes and resets


def test_bias_gradient_operand_in_its_order_is_not_copied(fake_gpu, rng):
    """BGRADA on a column-major ``a`` reads it directly: no copy."""
    a, b = _rand(rng, (6, 4), "F"), _rand(rng, (4, 5))
    with adv.Matmul(fake_gpu.fake(a), fake_gpu.fake(b)) as mm:
        mm.plan(epilog=E.BGRADA)
        assert mm._plan.problem.staged is None and mm._staged is None
        out, aux = mm.execute()
        _close(aux["bgrada"].array.reshape(-1), a.sum(axis=1))


def test_complex_epilog_is_cublaslt_error(fake_gpu, rng):
    """An epilog cuBLASLt refuses for complex operands raises cuBLASLtError (nvmath-python's type; it
    is a ValueError here too), before any GPU work."""
    from nvmath.bindings.cublasLt import cuBLASLtError

    a = rng.standard_normal((8, 8)) + 1j * rng.standard_normal((8, 8))
    x = fake_gpu.fake(a.astype(np.complex64))
    with pytest.raises(cuBLASLtError) as info:
        adv.matmul(x, x, epilog=E.RELU)
    assert isinstance(info.value, ValueError) and info.value.status == 15


def test_refused_bias_dtype_is_cublaslt_error(fake_gpu, rng):
    """A bias dtype cuBLASLt does not take for the result dtype raises cuBLASLtError (and ValueError)."""
    from nvmath.bindings.cublasLt import cuBLASLtError

    a, b = fake_gpu.fake(_rand(rng, (6, 4))), fake_gpu.fake(_rand(rng, (4, 5)))
    bias = fake_gpu.fake(rng.standard_normal(6))  # float64 bias, float32 result
    with pytest.raises(cuBLASLtError):
        adv.matmul(a, b, epilog=E.BIAS, epilog_inputs={"bias": bias})
