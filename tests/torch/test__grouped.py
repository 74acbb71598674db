"""GroupedLinear / grouped_linear (nvmath.torch._grouped): forward and backward equal a loop of
torch.nn.Linear (one per group) on the groups' tokens; counts checked before any launch; GPU: the same
on bf16 and against torch._grouped_mm where torch has it."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import nvmath.torch as nt
from nvmath.torch._grouped import check_counts


def loop_reference(layer, x, counts):
    """A loop of torch.nn.Linear over the groups (float64), its output and parameter/input grads."""
    outs = []
    w = layer.weight.detach().double().requires_grad_()
    b = None if layer.bias is None else layer.bias.detach().double().requires_grad_()
    xd = x.detach().double().requires_grad_()
    start = 0
    for g, c in enumerate(counts):
        outs.append(torch.nn.functional.linear(xd[start : start + c], w[g], None if b is None else b[g]))
        start += c
    return torch.cat(outs), xd, w, b


def rel(a, b):
    return float((a.double() - b.double()).norm() / max(float(b.double().norm()), 1e-30))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("counts", [[5, 0, 9, 2], [0, 0, 16, 0], [4, 4, 4, 4]], ids=["uneven", "one", "even"])
def test_forward_backward_equal_loop(dtype, bias, counts):
    """Output and gradients (x, weight, bias) equal a loop of nn.Linear (empty groups: zero grads)."""
    torch.manual_seed(0)
    layer = nt.GroupedLinear(4, 12, 7, bias=bias, dtype=dtype)
    x = torch.randn(sum(counts), 12, dtype=dtype, requires_grad=True)
    y = layer(x, torch.tensor(counts))
    g = torch.randn_like(y)
    y.backward(g)
    want, xd, w, b = loop_reference(layer, x, counts)
    want.backward(g.double())
    tol = 1e-2 if dtype == torch.bfloat16 else 1e-5
    assert y.dtype == dtype and y.shape == (sum(counts), 7)
    assert rel(y.detach(), want.detach()) < tol
    assert rel(x.grad, xd.grad) < tol and rel(layer.weight.grad, w.grad) < tol
    for k, c in enumerate(counts):
        if c == 0:
            assert not layer.weight.grad[k].any()
    if bias:
        assert rel(layer.bias.grad, b.grad) < tol


def test_parameters_and_init():
    """weight (G, out, in), bias (G, out), each group initialised within nn.Linear's bounds."""
    layer = nt.GroupedLinear(3, 8, 5)
    assert layer.weight.shape == (3, 5, 8) and layer.bias.shape == (3, 5)
    w, b = layer.weight.detach(), layer.bias.detach()
    assert float(w.abs().max()) <= 1 / 8**0.5 + 1e-6 and float(b.abs().max()) <= 1 / 8**0.5
    assert "num_groups=3" in repr(layer)
    with pytest.raises(ValueError, match="num_groups"):
        nt.GroupedLinear(0, 8, 5)


@pytest.mark.parametrize(
    "counts, exc, word",
    [(torch.tensor([1.0, 2.0]), TypeError, "integer tensor"), (torch.tensor([True, False]), TypeError, "integer"),
     ([1, 2.0], TypeError, "ints"), ("12", TypeError, "sequence"), ([3], ValueError, "one entry per group"),
     ([4, -1], ValueError, ">= 0"), ([1, 1], ValueError, "sum to 2 but the input has 3"),
     (torch.tensor([[1, 2]]), ValueError, "1-D")],
)  # fmt: skip
def test_bad_counts_raise_before_launch(counts, exc, word, monkeypatch):
    """Wrong dtype, length, sign or sum of the counts raises, naming it, and launches nothing."""
    from nvmath.torch import _grouped_kernels

    monkeypatch.setattr(_grouped_kernels, "_grouped_mm", lambda *a: pytest.fail("launched"))
    layer = nt.GroupedLinear(2, 4, 4)
    with pytest.raises(exc, match=word):
        layer(torch.randn(3, 4), counts)


