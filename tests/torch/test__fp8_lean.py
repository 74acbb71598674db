"""The lean scaling-state update (``NVMATH_FP8_LEAN_SCALING``, on by default) against the former
sequence: the same scales, amax histories, flags and returned (poisoned) scales, bit for bit, on edge
amax values and on training-like sequences; and fewer device operations per update (counted with a
dispatch mode: the host cost of FP8 layers is mostly these launches)."""

from __future__ import annotations

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from nvmath.torch import _fp8
from nvmath.torch._fp8_cast import quantize_pair
from nvmath.torch.fp8 import CurrentScaling, DelayedScaling

F32_MAX = torch.finfo(torch.float32).max
EDGE = [0.0, -0.0, -2.0, 1e-45, 1e-38, 3e-3, 1.0, 448.0, 1e30, F32_MAX, float("inf"), float("nan")]
RECIPES = [
    CurrentScaling(),
    CurrentScaling(margin=2, fp8_format="e4m3"),
    DelayedScaling(amax_history_len=1),
    DelayedScaling(amax_history_len=4),
    DelayedScaling(amax_history_len=3, fp8_format="e4m3"),
    DelayedScaling(amax_history_len=5, amax_compute_algo="most_recent", margin=1),
]


@pytest.fixture(autouse=True)
def _lean_on(monkeypatch):
    """The lean path whatever NVMATH_FP8_LEAN_SCALING said at import (``_former`` switches it off)."""
    monkeypatch.setattr(_fp8, "LEAN_SCALING", True)


def _same(a: torch.Tensor, b: torch.Tensor) -> None:
    torch.testing.assert_close(a, b, rtol=0, atol=0, equal_nan=True)


def _former(monkeypatch: pytest.MonkeyPatch, fn, *args):
    with monkeypatch.context() as m:
        m.setattr(_fp8, "LEAN_SCALING", False)
        return fn(*args)


@pytest.mark.parametrize("margin", [0, 1, 3, 140])
@pytest.mark.parametrize("fp8_max", [448.0, 57344.0])
def test_lean_scale_from_amax_equals_the_former_formula(monkeypatch, margin, fp8_max):
    """scale_from_amax: one value per edge amax (0, -0, negative, subnormal, huge, inf, NaN) and old
    scale, the same bits on both paths (margin 140: the quotient underflows to 0)."""
    amax = torch.tensor(EDGE, dtype=torch.float32)
    old = torch.linspace(0.5, 4.0, len(EDGE))
    for a, o in zip(amax, old):
        lean = _fp8.scale_from_amax(a, o, fp8_max, margin)
        former = _former(monkeypatch, _fp8.scale_from_amax, a, o, fp8_max, margin)
        _same(lean, former)


def _drive(state: _fp8.ScalingState, steps: list) -> list:
    """Run ``steps`` (``(kind, role, value)``) through ``state``; every returned tensor, then the buffers."""
    out = []
    for kind, role, value in steps:
        if kind == "quantize":
            out += list(state.quantize(value, role))
        elif kind == "pair":
            q, qt, s, sums = quantize_pair(state, value, role, colsum=True)
            out += [q.float(), qt.float(), s, sums]
        else:  # record_amax (an amax measured elsewhere: any float, negative included)
            out.append(state.record_amax(role, value, torch.tensor(2.0)))
        out += [state.scale.clone(), state.amax_history.clone(), state.found_inf.clone()]
    return out


def _steps(seed: int) -> list:
    g = torch.Generator().manual_seed(seed)
    steps = []
    for k in range(14):
        x = torch.randn(32, 16, generator=g) * float(10 ** (k % 5 - 2))
        if k == 5:
            x[3, 4] = float("inf")
        if k == 9:
            x[0, 0] = float("nan")
        if k == 11:
            x.zero_()
        role = ("input", "weight", "grad_output")[k % 3]
        steps.append(("quantize" if k % 2 else "pair", role, x.to(torch.bfloat16)))
    for v in (3.5, float("nan"), -1.0, float("-inf"), 0.0, 7.0):
        steps.append(("record", "input", torch.tensor([v])))
    return steps


@pytest.mark.parametrize("recipe", RECIPES, ids=repr)
def test_lean_state_updates_equal_the_former_sequence(monkeypatch, recipe):
    """quantize, quantize_pair and record_amax over a sequence with inf, NaN, zero tensors and odd
    measured amaxes: the FP8 copies, returned scales and every buffer after every step are the same
    bits with the lean update as with the former one."""
    lean = _drive(_fp8.ScalingState(recipe), _steps(0))
    former = _former(monkeypatch, _drive, _fp8.ScalingState(recipe), _steps(0))
    assert len(lean) == len(former)
    for a, b in zip(lean, former):
        if a is None:
            assert b is None
        else:
            _same(a, b)


