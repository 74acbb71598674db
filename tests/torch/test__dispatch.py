"""Autograd through nvmath's public APIs: ``nvmath.linalg.advanced.matmul`` and ``Matmul.execute``.

On the CPU the real planner runs on the emulated cuBLASLt (torch tensors posing as GPU tensors), so
``gradcheck`` in float64 checks the backward formulas end to end; GPU tests repeat it on cuBLASLt.
"""

from __future__ import annotations

import numpy as np
import pytest

from nvmath._errors import CudaLibraryError, NotSupportedError

CASES = {
    # name: (epilog name or None, operand shapes (a, b, extra), kwargs builder)
    "plain": (None, [(3, 4), (4, 5)], None),
    "batched": (None, [(2, 3, 4), (4, 5)], None),
    "both-batched": (None, [(2, 3, 4), (2, 4, 5)], None),
    "vector-a": (None, [(4,), (4, 5)], None),
    "vector-b": (None, [(2, 3, 4), (4,)], None),
    "c-alpha-beta": (None, [(3, 4), (4, 5), (3, 5)], "c"),
    "c-column": (None, [(3, 4), (4, 5), (3, 1)], "c"),
    "bias-M": ("BIAS", [(3, 4), (4, 5), (3,)], "bias"),
    "bias-N": ("BIAS", [(3, 4), (4, 5), (5,)], "bias"),
    "bias-row": ("BIAS", [(3, 4), (4, 5), (1, 5)], "bias"),
    "relu": ("RELU", [(3, 4), (4, 5)], None),
    "relu-bias": ("RELU_BIAS", [(3, 4), (4, 5), (3, 1)], "bias"),
    "relu-aux-bias": ("RELU_AUX_BIAS", [(3, 4), (4, 5), (3,)], "bias"),
    "gelu": ("GELU", [(3, 4), (4, 5)], None),
    "gelu-bias-N": ("GELU_BIAS", [(3, 4), (4, 5), (1, 5)], "bias"),
    "gelu-aux-bias": ("GELU_AUX_BIAS", [(3, 4), (4, 5), (3,)], "bias"),
    "gelu-batched": ("GELU_BIAS", [(2, 3, 4), (2, 4, 5), (3, 1)], "bias"),
}


def _call(adv, epilog, extra_kind, a, b, extra):
    E = adv.MatmulEpilog
    if extra_kind == "c":
        return adv.matmul(a, b, extra, alpha=0.5, beta=2.0)
    kw = {}
    if epilog is not None:
        kw["epilog"] = E[epilog]
    if extra_kind == "bias":
        kw["epilog_inputs"] = {"bias": extra}
    out = adv.matmul(a, b, **kw)
    return out[0] if isinstance(out, tuple) else out


@pytest.mark.parametrize("name", sorted(CASES))
def test_advanced_matmul_gradcheck(torch, fake_gpu, name):
    """gradcheck (float64) passes for every differentiable epilog, broadcast, 1-D operand, c and bias shape."""
    import nvmath.linalg.advanced as adv

    epilog, shapes, extra_kind = CASES[name]
    gen = torch.Generator().manual_seed(5)
    args = [torch.randn(*s, dtype=torch.float64, generator=gen).requires_grad_() for s in shapes]
    if len(args) == 2:
        args.append(None)
    fn = lambda a, b, extra: _call(adv, epilog, extra_kind, a, b, extra)
    assert torch.autograd.gradcheck(fn, tuple(args))


def test_result_is_differentiable_only_when_asked(torch, fake_gpu):
    """Operands that require grad give a result with a grad_fn; under no_grad or detached, none (direct path)."""
    import nvmath.linalg.advanced as adv

    a = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    b = torch.randn(4, 2, dtype=torch.float64)
    assert adv.matmul(a, b).grad_fn is not None
    with torch.no_grad():
        assert adv.matmul(a, b).grad_fn is None
    assert adv.matmul(a.detach(), b).grad_fn is None