def test_one_grouped_call_per_product(monkeypatch):
    """Forward, dgrad and wgrad are one sequence call each (one grouped launch on the GPU), over the
    groups that have tokens."""
    from nvmath.torch import _grouped_kernels

    calls = []
    real = _grouped_kernels._grouped_mm
    monkeypatch.setattr(
        _grouped_kernels, "_grouped_mm", lambda a, b, c, beta: (calls.append(len(a)), real(a, b, c, beta))
    )
    layer = nt.GroupedLinear(4, 8, 8)
    x = torch.randn(10, 8, requires_grad=True)
    layer(x, [3, 0, 7, 0]).sum().backward()
    assert calls == [2, 2, 2]


def test_bad_shapes_and_dtypes():
    """Input of the wrong width or rank, a mismatched dtype: RuntimeError naming the shapes/dtypes."""
    layer = nt.GroupedLinear(2, 4, 4)
    with pytest.raises(RuntimeError, match="does not fit"):
        layer(torch.randn(3, 5), [1, 2])
    with pytest.raises(RuntimeError, match="dtype"):
        layer(torch.randn(3, 4, dtype=torch.float64), [1, 2])
    assert check_counts((1, 2), 2, 3) == [1, 2]


def test_matches_torch_grouped_mm_cpu_if_available():
    """Where torch._grouped_mm runs (CPU bf16 in recent torch), the output equals it plus the bias."""
    gm = getattr(torch, "_grouped_mm", None)
    if gm is None:
        pytest.skip("this torch has no torch._grouped_mm")
    layer = nt.GroupedLinear(3, 16, 32, dtype=torch.bfloat16)
    counts = [8, 0, 24]
    x = torch.randn(32, 16, dtype=torch.bfloat16)
    try:
        want = gm(x, layer.weight.detach().transpose(-2, -1), offs=torch.tensor(counts).cumsum(0).int())
    except RuntimeError as exc:
        pytest.skip(f"torch._grouped_mm does not run here: {exc}")
    want = want + torch.repeat_interleave(layer.bias.detach(), torch.tensor(counts), dim=0)
    assert rel(layer(x, counts).detach(), want) < 1e-2


# ---------------------------------------------------------------- per-group cuBLASLt products (fake GPU)
@pytest.fixture
def slice_runs(nt, fake_gpu, monkeypatch):
    """The per-group path on the fake GPU: a fresh SliceRuns planning at first sight, and a 16-byte
    slice alignment (torch's CPU allocator aligns to 64 bytes, not the GPU's 256)."""
    from nvmath.torch import _grouped_runs

    runs = _grouped_runs.SliceRuns(plan_after=1)
    monkeypatch.setattr(_grouped_runs, "D_ALIGNMENT", 16)
    monkeypatch.setattr(_grouped_runs, "MIN_FLOPS_PER_GROUP", 0)  # (the tests' products are tiny)
    monkeypatch.setattr(_grouped_runs, "default_runs", runs)
    yield runs
    runs.clear()


def _no_grouped_launch(monkeypatch):
    """Record the grouped launches (their group counts), computed by a torch loop (the fake GPU has
    no cuBLAS for the real one)."""
    from nvmath.torch import _grouped_kernels

    launched = []

    def grouped(a, b, c, beta):
        launched.append(len(a))
        for x, y, z in zip(a, b, c):
            z.copy_(x @ y + z if beta else x @ y)

    monkeypatch.setattr(_grouped_kernels, "_grouped_mm", grouped)
    return launched


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("counts", [[4, 0, 8, 4], [0, 0, 16, 0], [4, 4, 4, 4]], ids=["uneven", "one", "even"])
def test_per_group_products_equal_loop(slice_runs, monkeypatch, dtype, bias, counts):
    """On cuBLASLt, each product runs as per-group GEMMs into slices (bias by the BIAS epilog, its
    gradient by BGRADB), no grouped launch; output and gradients equal the loop of nn.Linear, groups
    without tokens get zero weight and bias gradients."""
    launched = _no_grouped_launch(monkeypatch)
    torch.manual_seed(0)
    layer = nt.GroupedLinear(4, 8, 12, bias=bias, dtype=dtype)
    x = torch.randn(sum(counts), 8, dtype=dtype, requires_grad=True)
    g = torch.randn(sum(counts), 12, dtype=dtype)
    for _ in range(2):  # (the second step runs the cached planners on new outputs)
        layer.zero_grad()
        x.grad = None
        y = layer(x, torch.tensor(counts))
        y.backward(g)
    want, xd, w, b = loop_reference(layer, x, counts)
    want.backward(g.double())
    tol = 1e-5
    assert not launched and len(slice_runs) > 0
    assert rel(y.detach(), want.detach()) < tol
    assert rel(x.grad, xd.grad) < tol and rel(layer.weight.grad, w.grad) < tol
    for k, c in enumerate(counts):
        if c == 0:
            assert not layer.weight.grad[k].any() and (not bias or not layer.bias.grad[k].any())
    if bias:
        assert rel(layer.bias.grad, b.grad) < tol


