"""nvmath.torch.Linear and MLP against torch.nn.Linear (+ activation): forward, backward, state dicts.

CPU tests run the real planner on the emulated cuBLASLt in float64; GPU tests run cuBLASLt in
bf16/fp16/fp32 against a float64 torch reference.
"""

from __future__ import annotations

import pytest

ACTS = [None, "relu", "gelu"]


def _keys(cache):
    """The planner cache's keys (white-box)."""
    return list(cache._cache.keys())  # noqa: SLF001


def _ref_act(torch, z, act):
    if act == "relu":
        return torch.relu(z)
    if act == "gelu":
        return torch.nn.functional.gelu(z, approximate="tanh")
    return z


def _pair(torch, nt, n_in, n_out, act, bias=True, **kw):
    ours = nt.Linear(n_in, n_out, bias=bias, activation=act, **kw)
    ref = torch.nn.Linear(n_in, n_out, bias=bias, **kw)
    ref.load_state_dict(ours.state_dict())
    return ours, ref


def _grads(module, x):
    return [x.grad] + [p.grad for p in module.parameters()]


@pytest.mark.parametrize("act", ACTS)
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("shape", [(5, 4), (2, 3, 4), (1, 4)])
def test_linear_matches_torch_forward_and_backward(torch, nt, fake_gpu, act, bias, shape):
    """Linear(+act) gives torch.nn.Linear + act's output and gradients (input, weight, bias) in float64."""
    torch.manual_seed(1)
    ours, ref = _pair(torch, nt, 4, 6, act, bias, dtype=torch.float64)
    x = torch.randn(*shape, dtype=torch.float64, requires_grad=True)
    xr = x.detach().clone().requires_grad_()
    y, yr = ours(x), _ref_act(torch, ref(xr), act)
    torch.testing.assert_close(y, yr)
    g = torch.randn_like(y)
    y.backward(g)
    yr.backward(g)
    for a, b in zip(_grads(ours, x), _grads(ref, xr)):
        torch.testing.assert_close(a, b)


def test_linear_inference_uses_no_aux_epilog(torch, nt, fake_gpu):
    """Without grad, Linear(gelu) runs GELU_BIAS (no aux output); with grad, GELU_AUX_BIAS."""
    from nvmath.linalg.advanced import MatmulEpilog as E

    lin = nt.Linear(4, 3, activation="gelu", dtype=torch.float64)
    x = torch.randn(2, 4, dtype=torch.float64)
    with torch.no_grad():
        lin(x)
    lin(x)
    epilogs = {key[0] for key in _keys(nt.default_cache)}
    assert epilogs == {E.GELU_BIAS, E.GELU_AUX_BIAS}


def test_state_dict_loads_both_ways(torch, nt):
    """A torch.nn.Linear state dict loads into nvmath.torch.Linear and back, with the same keys and shapes."""
    ref = torch.nn.Linear(7, 5)
    ours = nt.Linear(7, 5, activation="relu")
    assert set(ours.state_dict()) == {"weight", "bias"}
    ours.load_state_dict(ref.state_dict())
    assert torch.equal(ours.weight, ref.weight)
    back = torch.nn.Linear(7, 5)
    back.load_state_dict(ours.state_dict())
    assert torch.equal(back.bias, ref.bias)
    assert nt.Linear(7, 5, bias=False).bias is None


def test_linear_forward_follows_swapped_and_parametrized_parameters(torch, nt, fake_gpu):
    """forward reads the registered parameters directly, yet follows a new Parameter assigned to the module,
    a parametrization of the weight (torch.nn.utils.parametrize) and a module without bias."""
    from torch.nn.utils import parametrize

    class Doubled(torch.nn.Module):
        def forward(self, w):
            return 2 * w

    torch.manual_seed(5)
    x = torch.randn(3, 4, dtype=torch.float64)
    lin = nt.Linear(4, 2, dtype=torch.float64)
    with torch.no_grad():
        torch.testing.assert_close(lin(x), x @ lin.weight.T + lin.bias)
        lin.weight = torch.nn.Parameter(torch.randn(2, 4, dtype=torch.float64))
        torch.testing.assert_close(lin(x), x @ lin.weight.T + lin.bias)
        parametrize.register_parametrization(lin, "weight", Doubled())
        torch.testing.assert_close(lin(x), x @ lin.weight.T + lin.bias)
        torch.testing.assert_close(lin.weight, 2 * lin.parametrizations.weight.original)
        plain = nt.Linear(4, 2, bias=False, dtype=torch.float64)
        torch.testing.assert_close(plain(x), x @ plain.weight.T)


