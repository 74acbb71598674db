"""nvmath.torch.linear / mlp: the functional forms, their cache argument and their input checks."""

from __future__ import annotations

import pytest


def test_linear_and_mlp_use_the_given_cache(torch, nt, fake_gpu):
    """linear(..., cache=c) and mlp(..., cache=c) plan in c (not the default cache) and match torch."""
    cache = nt.PlannerCache(8)
    gen = torch.Generator().manual_seed(1)
    x, w, b = (torch.randn(*s, dtype=torch.float64, generator=gen) for s in ((5, 4), (3, 4), (3,)))
    torch.testing.assert_close(nt.linear(x, w, b, "relu", cache=cache), torch.relu(x @ w.T + b))
    w2 = torch.randn(2, 3, dtype=torch.float64, generator=gen)
    y = nt.mlp(x, w, b, w2, None, "gelu", cache=cache)
    torch.testing.assert_close(y, torch.nn.functional.gelu(x @ w.T + b, approximate="tanh") @ w2.T)
    assert len(cache) == 3 and len(nt.default_cache) == 0


def test_mlp_needs_an_activation_and_matching_shapes(torch, nt, fake_gpu):
    """mlp() refuses activation=None and a w2 whose in_features differ from w1's out_features."""
    x, w1, w2 = torch.randn(2, 4), torch.randn(3, 4), torch.randn(2, 5)
    with pytest.raises(ValueError, match="activation must be one of"):
        nt.mlp(x, w1, None, w2, None, None)
    with pytest.raises(RuntimeError, match="w2"):
        nt.mlp(x, w1, None, w2, None, "relu")


def test_mlp_with_frozen_layers_computes_only_the_needed_gradients(torch, nt, fake_gpu):
    """With fc2 frozen and no input grad, only fc1's gradients are formed (and match torch)."""
    torch.manual_seed(3)
    mlp = nt.MLP(4, 8, 3, activation="relu", dtype=torch.float64)
    mlp.fc2.requires_grad_(False)
    x = torch.randn(5, 4, dtype=torch.float64)
    mlp(x).sum().backward()
    z = x @ mlp.fc1.weight.T + mlp.fc1.bias
    w1, b1 = mlp.fc1.weight.detach().requires_grad_(), mlp.fc1.bias.detach().requires_grad_()
    (torch.relu(x @ w1.T + b1) @ mlp.fc2.weight.T + mlp.fc2.bias).sum().backward()
    torch.testing.assert_close(mlp.fc1.weight.grad, w1.grad)
    torch.testing.assert_close(mlp.fc1.bias.grad, b1.grad)
    assert mlp.fc2.weight.grad is None and z.shape == (5, 8)


def test_linear_hit_path_follows_requires_grad_between_calls(torch, nt, fake_gpu):
    """Calls of one planned problem alternate between inference (address-only hits) and autograd as
    grad mode and requires_grad change; every result and gradient matches torch."""
    torch.manual_seed(4)
    lin = nt.Linear(4, 3, activation="relu", dtype=torch.float64)
    ref = torch.nn.Linear(4, 3, dtype=torch.float64)
    ref.load_state_dict(lin.state_dict())
    x = torch.randn(5, 4, dtype=torch.float64)
    for step in range(3):
        with torch.no_grad():
            torch.testing.assert_close(lin(x), torch.relu(ref(x)))
        y = lin(x)
        assert y.requires_grad and y.grad_fn is not None
        y.sum().backward()
        torch.relu(ref(x)).sum().backward()
        torch.testing.assert_close(lin.weight.grad, ref.weight.grad)
        torch.testing.assert_close(lin.bias.grad, ref.bias.grad)
    lin.requires_grad_(False)
    xg = x.clone().requires_grad_()
    y = lin(xg)
    y.sum().backward()
    mask = (x @ lin.weight.T + lin.bias > 0).to(x.dtype)
    torch.testing.assert_close(xg.grad, mask @ lin.weight)
    out = lin(x)
    assert not out.requires_grad
    torch.testing.assert_close(out, torch.relu(ref(x)).detach())


