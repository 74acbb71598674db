"""The compiled weight-gradient entries of a ``PlannerCache``'s Linear table (``WEIGHT_GRAD`` and
``WEIGHT_BIAS_GRAD``: ``dz.T @ x`` with the bias gradient fused by BGRADB), on the fake GPU (torch CPU
tensors posing as package-"torch" CUDA tensors, the emulated ``cublasLtMatmul`` behind a real C function):
a training step's backward is served by the table, with gradients bit-identical to the Python path's and
close to torch's in float64; every key mismatch falls back; the bias-gradient output is made per call
and the descriptor pointed at it; a cleared cache or a freed planner leaves nothing the table runs."""

from __future__ import annotations

import pytest
from compiled_hit_helpers import aligned_tensor, install_linear_hit_fake
from fastcall_probes import FastCall, needs_extension

from nvmath._internal import fastpath
from nvmath.bindings import cublasLt

pytestmark = needs_extension

_STATUS = [0]  # the status the emulated cublasLtMatmul returns (0: it computes)


@pytest.fixture
def gpu(torch, torch_fakes, monkeypatch):
    """``(nvmath.torch, calls)`` of :func:`compiled_hit_helpers.install_linear_hit_fake` (status: ``_STATUS``)."""
    nt, calls = install_linear_hit_fake(torch_fakes, monkeypatch, _STATUS)
    yield nt, calls
    nt.default_cache.clear()


_aligned = aligned_tensor


def _weight_entries(cache) -> list:
    """The table's weight-gradient entries (their plan-cache key starts with ``"x.T @ dz"``)."""
    return [e for e in cache.linear_hits.entries() if e.key[0] == "x.T @ dz"]


def _step(nt, cache, x, w, b, act, g):
    """One training step on the leaves ``x``, ``w``, ``b`` (their grads reset first): ``(dx, dw, db)``.
    (The same leaves each step: a clone's alignment class may differ, which is another problem.)"""
    for t in (x, w, b):
        if t is not None:
            t.grad = None
    nt.linear(x, w, b, act, cache=cache).backward(g)
    return x.grad, w.grad, None if b is None else b.grad


def _reference(torch, x, w, b, act, g):
    xr, wr = x.detach().double().requires_grad_(), w.detach().double().requires_grad_()
    br = b.detach().double().requires_grad_() if b is not None else None
    y = torch.nn.functional.linear(xr, wr, br)
    y = (
        torch.relu(y)
        if act == "relu"
        else torch.nn.functional.gelu(y, approximate="tanh")
        if act == "gelu"
        else y
    )
    y.backward(g.double())
    return xr.grad, wr.grad, None if br is None else br.grad


@pytest.mark.parametrize("act", [None, "relu", "gelu"])
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "nobias"])
def test_weight_gradient_is_served_and_bit_identical(torch, gpu, act, bias):
    """The weight gradient (with the bias gradient, BGRADB) gets a table entry that serves the later steps;
    every gradient equals, bit for bit, what the same cache's Python path computes (the table switched
    off), and torch's in float64."""
    nt, _ = gpu
    cache = nt.PlannerCache()
    x, w, g = (
        _aligned(torch, 8, 32).requires_grad_(),
        _aligned(torch, 16, 32).requires_grad_(),
        _aligned(torch, 8, 16),
    )
    b = _aligned(torch, 16).requires_grad_() if bias else None
    steps = [_step(nt, cache, x, w, b, act, g) for _ in range(4)]
    entries = _weight_entries(cache)
    assert entries
    if act is None:  # (with an activation dz is a new CPU tensor whose alignment class may vary: a new key)
        assert entries[0].hits >= 1
    table, cache.linear_hits = cache.linear_hits, None
    python = _step(nt, cache, x, w, b, act, g)
    cache.linear_hits = table
    for grads in steps:
        for got, want in zip(grads, python):
            assert (got is None) == (want is None)
            if got is not None:
                assert torch.equal(got, want)
    for got, want in zip(python, _reference(torch, x, w, b, act, g)):
        if want is not None:
            torch.testing.assert_close(got.double(), want, rtol=1e-5, atol=1e-5)