def test_aux_output_is_returned_and_not_differentiable(torch, fake_gpu):
    """RELU_AUX_BIAS with grad returns (result, {"relu_aux": bitmask}); the bitmask needs no grad."""
    import nvmath.linalg.advanced as adv

    a = torch.randn(16, 4, dtype=torch.float64, requires_grad=True)
    b = torch.randn(4, 3, dtype=torch.float64)
    bias = torch.randn(16, dtype=torch.float64, requires_grad=True)
    y, aux = adv.matmul(a, b, epilog=adv.MatmulEpilog.RELU_AUX_BIAS, epilog_inputs={"bias": bias})
    assert set(aux) == {"relu_aux"} and aux["relu_aux"].dtype == torch.uint8
    assert not aux["relu_aux"].requires_grad
    torch.testing.assert_close(y, torch.relu(a @ b + bias[:, None]))
    y.sum().backward()
    torch.testing.assert_close(bias.grad, ((a @ b + bias[:, None]) > 0).double().sum(1))


@pytest.mark.parametrize("epilog", ["DRELU", "DGELU_BGRAD", "BGRADA", "BGRADB"])
def test_backward_epilogs_refuse_grad_at_call_time(torch, fake_gpu, epilog):
    """An epilog without a derivative raises when called with operands that require grad (not in backward)."""
    import nvmath.linalg.advanced as adv

    a = torch.randn(8, 4, dtype=torch.float64, requires_grad=True)
    with pytest.raises(ValueError, match=f"epilog {epilog} has no derivative.*torch.no_grad"):
        adv.matmul(a, torch.randn(4, 3, dtype=torch.float64), epilog=adv.MatmulEpilog[epilog])


def test_non_differentiable_arguments_are_refused(torch, fake_gpu):
    """Qualifiers, quantization scales and extra epilog inputs with grad raise a ValueError naming them."""
    import nvmath.linalg.advanced as adv

    a = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    b = torch.randn(4, 3, dtype=torch.float64)
    q = (
        np.zeros(2, dtype=adv.matrix_qualifiers_dtype)
        if hasattr(adv, "matrix_qualifiers_dtype")
        else object()
    )
    with pytest.raises(ValueError, match="qualifiers"):
        adv.matmul(a, b, qualifiers=q)
    with pytest.raises(ValueError, match="quantization_scales"):
        adv.matmul(a, b, quantization_scales={"a": 1.0, "b": 1.0})
    with pytest.raises(ValueError, match="needs a bias"):
        adv.matmul(a, b, epilog=adv.MatmulEpilog.BIAS)


def test_integer_operands_refuse_grad(torch, fake_gpu):
    """A non-floating dtype has no autograd: a TypeError names the tensor and the allowed dtypes."""
    from nvmath.torch._rules import check_dtypes

    with pytest.raises(TypeError, match="b has dtype torch.int8"):
        check_dtypes(a=torch.zeros(1), b=torch.zeros(1, dtype=torch.int8))


@pytest.mark.parametrize("epilog", [None, "RELU_BIAS", "GELU_AUX_BIAS"])
def test_planner_execute_is_differentiable(torch, fake_gpu, epilog):
    """Matmul.execute() with operands that require grad returns a result whose gradients match torch's."""
    import nvmath.linalg.advanced as adv

    gen = torch.Generator().manual_seed(6)
    a = torch.randn(6, 4, dtype=torch.float64, generator=gen, requires_grad=True)
    b = torch.randn(4, 5, dtype=torch.float64, generator=gen, requires_grad=True)
    bias = torch.randn(6, dtype=torch.float64, generator=gen, requires_grad=True)
    kw = {} if epilog is None else {"epilog": adv.MatmulEpilog[epilog], "epilog_inputs": {"bias": bias}}
    with adv.Matmul(a, b) as mm:
        mm.plan(**kw)
        out = mm.execute()
    y = out[0] if isinstance(out, tuple) else out
    z = a @ b + (bias[:, None] if epilog else 0)
    ref = {
        None: z,
        "RELU_BIAS": torch.relu(z),
        "GELU_AUX_BIAS": torch.nn.functional.gelu(z, approximate="tanh"),
    }
    torch.testing.assert_close(y, ref[epilog])
    grads = torch.autograd.grad(y.sum(), [a, b])
    for g, r in zip(grads, torch.autograd.grad(ref[epilog].sum(), [a, b])):
        torch.testing.assert_close(g, r)


def test_planner_planned_with_gelu_without_aux_refuses_grad(torch, fake_gpu):
    """A Matmul planned with GELU_BIAS cannot be differentiated (no pre-activation): the error says GELU_AUX_BIAS."""
    import nvmath.linalg.advanced as adv

    a = torch.randn(6, 4, dtype=torch.float64, requires_grad=True)
    with adv.Matmul(a, torch.randn(4, 5, dtype=torch.float64)) as mm:
        mm.plan(epilog=adv.MatmulEpilog.GELU)
        with pytest.raises(ValueError, match="plan GELU_AUX"):
            mm.execute()
        with torch.no_grad():
            assert mm.execute().shape == (6, 5)


