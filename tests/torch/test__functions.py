"""_functions: the eager autograd functions are first-order only and keep outputs off the dispatcher."""

from __future__ import annotations

import pytest


def test_double_backward_is_refused(torch, nt, fake_gpu):
    """A second derivative through Linear raises (once_differentiable) instead of returning wrong values."""
    x = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    lin = nt.Linear(4, 2, activation="gelu", dtype=torch.float64)
    (gx,) = torch.autograd.grad(lin(x).sum(), [x], create_graph=True)
    with pytest.raises(RuntimeError):
        gx.sum().backward()


def test_eager_calls_build_python_autograd_nodes(torch, nt, fake_gpu):
    """Eager calls are LinearFn / MLPFn nodes (the direct path), not the custom op's autograd node."""
    x = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    assert "LinearFn" in type(nt.Linear(4, 2, dtype=torch.float64)(x).grad_fn).__name__
    assert "MLPFn" in type(nt.MLP(4, 8, 2, dtype=torch.float64)(x).grad_fn).__name__
