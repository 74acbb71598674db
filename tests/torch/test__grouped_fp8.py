"""FP8 GroupedLinear (nvmath.torch._grouped_fp8): one autograd Function over all groups, each group with
its own scales in one stacked state -- equal to a loop of nvmath.torch.Linear(fp8=recipe) layers
(outputs, gradients and every group's scaling state), within FP8 tolerance of the float layer; sizes,
dtypes and recipes checked before any launch; the state in state_dict (the former per-group layout
loads too); the skip-step policy per group; GPU: the same on bf16 over several steps."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import nvmath.torch as nt
from nvmath.torch import fp8

RECIPES = [fp8.CurrentScaling(), fp8.DelayedScaling()]
ROLES = ("input", "weight", "grad_output")


def rel(a, b):
    return float((a.double() - b.double()).norm() / max(float(b.double().norm()), 1e-30))


def linear_loop(layer, recipe):
    """One nvmath.torch.Linear(fp8=recipe) per group holding copies of the group's parameters."""
    out = []
    for g in range(layer.num_groups):
        lin = nt.Linear(layer.in_features, layer.out_features, bias=layer.bias is not None,
                        device=layer.weight.device, dtype=layer.weight.dtype, fp8=recipe)  # fmt: skip
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
    db = None
    if lins[0].bias is not None:
        db = torch.stack([lin.bias.grad if lin.bias.grad is not None else torch.zeros_like(lin.bias)
                          for lin in lins])  # fmt: skip
    return y.detach(), xs.grad, dw, db


def assert_states_match(state, lins, counts):
    """The grouped state's column of every group that ran equals that group's Linear state."""
    for k, (lin, c) in enumerate(zip(lins, counts)):
        if not c:
            continue
        s = lin.fp8_state
        torch.testing.assert_close(state.scale[:, k], s.scale, rtol=0, atol=0)
        torch.testing.assert_close(state.amax_history[:, :, k], s.amax_history, rtol=0, atol=0)
        torch.testing.assert_close(state.found_inf[:, k], s.found_inf, rtol=0, atol=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("recipe", RECIPES, ids=["current", "delayed"])
def test_equals_a_loop_of_fp8_linear_layers(recipe, dtype):
    """Output, gradients and every group's scaling state equal a loop of FP8 Linear layers over steps
    (delayed scaling's history moves alike; bf16: the bias fused in the GEMM as in Linear); empty
    groups get zero gradients."""
    torch.manual_seed(0)
    counts = [16, 0, 48, 32]
    layer = nt.GroupedLinear(4, 32, 16, dtype=dtype, fp8=recipe)
    lins = linear_loop(layer, recipe)
    x = torch.randn(sum(counts), 32, dtype=dtype)
    tol = 1e-6
    for _ in range(3):
        g = torch.randn(sum(counts), 16, dtype=dtype)
        xg = x.clone().requires_grad_()
        layer.zero_grad()
        for lin in lins:
            lin.zero_grad()
        y = layer(xg, counts)
        y.backward(g)
        want_y, want_dx, want_dw, want_db = run_loop(lins, x, counts, g)
        assert rel(y.detach(), want_y) < tol and rel(xg.grad, want_dx) < tol
        assert rel(layer.weight.grad, want_dw) < tol and rel(layer.bias.grad, want_db) < tol
        assert not layer.weight.grad[1].any() and not layer.bias.grad[1].any()
        assert_states_match(layer.fp8_state, lins, counts)
    # the weights never changed: their FP8 copies were made once (all groups in one pass)
    assert layer.fp8_state.weight_updates == 1


def test_weight_copies_remade_once_per_weight_version():
    """The stacked weight's FP8 copies are made once per weight version (an in-place update such as an
    optimizer step makes them again, and they then compute with the new weight)."""
    torch.manual_seed(5)
    layer = nt.GroupedLinear(2, 32, 16, fp8=fp8.CurrentScaling())
    x = torch.randn(32, 32)
    layer(x, [16, 16])
    layer(x, [16, 16])
    assert layer.fp8_state.weight_updates == 1
    with torch.no_grad():
        layer.weight.mul_(2)
    y = layer(x, [16, 16])
    assert layer.fp8_state.weight_updates == 2
    want = torch.cat([x[:16] @ layer.weight[0].T + layer.bias[0], x[16:] @ layer.weight[1].T + layer.bias[1]])
    assert rel(y.detach(), want.detach()) < 0.06


def test_without_bias_and_input_gradient_only():
    """A layer without bias; gradients asked for the input alone (the weight's wgrad GEMMs skipped)."""
    torch.manual_seed(6)
    counts = [32, 16]
    layer = nt.GroupedLinear(2, 32, 16, bias=False, fp8=fp8.CurrentScaling())
    lins = linear_loop(layer, fp8.CurrentScaling())
    x = torch.randn(48, 32, requires_grad=True)
    g = torch.randn(48, 16)
    (dx,) = torch.autograd.grad(layer(x, counts), [x], grad_outputs=g)
    _, want_dx, _, _ = run_loop(lins, x.detach(), counts, g)
    assert rel(dx, want_dx) < 1e-6


def test_within_fp8_tolerance_of_the_float_layer():
    """FP8 forward and backward stay within FP8 tolerance of the float32 GroupedLinear's."""
    torch.manual_seed(1)
    counts = [32, 16, 0, 64]
    layer = nt.GroupedLinear(4, 64, 32, fp8=fp8.CurrentScaling())
    ref = nt.GroupedLinear(4, 64, 32)
    ref.load_state_dict({k: v for k, v in layer.state_dict().items() if not k.startswith("fp8_state")})
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
    "n_in, counts, tokens, dtype, exc, word",
    [(32, [16, 8], 24, torch.float32, ValueError, "group 1 has 8 tokens"),
     (24, [16, 16], 32, torch.float32, ValueError, "in_features = 24"),
     (32, [16, 16], 32, torch.float64, TypeError, "bfloat16, float16 or float32"),
     (32, [16, 8, 8], 32, torch.float32, ValueError, "one entry per group"),
     (32, [16, 32], 32, torch.float32, ValueError, "sum to 48")],
)  # fmt: skip
def test_bad_sizes_dtypes_and_counts_raise_before_any_launch(
    n_in, counts, tokens, dtype, exc, word, monkeypatch
):
    """Group token counts or features not multiples of 16, a float64 layer, bad counts: a clear error,
    and nothing was quantized or multiplied."""
    from nvmath.torch import _grouped_fp8_kernels as K

    monkeypatch.setattr(K, "quantize_groups", lambda *a, **k: pytest.fail("launched"))
    layer = nt.GroupedLinear(2, n_in, 16, dtype=dtype, fp8=fp8.CurrentScaling())
    with pytest.raises(exc, match=word):
        layer(torch.randn(tokens, n_in, dtype=dtype), counts)