# ---------------------------------------------------------------- GPU
@pytest.mark.gpu
@pytest.mark.parametrize(
    "name", ["plain", "batched", "c-alpha-beta", "bias-N", "relu-bias", "gelu-aux-bias", "gelu-bias-N"]
)
def test_advanced_matmul_gradcheck_gpu(torch_cuda, name):
    """On the GPU, gradcheck (float64) passes through cuBLASLt for the differentiable epilogs."""
    import nvmath.linalg.advanced as adv

    torch = torch_cuda
    epilog, shapes, extra_kind = CASES[name]
    gen = torch.Generator(device="cuda").manual_seed(7)
    args = [
        torch.randn(*s, dtype=torch.float64, device="cuda", generator=gen).requires_grad_() for s in shapes
    ]
    if len(args) == 2:
        args.append(None)
    fn = lambda a, b, extra: _call(adv, epilog, extra_kind, a, b, extra)
    try:
        with torch.no_grad():
            fn(*args)
    except (NotSupportedError, CudaLibraryError, ValueError) as exc:  # not every epilog exists in float64
        pytest.skip(f"cuBLASLt runs no float64 {epilog}: {exc} (the float32 test covers it)")
    assert torch.autograd.gradcheck(fn, tuple(args))


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_advanced_matmul_grads_match_torch_gpu(torch_cuda, name, dtype):
    """On the GPU, gradients through cuBLASLt (every differentiable epilog) match torch autograd in float64."""
    import nvmath.linalg.advanced as adv

    torch = torch_cuda
    epilog, shapes, extra_kind = CASES[name]
    gen = torch.Generator(device="cuda").manual_seed(9)
    dt = getattr(torch, dtype)
    shapes = [tuple(8 * e if e > 1 else e for e in s) for s in shapes]  # larger than gradcheck's
    ours = [torch.randn(*s, dtype=torch.float32, device="cuda", generator=gen).to(dt) for s in shapes]
    ours = [t.requires_grad_() for t in ours]
    refs = [t.detach().double().requires_grad_() for t in ours]
    extra = lambda ts: ts[2] if len(ts) == 3 else None
    out = _call(adv, epilog, extra_kind, ours[0], ours[1], extra(ours))
    ref = _ref(torch, epilog, extra_kind, refs[0], refs[1], extra(refs))
    tol = 1e-4 if dtype == "float32" else 3e-2
    assert ((out.double() - ref).norm() / ref.norm()).item() < tol
    g = torch.randn_like(out)
    out.backward(g)
    ref.backward(g.double())
    for t, r in zip(ours, refs):
        assert t.grad is not None and t.grad.dtype == dt
        assert ((t.grad.double() - r.grad).norm() / r.grad.norm()).item() < 2 * tol


def _ref(torch, epilog, extra_kind, a, b, extra):
    """torch's float64 version of :func:`_call`."""
    z = torch.matmul(a, b)
    if extra_kind == "c":
        return 0.5 * z + 2.0 * extra
    if extra_kind == "bias":
        z = z + (extra[:, None] if extra.dim() == 1 and extra.shape[0] == z.shape[-2] else extra)
    if epilog is not None and "RELU" in epilog:
        return torch.relu(z)
    if epilog is not None and "GELU" in epilog:
        return torch.nn.functional.gelu(z, approximate="tanh")
    return z


@pytest.mark.gpu
def test_planner_execute_gradcheck_gpu(torch_cuda):
    """On the GPU, a planner's execute() with GELU_AUX_BIAS passes gradcheck after reset_operands."""
    import nvmath.linalg.advanced as adv

    torch = torch_cuda
    mk = lambda *s: torch.randn(*s, dtype=torch.float64, device="cuda").requires_grad_()
    a, b, bias = mk(8, 4), mk(4, 5), mk(8)
    mm = adv.Matmul(a, b)
    mm.plan(epilog=adv.MatmulEpilog.GELU_AUX_BIAS, epilog_inputs={"bias": bias})

    def fn(a, b, bias):
        mm.reset_operands(a=a, b=b, epilog_inputs={"bias": bias})
        return mm.execute()[0]

    try:
        assert torch.autograd.gradcheck(fn, (a, b, bias))
    finally:
        mm.free()


