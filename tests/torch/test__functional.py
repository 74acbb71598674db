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