def test_the_bias_gradient_gets_a_new_output_per_call(torch, gpu):
    """Each served call allocates its own bias gradient and points the descriptor at it: two calls'
    outputs are distinct tensors, each holding its own ``dz.sum(0)``."""
    nt, _ = gpu
    from nvmath.torch._linear_hit import WEIGHT_BIAS_GRAD

    cache = nt.PlannerCache()
    x, _ = _warm_grads(nt, torch, cache)
    dz1, dz2 = _aligned(torch, 8, 16), _aligned(torch, 8, 16)
    out1 = cache.linear_hits(x, dz1, None, WEIGHT_BIAS_GRAD)
    out2 = cache.linear_hits(x, dz2, None, WEIGHT_BIAS_GRAD)
    assert out1 is not None and out2 is not None
    (dw1, db1), (dw2, db2) = out1, out2
    assert db1.data_ptr() != db2.data_ptr()
    for dz, dw, db in ((dz1, dw1, db1), (dz2, dw2, db2)):
        torch.testing.assert_close(db.double(), dz.double().sum(0), rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(dw.double(), dz.double().T @ x.double(), rtol=1e-5, atol=1e-5)
        assert dw.shape == (16, 32) and dw.is_contiguous()


def _warm_grads(nt, torch, cache):
    """Three training steps of one bias layer (its weight-gradient entry made and served); ``(x, g)``
    detached (what the weight-gradient product takes: ``x`` and ``dz = g``)."""
    x, w, b = (_aligned(torch, *s).requires_grad_() for s in ((8, 32), (16, 32), (16,)))
    g = _aligned(torch, 8, 16)
    for _ in range(3):
        _step(nt, cache, x, w, b, None, g)
    return x.detach(), g


@pytest.mark.parametrize("name", ["dz dtype", "x shape", "x strides", "dz alignment", "no bias", "subclass"])
def test_each_key_mismatch_is_not_served(torch, gpu, name):
    """A weight-gradient call differing from the served problem in one key item gets ``None`` from the
    table (the Python path then runs it), and nothing is launched."""
    nt, calls = gpu
    from nvmath.torch._linear_hit import WEIGHT_BIAS_GRAD, WEIGHT_GRAD

    cache = nt.PlannerCache()
    x, g = _warm_grads(nt, torch, cache)
    assert cache.linear_hits(x, g, None, WEIGHT_BIAS_GRAD) is not None
    call = {
        "dz dtype": (x, g.double(), WEIGHT_BIAS_GRAD),
        "x shape": (_aligned(torch, 4, 32), g, WEIGHT_BIAS_GRAD),
        "x strides": (_aligned(torch, 32, 8).mT, g, WEIGHT_BIAS_GRAD),
        "dz alignment": (x, _aligned(torch, 8, 16, offset=4), WEIGHT_BIAS_GRAD),
        "no bias": (x, g, WEIGHT_GRAD),
        "subclass": (torch.nn.Parameter(x, requires_grad=False), g, WEIGHT_BIAS_GRAD),
    }[name]
    before = len(calls)
    assert cache.linear_hits(call[0], call[1], None, call[2]) is None
    assert len(calls) == before


def test_clear_and_free_leave_nothing_to_run(torch, gpu):
    """``clear()`` unlists the weight-gradient entry; a planner freed under a listed entry (its launch
    closed) is never launched by it; the next steps plan again and give the right gradients."""
    nt, calls = gpu
    from nvmath.torch._linear_hit import WEIGHT_BIAS_GRAD

    cache = nt.PlannerCache()
    x, g = _warm_grads(nt, torch, cache)
    (entry,) = _weight_entries(cache)
    cache.clear()
    assert not entry.listed and len(cache.linear_hits) == 0
    x, g = _warm_grads(nt, torch, cache)
    (entry,) = _weight_entries(cache)
    entry.launch.close()  # (what freeing its planner does)
    before = len(calls)
    assert cache.linear_hits(x, g, None, WEIGHT_BIAS_GRAD) is None
    assert len(calls) == before


def test_hits_are_counted_in_stats(torch, gpu):
    """The weight-gradient entry's hits appear in ``stats.hits`` (folded under its plan-cache key)."""
    nt, _ = gpu
    from nvmath.torch._linear_hit import WEIGHT_BIAS_GRAD

    cache = nt.PlannerCache()
    x, g = _warm_grads(nt, torch, cache)
    hits = cache.stats.hits
    for _ in range(5):
        assert cache.linear_hits(x, g, None, WEIGHT_BIAS_GRAD) is not None
    assert cache.stats.hits == hits + 5


def test_a_failed_launch_raises_the_bindings_error(torch, gpu):
    """A nonzero cublasLtMatmul status in a weight-gradient hit raises ``cuBLASLtError``, as the Python
    path does."""
    nt, _ = gpu
    from nvmath.torch._linear_hit import WEIGHT_BIAS_GRAD

    cache = nt.PlannerCache()
    x, g = _warm_grads(nt, torch, cache)
    _STATUS[0] = 13
    try:
        with pytest.raises(cublasLt.cuBLASLtError) as error:
            cache.linear_hits(x, g, None, WEIGHT_BIAS_GRAD)
    finally:
        _STATUS[0] = 0
    assert error.value.status == 13


def test_aux_alloc_needs_a_plain_entry_with_attributes(torch, gpu):
    """``LinearHit(aux_alloc=...)`` is refused (``ValueError``) for an entry with a bias operand or without
    the output's pointer attributes: such an entry could write its output nowhere."""
    nt, _ = gpu
    from nvmath import _fastcall

    cache = nt.PlannerCache()
    fields = _fields_of(nt, cache, torch)
    with pytest.raises(ValueError, match="aux_alloc"):
        _fastcall.LinearHit(**{**fields, "attrs": ()})
    with pytest.raises(ValueError, match="aux_alloc"):
        _fastcall.LinearHit(**{**fields, "btype": torch.Tensor})
    assert _fastcall.LinearHit(**fields) is not None


def _fields_of(nt, cache, torch) -> dict:
    """The keyword arguments ``_linear_hit.build`` gives the weight-gradient entry (rebuilt: the cache
    cleared and warmed again with ``LinearHit`` spied on)."""
    from nvmath import _fastcall

    made: list = []
    real = _fastcall.LinearHit

    def spy(**kw):
        made.append(kw)
        return real(**kw)

    cache.clear()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_fastcall, "LinearHit", spy)
        _warm_grads(nt, torch, cache)
    (fields,) = [kw for kw in made if kw["key"][0] == "x.T @ dz"]
    assert fields["aux_alloc"] is not None
    return fields