def test_problems_planned_once_then_reused(slice_runs, monkeypatch):
    """Equal group problems share one planner; later steps plan nothing (the cache serves them)."""
    counts = [4, 8, 4]
    layer = nt.GroupedLinear(3, 8, 8, dtype=torch.float64)
    x = torch.randn(16, 8, dtype=torch.float64, requires_grad=True)
    layer(x, counts).sum().backward()
    first = slice_runs.planned
    assert 0 < first <= 9  # three products of three groups, equal problems shared
    for _ in range(3):
        layer(x, counts).sum().backward()
    assert slice_runs.planned == first


def test_first_sighting_runs_the_grouped_launch_then_plans(nt, fake_gpu, monkeypatch):
    """With the default policy (plan at the second sighting), new counts run one grouped launch per
    product, their repetition the per-group products; both give the loop's results."""
    from nvmath.torch import _grouped_runs

    runs = _grouped_runs.SliceRuns()
    monkeypatch.setattr(_grouped_runs, "D_ALIGNMENT", 16)
    monkeypatch.setattr(_grouped_runs, "MIN_FLOPS_PER_GROUP", 0)
    monkeypatch.setattr(_grouped_runs, "default_runs", runs)
    launched = _no_grouped_launch(monkeypatch)
    counts = [4, 8, 4]
    layer = nt.GroupedLinear(3, 8, 8, dtype=torch.float64)
    x = torch.randn(16, 8, dtype=torch.float64, requires_grad=True)
    want, xd, w, b = loop_reference(layer, x, counts)
    want.sum().backward()
    for step in range(3):
        got = torch.autograd.grad(layer(x, counts).sum(), [x, layer.weight, layer.bias])
        assert rel(got[0], xd.grad) < 1e-10 and rel(got[1], w.grad) < 1e-10 and rel(got[2], b.grad) < 1e-10
        assert len(launched) == 3 and (runs.planned > 0) == (step > 0)
    runs.clear()


def test_unaligned_slices_many_groups_and_small_work_run_the_grouped_launch(slice_runs, monkeypatch):
    """Output slices less aligned than cuBLASLt's planned result, more groups than
    MAX_PER_GROUP_LAUNCHES, and products of less work per group than MIN_FLOPS_PER_GROUP keep the one
    grouped launch per product (results still the loop's)."""
    from nvmath.torch import _grouped_runs

    launched = _no_grouped_launch(monkeypatch)
    layer = nt.GroupedLinear(2, 8, 3, dtype=torch.float64)  # rows of 24 bytes: slices 8-byte aligned
    x = torch.randn(5, 8, dtype=torch.float64)
    want = loop_reference(layer, x, [3, 2])[0]
    assert rel(layer(x, [3, 2]).detach(), want.detach()) < 1e-12 and launched == [2]
    n = _grouped_runs.MAX_PER_GROUP_LAUNCHES + 1
    many = nt.GroupedLinear(n, 4, 4, dtype=torch.float64)
    x = torch.randn(n * 2, 4, dtype=torch.float64)
    want = loop_reference(many, x, [2] * n)[0]
    assert rel(many(x, [2] * n).detach(), want.detach()) < 1e-12 and launched[-1] == n
    monkeypatch.setattr(_grouped_runs, "MIN_FLOPS_PER_GROUP", 2 * 4 * 8 * 8 + 1)  # (one flop short)
    layer = nt.GroupedLinear(2, 8, 8, dtype=torch.float64)
    x = torch.randn(8, 8, dtype=torch.float64)
    want = loop_reference(layer, x, [4, 4])[0]
    assert rel(layer(x, [4, 4]).detach(), want.detach()) < 1e-12 and launched[-1] == 2
    assert len(slice_runs) == 0


