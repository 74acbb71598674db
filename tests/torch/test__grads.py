"""_grads: the backward formulas of ``epilog(alpha * a @ b + beta * c + bias)``, checked with torch's matmul."""

from __future__ import annotations

import pytest


def test_bias_axis_follows_the_advanced_matmul_rule(torch):
    """1-D bias of length M runs along M (also when M == N), else along N; (M, 1) along M; (1, N) along N."""
    from nvmath.torch._grads import bias_along_n

    assert not bias_along_n(torch.zeros(3), 3, 5)
    assert bias_along_n(torch.zeros(5), 3, 5)
    assert not bias_along_n(torch.zeros(4), 4, 4)
    assert not bias_along_n(torch.zeros(2, 3, 1), 3, 5)
    assert bias_along_n(torch.zeros(1, 5), 3, 5)


def test_preactivation_reads_the_aux_orientation(torch):
    """The pre-activation is aux[:m] (bias along M) or aux[:n].T (bias along N, the transposed problem)."""
    from nvmath.torch._grads import preactivation

    aux = torch.arange(8 * 5.0).view(8, 5)
    assert torch.equal(preactivation(aux, 3, 5, False), aux[:3])
    aux_t = torch.arange(8 * 3.0).view(8, 3)
    assert torch.equal(preactivation(aux_t, 3, 5, True), aux_t[:5].T)


@pytest.mark.parametrize("act", [None, "relu", "gelu"])
def test_matmul_backward_matches_autograd(torch, act):
    """With torch.matmul as the product, the formulas equal autograd of act(0.5 a@b + 2c + bias) (broadcasts too)."""
    from nvmath.torch._grads import matmul_backward

    gen = torch.Generator().manual_seed(3)
    mk = lambda *s: torch.randn(*s, dtype=torch.float64, generator=gen).requires_grad_()
    a, b, c, bias = mk(2, 3, 4), mk(4, 5), mk(3, 1), mk(5)
    z = 0.5 * (a @ b) + 2.0 * c + bias
    y = {None: z, "relu": torch.relu(z), "gelu": torch.nn.functional.gelu(z, approximate="tanh")}[act]
    g = torch.randn(y.shape, dtype=torch.float64, generator=gen)
    want = torch.autograd.grad(y, [a, b, c, bias], g)
    got = matmul_backward(
        torch.matmul, g, a.detach(), b.detach(), c.detach(), bias.detach(), y.detach(), z.detach(), act, 0.5,
        2.0, (True, True, True, True),
    )  # fmt: skip
    for x, w in zip(got, want):
        torch.testing.assert_close(x, w)
    assert matmul_backward(torch.matmul, g, a, b, c, bias, y, z, act, 0.5, 2.0, (False,) * 4) == (None,) * 4
