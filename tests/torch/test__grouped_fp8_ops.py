"""FP8 GroupedLinear under torch.compile (nvmath.torch._grouped_fp8_ops): fullgraph tracing through the
nvmath::grouped_fp8_linear custom operators equals the eager layer bit for bit on CPU (outputs, every
gradient, every group's scaling state, the weight's FP8 copies once per weight version); fake kernels
agree with the real ones; counts as a list (fullgraph) or a CPU tensor (a graph break); the recipe
check in the operator; a deep copy has its own state; GPU: inductor against eager."""

from __future__ import annotations

import copy

import pytest

torch = pytest.importorskip("torch")

import nvmath.torch as nt
from nvmath.torch import fp8

RECIPES = [fp8.CurrentScaling(), fp8.DelayedScaling(amax_history_len=4)]


@pytest.fixture(autouse=True)
def fresh_dynamo():
    """Each test traces anew (the parametrized layers would otherwise pile up recompiles of
    GroupedLinear.forward against dynamo's recompile limit, which fullgraph=True turns into an error);
    the graph breaks counted here (a counts tensor) do not reach other tests counting theirs."""
    from torch._dynamo import reset
    from torch._dynamo.utils import counters

    reset()
    yield
    reset()
    counters["graph_break"].clear()


def rel(a, b):
    return float((a.double() - b.double()).norm() / max(float(b.double().norm()), 1e-30))


def assert_steps_equal(compiled, layer, twin, counts, dtype, steps=3, device="cpu", exact=True):
    """Run ``compiled`` (of ``layer``) and ``twin`` for ``steps`` training steps (SGD in between) on the
    same inputs: outputs, gradients and scaling states equal (``exact``) or close."""
    torch.manual_seed(21)
    tokens, k = sum(counts), layer.in_features
    for _ in range(steps):
        x = torch.randn(tokens, k, dtype=dtype, device=device)
        g = torch.randn(tokens, layer.out_features, dtype=dtype, device=device)
        xa, xb = x.clone().requires_grad_(), x.clone().requires_grad_()
        ya, yb = compiled(xa, counts), twin(xb, counts)
        ya.backward(g)
        yb.backward(g)
        pairs = [(ya, yb), (xa.grad, xb.grad), (layer.weight.grad, twin.weight.grad)]
        if layer.bias is not None:
            pairs.append((layer.bias.grad, twin.bias.grad))
        for a, b in pairs:
            assert torch.equal(a, b) if exact else rel(a, b) < 1e-2
        for name, buf in layer.fp8_state.named_buffers():
            got = twin.fp8_state.get_buffer(name)
            assert torch.equal(buf, got) if exact else torch.allclose(buf, got, rtol=1e-2), name
        with torch.no_grad():
            for m in (layer, twin):
                for p in m.parameters():
                    p -= 0.05 * p.grad
                m.zero_grad()


@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no-bias"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("recipe", RECIPES, ids=["current", "delayed"])
def test_compiled_fullgraph_equals_eager(recipe, dtype, bias):
    """torch.compile(layer, fullgraph=True) traces the FP8 GroupedLinear as its custom operators (no
    graph break: fullgraph would raise) and equals the eager twin bit for bit over training steps, a
    group without tokens included; the weight's FP8 copies are made once per weight version."""
    torch.manual_seed(1)
    layer = nt.GroupedLinear(3, 32, 16, bias=bias, dtype=dtype, fp8=recipe)
    twin = nt.GroupedLinear(3, 32, 16, bias=bias, dtype=dtype, fp8=recipe)
    twin.load_state_dict(layer.state_dict())
    compiled = torch.compile(layer, fullgraph=True, backend="aot_eager")
    assert_steps_equal(compiled, layer, twin, [16, 0, 32], dtype)
    assert layer.fp8_state.weight_updates == twin.fp8_state.weight_updates == 3


@pytest.mark.parametrize("fullgraph", [True, False], ids=["fullgraph-list", "tensor-counts"])
def test_compiled_model_around_the_layer(fullgraph):
    """A compiled function with torch ops around the layer: with the counts a list, fullgraph; with a
    CPU int64 tensor of counts (data to the tracer: read where the graph breaks), without. Input, weight
    and bias gradients and the state equal eager's."""
    torch.manual_seed(2)
    recipe = fp8.DelayedScaling(amax_history_len=4)
    layer = nt.GroupedLinear(2, 32, 16, fp8=recipe)
    twin = copy.deepcopy(layer)
    counts = [16, 32] if fullgraph else torch.tensor([16, 32])
    fn = torch.compile(lambda x: torch.relu(layer(x * 2, counts)), fullgraph=fullgraph, backend="aot_eager")
    for _ in range(2):
        x = torch.randn(48, 32)
        xa, xb = x.clone().requires_grad_(), x.clone().requires_grad_()
        got = torch.autograd.grad(fn(xa).sum(), [xa, layer.weight, layer.bias])
        want = torch.autograd.grad(torch.relu(twin(xb * 2, counts)).sum(), [xb, twin.weight, twin.bias])
        for a, b in zip(got, want):
            assert torch.equal(a, b)
    assert torch.equal(layer.fp8_state.amax_history, twin.fp8_state.amax_history)


