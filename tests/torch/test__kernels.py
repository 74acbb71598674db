"""_kernels: the GELU(tanh) derivative, activation gradients and the aux padding the MLP clears."""

from __future__ import annotations


def test_gelu_tanh_grad_matches_autograd(torch):
    """gelu_tanh_grad equals autograd of torch's tanh GELU (float64), and upcasts bf16 to float32."""
    from nvmath.torch._kernels import gelu_tanh_grad

    z = torch.linspace(-6, 6, 101, dtype=torch.float64, requires_grad=True)
    (want,) = torch.autograd.grad(torch.nn.functional.gelu(z, approximate="tanh").sum(), [z])
    torch.testing.assert_close(gelu_tanh_grad(z.detach()), want)
    assert gelu_tanh_grad(torch.zeros(2, dtype=torch.bfloat16)).dtype == torch.float32


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


def test_clear_padding_zeroes_rows_and_unused_bits(torch):
    """MLP aux: GELU rows past N and ReLU bitmask bytes (and bits) past N are zeroed; real data stays."""
    from nvmath.torch._kernels import _clear_padding

    gelu = torch.ones(8, 3)
    _clear_padding(gelu, 6, "gelu")
    assert gelu[:6].eq(1).all() and gelu[6:].eq(0).all()
    relu = torch.full((16, 3), 255, dtype=torch.uint8)
    _clear_padding(relu, 10, "relu")
    assert relu[0].eq(255).all() and relu[1].eq(0b11).all() and relu[2:].eq(0).all()
