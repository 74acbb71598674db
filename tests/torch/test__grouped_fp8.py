"""FP8 GroupedLinear (nvmath.torch._grouped_fp8, experimental): each group is the library's FP8
Linear with its own scaling state -- equal to a loop of nvmath.torch.Linear(fp8=recipe) layers, within FP8 tolerance of
the float layer; sizes, dtypes and recipes checked before any launch; states in state_dict; GPU: the
same on bf16 over several steps."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import nvmath.torch as nt
from nvmath.torch import fp8

RECIPES = [fp8.CurrentScaling(), fp8.DelayedScaling()]


def rel(a, b):
    return float((a.double() - b.double()).norm() / max(float(b.double().norm()), 1e-30))


def linear_loop(layer, recipe):
    """One nvmath.torch.Linear(fp8=recipe) per group holding copies of the group's parameters."""
    out = []
    for g in range(layer.num_groups):
        lin = nt.Linear(layer.in_features, layer.out_features, bias=layer.bias is not None,
                        dtype=layer.weight.dtype, fp8=recipe)  # fmt: skip
        with torch.no_grad():
            lin.weight.copy_(layer.weight[g])
            if layer.bias is not None:
                lin.bias.copy_(layer.bias[g])
        out.append(lin)
    return out


def run_loop(lins, x, counts, g):
    """The loop's output and gradients (x, stacked weights, stacked biases) for output gradient ``g``."""
    xs = x.detach().clone().requires_grad_()
    ys, start = [], 0
    for lin, c in zip(lins, counts):
        if c:
            ys.append(lin(xs[start : start + c]))
        start += c
    y = torch.cat(ys)
    y.backward(g)
    dw = torch.stack([lin.weight.grad if lin.weight.grad is not None else torch.zeros_like(lin.weight)
                      for lin in lins])  # fmt: skip
    db = torch.stack([lin.bias.grad if lin.bias.grad is not None else torch.zeros_like(lin.bias)
                      for lin in lins])  # fmt: skip
    return y.detach(), xs.grad, dw, db


@pytest.mark.parametrize("recipe", RECIPES, ids=["current", "delayed"])
def test_equals_a_loop_of_fp8_linear_layers(recipe):
    """Output and gradients equal a loop of FP8 Linear layers (per-group states), over steps (delayed
    scaling's history moves alike); empty groups get zero gradients."""
    torch.manual_seed(0)
    counts = [16, 0, 48, 32]
    layer = nt.GroupedLinear(4, 32, 16, fp8=recipe)
    lins = linear_loop(layer, recipe)
    x = torch.randn(sum(counts), 32)
    for step in range(3):
        g = torch.randn(sum(counts), 16)
        xg = x.clone().requires_grad_()
        layer.zero_grad()
        for lin in lins:
            lin.zero_grad()
        y = layer(xg, counts)
        y.backward(g)
        want_y, want_dx, want_dw, want_db = run_loop(lins, x, counts, g)
        assert rel(y.detach(), want_y) < 1e-6 and rel(xg.grad, want_dx) < 1e-6
        assert rel(layer.weight.grad, want_dw) < 1e-6 and rel(layer.bias.grad, want_db) < 1e-6
        assert not layer.weight.grad[1].any() and not layer.bias.grad[1].any()
    # the weights never changed: each group's FP8 copies were made once (none for the empty group)
    assert [s.weight_updates for s in layer.fp8_states] == [1 if c else 0 for c in counts]


def test_within_fp8_tolerance_of_the_float_layer():
    """FP8 forward and backward stay within FP8 tolerance of the float32 GroupedLinear's."""
    torch.manual_seed(1)
    counts = [32, 16, 0, 64]
    layer = nt.GroupedLinear(4, 64, 32, fp8=fp8.CurrentScaling())
    ref = nt.GroupedLinear(4, 64, 32)
    ref.load_state_dict({k: v for k, v in layer.state_dict().items() if not k.startswith("fp8_states")})
    x = torch.randn(sum(counts), 64, requires_grad=True)
    xr = x.detach().clone().requires_grad_()
    g = torch.randn(sum(counts), 32)
    y, yr = layer(x, counts), ref(xr, counts)
    y.backward(g)
    yr.backward(g)
    assert rel(y.detach(), yr.detach()) < 0.06
    assert rel(x.grad, xr.grad) < 0.12 and rel(layer.weight.grad, ref.weight.grad) < 0.12
    assert rel(layer.bias.grad, ref.bias.grad) < 0.05


