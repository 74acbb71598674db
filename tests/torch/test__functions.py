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


def _f64(torch, *shape, grad=False):
    """float64 data at a 256-byte aligned address (the alignment is part of a planner's key)."""
    n = 1
    for e in shape:
        n *= e
    flat = torch.randn(n + 32, dtype=torch.float64)
    skip = (-flat.data_ptr() % 256) // 8
    return flat[skip : skip + n].view(*shape).requires_grad_(grad)


class _PlanSpy:
    """Counts Matmul constructions and plan() calls (the heuristic query is counted by the fake GPU)."""

    def __init__(self, monkeypatch, fake_gpu):
        from nvmath.linalg.advanced import Matmul

        self.fake, self.made, self.plans = fake_gpu, 0, 0
        init, plan = Matmul.__init__, Matmul.plan

        def counting_init(mm, *args, **kwargs):
            self.made += 1
            init(mm, *args, **kwargs)

        def counting_plan(mm, *args, **kwargs):
            self.plans += 1
            return plan(mm, *args, **kwargs)

        monkeypatch.setattr(Matmul, "__init__", counting_init)
        monkeypatch.setattr(Matmul, "plan", counting_plan)

    def counts(self):
        return self.made, self.plans, self.fake.heuristic_calls


@pytest.mark.parametrize("bias", ["none", "frozen", "trained"])
def test_linear_training_steps_in_steady_state_plan_nothing(torch, nt, fake_gpu, monkeypatch, bias):
    """After the first step, fwd+bwd steps on new tensors of the same layouts make no planner, call no
    plan() and query no heuristic: three cache hits per step (forward, weight and input gradients)
    and gradients equal to torch's."""
    spy = _PlanSpy(monkeypatch, fake_gpu)

    def step():
        x, w, g = _f64(torch, 8, 4, grad=True), _f64(torch, 3, 4, grad=True), _f64(torch, 8, 3)
        b = None if bias == "none" else _f64(torch, 3, grad=bias == "trained")
        nt.linear(x, w, b).backward(g)
        return x, w, b, g

    step()
    before, stats = spy.counts(), nt.default_cache.stats
    for _ in range(4):
        x, w, b, g = step()
    after = nt.default_cache.stats
    assert spy.counts() == before and after.misses == stats.misses
    assert after.hits - stats.hits == 3 * 4
    xr, wr = x.detach().clone().requires_grad_(), w.detach().clone().requires_grad_()
    br = None if b is None else b.detach().clone().requires_grad_(b.requires_grad)
    torch.nn.functional.linear(xr, wr, br).backward(g)
    torch.testing.assert_close(x.grad, xr.grad)
    torch.testing.assert_close(w.grad, wr.grad)
    if bias == "trained":
        torch.testing.assert_close(b.grad, br.grad)


@pytest.mark.parametrize("act", ["relu", "gelu"])
def test_activation_and_mlp_steps_never_plan_on_a_hit(torch, nt, fake_gpu, monkeypatch, act):
    """With an activation (whose gradient is a fresh tensor, at whatever alignment the CPU allocator
    gives: a new alignment is a new problem) and in the MLP block, every planner made is a cache miss,
    planned once with one heuristic query: a hit re-plans nothing."""
    spy, stats = _PlanSpy(monkeypatch, fake_gpu), nt.default_cache.stats  # (clear() keeps the counters)
    w1, b1 = _f64(torch, 6, 4, grad=True), _f64(torch, 6, grad=True)
    w2, b2 = _f64(torch, 3, 6, grad=True), _f64(torch, 3, grad=True)
    for _ in range(4):
        x, g = _f64(torch, 8, 4, grad=True), _f64(torch, 8, 3)
        nt.linear(x, w2.detach()[:, :4].contiguous().requires_grad_(), b2, act).backward(g)
        nt.mlp(x, w1, b1, w2, b2, act).backward(g)
    s = nt.default_cache.stats
    made, plans, queries = spy.counts()
    hits, misses = s.hits - stats.hits, s.misses - stats.misses
    assert made == plans == queries == misses == len(nt.default_cache)
    assert hits + misses == 4 * (3 + 6)


def test_plain_backward_skips_the_no_grad_block(torch, nt, fake_gpu, monkeypatch):
    """A plain backward runs LinearFn's backward with grad mode off and enters no torch.no_grad()
    (once_differentiable's block is only for create_graph=True); the gradients are torch's."""
    entered = []
    no_grad = torch.no_grad

    class CountingNoGrad(no_grad):
        def __enter__(self):
            entered.append(torch.is_grad_enabled())
            return super().__enter__()

    x, w, g = _f64(torch, 5, 4, grad=True), _f64(torch, 3, 4, grad=True), _f64(torch, 5, 3)
    monkeypatch.setattr(torch, "no_grad", CountingNoGrad)
    nt.linear(x, w, None, "gelu").backward(g)
    assert entered == []
    monkeypatch.setattr(torch, "no_grad", no_grad)
    xr, wr = x.detach().clone().requires_grad_(), w.detach().clone().requires_grad_()
    torch.nn.functional.gelu(xr @ wr.T, approximate="tanh").backward(g)
    torch.testing.assert_close(x.grad, xr.grad)
    torch.testing.assert_close(w.grad, wr.grad)


@pytest.mark.gpu
@pytest.mark.parametrize("act", [None, "relu", "gelu"])
def test_training_steps_in_steady_state_plan_nothing_on_the_gpu(torch_cuda, nt, monkeypatch, act):
    """On the GPU (allocations 512-byte aligned, so every step's tensors have the same keys), Linear and
    MLP training steps after the first make no planner, call no plan() and no heuristic query: 3 cache
    hits per Linear step, 6 per MLP step; the gradients match a float64 reference."""
    from nvmath.linalg.advanced import Matmul, _algorithm

    torch = torch_cuda
    torch.manual_seed(3)
    cache = nt.PlannerCache(16)
    lin = nt.Linear(64, 48, activation=act, device="cuda", cache=cache)
    mlp = nt.MLP(64, 96, 48, activation=act or "gelu", device="cuda", cache=cache)

    def step():
        x, g = torch.randn(32, 64, device="cuda", requires_grad=True), torch.randn(32, 48, device="cuda")
        lin(x).backward(g)
        mlp(x).backward(g)
        return x, g

    step()
    counted = []

    def counting(name, real):
        def call(*args, **kwargs):
            counted.append(name)
            return real(*args, **kwargs)

        return call

    for owner, name in ((Matmul, "__init__"), (Matmul, "plan"), (_algorithm, "query_heuristics")):
        monkeypatch.setattr(owner, name, counting(name, getattr(owner, name)))
    before = cache.stats
    for _ in range(3):
        x, g = step()
    after = cache.stats
    assert counted == [] and after.misses == before.misses and after.hits - before.hits == 3 * (3 + 6)
    x.grad = None
    lin.zero_grad()
    lin(x).backward(g)
    xd, wd, bd = (t.detach().double().requires_grad_() for t in (x, lin.weight, lin.bias))
    yd = torch.nn.functional.linear(xd, wd, bd)
    yd = {None: yd, "relu": torch.relu(yd), "gelu": torch.nn.functional.gelu(yd, approximate="tanh")}[act]
    yd.backward(g.double())
    for got, ref in ((x.grad, xd.grad), (lin.weight.grad, wd.grad), (lin.bias.grad, bd.grad)):
        assert ((got.double() - ref).norm() / ref.norm()).item() < 1e-3