def test_product_replays_its_launches_on_new_values_without_views(slice_runs):
    """A product seen before (same counts, bases' layouts and addresses modulo 256) replays its recorded
    launches (no problem views made) and computes the new values; an eviction forgets the replays; a
    switched-off SliceRuns runs nothing."""
    from nvmath.torch import _grouped_runs

    counts, bounds = [4, 0, 8], [(0, 0, 4), (2, 4, 12)]
    x, w = torch.randn(12, 8, dtype=torch.float64), torch.randn(3, 16, 8, dtype=torch.float64)
    y = torch.empty(12, 16, dtype=torch.float64)

    def problems():
        return [(x[s:e], w[k].mT, y[s:e], None, None) for k, s, e in bounds]

    def want():
        return torch.cat([x[0:4] @ w[0].T, x[4:12] @ w[2].T])

    runs = slice_runs
    assert runs.run_product(("t", tuple(counts)), (x, w, y, None), problems) is not None
    torch.testing.assert_close(y, want())
    x.copy_(torch.randn_like(x))
    w.copy_(torch.randn_like(w))
    made = runs.run_product(("t", tuple(counts)), (x, w, y, None), lambda: pytest.fail("views made"))
    assert made == [None, None]
    torch.testing.assert_close(y, want())
    runs._evicted([None, None])  # noqa: SLF001 - an eviction (white-box): the replays are forgotten
    calls = []
    runs.run_product(("t", tuple(counts)), (x, w, y, None), lambda: calls.append(1) or problems())
    assert calls == [1]
    runs.enabled = False
    assert runs.run_product(("t", tuple(counts)), (x, w, y, None), lambda: pytest.fail("ran")) is None
    assert runs.run(problems()) is None and isinstance(_grouped_runs.default_runs, _grouped_runs.SliceRuns)


@pytest.mark.parametrize("kw", [{"maxsize": 0}, {"plan_after": 0}, {"seen": True}, {"maxsize": 1.5}])
def test_slice_runs_bad_arguments(kw):
    """SliceRuns' bounds must be ints >= 1; the message names the argument."""
    from nvmath.torch._grouped_runs import SliceRuns

    with pytest.raises(ValueError, match=next(iter(kw))):
        SliceRuns(**kw)


def test_slice_runs_evicts_and_cannot_be_copied(slice_runs, monkeypatch):
    """A bounded SliceRuns frees its least recently used planners; it refuses to be pickled."""
    import pickle

    from nvmath.torch import _grouped_runs

    small = _grouped_runs.SliceRuns(2, plan_after=1)
    monkeypatch.setattr(_grouped_runs, "default_runs", small)
    layer = nt.GroupedLinear(1, 4, 4, bias=False, dtype=torch.float64)
    for m in (4, 8, 12):
        layer(torch.randn(m, 4, dtype=torch.float64), [m])
    assert len(small) == 2 and small.planned == 3
    with pytest.raises(TypeError, match="cannot be copied"):
        pickle.dumps(small)
    small.clear()
    assert len(small) == 0


# ---------------------------------------------------------------- torch.compile
def test_compiled_cpu_layer_equals_eager():
    """torch.compile of a CPU GroupedLinear (traced as a loop of torch matmuls) gives eager's output and
    gradients."""
    torch.manual_seed(3)
    layer = nt.GroupedLinear(3, 8, 4, dtype=torch.float64)
    x = torch.randn(10, 8, dtype=torch.float64, requires_grad=True)
    want = torch.autograd.grad(layer(x, [3, 0, 7]).square().sum(), [x, layer.weight, layer.bias])
    compiled = torch.compile(layer, backend="aot_eager")
    got = torch.autograd.grad(compiled(x, [3, 0, 7]).square().sum(), [x, layer.weight, layer.bias])
    for a, b in zip(got, want):
        assert rel(a, b) < 1e-12


def test_custom_ops_pass_opcheck():
    """nvmath::grouped_linear and its backward: schema, fake kernels and autograd registration agree
    with the eager kernels (torch.library.opcheck)."""
    from nvmath.torch import _grouped_ops  # noqa: F401  (registers the operators)

    layer = nt.GroupedLinear(3, 8, 4, dtype=torch.float64)
    x = torch.randn(10, 8, dtype=torch.float64, requires_grad=True)
    w, b = layer.weight.detach().requires_grad_(), layer.bias.detach().requires_grad_()
    torch.library.opcheck(torch.ops.nvmath.grouped_linear.default, (x, w, b, [3, 0, 7]))
    torch.library.opcheck(torch.ops.nvmath.grouped_linear.default, (x, w, None, [5, 5, 0]))
    g = torch.randn(10, 4, dtype=torch.float64)
    args = (g, x.detach(), w.detach(), [3, 0, 7], True, [True] * 3)
    torch.library.opcheck(torch.ops.nvmath.grouped_linear_backward.default, args)


