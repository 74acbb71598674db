"""The stateless matmul: one cached plan per kind of call (key from raw tensor reads), per-call scalars
and streams, a bounded cache that can be cleared and disabled, shared workspaces on the GPU."""

from __future__ import annotations

import numpy as np
import pytest

import nvmath.linalg as la
from nvmath.linalg.generic import generic_key, plan_cache


@pytest.fixture(autouse=True)
def fresh_cache():
    plan_cache.clear()
    plan_cache.enabled = True
    yield
    plan_cache.clear()
    plan_cache.enabled = True


def test_repeated_calls_hit():
    """Same shapes / strides / dtypes hit the cached plan; alpha and beta are per call."""
    rng = np.random.default_rng(0)
    a, b, c = rng.standard_normal((5, 4)), rng.standard_normal((4, 3)), rng.standard_normal((5, 3))
    la.matmul(a, b)
    hits = plan_cache.stats.hits
    for alpha in (1.0, 2.0, -1.0):
        np.testing.assert_allclose(la.matmul(a + alpha, b, alpha=alpha), alpha * (a + alpha) @ b)
    assert plan_cache.stats.hits == hits + 3 and plan_cache.stats.size == 1
    for beta in (0.0, 2.0):
        np.testing.assert_allclose(la.matmul(a, b, c, beta=beta), a @ b + beta * c)
    assert plan_cache.stats.size == 2


def test_last_call_memo_counts_hits_and_never_runs_a_freed_plan():
    """A repeated common call (two operands) runs the last call's plan without a lookup: still counted as a
    hit; after a clear, an eviction or another key it plans / looks up again and computes the right result."""
    from nvmath.linalg.generic import _stateless

    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((5, 4)), rng.standard_normal((4, 3))
    x = rng.standard_normal((3, 3))
    la.matmul(a, b)
    la.matmul(a, b)  # (a hit through the cache: now the last call)
    hits = plan_cache.stats.hits
    for alpha in (None, 2.0, None):
        np.testing.assert_allclose(la.matmul(a, b, alpha=alpha), (alpha or 1) * (a @ b))
    assert plan_cache.stats.hits == hits + 3
    entry = plan_cache.last[1]
    plan_cache.clear()
    assert not entry.live and plan_cache.last[1] is None
    np.testing.assert_allclose(la.matmul(a, b), a @ b)  # planned again
    la.matmul(a, b)
    evicted = plan_cache.last[1]
    plan_cache.resize(1)
    np.testing.assert_allclose(la.matmul(x, x), x @ x)  # evicts the last call's plan
    assert not evicted.live
    np.testing.assert_allclose(la.matmul(a, b), a @ b)
    plan_cache.resize(_stateless.DEFAULT_CACHE_SIZE)


def test_keys_separate_kinds():
    """Different layouts, dtypes, qualifiers, options and execution give different keys; equal ones match."""
    a, b = np.ones((4, 4)), np.ones((4, 4))
    base = generic_key(a, b)
    assert base == generic_key(a.copy(), b.copy())
    q = np.array([la.SymmetricMatrixQualifier.create(), la.GeneralMatrixQualifier.create()])
    others = [
        generic_key(np.asfortranarray(a), b),
        generic_key(a.astype(np.float32), b.astype(np.float32)),
        generic_key(a, b, qualifiers=q),
        generic_key(a, b, options={"blocking": True}),
        generic_key(a, b, execution="cuda"),
        generic_key([a], [b]),
        generic_key(a, b, a),
    ]
    assert len({base, *others}) == len(others) + 1


def test_torch_key_has_conjugation(torch):
    """torch keys include the lazy conjugation bit and the device."""
    x = torch.ones(3, 3, dtype=torch.complex64)
    assert generic_key(x, x) != generic_key(x.conj(), x)


def test_uncacheable_arguments_still_run():
    """An argument that cannot be keyed (unhashable qualifiers container) plans, runs and frees."""
    a = np.ones((3, 3))
    q = [la.GeneralMatrixQualifier.create(), {"not": "hashable"}]
    assert generic_key(a, a, qualifiers=q) is None


def test_disabled_cache():
    """plan_cache.enabled = False plans every call afresh (and still computes)."""
    plan_cache.enabled = False
    a = np.eye(3)
    np.testing.assert_array_equal(la.matmul(a, a), a)
    assert plan_cache.stats.size == 0