def test_linear_rejects_bad_activation_and_mismatches(torch, nt, fake_gpu):
    """Bad activation names and dtype/shape mismatches raise with the tensors named, before any GPU work."""
    with pytest.raises(ValueError, match="activation must be one of"):
        nt.Linear(3, 2, activation="tanh")
    lin = nt.Linear(3, 2, dtype=torch.float64)
    with pytest.raises(RuntimeError, match="weight and input .*same dtype"):
        lin(torch.randn(2, 3, dtype=torch.float32))
    with pytest.raises(RuntimeError, match="cannot be multiplied"):
        lin(torch.randn(2, 4, dtype=torch.float64))
    with pytest.raises(RuntimeError, match="weight and input to be on the same device"):
        lin(torch.randn(2, 3, dtype=torch.float64, device="meta"))
    with pytest.raises(TypeError, match="input must be a torch.Tensor"):
        lin([[1.0, 2.0, 3.0]])
    with pytest.raises(RuntimeError, match=r"bias must have shape \(2,\)"):
        nt.linear(torch.randn(2, 3, dtype=torch.float64), lin.weight, torch.zeros(3, dtype=torch.float64))
    assert len(nt.default_cache) == 0


def test_fp8_and_integer_inputs_refuse_grad(torch, nt, fake_gpu):
    """A weight that requires grad with FP8 / integer input raises a TypeError naming the dtype at call time."""
    from nvmath.torch._rules import check_dtypes

    if not hasattr(torch, "float8_e4m3fn"):
        pytest.skip("this torch has no float8 dtypes")
    with pytest.raises(TypeError, match="input has dtype torch.float8_e4m3fn.*no autograd"):
        check_dtypes(input=torch.zeros(2, dtype=torch.float8_e4m3fn))
    w = torch.zeros(2, 3, dtype=torch.float8_e4m3fn)
    x = torch.zeros(4, 3, dtype=torch.float8_e4m3fn)
    with pytest.raises(TypeError, match="float8_e4m3fn"):
        nt.linear(x, torch.nn.Parameter(w.float()).to(torch.float8_e4m3fn).requires_grad_())


@pytest.mark.parametrize("act", ["relu", "gelu"])
def test_mlp_matches_torch(torch, nt, fake_gpu, act):
    """MLP (DGELU in the GEMM, BGRADB; ReLU via threshold_backward) matches Linear -> act -> Linear in
    torch, gradients included."""
    torch.manual_seed(2)
    ours = nt.MLP(4, 8, 3, activation=act, dtype=torch.float64)
    fc1, fc2 = torch.nn.Linear(4, 8, dtype=torch.float64), torch.nn.Linear(8, 3, dtype=torch.float64)
    fc1.load_state_dict(ours.fc1.state_dict())
    fc2.load_state_dict(ours.fc2.state_dict())
    x = torch.randn(6, 4, dtype=torch.float64, requires_grad=True)
    xr = x.detach().clone().requires_grad_()
    y, yr = ours(x), fc2(_ref_act(torch, fc1(xr), act))
    torch.testing.assert_close(y, yr)
    y.sum().backward()
    yr.sum().backward()
    ref_grads = [xr.grad] + [p.grad for p in (*fc1.parameters(), *fc2.parameters())]
    for a, b in zip([x.grad] + [p.grad for p in ours.parameters()], ref_grads):
        torch.testing.assert_close(a, b)


# ---------------------------------------------------------------- GPU
TOL = {"float32": 1e-5, "float16": 5e-3, "bfloat16": 2e-2}


