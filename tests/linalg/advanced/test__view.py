"""Matmul.view: the read-only snapshot of the planned epilog, scalars and caller tensors (fake GPU)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import nvmath.linalg.advanced as adv
from nvmath.linalg.advanced import MatmulEpilog as E

import matmul_fakes as F  # (tests/linalg/advanced is on sys.path: see conftest.py)


_aligned = F.aligned


def test_view_before_and_after_plan(lt):
    """Before plan() the view has no epilog and no epilog inputs; after it, the planned epilog and the
    caller's bias; alpha / beta are the given scalars (beta None without c)."""
    a, b = _aligned(np.ones((5, 4), np.float32)), _aligned(np.ones((4, 3), np.float32))
    bias = _aligned(np.ones((5,), np.float32))
    fa, fb, fbias = F.fake(a), F.fake(b), F.fake(bias)
    mm = adv.Matmul(fa, fb, alpha=2.0)
    v = mm.view
    assert isinstance(v, adv.MatmulView)
    assert v.epilog is None and dict(v.epilog_inputs) == {} and v.quantization_scales == ()
    assert v.alpha == 2.0 and v.beta is None
    assert v.operands["a"] is fa and v.operands["b"] is fb and "c" not in v.operands
    mm.plan(epilog=E.BIAS, epilog_inputs={"bias": fbias})
    v = mm.view
    assert v.epilog == E.BIAS and v.epilog_inputs["bias"] is fbias
    mm.free()


def test_view_with_c_reset_and_release(lt):
    """The view follows reset_operands (new scalars and tensors); after release_operands the caller's
    tensors read None; the view itself cannot be modified."""
    a, b, c = (_aligned(np.ones(s, np.float32)) for s in ((5, 4), (4, 3), (5, 3)))
    mm = adv.Matmul(F.fake(a), F.fake(b), F.fake(c), alpha=1.5, beta=0.5)
    mm.plan()
    v = mm.view
    assert v.epilog == E.DEFAULT and (v.alpha, v.beta) == (1.5, 0.5)
    a2 = F.fake(_aligned(np.ones((5, 4), np.float32)))
    mm.reset_operands(a=a2, beta=3.0)
    v = mm.view
    assert v.operands["a"] is a2 and v.beta == 3.0
    mm.release_operands()
    assert set(mm.view.operands.values()) == {None}
    with pytest.raises(dataclasses.FrozenInstanceError):
        v.alpha = 0.0
    with pytest.raises(TypeError):
        v.operands["a"] = None
    mm.free()
