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


def test_activation_grad_gelu_reads_the_padded_aux_and_matches_autograd(torch):
    """GELU's dz = g * gelu'(z) from the saved aux (column-major, rows padded past N) equals autograd's
    (float64), contiguous, in g's dtype (bf16 too)."""
    from nvmath.torch._kernels import activation_grad

    m, n = 5, 6
    z = torch.randn(m, n, dtype=torch.float64, requires_grad=True)
    aux = torch.empty_strided((8, m), (1, 8), dtype=torch.float64)  # (round_up(N, 8), M), column-major
    aux[:n] = z.detach().T
    g = torch.randn(m, n, dtype=torch.float64)
    (want,) = torch.autograd.grad(torch.nn.functional.gelu(z, approximate="tanh"), [z], grad_outputs=g)
    dz = activation_grad(g, "gelu", torch.empty(0), aux[:n])
    assert dz.is_contiguous()
    torch.testing.assert_close(dz, want)
    low = activation_grad(g.bfloat16(), "gelu", torch.empty(0), aux[:n].bfloat16())
    assert low.dtype == torch.bfloat16 and low.is_contiguous()


def test_clear_padding_zeroes_rows_past_n(torch):
    """MLP GELU aux: rows past N are zeroed (a deterministic output); the real rows stay."""
    from nvmath.torch._kernels import _clear_padding

    gelu = torch.ones(8, 3)
    _clear_padding(gelu, 6)
    assert gelu[:6].eq(1).all() and gelu[6:].eq(0).all()


@pytest.mark.parametrize("bias", [False, True])
def test_weight_grad_is_the_product_in_the_gradient_layout(torch, nt, fake_gpu, bias):
    """weight_grad gives dz.T @ x as a contiguous (N, K) tensor (float64 reference; the layout torch's
    gradient accumulation keeps without a copy) and, with ``bias``, dz.sum(0) (BGRADB)."""
    from nvmath.torch._kernels import weight_grad

    gen = torch.Generator().manual_seed(3)
    dz = torch.randn(6, 4, dtype=torch.float64, generator=gen)  # (M, N)
    x = torch.randn(6, 5, dtype=torch.float64, generator=gen)  # (M, K)
    cache = nt.PlannerCache() if hasattr(nt, "PlannerCache") else nt.default_cache
    dw, db = weight_grad(cache, dz, x, bias)
    assert dw.shape == (4, 5) and dw.is_contiguous()
    torch.testing.assert_close(dw, dz.T @ x)
    if bias:
        torch.testing.assert_close(db, dz.sum(0))
    else:
        assert db is None