def _warm_layer(nt, torch, cache):
    """Three training steps of one bias layer: ``(x, w, g, (the leaves x, w, b))``, ``x`` and ``w``
    detached (``dz = g``)."""
    leaves = tuple(_aligned(torch, *s).requires_grad_() for s in ((8, 32), (16, 32), (16,)))
    g = _aligned(torch, 8, 16)
    for _ in range(3):
        _step(nt, cache, *leaves, None, g)
    return leaves[0].detach(), leaves[1].detach(), g, leaves


def test_one_call_makes_both_gradients(torch, gpu, monkeypatch):
    """``LinearHits.backward`` serves a step's weight and bias gradients and its input gradient in one
    call: the Python products are not reached, and the three gradients equal torch's in float64."""
    nt, calls = gpu
    from nvmath.torch._linear_hit import PRODUCT, WEIGHT_BIAS_GRAD

    cache = nt.PlannerCache()
    x, w, g, leaves = _warm_layer(nt, torch, cache)
    python = []
    monkeypatch.setattr(cache, "weight_grad", lambda *a, **k: python.append(a))
    monkeypatch.setattr(cache, "run", lambda *a, **k: python.append(a))
    before = len(calls)
    (dw, db), dx = cache.linear_hits.backward(x, g, w, WEIGHT_BIAS_GRAD, PRODUCT)
    assert len(calls) == before + 2
    xs, ws, bs = leaves
    _step(nt, cache, xs, ws, bs, None, g)
    assert python == []  # (the step too: one C call)
    for got, want in zip(
        (dx, dw, db), (g.double() @ w.double(), g.double().T @ x.double(), g.double().sum(0))
    ):
        torch.testing.assert_close(got.double(), want, rtol=1e-5, atol=1e-5)
    assert torch.equal(xs.grad, dx) and torch.equal(ws.grad, dw) and torch.equal(bs.grad, db)


def test_backward_without_an_entry_launches_nothing(torch, gpu):
    """A wanted product without an entry (another shape, the other bias flag) makes the whole call a
    miss (``None``) before any launch; one not wanted is ``None`` in the result."""
    nt, calls = gpu
    from nvmath.torch._linear_hit import PRODUCT, WEIGHT_BIAS_GRAD, WEIGHT_GRAD

    cache = nt.PlannerCache()
    x, w, g, _ = _warm_layer(nt, torch, cache)
    table = cache.linear_hits
    before = len(calls)
    assert table.backward(x, g, w, WEIGHT_GRAD, PRODUCT) is None
    assert table.backward(x, g, _aligned(torch, 16, 24), WEIGHT_BIAS_GRAD, PRODUCT) is None
    assert table.backward(x, g, w, None, None) is None
    assert len(calls) == before
    out = table.backward(x, g, w, None, PRODUCT)
    assert out[0] is None and out[1].shape == (8, 32) and len(calls) == before + 1
    with pytest.raises(TypeError, match="backward takes"):
        table.backward(x, g, w)