def test_linear_checks_still_apply_to_planned_problems(torch, nt, fake_gpu):
    """Once (x, weight, bias) is planned, a call whose bias dtype, shape, activation, input width or
    device differs is still checked (and refused) as on a first call."""
    x, w, b = (torch.randn(*s, dtype=torch.float64) for s in ((5, 4), (3, 4), (3,)))
    misses = nt.default_cache.stats.misses
    with torch.no_grad():
        nt.linear(x, w, b, "gelu")
        nt.linear(x, w, b, "gelu")
        with pytest.raises(RuntimeError, match="bias and input .*same dtype"):
            nt.linear(x, w, b.float(), "gelu")
        with pytest.raises(RuntimeError, match=r"bias must have shape \(3,\)"):
            nt.linear(x, w, torch.randn(1, dtype=torch.float64), "gelu")
        with pytest.raises(ValueError, match="activation must be one of"):
            nt.linear(x, w, b, "tanh")
        with pytest.raises(ValueError, match="activation must be one of"):
            nt.linear(x, w, b, ["gelu"])
        with pytest.raises(RuntimeError, match="cannot be multiplied"):
            nt.linear(torch.randn(5, 3, dtype=torch.float64), w, b, "gelu")
        with pytest.raises(TypeError, match="bias must be a torch.Tensor"):
            nt.linear(x, w, [0.0, 1.0, 2.0], "gelu")
        with pytest.raises(RuntimeError, match="weight and input to be on the same device"):
            nt.linear(x.to("meta"), w, b, "gelu")  # another device: not the planned problem
    assert nt.default_cache.stats.misses == misses + 1 and len(nt.default_cache) == 1


def test_linear_with_grad_checks_new_problems_and_planned_ones_alike(torch, nt, fake_gpu):
    """With a gradient needed, the operands are checked by torch's rules on a problem's first call (inside
    the autograd forward) and a planned problem's key refuses any call that differs: mismatched dtypes,
    shapes and devices raise torch's errors, nothing else is planned, and the planned call stays right."""
    x, w, b = (torch.randn(*s, dtype=torch.float64) for s in ((5, 4), (3, 4), (3,)))
    w.requires_grad_()
    misses = nt.default_cache.stats.misses
    with pytest.raises(RuntimeError, match="bias and input .*same dtype"):
        nt.linear(x, w, b.float(), "relu")  # a new problem: refused before planning
    with pytest.raises(RuntimeError, match="cannot be multiplied"):
        nt.linear(torch.randn(5, 3, dtype=torch.float64), w, b)
    assert nt.default_cache.stats.misses == misses and len(nt.default_cache) == 0
    y = nt.linear(x, w, b, "relu")
    y.sum().backward()
    torch.testing.assert_close(y, torch.relu(x @ w.T + b))
    torch.testing.assert_close(w.grad, ((x @ w.T + b > 0).to(x.dtype)).T @ x)
    misses, planned = nt.default_cache.stats.misses, len(nt.default_cache)  # (the forward's and backward's)
    with pytest.raises(RuntimeError, match=r"bias must have shape \(3,\)"):
        nt.linear(x, w, torch.randn(1, dtype=torch.float64), "relu")
    with pytest.raises(RuntimeError, match="weight and input .*same dtype"):
        nt.linear(x.float(), w, b, "relu")
    with pytest.raises(RuntimeError, match="weight and input to be on the same device"):
        nt.linear(x.to("meta"), w, b, "relu")
    assert nt.default_cache.stats.misses == misses and len(nt.default_cache) == planned


def test_linear_with_grad_outside_functorch_skips_only_function_apply_layer(torch, nt, fake_gpu):
    """The training call reaches torch's C apply directly: the graph node is LinearFn's, the input's
    gradient matches torch, and under a functorch transform the call goes through LinearFn.apply (which
    refuses a function without setup_context, as torch does)."""
    from nvmath.torch import _functions

    x = torch.randn(4, 3, dtype=torch.float64, requires_grad=True)
    w = torch.randn(2, 3, dtype=torch.float64)
    y = nt.linear(x, w, None)
    assert type(y.grad_fn).__name__ == "LinearFnBackward"
    y.sum().backward()
    torch.testing.assert_close(x.grad, torch.ones(4, 2, dtype=torch.float64) @ w)
    with pytest.raises(RuntimeError, match="setup_context"):
        torch.func.grad(lambda t: _functions.apply_linear(t, w, None, None, nt.default_cache).sum())(
            x.detach()
        )


def test_linear_with_grad_takes_function_apply_without_torchs_c_pieces(torch, nt, fake_gpu, monkeypatch):
    """Where torch lacks the C pieces of Function.apply that the direct entry uses, training calls go
    through LinearFn.apply (same node, same gradients)."""
    from nvmath.torch import _functions

    calls = []
    apply = _functions.LinearFn.apply
    monkeypatch.setattr(_functions, "_transforms_active", _functions._always)
    monkeypatch.setattr(_functions.LinearFn, "apply", lambda *a: calls.append(1) or apply(*a))
    x = torch.randn(4, 3, dtype=torch.float64, requires_grad=True)
    w = torch.randn(2, 3, dtype=torch.float64)
    y = nt.linear(x, w, None)
    y.sum().backward()
    assert calls == [1] and type(y.grad_fn).__name__ == "LinearFnBackward"
    torch.testing.assert_close(x.grad, torch.ones(4, 2, dtype=torch.float64) @ w)
