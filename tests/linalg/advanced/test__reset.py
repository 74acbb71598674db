"""``Matmul``'s operand methods (``_reset.OperandResets``) and the lifecycle around the launch, on the
fake GPU: a replacement of another layout is refused without touching the plan or its launch, a launch
of a replaced plan refuses to run, and everything refuses after ``free()``.
"""

from __future__ import annotations

import ast
import pathlib

import numpy as np
import pytest

import nvmath.linalg.advanced as adv
from nvmath._errors import InvalidMatmulState
from nvmath.linalg.advanced import _reset

import matmul_fakes as F  # (tests/linalg/advanced is on sys.path: see conftest.py)


def _rand(rng, shape):
    return F.aligned(rng.uniform(-1, 1, shape).astype(np.float32))


@pytest.mark.parametrize("kind", ["transposed", "shape", "dtype"])
def test_reset_with_a_new_layout_is_refused_and_the_launch_is_kept(lt, rng, kind):
    """reset_operands with another layout (the transposed strides), shape or dtype raises ValueError,
    and the planner keeps its launch and operands: execute() still gives the planned product."""
    a, b = _rand(rng, (6, 4)), _rand(rng, (4, 5))
    with adv.Matmul(F.fake(a), F.fake(b)) as mm:
        mm.plan()
        launch = mm.launcher
        if kind == "transposed":
            new = F.fake(np.asfortranarray(_rand(rng, (6, 4))))
        elif kind == "shape":
            new = F.fake(_rand(rng, (6, 3)))
        else:
            new = F.fake(F.aligned(_rand(rng, (6, 4)).astype(np.float64)))
        with pytest.raises(ValueError, match="must match the planned one"):
            mm.reset_operands(a=new)
        with pytest.raises(ValueError, match="must match the planned one"):  # and with a scalar too
            mm.reset_operands(a=new, alpha=2.0)
        assert mm.launcher is launch and not launch.closed
        np.testing.assert_allclose(mm.execute().array, a @ b, rtol=1e-5)


def test_a_replaced_plan_s_launch_refuses_and_the_new_one_runs(lt, rng):
    """plan() again installs a new launch; the one taken before refuses (InvalidMatmulState) instead
    of running the old layouts, and execute() uses the new plan."""
    a, b = _rand(rng, (6, 4)), _rand(rng, (4, 5))
    with adv.Matmul(F.fake(a), F.fake(b)) as mm:
        mm.plan()
        old = mm.launcher
        mm.plan(epilog=adv.MatmulEpilog.RELU)
        assert mm.launcher is not old and old.closed
        with pytest.raises(InvalidMatmulState, match="replaced or freed"):
            old.run(None, 0, 0, 0, 0)
        np.testing.assert_allclose(mm.execute().array, np.maximum(a @ b, 0), rtol=1e-5)


def test_use_after_free_raises_everywhere(lt, rng):
    """After free(): execute, plan, autotune, reset_operands (checked and not), release_operands and
    a launch taken before all raise InvalidMatmulState; free() again is a no-op."""
    a, b = _rand(rng, (6, 4)), _rand(rng, (4, 5))
    mm = adv.Matmul(F.fake(a), F.fake(b))
    mm.plan()
    launch = mm.launcher
    mm.free()
    calls = [
        mm.execute, mm.plan, mm.autotune, mm.release_operands,
        lambda: mm.reset_operands(a=F.fake(a)), lambda: mm.reset_operands_unchecked(a=F.fake(a)),
        lambda: launch.run(None, 0, 0, 0, 0),
    ]  # fmt: skip
    for call in calls:
        with pytest.raises(InvalidMatmulState):
            call()
    assert mm.launcher is None and not mm.is_planned
    mm.free()


def test_reset_then_release_then_reset_all(lt, rng):
    """A valid reset swaps the operand (same layout); after release_operands every operand is needed
    again, and a reset with all of them restores execute()."""
    a, b, a2 = _rand(rng, (6, 4)), _rand(rng, (4, 5)), _rand(rng, (6, 4))
    with adv.Matmul(F.fake(a), F.fake(b)) as mm:
        mm.plan()
        mm.reset_operands(a=F.fake(a2), alpha=2.0)
        np.testing.assert_allclose(mm.execute().array, 2 * a2 @ b, rtol=1e-5)
        mm.release_operands()
        with pytest.raises(ValueError, match="missing: b"):
            mm.reset_operands(a=F.fake(a))
        mm.reset_operands(a=F.fake(a), b=F.fake(b))
        np.testing.assert_allclose(mm.execute().array, 2 * a @ b, rtol=1e-5)


def test_operand_methods_read_only_the_planner_s_own_state():
    """The operand methods are the planner's own (a mixin of Matmul): _reset.py reads no private
    member of any object but ``self``."""
    assert issubclass(adv.Matmul, _reset.OperandResets)
    tree = ast.parse(pathlib.Path(_reset.__file__).read_text())
    foreign = [
        ast.unparse(node)
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__")
        and not (isinstance(node.value, ast.Name) and node.value.id == "self")
    ]  # fmt: skip
    assert foreign == []
