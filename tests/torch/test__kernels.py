"""_kernels: activation gradients (torch's own elementwise backward) and the aux padding the MLP clears."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize("dtype", ["float64", "bfloat16"])
def test_activation_grad_gelu_matches_autograd(torch, dtype):
    """GELU(tanh)'s dz = g * gelu'(z) from the saved pre-activation (aux, (N, M), read as z = aux.T), equal to
    autograd of torch's tanh GELU, in g's dtype and contiguous."""
    from nvmath.torch._kernels import activation_grad

    dt = getattr(torch, dtype)
    z = torch.linspace(-6, 6, 24, dtype=torch.float64).view(4, 6).requires_grad_()
    g = torch.linspace(-1, 1, 24, dtype=torch.float64).view(4, 6)
    (want,) = torch.autograd.grad(torch.nn.functional.gelu(z, approximate="tanh"), [z], grad_outputs=g)
    aux = z.detach().to(dt).T.contiguous()  # as the forward saves it: (N, M)
    dz = activation_grad(g.to(dt), "gelu", torch.empty(0), aux)
    assert dz.dtype == dt and dz.is_contiguous()
    torch.testing.assert_close(dz.double(), want, atol=1e-2 if dtype == "bfloat16" else 1e-12, rtol=1e-2)


def test_activation_grad_relu_uses_the_output_and_is_contiguous(torch):
    """ReLU's dz = g * [y > 0] in g's dtype, contiguous even for an expanded incoming gradient."""
    from nvmath.torch._kernels import activation_grad

    y = torch.tensor([[0.0, 1.0], [2.0, 0.0]])
    g = torch.ones(()).expand(2, 2)
    dz = activation_grad(g, "relu", y, torch.empty(0))
    assert dz.is_contiguous() and torch.equal(dz, torch.tensor([[0.0, 1.0], [1.0, 0.0]]))
    assert activation_grad(g, None, y, torch.empty(0)).is_contiguous()


def test_clear_padding_zeroes_rows_past_n(torch):
    """MLP GELU aux: rows past N are zeroed (a deterministic output); the real rows stay."""
    from nvmath.torch._kernels import _clear_padding

    gelu = torch.ones(8, 3)
    _clear_padding(gelu, 6)
    assert gelu[:6].eq(1).all() and gelu[6:].eq(0).all()