def test_group_sizes_checked_every_call_only_good_ones_remembered():
    """check_group_sizes remembers the counts and features that passed (no loop per step) but a bad
    group raises on every call, also after good ones of the same features; an int subclass other than
    bool is still taken as a count, a bool still refused."""
    import enum

    from nvmath.torch import _grouped_fp8 as F

    F.check_group_sizes([16, 32], 32, 16)
    F.check_group_sizes([16, 32], 32, 16)
    for _ in range(2):
        with pytest.raises(ValueError, match="group 1 has 8 tokens"):
            F.check_group_sizes([16, 8], 32, 16)
    with pytest.raises(ValueError, match="in_features = 24"):
        F.check_group_sizes([16, 32], 24, 16)

    class Count(enum.IntEnum):
        SIXTEEN = 16

    layer = nt.GroupedLinear(2, 32, 16, fp8=fp8.DelayedScaling())
    assert tuple(layer(torch.randn(32, 32), [Count.SIXTEEN, 16]).shape) == (32, 16)
    with pytest.raises(TypeError, match="ints"):
        layer(torch.randn(32, 32), [True, 31])


def test_no_tokens_at_all_gives_an_empty_output():
    """Counts all zero: an empty (0, out_features) output, nothing run, the state untouched."""
    layer = nt.GroupedLinear(2, 32, 16, fp8=fp8.DelayedScaling())
    y = layer(torch.randn(0, 32), [0, 0])
    assert tuple(y.shape) == (0, 16)
    assert not layer.fp8_state.amax_history.any() and layer.fp8_state.weight_updates == 0


