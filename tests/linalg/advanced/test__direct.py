"""AddressRun: a planned Matmul run on bare addresses gives what a fresh plan gives, follows re-plans,
and refuses plans that cannot run that way (fake GPU, CPU only)."""

from __future__ import annotations


import numpy as np
import pytest

import nvmath.linalg.advanced as adv
from nvmath.linalg.advanced import MatmulEpilog as E
from nvmath.linalg.advanced._direct import AddressRun, address_run_possible

import matmul_fakes as F  # (tests/linalg/advanced is on sys.path: see conftest.py)


def _rand(rng, shape, dtype=np.float32):
    return F.aligned(rng.uniform(-1, 1, shape).astype(dtype))


def _ptr(x: np.ndarray) -> int:
    return x.ctypes.data


def _result(mm_run: AddressRun) -> np.ndarray:
    """An aligned, NaN-poisoned result in the run's result layout."""
    shape, strides, dtype = mm_run.result_layout
    assert dtype == "float32"
    order = "F" if len(shape) == 2 and strides[0] == 1 and shape[0] > 1 else "C"
    out = F.aligned(np.full(shape, np.nan, dtype=np.float32, order=order))
    if order == "F":
        out = np.asfortranarray(out)
    assert tuple(s // 4 for s in out.strides) == tuple(strides) or 1 in shape
    return out


def test_new_addresses_give_what_a_fresh_plan_gives(lt, rng):
    """Operands swapped by address only (a, b, bias all moved) match numpy and a fresh planner."""
    a, b, bias = _rand(rng, (6, 5)), _rand(rng, (5, 7)), _rand(rng, (6,))
    with adv.Matmul(F.fake(a), F.fake(b)) as mm:
        mm.plan(epilog=E.RELU_BIAS, epilog_inputs={"bias": F.fake(bias)})
        run = AddressRun(mm, ("bias",))
        for _ in range(3):
            a2, b2, bias2 = _rand(rng, (6, 5)), _rand(rng, (5, 7)), _rand(rng, (6,))
            d = _result(run)
            assert run(_ptr(a2), _ptr(b2), _ptr(d), (_ptr(bias2),)) is None
            want = np.maximum(a2 @ b2 + bias2[:, None], 0)
            np.testing.assert_allclose(d, want, rtol=1e-5, atol=1e-6)
            inputs = {"bias": F.fake(bias2)}
            fresh = adv.matmul(F.fake(a2), F.fake(b2), epilog=E.RELU_BIAS, epilog_inputs=inputs)
            np.testing.assert_allclose(d, fresh.array, rtol=1e-6, atol=1e-7)
    assert lt.heuristic_calls == 2  # the planner and the stateless call: none for the address runs


def test_same_bias_address_sets_no_attribute_again(lt, rng, monkeypatch):
    """A run with the bias of the run before sets no descriptor attribute (the steady case); a moved
    bias sets it once, and both give numpy's result."""
    from nvmath.linalg.advanced import _descriptors

    a, b, bias = _rand(rng, (6, 5)), _rand(rng, (5, 7)), _rand(rng, (6,))
    calls = []
    real = _descriptors.lt.matmul_desc_set_attribute
    monkeypatch.setattr(
        _descriptors.lt, "matmul_desc_set_attribute", lambda *args: (calls.append(args[1]), real(*args))[1]
    )
    with adv.Matmul(F.fake(a), F.fake(b)) as mm:
        mm.plan(epilog=E.BIAS, epilog_inputs={"bias": F.fake(bias)})
        run = AddressRun(mm, ("bias",))
        calls.clear()  # (planning set the attributes; the plan's own bias is set already)
        for bias_now, sets in ((bias, 0), (bias, 0), (_rand(rng, (6,)), 1), (bias, 2), (bias, 2)):
            d = _result(run)
            assert run(_ptr(a), _ptr(b), _ptr(d), (_ptr(bias_now),)) is None
            np.testing.assert_allclose(d, a @ b + bias_now[:, None], rtol=1e-5, atol=1e-6)
            assert len(calls) == sets


def test_swapped_orientation_and_aux_outputs(lt, rng):
    """A plan formed as the transposed product (bias along N) takes the operands in the caller's order;
    aux outputs come back allocated by the planner."""
    x, w, bias = _rand(rng, (6, 8)), _rand(rng, (5, 8)), _rand(rng, (5,))
    with adv.Matmul(F.fake(x), F.fake(w.T)) as mm:
        mm.plan(epilog=E.GELU_AUX_BIAS, epilog_inputs={"bias": F.fake(bias)})
        assert mm.launcher.swap  # formed as (w @ x.T).T
        run = AddressRun(mm, ("bias",))
        x2, w2 = _rand(rng, (6, 8)), _rand(rng, (5, 8))
        d = _result(run)
        extras = run(_ptr(x2), _ptr(w2), _ptr(d), (_ptr(bias),))
        pre = x2 @ w2.T + bias
        np.testing.assert_allclose(d, F.gelu_tanh(pre.astype(np.float64)), rtol=1e-4, atol=1e-5)
        fresh_out, fresh = adv.matmul(
            F.fake(x2), F.fake(w2.T), epilog=E.GELU_AUX_BIAS, epilog_inputs={"bias": F.fake(bias)}
        )
        np.testing.assert_allclose(d, fresh_out.array, rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(extras["gelu_aux"].array, fresh["gelu_aux"].array, rtol=1e-6, atol=1e-7)


def test_follows_autotuned_algorithm_and_replan(lt, rng):
    """The run uses the planner's current algorithm, and a re-plan (same result layout) is followed."""
    a, b = _rand(rng, (4, 3)), _rand(rng, (3, 5))
    with adv.Matmul(F.fake(a), F.fake(b)) as mm:
        mm.plan()
        run = AddressRun(mm)
        d = _result(run)
        run(_ptr(a), _ptr(b), _ptr(d))
        assert lt.matmul_calls[-1]["algo"] == 100
        mm.plan(algorithms=[mm.algorithms[1]])
        d = _result(run)
        run(_ptr(a), _ptr(b), _ptr(d))
        assert lt.matmul_calls[-1]["algo"] == 101
        np.testing.assert_allclose(d, a @ b, rtol=1e-5, atol=1e-6)
        mm.plan(epilog=E.BIAS, epilog_inputs={"bias": F.fake(_rand(rng, (4,)))})
        with pytest.raises(ValueError, match="can no longer run on addresses"):
            run(_ptr(a), _ptr(b), _ptr(d))


def test_refuses_plans_that_cannot_run_on_addresses(lt, rng):
    """Host operands, c (in place or not), blocking planners, staged copies and unmatched epilog inputs
    are refused."""
    a, b, bias = _rand(rng, (6, 5)), _rand(rng, (5, 7)), _rand(rng, (6,))
    with adv.Matmul(F.FakeHostTensor(a), F.FakeHostTensor(b)) as mm:
        mm.plan()
        assert not address_run_possible(mm)
        with pytest.raises(ValueError, match="cannot run on addresses"):
            AddressRun(mm)
    with adv.Matmul(F.fake(a), F.fake(b)) as mm:
        with pytest.raises(ValueError, match="cannot run on addresses"):
            AddressRun(mm)  # not planned
        mm.plan(epilog=E.BIAS, epilog_inputs={"bias": F.fake(bias)})
        assert address_run_possible(mm, ("bias",)) and not address_run_possible(mm)
    c = _rand(rng, (6, 7))
    with adv.Matmul(F.fake(a), F.fake(b), F.fake(c), beta=1.0, options={"inplace": True}) as mm:
        mm.plan()
        assert not address_run_possible(mm)
    with adv.Matmul(F.fake(a), F.fake(b), F.fake(c), beta=1.0) as mm:  # c is read: not an address run
        mm.plan()
        assert not address_run_possible(mm)
    with adv.Matmul(F.fake(a), F.fake(b), options={"blocking": True}) as mm:
        mm.plan()
        assert not address_run_possible(mm)
    with adv.Matmul(F.fake(_rand(rng, (8, 5))), F.fake(b)) as mm:  # BGRADA reads a's dense column copy
        mm.plan(epilog=E.BGRADA)
        assert mm._staged is not None and not address_run_possible(mm)


def test_a_failing_launch_raises(lt, rng, monkeypatch):
    """The run calls cublasLtMatmul through the unchecked binding, yet a failure status still raises."""
    from nvmath.bindings import cublasLt

    a, b = _rand(rng, (4, 3)), _rand(rng, (3, 5))
    with adv.Matmul(F.fake(a), F.fake(b)) as mm:
        mm.plan()
        run = AddressRun(mm)
        d = _result(run)
        monkeypatch.setattr(cublasLt, "matmul", lambda *args: pytest.fail("the checked wrapper ran"))
        run(_ptr(a), _ptr(b), _ptr(d))
        np.testing.assert_allclose(d, a @ b, rtol=1e-5, atol=1e-6)
        monkeypatch.setattr(cublasLt, "_p_cublasLtMatmul", lambda *args: 7)  # CUBLAS_STATUS_INVALID_VALUE
        with pytest.raises(cublasLt.cuBLASLtError):
            run(_ptr(a), _ptr(b), _ptr(d))