def test_failed_build_caches_nothing():
    """A call that fails while planning leaves nothing in the cache."""
    with pytest.raises(ValueError):
        la.matmul(np.ones((2, 3)), np.ones((2, 3)))
    assert plan_cache.stats.size == 0


def test_sequence_calls_hit():
    """Explicit batches are cached too (one key per list of kinds)."""
    xs = [np.ones((2, 3)), np.ones((4, 3))]
    w = np.ones((3, 5))
    la.matmul(xs, [w])
    hits = plan_cache.stats.hits
    out = la.matmul(xs, [w], alpha=2.0)
    assert plan_cache.stats.hits == hits + 1
    np.testing.assert_allclose(out[1], 2 * xs[1] @ w)


def test_fake_gpu_shared_workspace(fake_gpu):
    """Cached GPU plans share one workspace per device and package; clear() releases it."""
    from cublas_fakes import fake

    from nvmath.linalg.generic import _stateless

    a = fake(np.ones((4, 4), np.float32))
    la.matmul(a, a)
    la.matmul(fake(np.ones((2, 4), np.float32)), a)
    assert len(_stateless.workspaces) == 1
    plan_cache.clear()
    assert not len(_stateless.workspaces)


def test_one_plan_per_kind_torch(torch):
    """The first torch call (its reader not yet found) and later ones share one key: one cached plan."""
    from nvmath._internal import stateless

    stateless.READERS.pop(torch.Tensor, None)
    a = torch.ones(3, 3, dtype=torch.float16).float()
    for _ in range(3):
        la.matmul(a, a)
    assert plan_cache.stats.size == 1


def test_threads_share_the_cache():
    """Concurrent stateless calls from several threads (shared and distinct kinds) all get right results."""
    import threading

    rng = np.random.default_rng(9)
    inputs = [(rng.standard_normal((4 + i % 2, 3)), rng.standard_normal((3, 2))) for i in range(8)]
    errors = []

    def work(i: int) -> None:
        a, b = inputs[i]
        for _ in range(50):
            if not np.allclose(la.matmul(a, b, alpha=2.0), 2 * a @ b):
                errors.append(i)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert plan_cache.stats.size == 2


def test_beta_rules_of_the_stateless_call_match_the_planner():
    """matmul() applies Matmul's beta rules: beta without c is ignored with a warning pointing at the
    caller (no second warning on the plan built for it), c without beta is a ValueError."""
    import warnings

    a, b = np.ones((2, 3)), np.ones((3, 2))
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        np.testing.assert_allclose(la.matmul(a, b, beta=2.0), a @ b)
        la.Matmul(a, b, beta=2.0)
    assert [w.filename for w in seen if "beta" in str(w.message)] == [__file__, __file__]
    with pytest.raises(ValueError, match="beta must be given"):
        la.matmul(a, b, np.ones((2, 2)))


def test_two_operand_calls_use_the_key_of_generic_key(torch):
    """The two-operand call (its key read raw, without generic_key's general path) caches its plan under
    generic_key(a, b), for numpy and torch operands alike: a later call with options of the same layout
    is another plan, a repeated plain call a hit, and the results equal numpy's (float64 reference)."""
    rng = np.random.default_rng(9)
    a, b = rng.standard_normal((4, 6)), rng.standard_normal((6, 2))
    for x, y in ((a, b), (torch.from_numpy(a), torch.from_numpy(b))):
        plan_cache.clear()
        np.testing.assert_allclose(np.asarray(la.matmul(x, y)), a @ b, rtol=1e-12)
        assert list(plan_cache.keys()) == [generic_key(x, y)]
        hits = plan_cache.stats.hits
        np.testing.assert_allclose(np.asarray(la.matmul(x, y)), a @ b, rtol=1e-12)
        assert plan_cache.stats.hits == hits + 1 and plan_cache.stats.size == 1
        np.testing.assert_allclose(np.asarray(la.matmul(x, y, options={})), a @ b, rtol=1e-12)
        assert plan_cache.stats.size == 2