def test_states_in_state_dict_and_loaded_into_a_fresh_layer():
    """The stacked scaling state is in state_dict; a fresh FP8 layer loads it and then computes what
    the trained one computes."""
    torch.manual_seed(2)
    recipe = fp8.DelayedScaling()
    layer = nt.GroupedLinear(2, 32, 16, fp8=recipe)
    x = torch.randn(32, 32)
    for _ in range(2):
        layer(x, [16, 16])
    sd = layer.state_dict()
    assert {"fp8_state.amax_history", "fp8_state.scale", "fp8_state.found_inf"} <= set(sd)
    assert tuple(sd["fp8_state.amax_history"].shape) == (1024, 3, 2)
    fresh = nt.GroupedLinear(2, 32, 16, fp8=recipe)
    fresh.load_state_dict(sd)
    with torch.no_grad():  # (an optimizer step: the trained layer's weight FP8 copies are remade too)
        layer.weight.mul_(1)
    torch.testing.assert_close(fresh(x, [16, 16]), layer(x, [16, 16]))


def test_checkpoint_of_the_former_per_group_states_loads():
    """A checkpoint with one scaling state per group (fp8_states.<g>.scale / amax_history / found_inf,
    the former layout) loads into the stacked state, each group's values in its column."""
    torch.manual_seed(7)
    recipe = fp8.DelayedScaling(amax_history_len=4)
    layer = nt.GroupedLinear(3, 32, 16, fp8=recipe)
    sd = {k: v for k, v in layer.state_dict().items() if not k.startswith("fp8_state.")}
    olds = []
    for g in range(3):
        found = torch.tensor([0, g, 1], dtype=torch.int32)
        old = {"scale": torch.rand(3) + 0.5, "amax_history": torch.rand(4, 3), "found_inf": found}
        olds.append(old)
        sd.update({f"fp8_states.{g}.{k}": v for k, v in old.items()})
    layer.load_state_dict(sd)
    state = layer.fp8_state
    for g, old in enumerate(olds):
        torch.testing.assert_close(state.scale[:, g], old["scale"])
        torch.testing.assert_close(state.amax_history[:, :, g], old["amax_history"])
        torch.testing.assert_close(state.found_inf[:, g], old["found_inf"])
    with pytest.raises(RuntimeError, match="size mismatch"):  # (another history length: refused by torch)
        nt.GroupedLinear(3, 32, 16, fp8=fp8.DelayedScaling(amax_history_len=8)).load_state_dict(sd)


@pytest.mark.parametrize("recipe", RECIPES, ids=["current", "delayed"])
def test_nonfinite_input_of_one_group_skips_that_group_and_the_step(recipe):
    """An inf in one group's tokens: that group's output is NaN, the others are finite; only that
    group's state is flagged and left as it was; optimizer_step skips the step and clears the flags."""
    torch.manual_seed(8)
    layer = nt.GroupedLinear(2, 32, 16, fp8=recipe)
    x = torch.randn(48, 32)
    layer(x, [16, 32])
    before = layer.fp8_state.amax_history.clone()
    x[20, 3] = float("inf")
    y = layer(x.requires_grad_(), [16, 32])
    assert torch.isfinite(y[:16]).all() and torch.isnan(y[16:]).all()
    state = layer.fp8_state
    assert state.found_inf[0].tolist() == [0, 1]
    torch.testing.assert_close(state.amax_history[:, 0, 1], before[:, 0, 1])
    opt = torch.optim.SGD(layer.parameters(), lr=0.1)
    y.sum().backward()
    w = layer.weight.detach().clone()
    assert nt.fp8.optimizer_step(opt, layer) is False
    torch.testing.assert_close(layer.weight.detach(), w)
    assert not state.found_inf.any()