def test_an_input_gradient_missing_after_the_first_launch_is_left_to_python(torch, gpu):
    """When the input gradient's entry fails its run-time checks after the weight gradient was launched
    (its launch closed), the call returns that weight gradient and ``None`` for ``dx``; the layer's
    step then makes ``dx`` on the Python path, right."""
    nt, calls = gpu
    from nvmath.torch._linear_hit import PRODUCT, WEIGHT_BIAS_GRAD

    cache = nt.PlannerCache()
    x, w, g, _ = _warm_layer(nt, torch, cache)
    (product,) = [e for e in cache.linear_hits.entries() if e.key[0] is None]  # (run()'s key: no epilog)
    product.launch.close()
    before = len(calls)
    (dw, _), dx = cache.linear_hits.backward(x, g, w, WEIGHT_BIAS_GRAD, PRODUCT)
    assert dx is None and len(calls) == before + 1
    torch.testing.assert_close(dw.double(), g.double().T @ x.double(), rtol=1e-5, atol=1e-5)


def test_backward_with_grad_needed_is_a_miss(torch, gpu):
    """With grad mode on and an operand requiring grad (``create_graph``), the call is a miss."""
    nt, calls = gpu
    from nvmath.torch._linear_hit import PRODUCT, WEIGHT_BIAS_GRAD

    cache = nt.PlannerCache()
    x, w, g, _ = _warm_layer(nt, torch, cache)
    before = len(calls)
    assert cache.linear_hits.backward(x, g.clone().requires_grad_(), w, WEIGHT_BIAS_GRAD, PRODUCT) is None
    assert len(calls) == before


def test_compiled_parts_give_the_bias_gradient_output_only_when_asked(torch, gpu):
    """A BGRADB plan's launch gives no compiled parts by default (it has an aux output); asked with
    ``aux=True`` it gives the bias gradient's maker ((N,) like the bias) and the descriptor's pointer
    attribute it is written through; a plan without aux output gives no ``aux`` part."""
    nt, _ = gpu
    from nvmath.linalg.advanced import MatmulEpilog as E

    cache = nt.PlannerCache()
    _warm_layer(nt, torch, cache)
    by_epilog = {mm.view.epilog: mm for mm in cache.planners()}
    mm = by_epilog[E.BGRADB]
    launch, handle = mm.launcher, mm.caller_stream.last
    assert launch.compiled_parts(handle) is None
    parts = launch.compiled_parts(handle, aux=True)
    maker, attr = parts["aux"]
    assert maker.shape == (16,) and attr.value > 0  # (the last served call's bias gradient)
    assert attr.attr == int(cublasLt.MatmulDescAttribute.BIAS_POINTER)
    (product,) = [p for e, p in by_epilog.items() if e not in (E.BGRADB, E.BIAS)]  # (the input gradient)
    assert "aux" not in product.launcher.compiled_parts(product.caller_stream.last, aux=True)


# ------------------------------------------------------------------------------------------- on the GPU
@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("act", [None, "relu", "gelu"])
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "nobias"])
def test_gpu_backward_is_served_and_bit_identical(torch_cuda, nt, monkeypatch, dtype, act, bias):
    """On the GPU the weight-gradient entry serves repeated training steps (8 and 64 tokens); every
    gradient equals, bit for bit, the same cache's Python path (the table switched off), and the weight
    and bias gradients are close to torch's in float64."""
    torch = torch_cuda
    monkeypatch.setattr(fastpath, "_COMPILED", FastCall)
    dt = getattr(torch, dtype)
    cache = nt.PlannerCache()
    w = torch.randn(384, 256, device="cuda", dtype=dt).requires_grad_()
    b = torch.randn(384, device="cuda", dtype=dt).requires_grad_() if bias else None
    for m in (8, 64):
        x = torch.randn(m, 256, device="cuda", dtype=dt).requires_grad_()
        g = torch.randn(m, 384, device="cuda", dtype=dt)
        for _ in range(2):
            _step(nt, cache, x, w, b, act, g)  # (plans; then a Python hit gives the table its entries)
        entry = [e for e in _weight_entries(cache) if e.key[2] == x.shape]
        assert len(entry) == 1
        before = entry[0].hits
        served = [_step(nt, cache, x, w, b, act, g) for _ in range(3)]
        assert entry[0].hits >= before + (3 if act is None else 1)
        table, cache.linear_hits = cache.linear_hits, None
        python = _step(nt, cache, x, w, b, act, g)
        cache.linear_hits = table
        for grads in served:
            for got, want in zip(grads, python):
                assert (got is None) == (want is None)
                if got is not None:
                    assert torch.equal(got, want)
        tol = 1e-5 if dtype == "float32" else 2e-2
        for got, want in zip(python[1:], _reference(torch, x, w, b, act, g)[1:]):
            if want is not None:
                assert ((got.double() - want).norm() / want.norm()).item() < tol
    cache.clear()