# ---------------------------------------------------------------- the generic matmul (CPU execution here)
GENERIC = {
    "plain": [(3, 4), (4, 5)],
    "batched": [(2, 3, 4), (4, 5)],
    "broadcast-batch": [(2, 1, 3, 4), (3, 4, 5)],
    "vector": [(4,), (4, 5)],
    "c": [(3, 4), (4, 5), (3, 5)],
}


def _generic():
    import nvmath.linalg as la

    if not hasattr(la, "matmul"):
        pytest.skip("the generic matmul (nvmath.linalg.matmul) is not in this tree")
    return la.matmul


@pytest.mark.parametrize("name", sorted(GENERIC))
@pytest.mark.parametrize("dtype", ["float64", "complex128"])
def test_generic_matmul_gradcheck_cpu(torch, name, dtype):
    """gradcheck passes for nvmath.linalg.matmul on torch CPU tensors (CPU execution), real and complex."""
    matmul = _generic()
    gen = torch.Generator().manual_seed(8)
    dt = getattr(torch, dtype)
    args = [torch.randn(*s, dtype=dt, generator=gen).requires_grad_() for s in GENERIC[name]]
    if len(args) == 3:
        fn = lambda a, b, c: matmul(a, b, c, alpha=0.5, beta=1.5)
    else:
        fn = lambda a, b: matmul(a, b)
    assert torch.autograd.gradcheck(fn, tuple(args))


def test_generic_matmul_refuses_what_it_cannot_differentiate(torch):
    """Explicit batches and qualifiers with operands that require grad raise, naming the fix."""
    matmul = _generic()
    a = torch.randn(3, 3, dtype=torch.float64, requires_grad=True)
    with pytest.raises(TypeError, match="explicit batches"):
        matmul([a, a], [a, a])
    import nvmath.linalg as la

    q = np.zeros(2, dtype=la.matrix_qualifiers_dtype)
    with pytest.raises(ValueError, match="qualifiers"):
        matmul(a, a, qualifiers=q)
    with torch.no_grad():
        assert matmul(a, a).grad_fn is None


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["plain", "batched", "c"])
def test_generic_matmul_gradcheck_gpu(torch_cuda, name):
    """On the GPU (cuBLAS), gradcheck passes for nvmath.linalg.matmul in float64."""
    torch = torch_cuda
    matmul = _generic()
    args = [torch.randn(*s, dtype=torch.float64, device="cuda").requires_grad_() for s in GENERIC[name]]
    if len(args) == 3:
        fn = lambda a, b, c: matmul(a, b, c, alpha=0.5, beta=1.5)
    else:
        fn = lambda a, b: matmul(a, b)
    assert torch.autograd.gradcheck(fn, tuple(args))


# ---------------------------------------------------------------- the generic matmul's two-operand path
@pytest.fixture
def routed_cpu_grad(monkeypatch):
    """Every CPU call with grad goes to nvmath.torch (the generic matmul otherwise lets torch's ``matmul``
    differentiate a repeated plain CPU call, see ``nvmath.linalg.generic._stateless._product_with_grad``)."""
    from nvmath._internal.torch_bridge import route
    from nvmath.linalg.generic import _stateless

    monkeypatch.setattr(_stateless, "_product_with_grad", lambda a, b: route("generic.matmul", a, b))


@pytest.mark.parametrize("name", ["plain", "batched", "broadcast-batch", "vector"])
@pytest.mark.parametrize("dtype", ["float64", "complex128"])
@pytest.mark.parametrize("wants", [(True, True), (True, False), (False, True)])
def test_generic_two_operand_grads_match_torch_cpu(torch, name, dtype, wants, routed_cpu_grad):
    """A call of two operands and nothing else runs the two-argument autograd function (PlainProductFn);
    its gradients equal torch.matmul's (float64 / complex128 reference), whichever operands need them."""
    matmul = _generic()
    gen = torch.Generator().manual_seed(21)
    dt = getattr(torch, dtype)
    a, b = (torch.randn(*s, dtype=dt, generator=gen).requires_grad_(w) for s, w in zip(GENERIC[name], wants))
    g = torch.randn(torch.matmul(a, b).shape, dtype=dt, generator=gen)
    out = matmul(a, b)
    assert type(out.grad_fn).__name__ == "PlainProductFnBackward"
    ref = torch.matmul(a.detach(), b.detach())
    assert torch.allclose(out.detach(), ref)
    got = torch.autograd.grad(out, [x for x in (a, b) if x.requires_grad], g)
    a2, b2 = a.detach().requires_grad_(wants[0]), b.detach().requires_grad_(wants[1])
    expected = torch.autograd.grad(torch.matmul(a2, b2), [x for x in (a2, b2) if x.requires_grad], g)
    for x, y in zip(got, expected):
        assert x.shape == y.shape and torch.allclose(x, y)