def test_repeated_cpu_call_with_grad_is_differentiated_by_torch(torch):
    """A plain CPU call of two tensors that require grad goes to nvmath.torch once; a repeat of the same
    shapes, strides and dtype is torch's own differentiable matmul: same product and gradients as
    torch.matmul's (float64 reference), for a Parameter too; another shape goes to nvmath.torch again."""
    from nvmath.linalg.generic import _stateless

    _stateless._CPU_GRAD.clear()
    gen = torch.Generator().manual_seed(3)
    a = torch.randn(5, 4, dtype=torch.float64, generator=gen, requires_grad=True)
    w = torch.nn.Parameter(torch.randn(4, 3, dtype=torch.float64, generator=gen))
    g = torch.randn(5, 3, dtype=torch.float64, generator=gen)
    names = []
    for _ in range(3):
        out = la.matmul(a, w)
        names.append(type(out.grad_fn).__name__)
        torch.testing.assert_close(out.detach(), a.detach() @ w.detach())
        ga, gw = torch.autograd.grad(out, [a, w], g)
        torch.testing.assert_close(ga, g @ w.detach().T)
        torch.testing.assert_close(gw, a.detach().T @ g)
    assert names[0] == "PlainProductFnBackward" and names[1] == names[2] == "MmBackward0"
    out = la.matmul(a[:, :3], w[:3])  # a new layout: routed to nvmath.torch
    assert type(out.grad_fn).__name__ == "PlainProductFnBackward"


def test_cpu_call_with_grad_errors_are_nvmaths(torch):
    """A CPU call with grad that nvmath refuses (mismatched inner sizes, mixed dtypes) raises nvmath's error
    every time; it never becomes a torch.matmul call."""
    from nvmath.linalg.generic import _stateless

    _stateless._CPU_GRAD.clear()
    a = torch.ones(3, 4, dtype=torch.float64, requires_grad=True)
    for _ in range(2):
        with pytest.raises(ValueError):
            la.matmul(a, torch.ones(5, 2, dtype=torch.float64))
    b32 = torch.ones(4, 2, dtype=torch.float32)
    first = None
    for _ in range(2):
        try:
            out = la.matmul(a, b32)
        except (TypeError, ValueError) as exc:
            assert first in (None, type(exc))
            first = type(exc)
        else:
            assert first is None and type(out.grad_fn).__name__ != "MmBackward0"
    assert len(_stateless._CPU_GRAD) == 0


def test_torch_last_call_is_compared_raw_and_follows_every_change(torch):
    """Two torch tensors: the last call is recognised from their raw attributes; a change of layout
    (transposed view), dtype, shape or conjugation is a different call (each result equals torch's)."""
    gen = torch.Generator().manual_seed(8)
    a = torch.randn(4, 4, dtype=torch.float64, generator=gen)
    b = torch.randn(4, 4, dtype=torch.float64, generator=gen)
    z = torch.randn(4, 4, dtype=torch.complex128, generator=gen)
    calls = [
        (a, b), (a, b), (a.T, b), (a, b.T), (a.float(), b.float()), (a[:3], b), (z, z), (z.conj(), z), (z, z),
        (a, b),
    ]  # fmt: skip
    memo = plan_cache.memo_hits
    for _ in range(2):
        for x, y in calls:
            torch.testing.assert_close(la.matmul(x, y), x.resolve_conj() @ y)
    assert plan_cache.memo_hits >= memo + 2  # (the repeated (a, b) of each round)


def test_narrow_cpu_call_with_grad_stays_with_nvmath_torch(torch):
    """bfloat16 / float16 CPU operands with grad (nvmath computes them in float32, rounded once) are never
    handed to torch's matmul, however often the call repeats."""
    from nvmath.linalg.generic import _stateless

    _stateless._CPU_GRAD.clear()
    for dtype in (torch.bfloat16, torch.float16):
        a = torch.ones(3, 4, dtype=dtype, requires_grad=True)
        b = torch.ones(4, 2, dtype=dtype)
        for _ in range(2):
            try:
                out = la.matmul(a, b)
            except (TypeError, ValueError, NotImplementedError):
                continue
            assert type(out.grad_fn).__name__ != "MmBackward0"
            torch.testing.assert_close(out.detach().float(), torch.full((3, 2), 4.0))
    assert len(_stateless._CPU_GRAD) == 0
