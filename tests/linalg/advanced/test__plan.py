"""``_plan.build_plan``'s memo of a plan's pure part (``Recipe``) and the recycled cuBLASLt objects,
end to end on the fake GPU: a repeated create/plan/free of one problem makes no cuBLASLt create call
and no heuristic query, and gives numpy's product; anything that changes what reaches cuBLASLt (an
epilog, the options, the preferences) gets its own recipe.
"""

from __future__ import annotations

import numpy as np
import pytest

import nvmath.linalg.advanced as adv
from nvmath.bindings import cublasLt
from nvmath.linalg.advanced import MatmulEpilog as E
from nvmath.linalg.advanced import _descriptors, _plan

import matmul_fakes as F  # (tests/linalg/advanced is on sys.path: see conftest.py)


def _rand(rng, shape):
    return F.aligned(rng.uniform(-1, 1, shape).astype(np.float32))


def _creates(monkeypatch):
    """The successful cuBLASLt create calls (descriptor, layout, preference), by C name."""
    calls: list[str] = []
    for name in ("cublasLtMatmulDescCreate", "cublasLtMatrixLayoutCreate", "cublasLtMatmulPreferenceCreate"):
        real = cublasLt._bind.resolve(name)

        def counted(*args, _real=real, _name=name):
            status = _real(*args)
            if not status:
                calls.append(_name)
            return status

        monkeypatch.setattr(cublasLt, "_p_" + name, counted)
    return calls


def _cycle(a, b, **plan_kwargs):
    with adv.Matmul(F.fake(a), F.fake(b)) as mm:
        mm.plan(**plan_kwargs)
        return np.array(mm.execute().array)


def test_repeated_create_plan_free_creates_nothing(lt, rng, monkeypatch):
    """The second and later create/plan/free cycles of a problem take the recipe, the heuristic memo
    and the recycled descriptor and layouts: no create call, no heuristic query, numpy's product."""
    creates = _creates(monkeypatch)
    a, b = _rand(rng, (6, 4)), _rand(rng, (4, 5))
    np.testing.assert_allclose(_cycle(a, b), a @ b, rtol=1e-5)
    first = list(creates)
    assert "cublasLtMatmulDescCreate" in first and lt.heuristic_calls == 1
    layouts, descriptors = _descriptors.LAYOUTS.stats.reuses, _descriptors.DESCRIPTORS.stats.reuses
    for _ in range(3):
        np.testing.assert_allclose(_cycle(a, b), a @ b, rtol=1e-5)
    assert creates == first and lt.heuristic_calls == 1
    assert _descriptors.LAYOUTS.stats.reuses - layouts == 9  # A, B and D (C is D) per cycle
    assert _descriptors.DESCRIPTORS.stats.reuses - descriptors == 3


def test_two_live_planners_of_one_problem_own_distinct_handles(lt, rng):
    """A recycled handle has one owner: two planners alive at once hold different descriptors and
    layouts, and each computes its own product."""
    a, b, a2 = _rand(rng, (6, 4)), _rand(rng, (4, 5)), _rand(rng, (6, 4))
    _cycle(a, b)  # (fills the pools)
    one, two = adv.Matmul(F.fake(a), F.fake(b)), adv.Matmul(F.fake(a2), F.fake(b))
    one.plan()
    two.plan()
    p1, p2 = one.launcher.plan, two.launcher.plan
    assert p1.desc.ptr != p2.desc.ptr
    assert not {p1.layouts.a.ptr, p1.layouts.b.ptr, p1.layouts.d.ptr} & {
        p2.layouts.a.ptr, p2.layouts.b.ptr, p2.layouts.d.ptr
    }
    np.testing.assert_allclose(one.execute().array, a @ b, rtol=1e-5)
    np.testing.assert_allclose(two.execute().array, a2 @ b, rtol=1e-5)
    one.free()
    np.testing.assert_allclose(two.execute().array, a2 @ b, rtol=1e-5)  # one's handles went to a pool
    two.free()


def test_an_epilog_after_a_plain_plan_gets_its_own_recipe(lt, rng):
    """A RELU plan of a problem planned plainly before applies the RELU (another recipe, another
    descriptor), and a plain plan after it does not."""
    a, b = _rand(rng, (6, 4)), _rand(rng, (4, 5))
    np.testing.assert_allclose(_cycle(a, b), a @ b, rtol=1e-5)
    np.testing.assert_allclose(_cycle(a, b, epilog=E.RELU), np.maximum(a @ b, 0), rtol=1e-5)
    np.testing.assert_allclose(_cycle(a, b), a @ b, rtol=1e-5)


def test_options_that_reach_cublaslt_are_part_of_the_recipe(lt, rng):
    """sm_count_target (a descriptor attribute) and memory_limit (the workspace cap) planned after a
    plain plan of the same problem reach cuBLASLt."""
    a, b = _rand(rng, (6, 4)), _rand(rng, (4, 5))
    _cycle(a, b)
    with adv.Matmul(F.fake(a), F.fake(b), options={"sm_count_target": 7}) as mm:
        mm.plan()
        assert mm.launcher.plan.desc.get("SM_COUNT_TARGET") == 7
    with adv.Matmul(F.fake(a), F.fake(b), options={"memory_limit": 1 << 20}) as mm:
        mm.plan()
        assert mm.launcher.plan.workspace_cap == 1 << 20
        np.testing.assert_allclose(mm.execute().array, a @ b, rtol=1e-5)
    assert lt.preferences[-1]["MAX_WORKSPACE_BYTES"] == 1 << 20  # (a new heuristic query)


def test_recipes_are_registered_and_an_unhashable_epilog_is_still_refused(lt, rng):
    """The recipe memo is a registered cache; an epilog that is no MatmulEpilog (unhashable) is
    refused as before, and the planner still plans afterwards."""
    a, b = _rand(rng, (6, 4)), _rand(rng, (4, 5))
    _cycle(a, b)
    assert len(_plan.RECIPES) >= 1
    with adv.Matmul(F.fake(a), F.fake(b)) as mm:
        with pytest.raises((TypeError, ValueError), match="epilog"):
            mm.plan(epilog=[1])
        mm.plan()
        np.testing.assert_allclose(mm.execute().array, a @ b, rtol=1e-5)


def test_create_plan_free_leaves_no_reference_cycle(lt, rng):
    """A freed planner's launch, plan, descriptor (also one with pointer attributes), layouts and
    algorithms -- and a planner dropped without free() -- are freed when dropped (by reference
    counting), not left to the garbage collector."""
    import gc

    a, b, bias = _rand(rng, (6, 4)), _rand(rng, (4, 5)), _rand(rng, (6,))
    _cycle(a, b)
    gc.collect()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        for _ in range(3):
            with adv.Matmul(F.fake(a), F.fake(b)) as mm:
                mm.plan()
                mm.plan(epilog=E.BIAS, epilog_inputs={"bias": F.fake(bias)})  # (a replaced plan and launch)
                mm.execute()
            dropped = adv.Matmul(F.fake(a), F.fake(b))  # a planner dropped without free()
            dropped.plan()
            dropped.execute()
            del dropped
        gc.collect()
        left = {type(o).__name__ for o in gc.garbage}
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
    assert not left & {
        "Matmul", "MatmulLaunch", "Plan", "MatmulDesc", "PointerAttribute", "LayoutSet", "MatrixLayout", "Algorithm"
    }