def _rel(torch, a, b):
    return ((a.double() - b).norm() / b.norm()).item()


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("act", ACTS)
def test_linear_gpu_matches_torch(torch_cuda, nt, dtype, act):
    """On the GPU, Linear(+act) forward and backward match a float64 torch reference in bf16/fp16/fp32."""
    torch = torch_cuda
    dt = getattr(torch, dtype)
    torch.manual_seed(3)
    ours = nt.Linear(256, 384, activation=act, device="cuda", dtype=dt)
    ref = torch.nn.Linear(256, 384, device="cuda", dtype=torch.float64)
    ref.load_state_dict({k: v.double() for k, v in ours.state_dict().items()})
    x = torch.randn(4, 50, 256, device="cuda", dtype=dt, requires_grad=True)
    xr = x.detach().double().requires_grad_()
    y, yr = ours(x), _ref_act(torch, ref(xr), act)
    assert y.dtype == dt and y.shape == (4, 50, 384)
    assert _rel(torch, y, yr) < TOL[dtype]
    g = torch.randn_like(y)
    y.backward(g)
    yr.backward(g.double())
    for a, b in zip(_grads(ours, x), _grads(ref, xr)):
        assert a.dtype == dt and not a.isnan().any()
        assert _rel(torch, a, b) < 2 * TOL[dtype]


@pytest.mark.gpu
@pytest.mark.parametrize("act", ["relu", "gelu"])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_mlp_gpu_matches_torch(torch_cuda, nt, act, dtype):
    """On the GPU, the fused MLP (DGELU in the GEMM, BGRADB) matches torch's Linear -> act -> Linear."""
    torch = torch_cuda
    dt = getattr(torch, dtype)
    torch.manual_seed(4)
    ours = nt.MLP(256, 512, 128, activation=act, device="cuda", dtype=dt)
    fc1 = torch.nn.Linear(256, 512, device="cuda", dtype=torch.float64)
    fc2 = torch.nn.Linear(512, 128, device="cuda", dtype=torch.float64)
    fc1.load_state_dict({k: v.double() for k, v in ours.fc1.state_dict().items()})
    fc2.load_state_dict({k: v.double() for k, v in ours.fc2.state_dict().items()})
    x = torch.randn(200, 256, device="cuda", dtype=dt, requires_grad=True)
    xr = x.detach().double().requires_grad_()
    y, yr = ours(x), fc2(_ref_act(torch, fc1(xr), act))
    assert _rel(torch, y, yr) < TOL[dtype]
    g = torch.randn_like(y)
    y.backward(g)
    yr.backward(g.double())
    ours_grads = [x.grad, ours.fc1.weight.grad, ours.fc1.bias.grad, ours.fc2.weight.grad, ours.fc2.bias.grad]
    ref_grads = [xr.grad, fc1.weight.grad, fc1.bias.grad, fc2.weight.grad, fc2.bias.grad]
    for a, b in zip(ours_grads, ref_grads):
        assert _rel(torch, a, b) < 4 * TOL[dtype]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("act", [None, "gelu"])
def test_linear_gpu_repeated_steps_match_torch(torch_cuda, nt, dtype, act):
    """On the GPU, repeated training steps and inference calls of one Linear with new inputs (planned
    problems then hit: the forward, the weight gradient with its bias gradient from the transposed
    product's result, the input gradient, all on addresses) match a float64 torch reference every time."""
    torch = torch_cuda
    dt = getattr(torch, dtype)
    torch.manual_seed(5)
    cache = nt.PlannerCache(16)
    ours = nt.Linear(256, 384, activation=act, device="cuda", dtype=dt, cache=cache)
    ref = torch.nn.Linear(256, 384, device="cuda", dtype=torch.float64)
    ref.load_state_dict({k: v.double() for k, v in ours.state_dict().items()})
    for step in range(4):
        ours.zero_grad()
        ref.zero_grad()
        x = torch.randn(96, 256, device="cuda", dtype=dt, requires_grad=True)
        xr = x.detach().double().requires_grad_()
        y, yr = ours(x), _ref_act(torch, ref(xr), act)
        g = torch.randn_like(y)
        y.backward(g)
        yr.backward(g.double())
        assert _rel(torch, y, yr) < TOL[dtype]
        for a, b in zip(_grads(ours, x), _grads(ref, xr)):
            assert a.dtype == dt and a.is_contiguous() and _rel(torch, a, b) < 2 * TOL[dtype]
        with torch.no_grad():
            assert _rel(torch, ours(x), _ref_act(torch, ref(xr), act)) < TOL[dtype]
    assert cache.stats.hits >= 3 * 3  # (steps after the first: forward, weight and input gradients)
