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