def test_generic_two_operand_path_takes_parameters_and_repeats(torch, routed_cpu_grad):
    """Parameters take the two-operand path too, and a repeated call (a plan-cache hit) gives the same
    gradients as the first (the cached plan is run again, not replanned)."""
    matmul = _generic()
    from nvmath.linalg.generic._stateless import plan_cache

    w = torch.nn.Parameter(torch.randn(4, 5, dtype=torch.float64))
    x = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    grads = []
    matmul(x.detach(), w.detach())  # the plan of the forward's layout
    hits = plan_cache.stats.hits
    for _ in range(3):
        out = matmul(x, w)
        assert type(out.grad_fn).__name__ == "PlainProductFnBackward"
        grads.append(torch.autograd.grad(out.sum(), [x, w]))
    assert plan_cache.stats.hits >= hits + 3
    for gx, gw in grads[1:]:
        assert torch.equal(gx, grads[0][0]) and torch.equal(gw, grads[0][1])
    assert torch.allclose(grads[0][1], x.detach().sum(0)[:, None].expand(4, 5))


@pytest.mark.parametrize("kwargs", [{"alpha": 2.0}, {"options": {}}, {"execution": "cpu"}])
def test_generic_calls_with_more_than_operands_keep_the_general_path(torch, kwargs):
    """Any argument beyond the two operands (scalars, options, execution) goes through MatmulFn, with the
    same results and gradients as torch's (alpha scales the product and both gradients)."""
    matmul = _generic()
    gen = torch.Generator().manual_seed(5)
    a = torch.randn(3, 4, dtype=torch.float64, generator=gen, requires_grad=True)
    b = torch.randn(4, 5, dtype=torch.float64, generator=gen, requires_grad=True)
    out = matmul(a, b, **kwargs)
    assert type(out.grad_fn).__name__ == "MatmulFnBackward"
    scale = kwargs.get("alpha", 1.0)
    assert torch.allclose(out.detach(), scale * (a.detach() @ b.detach()))
    ga, gb = torch.autograd.grad(out.sum(), [a, b])
    ones = torch.ones(3, 5, dtype=torch.float64)
    assert torch.allclose(ga, scale * ones @ b.detach().T)
    assert torch.allclose(gb, scale * a.detach().T @ ones)


def test_generic_two_operand_path_refuses_integer_operands(torch):
    """Integer operands cannot require grad; a float operand that does with an integer partner is refused
    (TypeError naming the dtype) before any work, as on the general path."""
    matmul = _generic()
    a = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    with pytest.raises(TypeError, match="dtype"):
        matmul(a, torch.ones(4, 5, dtype=torch.int64))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_generic_two_operand_grads_match_torch_gpu(torch_cuda, dtype):
    """On the GPU (cuBLAS) the two-operand path's result and gradients equal torch's (float64 reference)."""
    torch = torch_cuda
    matmul = _generic()
    dt = getattr(torch, dtype)
    a = torch.randn(2, 33, 17, dtype=dt, device="cuda", requires_grad=True)
    b = torch.randn(17, 9, dtype=dt, device="cuda", requires_grad=True)
    g = torch.randn(2, 33, 9, dtype=dt, device="cuda")
    out = matmul(a, b)
    assert type(out.grad_fn).__name__ == "PlainProductFnBackward"
    ga, gb = torch.autograd.grad(out, [a, b], g)
    a64, b64, g64 = a.detach().double(), b.detach().double(), g.double()
    tol = {"rtol": 1e-4, "atol": 1e-4} if dtype == "float32" else {}
    assert torch.allclose(out.double(), a64 @ b64, **tol)
    assert torch.allclose(ga.double(), g64 @ b64.T, **tol)
    assert torch.allclose(gb.double(), (a64.mT @ g64).sum(0), **tol)