@pytest.mark.parametrize(
    "n_in, counts, dtype, exc, word",
    [(32, [16, 8], torch.float32, ValueError, "group 1 has 8 tokens"),
     (24, [16, 16], torch.float32, ValueError, "in_features = 24"),
     (32, [16, 16], torch.float64, TypeError, "bfloat16, float16 or float32"),
     (32, [16, 8, 8], torch.float32, ValueError, "one entry per group")],
)  # fmt: skip
def test_bad_sizes_dtypes_and_counts_raise_before_any_launch(n_in, counts, dtype, exc, word, monkeypatch):
    """Group token counts or features not multiples of 16, a float64 layer, bad counts: a clear error,
    and no FP8 GEMM ran."""
    from nvmath.torch import _fp8_linear

    monkeypatch.setattr(_fp8_linear, "fp8_linear", lambda *a: pytest.fail("launched"))
    layer = nt.GroupedLinear(2, n_in, 16, dtype=dtype, fp8=fp8.CurrentScaling())
    with pytest.raises(exc, match=word):
        layer(torch.randn(sum(counts), n_in, dtype=dtype), counts)


def test_states_in_state_dict_and_loaded_into_a_fresh_layer():
    """The per-group scaling states are in state_dict; a fresh FP8 layer loads them and then computes
    what the trained one computes."""
    torch.manual_seed(2)
    recipe = fp8.DelayedScaling()
    layer = nt.GroupedLinear(2, 32, 16, fp8=recipe)
    x = torch.randn(32, 32)
    for _ in range(2):
        layer(x, [16, 16])
    sd = layer.state_dict()
    assert {"fp8_states.0.amax_history", "fp8_states.1.scale"} <= set(sd)
    fresh = nt.GroupedLinear(2, 32, 16, fp8=recipe)
    fresh.load_state_dict(sd)
    with torch.no_grad():  # (an optimizer step: the trained layer's weight FP8 copies are remade too)
        layer.weight.mul_(1)
    torch.testing.assert_close(fresh(x, [16, 16]), layer(x, [16, 16]))


def test_fp8_autocast_leaves_a_grouped_layer_in_its_dtype():
    """FP8 GroupedLinear is experimental and explicit only: inside fp8_autocast a layer without a recipe
    computes in its own dtype (no scaling states made)."""
    torch.manual_seed(3)
    layer = nt.GroupedLinear(2, 32, 16)
    x = torch.randn(32, 32)
    plain = layer(x, [16, 16])
    with nt.fp8_autocast(fp8.CurrentScaling()):
        inside = layer(x, [16, 16])
    assert not hasattr(layer, "fp8_states")
    torch.testing.assert_close(inside, plain)


def test_block_scaling_and_bad_recipes_are_refused():
    """MXFP8 on CPU tensors raises naming what it needs; a non-recipe is a TypeError."""
    layer = nt.GroupedLinear(2, 32, 16, fp8=fp8.MXFP8BlockScaling())
    with pytest.raises(RuntimeError, match="compute capability >= 10.0"):
        layer(torch.randn(32, 32), [16, 16])
    with pytest.raises(TypeError, match="recipe"):
        nt.GroupedLinear(2, 32, 16, fp8="e4m3")


# ---------------------------------------------------------------- GPU
@pytest.mark.gpu
@pytest.mark.parametrize("recipe", RECIPES, ids=["current", "delayed"])
def test_gpu_fp8_steps_within_tolerance_of_bf16(recipe):
    """bf16 FP8 GroupedLinear on the GPU (FP8 GEMMs on cuBLASLt): several steps on address-stable
    tensors within FP8 tolerance of the bf16 layer; empty groups' gradients zero."""
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA device")
    if torch.cuda.get_device_capability() < (8, 9):
        pytest.skip("FP8 needs compute capability 8.9")
    torch.manual_seed(4)
    counts = [256, 0, 64, 512, 16]
    layer = nt.GroupedLinear(5, 256, 512, device="cuda", dtype=torch.bfloat16, fp8=recipe)
    ref = nt.GroupedLinear(5, 256, 512, device="cuda", dtype=torch.bfloat16)
    ref.load_state_dict({k: v for k, v in layer.state_dict().items() if not k.startswith("fp8_states")})
    x = torch.randn(sum(counts), 256, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    g = torch.randn(sum(counts), 512, device="cuda", dtype=torch.bfloat16)
    want = torch.autograd.grad(ref(x, counts), [x, ref.weight, ref.bias], grad_outputs=g)
    for _ in range(3):
        y = layer(x, counts)
        got = torch.autograd.grad(y, [x, layer.weight, layer.bias], grad_outputs=g)
        assert rel(y.detach(), ref(x, counts).detach()) < 0.06
        assert rel(got[0], want[0]) < 0.12 and rel(got[1], want[1]) < 0.12 and rel(got[2], want[2]) < 0.05
        assert not got[1][1].any() and not got[2][1].any()