def test_traced_gpu_layer_runs_the_custom_op(slice_runs, monkeypatch):
    """Under torch.compile a GPU layer is nvmath::grouped_linear (addresses are not traced): its output
    and its registered backward equal the loop of nn.Linear."""
    from nvmath.torch import _grouped_ops

    launched = _no_grouped_launch(monkeypatch)
    calls = []
    real = _grouped_ops.grouped_linear_op
    monkeypatch.setattr(_grouped_ops, "grouped_linear_op", lambda *a: (calls.append(1), real(*a))[1])
    monkeypatch.setattr(torch.compiler, "is_compiling", lambda: True)
    counts = [4, 0, 8, 4]
    layer = nt.GroupedLinear(4, 8, 12, dtype=torch.float64)
    x = torch.randn(16, 8, dtype=torch.float64, requires_grad=True)
    y = layer(x, counts)
    got = torch.autograd.grad(y.sum(), [x, layer.weight, layer.bias])
    want, xd, w, b = loop_reference(layer, x, counts)
    want.sum().backward()
    assert calls == [1] and not launched
    assert rel(y.detach(), want.detach()) < 1e-12
    assert rel(got[0], xd.grad) < 1e-12 and rel(got[1], w.grad) < 1e-12 and rel(got[2], b.grad) < 1e-12


def test_fullgraph_compile_through_the_custom_op_with_changing_counts(monkeypatch):
    """A GPU layer compiles with fullgraph=True through nvmath::grouped_linear (here its kernels run the
    CPU loop) and stays equal to the loop of nn.Linear as the counts change (a dynamic counts list)."""
    from nvmath.torch import _grouped

    monkeypatch.setattr(_grouped, "per_group", lambda t: True)  # (route as a GPU layer; the op runs the loop)
    torch.manual_seed(5)
    layer = nt.GroupedLinear(3, 8, 4, dtype=torch.float64)
    compiled = torch.compile(layer, backend="aot_eager", fullgraph=True)
    for counts in ([3, 0, 7], [2, 4, 4], [5, 5, 0]):
        x = torch.randn(10, 8, dtype=torch.float64, requires_grad=True)
        got = torch.autograd.grad(compiled(x, counts).square().sum(), [x, layer.weight, layer.bias])
        want, xd, w, b = loop_reference(layer, x, counts)
        want.square().sum().backward()
        assert rel(got[0], xd.grad) < 1e-12 and rel(got[1], w.grad) < 1e-12 and rel(got[2], b.grad) < 1e-12


# ---------------------------------------------------------------- GPU
@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_gpu_equal_loop_and_grouped_mm(dtype):
    """On the GPU (one grouped launch per product): equal to the loop of nn.Linear, and to torch._grouped_mm (bf16)."""
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA device")
    torch.manual_seed(0)
    counts = [300, 0, 17, 1024, 5, 200, 64, 438]
    layer = nt.GroupedLinear(8, 256, 512, device="cuda", dtype=dtype)
    x = torch.randn(sum(counts), 256, device="cuda", dtype=dtype, requires_grad=True)
    y = layer(x, torch.tensor(counts, device="cuda"))
    g = torch.randn_like(y)
    y.backward(g)
    want, xd, w, b = loop_reference(layer, x, counts)
    want.backward(g.double())
    tol = 1e-2 if dtype == torch.bfloat16 else 1e-5
    assert rel(y.detach(), want.detach()) < tol and rel(x.grad, xd.grad) < tol
    assert rel(layer.weight.grad, w.grad) < tol and rel(layer.bias.grad, b.grad) < tol
    gm = getattr(torch, "_grouped_mm", None)
    if gm is not None and dtype == torch.bfloat16 and torch.cuda.get_device_capability() >= (9, 0):
        ref = gm(
            x.detach(),
            layer.weight.detach().transpose(-2, -1),
            offs=torch.tensor(counts, device="cuda").cumsum(0).int(),
        )
        ref = ref + torch.repeat_interleave(layer.bias.detach(), torch.tensor(counts, device="cuda"), dim=0)
        assert rel(y.detach(), ref) < 1e-2