@pytest.mark.parametrize(
    "recipe",
    [fp8.CurrentScaling(margin=1), fp8.DelayedScaling(amax_history_len=3, margin=2),
     fp8.DelayedScaling(amax_history_len=3, amax_compute_algo="most_recent", fp8_format="e4m3")],
    ids=["current", "delayed-max", "delayed-recent"],
)  # fmt: skip
def test_record_equals_a_scaling_state_per_group(recipe):
    """GroupedScalingState.record over all groups equals each group's ScalingState update (amaxes with
    0, inf and NaN among them; a group that did not run left as it was), over several steps."""
    from nvmath.torch._fp8 import ScalingState
    from nvmath.torch._grouped_fp8_state import GroupedScalingState

    torch.manual_seed(9)
    groups = 4
    grouped = GroupedScalingState(recipe, groups)
    singles = [ScalingState(recipe) for _ in range(groups)]
    active = torch.tensor([True, True, False, True])
    nan, inf = float("nan"), float("inf")
    for step, special in enumerate([None, 0.0, inf, nan, None]):
        for role in ("grad_output", "input"):
            amax = torch.rand(groups) * 10
            if special is not None:
                amax[step % groups] = special
            if recipe.delayed:
                used = grouped.scale[ROLES.index(role)].clone()
            else:
                used = grouped.current_scale(role, amax)
            got = grouped.record(role, amax[None], used[None], active)[0]
            for k, single in enumerate(singles):
                if not active[k]:
                    continue
                _, want = single.quantize_by(role, lambda s, a=amax[k]: (None, a))
                # (record returns the dequantization scales: 1 / the scale used, NaN where not finite)
                torch.testing.assert_close(got[k], want.reciprocal(), equal_nan=True, rtol=0, atol=0)
    for k, single in enumerate(singles):
        if active[k]:
            torch.testing.assert_close(grouped.scale[:, k], single.scale, rtol=0, atol=0)
            torch.testing.assert_close(grouped.amax_history[:, :, k], single.amax_history, rtol=0, atol=0)
            torch.testing.assert_close(grouped.found_inf[:, k], single.found_inf, rtol=0, atol=0)
    assert not grouped.amax_history[:, :, 2].any() and not grouped.found_inf[:, 2].any()
    with pytest.raises(TypeError, match="all groups at once"):
        grouped.quantize(torch.ones(16, 16), "input")


@pytest.mark.parametrize("recipe", RECIPES, ids=["current", "delayed"])
def test_record_and_current_scale_write_into_out(recipe):
    """``out=`` (rows of a step's scratch) gets what record and current_scale return without it, and is
    what they return; the state ends as its twin's (updated without ``out``)."""
    from nvmath.torch._grouped_fp8_state import GroupedScalingState

    torch.manual_seed(10)
    groups = 5
    a, b = GroupedScalingState(recipe, groups), GroupedScalingState(recipe, groups)
    active = torch.tensor([True, False, True, True, True])
    for special in (None, float("inf"), 0.0):
        amax = torch.rand(2, groups) * 8
        if special is not None:
            amax[0, 3] = special
        scratch = torch.zeros(4, groups)
        if recipe.delayed:
            ua, ub = a.scale[:2].clone(), b.scale[:2].clone()
        else:
            ua = a.current_scale("input", amax[0], out=scratch[3])
            assert ua is scratch[3] or ua.data_ptr() == scratch[3].data_ptr()
            ub = b.current_scale("input", amax[0])
            torch.testing.assert_close(ua, ub, rtol=0, atol=0)
            ua, ub = torch.stack((ua, a.scale[1])), torch.stack((ub, b.scale[1]))
        got = a.record("input", amax, ua, active, active_rows=1, out=scratch[:2])
        want = b.record("input", amax, ub, active, active_rows=1)
        assert got.data_ptr() == scratch.data_ptr()
        torch.testing.assert_close(scratch[:2], want, equal_nan=True, rtol=0, atol=0)
    for name in ("scale", "amax_history", "found_inf"):
        torch.testing.assert_close(getattr(a, name), getattr(b, name), rtol=0, atol=0)


@pytest.mark.parametrize("recipe", RECIPES, ids=["current", "delayed"])
def test_second_backward_of_a_retained_graph(recipe):
    """A retained graph's second backward runs (the backward's dequantization scales go into a row of
    the block of scales the forward saved, without moving its version counter) and, under current
    scaling (each backward measures its own scales), gives the first backward's gradients again."""
    torch.manual_seed(14)
    layer = nt.GroupedLinear(4, 64, 32, fp8=recipe)
    x = torch.randn(64, 64, requires_grad=True)
    y = layer(x, [16, 16, 0, 32])
    g = torch.randn_like(y)
    y.backward(g, retain_graph=True)
    first = (x.grad.clone(), layer.weight.grad.clone(), layer.bias.grad.clone())
    y.backward(g)
    if not recipe.delayed:  # (delayed: the second pass quantizes with the scales the first one updated)
        for got, want in zip((x.grad, layer.weight.grad, layer.bias.grad), first):
            torch.testing.assert_close(got, 2 * want, rtol=1e-6, atol=1e-6)


