"""nvmath.torch's layers on CPU tensors: torch's own operations, same parameters, autograd, compile.

A PyTorch user builds and tests a model on the CPU and moves it with ``.to("cuda")``. On the CPU,
``Linear``, ``MLP``, ``linear`` and ``mlp`` compute with ``torch.nn.functional.linear`` and the
activation (nothing fused, no cuBLASLt); the references here are torch's modules in float64.
"""

from __future__ import annotations

import pytest

ACTS = [None, "relu", "gelu"]


def _ref_act(torch, z, act):
    if act == "relu":
        return torch.relu(z)
    if act == "gelu":
        return torch.nn.functional.gelu(z, approximate="tanh")
    return z


@pytest.fixture(autouse=True)
def _no_planning(nt):
    """CPU layers never plan a cuBLASLt matmul (the default cache stays empty)."""
    nt.default_cache.clear()
    yield
    assert nt.default_cache.stats.size == 0


@pytest.mark.parametrize("act", ACTS)
@pytest.mark.parametrize("bias", [True, False])
def test_cpu_linear_forward_and_backward_match_torch(torch, nt, act, bias):
    """Linear on CPU float64 tensors: output and every gradient equal torch.nn.Linear + activation."""
    torch.manual_seed(0)
    ours = nt.Linear(6, 5, bias=bias, activation=act, dtype=torch.float64)
    ref = torch.nn.Linear(6, 5, bias=bias, dtype=torch.float64)
    ref.load_state_dict(ours.state_dict())
    x = torch.randn(3, 4, 6, dtype=torch.float64, requires_grad=True)
    xr = x.detach().clone().requires_grad_()
    y, yr = ours(x), _ref_act(torch, ref(xr), act)
    torch.testing.assert_close(y, yr)
    g = torch.randn_like(y)
    y.backward(g)
    yr.backward(g)
    torch.testing.assert_close(x.grad, xr.grad)
    for p, pr in zip(ours.parameters(), ref.parameters(), strict=True):
        torch.testing.assert_close(p.grad, pr.grad)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
def test_cpu_linear_low_precision_dtypes(torch, nt, dtype):
    """float32 / bfloat16 / float16 CPU parameters compute, in their dtype, close to a float64 reference."""
    dt = getattr(torch, dtype)
    layer = nt.Linear(16, 8, activation="gelu", dtype=dt)
    x = torch.randn(4, 16, dtype=dt)
    y = layer(x)
    assert y.dtype == dt and y.shape == (4, 8)
    ref = torch.nn.functional.gelu(
        x.double() @ layer.weight.double().T + layer.bias.double(), approximate="tanh"
    )
    tol = 1e-5 if dtype == "float32" else 3e-2
    torch.testing.assert_close(y.double(), ref, atol=tol, rtol=tol)


def test_cpu_gradcheck_linear_and_mlp(torch, nt):
    """gradcheck passes for the functional linear and mlp on CPU float64 tensors."""
    torch.manual_seed(1)
    x = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    w1 = torch.randn(5, 4, dtype=torch.float64, requires_grad=True)
    b1 = torch.randn(5, dtype=torch.float64, requires_grad=True)
    w2 = torch.randn(2, 5, dtype=torch.float64, requires_grad=True)
    b2 = torch.randn(2, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda *t: nt.linear(*t, "gelu"), (x, w1, b1))
    assert torch.autograd.gradcheck(lambda *t: nt.mlp(*t, "gelu"), (x, w1, b1, w2, b2))


@pytest.mark.parametrize("act", ["relu", "gelu"])
def test_cpu_mlp_matches_torch_and_keeps_the_layout(torch, nt, act):
    """MLP on the CPU equals fc2(act(fc1(x))) with torch.nn.Linear layers holding the same state dict."""
    torch.manual_seed(2)
    ours = nt.MLP(6, 10, 3, activation=act, dtype=torch.float64)
    assert set(ours.state_dict()) == {"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"}
    fc1, fc2 = torch.nn.Linear(6, 10, dtype=torch.float64), torch.nn.Linear(10, 3, dtype=torch.float64)
    fc1.load_state_dict(ours.fc1.state_dict())
    fc2.load_state_dict(ours.fc2.state_dict())
    x = torch.randn(7, 6, dtype=torch.float64)
    torch.testing.assert_close(ours(x), fc2(_ref_act(torch, fc1(x), act)))


def test_cpu_inference_and_bad_inputs(torch, nt):
    """No-grad CPU calls compute; mismatched dtypes, devices and shapes raise torch-style RuntimeErrors."""
    layer = nt.Linear(4, 3, activation="relu")
    with torch.no_grad():
        x = torch.randn(2, 4)
        torch.testing.assert_close(layer(x), torch.relu(x @ layer.weight.T + layer.bias))
    with pytest.raises(RuntimeError, match="same dtype"):
        layer(torch.randn(2, 4, dtype=torch.float64))
    with pytest.raises(RuntimeError, match="in_features"):
        layer(torch.randn(2, 5))
    with pytest.raises(RuntimeError, match="same device"):
        nt.linear(torch.randn(2, 4), torch.randn(3, 4, device="meta"))
    with pytest.raises(ValueError, match="activation"):
        nt.linear(torch.randn(2, 4), torch.randn(3, 4), None, "tanh")


def test_cpu_training_loop_reduces_the_loss(torch, nt):
    """A few SGD steps of an MLP on the CPU fit a small regression (the loss goes down)."""
    torch.manual_seed(3)
    model = torch.nn.Sequential(nt.Linear(8, 32, activation="relu"), nt.Linear(32, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    x = torch.randn(64, 8)
    target = x.sum(dim=1, keepdim=True)
    losses = []
    for _ in range(30):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), target)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0]


def test_cpu_torch_compile_fullgraph(torch, nt):
    """torch.compile(fullgraph=True) traces a CPU model of Linear and MLP and gives eager's results."""
    torch.manual_seed(4)
    model = torch.nn.Sequential(nt.Linear(8, 16, activation="gelu"), nt.MLP(16, 32, 4, activation="relu"))
    x = torch.randn(5, 8)
    torch._dynamo.reset()
    compiled = torch.compile(model, fullgraph=True, backend="eager")
    torch.testing.assert_close(compiled(x), model(x))
    y = compiled(x.requires_grad_())
    y.sum().backward()
    assert x.grad is not None and model[0].weight.grad is not None


@pytest.mark.gpu
def test_cpu_model_moved_to_cuda_takes_the_fused_path(torch_cuda, nt):
    """A model built on the CPU and moved with .to("cuda") runs the cuBLASLt path (the planner cache fills)
    and gives the CPU result within float32 tolerance."""
    torch = torch_cuda
    torch.manual_seed(5)
    layer = nt.Linear(64, 32, activation="gelu")
    x = torch.randn(8, 64)
    expected = layer(x)
    layer.to("cuda")
    nt.default_cache.clear()
    y = layer(x.cuda())
    assert y.device.type == "cuda"
    torch.testing.assert_close(y.cpu(), expected, atol=1e-3, rtol=1e-3)
    assert nt.default_cache.stats.size >= 1
    nt.default_cache.clear()