@pytest.mark.gpu
def test_gpu_training_steps_stay_equal_loop():
    """Several forward+backward steps on address-stable tensors (as in a training loop) stay equal to
    the loop of nn.Linear: the three grouped products' launches never run another's pointer arrays."""
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA device")
    torch.manual_seed(1)
    counts = [96, 32, 0, 160, 8, 64]
    layer = nt.GroupedLinear(6, 128, 96, device="cuda", dtype=torch.float32)
    x = torch.randn(sum(counts), 128, device="cuda", requires_grad=True)
    g = torch.randn(sum(counts), 96, device="cuda")
    want, xd, w, b = loop_reference(layer, x, counts)
    want.backward(g.double())
    for _ in range(4):
        got = torch.autograd.grad(layer(x, counts), [x, layer.weight, layer.bias], grad_outputs=g)
        assert rel(got[0], xd.grad) < 1e-5 and rel(got[1], w.grad) < 1e-5 and rel(got[2], b.grad) < 1e-5


@pytest.mark.gpu
@pytest.mark.parametrize("bias", [True, False])
def test_gpu_per_group_products_bf16_steps(bias, monkeypatch):
    """bf16 on the GPU: the first step (new counts) runs one grouped launch per product, the next ones
    per-group cuBLASLt GEMMs into slices (bias fused, its gradient by BGRADB); every step, on
    address-stable tensors, equals the loop of nn.Linear, empty groups' gradients are zero."""
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA device")
    from nvmath.torch import _grouped_kernels, _grouped_runs

    runs = _grouped_runs.SliceRuns()
    monkeypatch.setattr(_grouped_runs, "default_runs", runs)
    monkeypatch.setattr(_grouped_runs, "MIN_FLOPS_PER_GROUP", 0)  # (small products: per group all the same)
    launched = []
    real = _grouped_kernels._grouped_mm
    monkeypatch.setattr(_grouped_kernels, "_grouped_mm", lambda *a: (launched.append(len(a[0])), real(*a)))
    torch.manual_seed(2)
    counts = [512, 0, 256, 128, 64, 1024, 32, 8]
    layer = nt.GroupedLinear(8, 256, 512, bias=bias, device="cuda", dtype=torch.bfloat16)
    x = torch.randn(sum(counts), 256, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    g = torch.randn(sum(counts), 512, device="cuda", dtype=torch.bfloat16)
    want, xd, w, b = loop_reference(layer, x, counts)
    want.backward(g.double())
    params = [x, layer.weight] + ([layer.bias] if bias else [])
    for step in range(4):
        y = layer(x, torch.tensor(counts, device="cuda"))
        got = torch.autograd.grad(y, params, grad_outputs=g)
        assert rel(y.detach(), want.detach()) < 1e-2
        assert rel(got[0], xd.grad) < 1e-2 and rel(got[1], w.grad) < 1e-2
        assert not got[1][1].any()
        if bias:
            assert rel(got[2], b.grad) < 1e-2 and not got[2][1].any()
        assert len(launched) == 3 and (runs.planned > 0) == (step > 0)  # (step 0 launched all three)
    runs.clear()


@pytest.mark.gpu
def test_gpu_compiled_layer_equals_eager():
    """torch.compile of a bf16 GPU GroupedLinear (the nvmath::grouped_linear custom ops) gives eager's
    output and gradients, over several steps (the per-group planners then serve the ops)."""
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA device")
    torch.manual_seed(4)
    counts = [256, 0, 64, 512]
    layer = nt.GroupedLinear(4, 128, 256, device="cuda", dtype=torch.bfloat16)
    x = torch.randn(sum(counts), 128, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    params = [x, layer.weight, layer.bias]
    want = torch.autograd.grad(layer(x, counts).float().square().sum(), params)
    compiled = torch.compile(layer)
    for _ in range(3):
        got = torch.autograd.grad(compiled(x, counts).float().square().sum(), params)
        for a, b in zip(got, want):
            assert rel(a, b) < 1e-2