def test_fp8_autocast_leaves_a_grouped_layer_in_its_dtype():
    """fp8_autocast does not switch a GroupedLinear to FP8: inside it a layer without a recipe
    computes in its own dtype (no scaling state made)."""
    torch.manual_seed(3)
    layer = nt.GroupedLinear(2, 32, 16)
    x = torch.randn(32, 32)
    plain = layer(x, [16, 16])
    with nt.fp8_autocast(fp8.CurrentScaling()):
        inside = layer(x, [16, 16])
    assert not hasattr(layer, "fp8_state")
    torch.testing.assert_close(inside, plain)


def test_block_scaling_and_bad_recipes_are_refused():
    """MXFP8 on CPU tensors raises naming what it needs; a non-recipe is a TypeError; a state made for
    another recipe is refused."""
    layer = nt.GroupedLinear(2, 32, 16, fp8=fp8.MXFP8BlockScaling())
    with pytest.raises(RuntimeError, match="compute capability >= 10.0"):
        layer(torch.randn(32, 32), [16, 16])
    with pytest.raises(TypeError, match="recipe"):
        nt.GroupedLinear(2, 32, 16, fp8="e4m3")
    layer = nt.GroupedLinear(2, 32, 16, fp8=fp8.CurrentScaling())
    layer.fp8 = fp8.DelayedScaling()
    with pytest.raises(ValueError, match="one recipe per layer"):
        layer(torch.randn(32, 32), [16, 16])