@pytest.mark.parametrize("group", [2, 3, 4])
@pytest.mark.parametrize("recipe", RECIPES, ids=repr)
def test_batched_updates_equal_one_by_one(monkeypatch, recipe, group):
    """Updates collected by ``batched()`` (roles in any order, a role twice in a group, delayed_scale
    reads inside) and applied on exit: the FP8 copies and returned scales the same bits as the
    former one-by-one sequence, and the buffers after each group the same as after its last step."""
    state_lean, state_former = _fp8.ScalingState(recipe), _fp8.ScalingState(recipe)
    steps = _steps(1)
    for k in range(0, len(steps), group):
        with state_lean.batched():
            for kind, role, value in steps[k : k + group]:
                got = _drive_one(state_lean, kind, role, value)
                want = _former(monkeypatch, _drive_one, state_former, kind, role, value)
                for a, b in zip(got, want):
                    _same(a, b)
                if kind == "record" and recipe.delayed:
                    want = _former(monkeypatch, state_former.delayed_scale, role)
                    _same(state_lean.delayed_scale(role), want)
        for a, b in zip(_buffers(state_lean), _buffers(state_former)):
            _same(a, b)


def _drive_one(state, kind, role, value) -> list:
    return [t for t in _drive(state, [(kind, role, value)])[:-3] if t is not None]


def _buffers(state) -> list:
    return [state.scale, state.amax_history, state.found_inf]


VIEWS = {"detach", "alias", "view", "select", "slice", "reshape", "expand", "as_strided", "t", "transpose"}


class _Count(TorchDispatchMode):
    """The device operations dispatched inside the block (views excluded: they launch nothing)."""

    def __init__(self):
        super().__init__()
        self.ops: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if str(func).split(".")[1] not in VIEWS:
            self.ops.append(str(func))
        return func(*args, **(kwargs or {}))


def _update_ops(state: _fp8.ScalingState) -> list[str]:
    amax = torch.tensor(3.0)
    scale = state.scale[0]
    with _Count() as c:
        state._update(0, amax, scale, 448.0, state.recipe.margin, False)
    return c.ops


@pytest.mark.parametrize("recipe", [DelayedScaling(), CurrentScaling()], ids=repr)
def test_lean_update_runs_fewer_operations(monkeypatch, recipe):
    """One role's update (history, flag, scale, poisoned scale) dispatches at most 15 operations on the
    lean path, fewer than the former sequence (each a kernel launch on the GPU)."""
    lean = _update_ops(_fp8.ScalingState(recipe))
    former = _former(monkeypatch, _update_ops, _fp8.ScalingState(recipe))
    assert len(lean) <= 15, lean  # (views, which launch nothing, excluded)
    assert len(lean) < len(former), (lean, former)


def _mlp_steps(recipe, blocks: int = 3, device: str = "cpu") -> list:
    """Three training steps of an FP8 MLP block and an FP8 Linear layer: outputs, gradients and every
    state buffer after each step."""
    import nvmath.torch as nt

    torch.manual_seed(0)
    block = nt.MLP(32, 64, 32, fp8=recipe, dtype=torch.bfloat16, device=device)
    lin = nt.Linear(32, 48, fp8=recipe, dtype=torch.bfloat16, device=device)
    out = []
    for k in range(blocks):
        x = (torch.randn(16, 32) * 10.0**k).to(device, torch.bfloat16).requires_grad_()
        y = block(x)
        z = lin(y)
        z.float().square().sum().backward()
        with torch.no_grad():
            for p in (*block.parameters(), *lin.parameters()):
                p.sub_(p.grad * 0.01)
                out.append(p.grad.clone())
                p.grad = None
        out += [y.detach(), z.detach(), x.grad]
        out += [b.clone() for b in (*block.buffers(), *lin.buffers())]
    return out


@pytest.mark.parametrize("recipe", [DelayedScaling(amax_history_len=4), CurrentScaling()], ids=repr)
def test_mlp_and_linear_training_steps_equal_the_former_path(monkeypatch, recipe):
    """End to end on CPU: an FP8 MLP block and Linear layer trained three steps give the same outputs,
    gradients and scaling buffers, bit for bit, with the lean (batched) updates as with the former."""
    lean = _mlp_steps(recipe)
    former = _former(monkeypatch, _mlp_steps, recipe)
    assert len(lean) == len(former)
    for a, b in zip(lean, former):
        _same(a, b)


@pytest.mark.gpu
@pytest.mark.parametrize("recipe", [DelayedScaling(amax_history_len=4), CurrentScaling()], ids=repr)
def test_gpu_training_steps_equal_the_former_path(monkeypatch, recipe):
    """On the GPU (cast kernels, planned FP8 GEMMs, unchecked resets): the lean host path gives the
    same outputs, gradients and scaling buffers, bit for bit, as the former one."""
    from nvmath.torch import _fp8_linear

    lean = _mlp_steps(recipe, device="cuda")
    with monkeypatch.context() as m:
        m.setattr(_fp8_linear, "UNCHECKED_RESET", False)
        former = _former(monkeypatch, _mlp_steps, recipe, 3, "cuda")
    assert len(lean) == len(former)
    for a, b in zip(lean, former):
        _same(a, b)
