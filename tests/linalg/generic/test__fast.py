"""Fast entries of cached single GEMMs: chosen only for the kinds they handle, and numerically the
same as the general path (alpha, beta, c, conjugate qualifiers, torch CPU operands)."""

from __future__ import annotations

import numpy as np
import pytest

import nvmath.linalg as la
from nvmath.linalg.generic import plan_cache


@pytest.fixture(autouse=True)
def fresh_cache():
    plan_cache.clear()
    yield
    plan_cache.clear()


def _planned(*args, **kwargs):
    mm = la.Matmul(*args, **kwargs)
    mm.plan()
    return mm


def test_entry_choice():
    """A plain CPU GEMM gets the fast entry; structured, in-place, sequences and thread limits do not."""
    a, c = np.ones((3, 3)), np.ones((3, 3))
    q = np.array([la.SymmetricMatrixQualifier.create(), la.GeneralMatrixQualifier.create()])
    assert _planned(a, a)._fast is not None
    assert _planned(a, a, c, beta=1.0)._fast is not None
    assert _planned(a, a, qualifiers=q)._fast is None
    assert _planned(a, a, c, beta=1.0, options={"inplace": True})._fast is None
    assert _planned([a], [a])._fast is None
    assert _planned(a, a, execution=la.ExecutionCPU(num_threads=1))._fast is None


def test_fast_numerics():
    """Repeated stateless calls (the fast entry) give alpha * a @ b + beta * c with per-call scalars."""
    rng = np.random.default_rng(0)
    a, b, c = rng.standard_normal((2, 5, 4)), rng.standard_normal((4, 3)), rng.standard_normal((2, 5, 3))
    for alpha, beta in ((None, 1.0), (2.0, 0.0), (-1, 3)):
        out = la.matmul(a, b, c, alpha=alpha, beta=beta)
        np.testing.assert_allclose(out, (1 if alpha is None else alpha) * (a @ b) + beta * c)
    with pytest.raises(ValueError, match="complex"):
        la.matmul(a, b, c, alpha=1j, beta=1.0)


def test_fast_conjugate_and_torch(torch):
    """Conjugate qualifiers and torch CPU operands through the fast entry."""
    a = torch.randn(4, 4, dtype=torch.complex128)
    q = np.array([la.GeneralMatrixQualifier.create(conjugate=True), la.GeneralMatrixQualifier.create()])
    for _ in range(2):
        torch.testing.assert_close(la.matmul(a, a, qualifiers=q), a.conj().resolve_conj() @ a)
    for _ in range(2):
        out = la.matmul(a, a, alpha=2.0)
        assert isinstance(out, torch.Tensor)
        torch.testing.assert_close(out, 2 * (a @ a))


def test_fast_torch_requires_grad(torch):
    """torch CPU tensors that require grad: under no_grad a plain result (the fast path); with grad mode on,
    nvmath.torch makes the result differentiable (issue #12)."""
    a = torch.randn(3, 3, dtype=torch.float64, requires_grad=True)
    for _ in range(2):
        with torch.no_grad():
            out = la.matmul(a, a)
        torch.testing.assert_close(out, (a @ a).detach())
        assert not out.requires_grad
    out = la.matmul(a, a)
    assert out.requires_grad
    torch.testing.assert_close(out, a @ a)