# ---------------------------------------------------------------- GPU
@pytest.mark.gpu
@pytest.mark.parametrize("recipe", RECIPES, ids=["current", "delayed"])
def test_gpu_fp8_steps_within_tolerance_of_bf16(recipe):
    """bf16 FP8 GroupedLinear on the GPU (FP8 GEMMs on cuBLASLt, the cast kernels per group): several
    steps within FP8 tolerance of the bf16 layer; empty groups' gradients zero."""
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA device")
    if torch.cuda.get_device_capability() < (8, 9):
        pytest.skip("FP8 needs compute capability 8.9")
    torch.manual_seed(4)
    counts = [256, 0, 64, 512, 16]
    layer = nt.GroupedLinear(5, 256, 512, device="cuda", dtype=torch.bfloat16, fp8=recipe)
    ref = nt.GroupedLinear(5, 256, 512, device="cuda", dtype=torch.bfloat16)
    ref.load_state_dict({k: v for k, v in layer.state_dict().items() if not k.startswith("fp8_state")})
    x = torch.randn(sum(counts), 256, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    g = torch.randn(sum(counts), 512, device="cuda", dtype=torch.bfloat16)
    want = torch.autograd.grad(ref(x, counts), [x, ref.weight, ref.bias], grad_outputs=g)
    for _ in range(3):
        y = layer(x, counts)
        got = torch.autograd.grad(y, [x, layer.weight, layer.bias], grad_outputs=g)
        assert rel(y.detach(), ref(x, counts).detach()) < 0.06
        assert rel(got[0], want[0]) < 0.12 and rel(got[1], want[1]) < 0.12 and rel(got[2], want[2]) < 0.05
        assert not got[1][1].any() and not got[2][1].any()
    from nvmath.torch import _fp8_cast
    from nvmath.torch._grouped_fp8_gemms import grouped_fp8_gemms

    assert grouped_fp8_gemms.enabled and _fp8_cast.in_use()  # (neither fell back to the former paths)


@pytest.mark.gpu
@pytest.mark.parametrize("recipe", RECIPES, ids=["current", "delayed"])
def test_gpu_equals_a_loop_of_fp8_linear_layers(recipe):
    """On the GPU the grouped layer (cast kernels per group into one buffer, stacked state) computes
    what a loop of FP8 Linear layers computes: the same FP8 values and scales, so outputs and gradients
    agree to the GEMMs' rounding, and every group's state equals its Linear's."""
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA device")
    if torch.cuda.get_device_capability() < (8, 9):
        pytest.skip("FP8 needs compute capability 8.9")
    torch.manual_seed(10)
    counts = [128, 0, 64, 256]
    layer = nt.GroupedLinear(4, 256, 128, device="cuda", dtype=torch.bfloat16, fp8=recipe)
    lins = linear_loop(layer, recipe)
    x = torch.randn(sum(counts), 256, device="cuda", dtype=torch.bfloat16)
    for _ in range(3):
        g = torch.randn(sum(counts), 128, device="cuda", dtype=torch.bfloat16)
        xg = x.clone().requires_grad_()
        layer.zero_grad()
        for lin in lins:
            lin.zero_grad()
        y = layer(xg, counts)
        y.backward(g)
        want_y, want_dx, want_dw, want_db = run_loop(lins, x, counts, g)
        assert rel(y.detach(), want_y) < 1e-2 and rel(xg.grad, want_dx) < 1e-2
        assert rel(layer.weight.grad, want_dw) < 1e-2 and rel(layer.bias.grad, want_db) < 1e-2
        assert_states_match(layer.fp8_state, lins, counts)
    from nvmath.torch._grouped_fp8_gemms import grouped_fp8_gemms

    assert grouped_fp8_gemms.enabled, "the grouped FP8 planners failed here and switched off (see the log)"


# ---------------------------------------------------------------- the GPU quantization on host threads
def host_launches(host, calls):
    """A stand-in for _fp8_cast.launch_grid that runs the grouped launch on the host build, on the very
    addresses the grouped layer computed (CPU tensors: host memory; the row-offset table too): the
    grouped cast-transpose (64 x 64 or vectorized, as the key says) or the grouped amax reduction;
    ``calls`` collects the launches' grids."""
    variant = {torch.bfloat16: 0, torch.float16: 1, torch.float32: 2}

    def launch(device, key, shape, args):
        calls.append(shape)
        if key[0] == "grouped_amax":  # (current scaling's first pass: the grouped reduction)
            x, amax, offsets, cols = (int(a) for a in args)
            assert shape[2] == 1
            assert host.lib.host_amax_grouped(variant[key[1]], x, amax, offsets, cols, *shape[:2]) == 0
            return True
        kind, wide, fp8_dtype = key
        assert kind in ("grouped", "grouped_vector")
        x, aux, q, qt, scale, amax, partial, offsets, cols, partial_rows, target = (int(a) for a in args)
        assert aux == 0  # (the kernel's parameter order: x, aux, q, ...; this pass has no aux)
        e5m2 = int(fp8_dtype == torch.float8_e5m2)
        ptrs = (x, q or None, qt or None, scale or None, amax, partial or None, offsets)
        run = host.lib.host_cast_grouped if kind == "grouped" else host.lib.host_cast_grouped_vec
        assert run(variant[wide], e5m2, *ptrs, cols, partial_rows, target, *shape) == 0
        return True

    return launch


@pytest.mark.parametrize("colsum", [False, True], ids=["plain", "colsum"])
@pytest.mark.parametrize("scaled", [True, False], ids=["quantize", "amax-only"])
def test_kernel_pass_per_group_equals_torch(host, monkeypatch, scaled, colsum):
    """The GPU quantization (one grouped cast-transpose launch: each group at its offsets of one FP8
    buffer, one transposed buffer, one (G,) amax and one partial-sum tensor) writes what torch's
    per-group quantization computes: the same FP8 bytes in both orders, amaxes and column sums;
    groups without rows read 0."""
    from nvmath.torch import _fp8_cast
    from nvmath.torch import _grouped_fp8_kernels as K

    calls = []
    monkeypatch.setattr(_fp8_cast, "launch_grid", host_launches(host, calls))
    torch.manual_seed(11)
    counts = [32, 0, 16, 80]
    bounds = K.bounds_of(counts)
    x = (torch.randn(sum(counts), 64) * 3).to(torch.bfloat16)
    scale = torch.tensor([40.0, 2.0, 100.0, 7.0]) if scaled else None
    got = K._kernel_run(x, bounds, 4, torch.float8_e5m2, scale, colsum)
    want = K._torch_run(x, bounds, 4, torch.float8_e5m2, scale, colsum)
    # (one launch; grid rows: group 3's 80 rows, two tiles; the amax alone: the grouped reduction's
    # blocks of the largest group, one grid row per group)
    assert calls == ([(1, 2, 4)] if scaled or colsum else [(1, 4, 1)])
    torch.testing.assert_close(got.amax, want.amax, rtol=0, atol=0)
    if scaled:
        assert torch.equal(got.q.view(torch.uint8), want.q.view(torch.uint8))
        for _, s, e in bounds:
            got_t, want_t = got.transposed(s, e), want.transposed(s, e)
            assert torch.equal(got_t.view(torch.uint8), want_t.view(torch.uint8))
    if colsum:
        torch.testing.assert_close(got.colsum, want.colsum, rtol=1e-5, atol=1e-4)
        assert not got.colsum[1].any()


@pytest.mark.parametrize("recipe", RECIPES, ids=["current", "delayed"])
def test_layer_through_the_kernel_pass_equals_the_loop(host, monkeypatch, recipe):
    """The whole layer with its quantizations on the kernels' path (the host build standing in for
    the GPU launches) equals the loop of FP8 Linear layers over steps: one launch per quantized tensor
    whatever its groups (current scaling: two, the amax-only pass first), the weight's after a change."""
    from nvmath.torch import _fp8_cast

    torch.manual_seed(12)
    counts = [32, 0, 16, 48]
    layer = nt.GroupedLinear(4, 64, 32, dtype=torch.bfloat16, fp8=recipe)
    lins = linear_loop(layer, recipe)
    x = torch.randn(sum(counts), 64, dtype=torch.bfloat16)
    for step in range(2):
        g = torch.randn(sum(counts), 32, dtype=torch.bfloat16)
        xg = x.clone().requires_grad_()
        layer.zero_grad()
        calls = []
        with monkeypatch.context() as m:
            m.setattr(_fp8_cast, "available", lambda t, aux=None: t.dim() == 2 and t.is_contiguous())
            m.setattr(_fp8_cast, "launch_grid", host_launches(host, calls))
            y = layer(xg, counts)
            y.backward(g)
        passes = 1 if recipe.delayed else 2
        assert len(calls) == passes * (1 + 1 + (1 if step == 0 else 0))
        for lin in lins:
            lin.zero_grad()
        want_y, want_dx, want_dw, want_db = run_loop(lins, x, counts, g)
        assert rel(y.detach(), want_y) < 1e-6 and rel(xg.grad, want_dx) < 1e-6
        assert rel(layer.weight.grad, want_dw) < 1e-6 and rel(layer.bias.grad, want_db) < 1e-3
        assert_states_match(layer.fp8_state, lins, counts)


# ---------------------------------------------------------------- the planned GEMMs on the fake GPU
@pytest.mark.parametrize("recipe", RECIPES, ids=["current", "delayed"])
def test_layer_through_planned_gemms_equals_emulation(fake_gpu, monkeypatch, recipe):
    """Every group's forward, dgrad and wgrad GEMM through planned Matmuls on the emulated cuBLASLt
    (the operands as the layer hands them: row slices of one FP8 buffer, transposed blocks of another,
    per-group scale views) equals the layer's CPU emulation over steps; one planner per problem."""
    from nvmath.torch import _fp8_linear

    class AlwaysPlanned(_fp8_linear.FP8GemmCache):
        def __call__(self, qa, qb, inv_a, inv_b, dtype):
            return self.run_planned(qa, qb, inv_a, inv_b, dtype)

    torch.manual_seed(13)
    counts = [32, 0, 16, 48]
    layer = nt.GroupedLinear(4, 64, 32, fp8=recipe)
    twin = nt.GroupedLinear(4, 64, 32, fp8=recipe)
    twin.load_state_dict(layer.state_dict())
    planned = AlwaysPlanned()
    x = torch.randn(sum(counts), 64)
    for step in range(2):
        g = torch.randn(sum(counts), 32)
        with monkeypatch.context() as m:
            m.setattr(_fp8_linear, "fp8_gemm_cache", planned)
            xg = x.clone().requires_grad_()
            got = torch.autograd.grad(layer(xg, counts), [xg, layer.weight, layer.bias], grad_outputs=g)
        xw = x.clone().requires_grad_()
        want = torch.autograd.grad(twin(xw, counts), [xw, twin.weight, twin.bias], grad_outputs=g)
        for a, b in zip(got, want):
            assert rel(a, b) < 1e-6
        if step == 0:  # 3 groups with tokens x forward, dgrad, wgrad (group 0's dgrad and wgrad are one
            # problem, (32, 32) @ (64, 32).T, when their operands' alignments agree); later steps plan
            # anew only where the CPU allocator gave another alignment (cuda's is fixed)
            assert planned.plans in (8, 9)
    planned.clear()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16-bias-fused"])
@pytest.mark.parametrize("recipe", RECIPES, ids=["current", "delayed"])
def test_layers_on_the_grouped_planners_equal_emulation(fake_gpu, recipe, dtype):
    """Two layers of equal shapes (sharing the grouped runner's planners) through planned Matmuls on the
    emulated cuBLASLt with scale slots (each group's dequantization scales written into its planner's
    slots before the product) and pointer swaps: every step equals the CPU emulation of twin layers;
    groups of equal counts get planners of their own (their scales differ); the second layer re-points
    the shared forward planners' bias."""
    from nvmath.torch._grouped_fp8_gemms import GroupedFP8Gemms, grouped_fp8_gemms

    runner = grouped_fp8_gemms
    assert isinstance(runner, GroupedFP8Gemms)
    runner.clear()
    runner.cpu_planned = True
    try:
        torch.manual_seed(15)
        counts = [32, 0, 32, 16]
        layers = [nt.GroupedLinear(4, 64, 32, dtype=dtype, fp8=recipe) for _ in range(2)]
        twins = [nt.GroupedLinear(4, 64, 32, dtype=dtype, fp8=recipe) for _ in range(2)]
        for layer, twin in zip(layers, twins):
            twin.load_state_dict(layer.state_dict())
        x = torch.randn(sum(counts), 64, dtype=dtype)
        for step in range(2):
            g = torch.randn(sum(counts), 32, dtype=dtype)
            for layer, twin in zip(layers, twins):
                runner.cpu_planned = True
                xg = x.clone().requires_grad_()
                got = torch.autograd.grad(layer(xg, counts), [xg, layer.weight, layer.bias], grad_outputs=g)
                runner.cpu_planned = False
                xw = x.clone().requires_grad_()
                want = torch.autograd.grad(twin(xw, counts), [xw, twin.weight, twin.bias], grad_outputs=g)
                for a, b in zip(got, want):
                    assert rel(a, b) < (1e-6 if dtype == torch.float32 else 1e-2)
            assert runner.enabled and runner.plans >= 9  # (3 groups with tokens x 3 products, at least)
    finally:
        runner.cpu_planned = False
        runner.clear()


def test_grouped_planners_switch_off_when_a_plan_fails(fake_gpu, monkeypatch, caplog):
    """A planner that raises switches the grouped runner off (logged once): the layer then runs the FP8
    Linear caches and still computes what its twin computes."""
    from nvmath.torch import _grouped_fp8_gemms as R

    runner = R.GroupedFP8Gemms()
    runner.cpu_planned = True
    monkeypatch.setattr(R, "grouped_fp8_gemms", runner)

    def refuse(*args, **kwargs):
        raise RuntimeError("no algorithm")

    monkeypatch.setattr(runner, "_plan", refuse)
    torch.manual_seed(16)
    layer = nt.GroupedLinear(2, 32, 16, fp8=fp8.CurrentScaling())
    twin = nt.GroupedLinear(2, 32, 16, fp8=fp8.CurrentScaling())
    twin.load_state_dict(layer.state_dict())
    x = torch.randn(32, 32)
    with caplog.at_level("WARNING"):
        y = layer(x, [16, 16])
    assert not runner.enabled and "grouped FP8 GEMM planners failed" in caplog.text
    runner.cpu_planned = False
    torch.testing.assert_close(y, twin(x, [16, 16]))


def test_scale_slots_and_fallback_scales_start_on_16_bytes():
    """cuBLASLt's FP8 kernels refuse scale pointers off 16 bytes (NOT_SUPPORTED at the launch, seen on
    the H200 with a slot at byte offset 0x24): every planner's scale slots and every per-group scale
    handed to the FP8 Linear caches start on 16 bytes and hold the group's value."""
    from nvmath.torch._grouped_fp8_gemms import GroupedFP8Gemms
    from nvmath.torch._grouped_fp8_kernels import aligned_scalars

    runner = GroupedFP8Gemms(maxsize=5)
    taken = [runner._take_slots(torch.device("cpu")) for _ in range(5)]
    buf = runner._slots[torch.device("cpu")]
    slots = [s for pair in taken for s in pair]
    assert len(set(slots)) == 10 and 0 not in slots
    assert all(buf[s : s + 1].data_ptr() % 16 == 0 for s in slots)
    t = torch.arange(1.0, 8.0)
    parts = aligned_scalars(t)
    assert [p.item() for p in parts] == t.tolist() and all(p.data_ptr() % 16 == 0 for p in parts)
    assert all(p.dim() == 0 for p in parts)