def test_compiled_input_gradient_only_and_no_grad():
    """Frozen weight and bias (only dx needed: the backward operator returns empties for the rest) and a
    no-grad forward both compile in full and equal eager."""
    torch.manual_seed(3)
    layer = nt.GroupedLinear(2, 32, 16, fp8=fp8.CurrentScaling())
    layer.requires_grad_(False)
    twin = copy.deepcopy(layer)
    compiled = torch.compile(layer, fullgraph=True, backend="aot_eager")
    x = torch.randn(32, 32)
    xa, xb = x.clone().requires_grad_(), x.clone().requires_grad_()
    (ga,) = torch.autograd.grad(compiled(xa, [16, 16]).sum(), [xa])
    (gb,) = torch.autograd.grad(twin(xb, [16, 16]).sum(), [xb])
    assert torch.equal(ga, gb)
    with torch.no_grad():
        assert torch.equal(compiled(x, [0, 32]), twin(x, [0, 32]))


def test_fake_kernels_agree_with_the_operators():
    """The operators' fake kernels give the real outputs' shapes, dtypes and strides
    (torch.library.opcheck); qxt is e4m3 and flat, inv_x one scale per group."""
    from nvmath.torch import _grouped_fp8_ops as ops

    torch.manual_seed(4)
    layer = nt.GroupedLinear(3, 32, 16, dtype=torch.bfloat16, fp8=fp8.CurrentScaling())
    number = layer.fp8_state.op_number
    x = torch.randn(48, 32, dtype=torch.bfloat16)
    args = (x, layer.weight, layer.bias, [16, 0, 32], number)
    torch.library.opcheck(ops.grouped_fp8_op, args, test_utils=("test_faketensor",))
    y, qxt, inv_x = ops.grouped_fp8_op(*args)
    assert y.shape == (48, 16) and y.dtype == torch.bfloat16
    assert qxt.shape == (48 * 32,) and qxt.dtype == torch.float8_e4m3fn and inv_x.shape == (3,)
    g = torch.randn_like(y)
    for needs in ([True, True, True], [True, False, False], [False, True, True]):
        bargs = (g, qxt, inv_x, layer.weight, [16, 0, 32], number, torch.bfloat16, needs)
        torch.library.opcheck(ops.grouped_fp8_backward_op, bargs, test_utils=("test_faketensor",))


def test_recipe_check_runs_in_the_operator(monkeypatch):
    """Under torch.compile the compute-capability check of the recipe runs inside the operator (at run
    time, once per device): a refusal still raises, naming the capability."""
    from nvmath.torch import _fp8_linear

    layer = nt.GroupedLinear(2, 32, 16, fp8=fp8.CurrentScaling())

    def refuse(recipe, device):
        raise RuntimeError("FP8 GEMMs need a GPU of compute capability >= 8.9; device x has 8.0")

    monkeypatch.setattr(_fp8_linear, "check_recipe", refuse)
    layer.fp8_state.checked_device = None
    with pytest.raises(RuntimeError, match="8.9"):
        torch.compile(layer, fullgraph=True, backend="aot_eager")(torch.randn(32, 32), [16, 16])


def test_deepcopied_layer_has_its_own_state_under_compile():
    """copy.deepcopy of an FP8 GroupedLinear registers the copy's state anew: the compiled copy updates
    its own state, never the original's; a deleted layer's number raises a clear error."""
    from nvmath.torch._fp8_linear import registered_state

    layer = nt.GroupedLinear(2, 32, 16, fp8=fp8.DelayedScaling(amax_history_len=4))
    twin = copy.deepcopy(layer)
    assert twin.fp8_state.op_number != layer.fp8_state.op_number
    assert registered_state(twin.fp8_state.op_number) is twin.fp8_state
    before = layer.fp8_state.amax_history.clone()
    torch.compile(twin, fullgraph=True, backend="aot_eager")(torch.randn(32, 32), [16, 16])
    assert torch.equal(layer.fp8_state.amax_history, before)
    assert twin.fp8_state.amax_history.abs().sum() > 0
    number = layer.fp8_state.op_number
    del layer
    import gc

    gc.collect()
    with pytest.raises(RuntimeError, match="no longer exists"):
        registered_state(number)


# ---------------------------------------------------------------- GPU
@pytest.mark.gpu
@pytest.mark.parametrize("recipe", RECIPES, ids=["current", "delayed"])
def test_gpu_compiled_inductor_equals_eager(recipe):
    """torch.compile(fullgraph=True) with inductor of a bf16 FP8 GroupedLinear on the GPU (cast kernels
    and grouped FP8 planners inside the operators) against the eager twin over training steps, uneven
    counts with an empty group: equal up to the float32 sum order of torch ops inductor fuses."""
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA device")
    if torch.cuda.get_device_capability() < (8, 9):
        pytest.skip("FP8 needs compute capability 8.9")
    torch.manual_seed(5)
    layer = nt.GroupedLinear(4, 256, 128, device="cuda", dtype=torch.bfloat16, fp8=recipe)
    twin = copy.deepcopy(layer)
    compiled = torch.compile(layer, fullgraph=True)
    assert_steps_equal(compiled, layer, twin, [128, 0, 64, 256], torch.bfloat16, device="cuda", exact=False)
    from nvmath.torch._grouped_fp8_gemms import grouped_fp8_gemms

    assert grouped_fp8_gemms.enabled
