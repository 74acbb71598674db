"""The fused FP8 MLP block (nvmath.torch._fp8_mlp, MLP(..., fp8=recipe) with GELU in bf16/fp16).

CPU: with every fused stage refused the block equals two FP8 Linear layers exactly (same outputs,
gradients, scaling states); fused, the forward equals a float64 reference of the fused arithmetic
(fc1's e4m3 output and its amax straight from fc1's GEMM under delayed scaling) and the gradients are
within FP8 tolerance of the unfused block; which blocks take the fused path; the skip-step policy.
GPU (H200): every stage runs fused (no refusal), equal to the unfused block within FP8 tolerance,
planners reused across steps; torch.compile.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import nvmath.torch as nt
from nvmath.torch import _fp8_mlp, fp8
from nvmath.torch._fp8_linear import FP8LinearState

E4, E5, BF16 = torch.float8_e4m3fn, torch.float8_e5m2, torch.bfloat16
DELAYED = fp8.DelayedScaling(amax_history_len=4)


def rel(a, b):
    a, b = a.detach().double(), b.detach().double()
    return float((a - b).norm() / b.norm())


def block(recipe, dtype=BF16, seed=0, n=(32, 64, 48)):
    torch.manual_seed(seed)
    return nt.MLP(*n, fp8=recipe, dtype=dtype)


def step(m, x, g, fused=None):
    """One forward + backward of MLP ``m`` through fp8_mlp (``fused``: the fused GEMMs to use)."""
    xx = x.clone().requires_grad_()
    f1, f2 = m.fc1, m.fc2
    y = _fp8_mlp.fp8_mlp(xx, f1.weight, f1.bias, f2.weight, f2.bias, f1.fp8_state, f2.fp8_state, fused=fused)
    y.backward(g)
    return y.detach(), xx.grad, f1.weight.grad, f1.bias.grad, f2.weight.grad, f2.bias.grad


def states(m):
    return [b.clone() for s in (m.fc1.fp8_state, m.fc2.fp8_state) for b in s.buffers()]


@pytest.mark.parametrize("recipe", [DELAYED, fp8.CurrentScaling()], ids=["delayed", "current"])
def test_all_refused_equals_two_fp8_layers(recipe, monkeypatch):
    """Every fused stage refused (the layers' fused epilogues too): the block's outputs, gradients and
    scaling states equal fc2(fc1(x)) of two FP8 Linear layers exactly, step after step."""
    from nvmath.torch import _fp8_epilogs

    monkeypatch.setattr(_fp8_epilogs, "fp8_epilog_gemms", _fp8_mlp.NO_FUSION)
    a, b = block(recipe), block(recipe)
    x, g = torch.randn(32, 32, dtype=BF16), torch.randn(32, 48, dtype=BF16)
    for _ in range(3):
        got = step(a, x, g, fused=_fp8_mlp.NO_FUSION)
        xx = x.clone().requires_grad_()
        y = b.fc2(b.fc1(xx))
        y.backward(g)
        want = (y.detach(), xx.grad, b.fc1.weight.grad, b.fc1.bias.grad, b.fc2.weight.grad, b.fc2.bias.grad)
        for u, v in zip(got, want):
            assert torch.equal(u, v)
        for u, v in zip(states(a), states(b)):
            assert torch.equal(u, v)
        a.zero_grad()
        b.zero_grad()


def ref_q(x, s, dtype):
    f = fp8.FP8_MAX[dtype]
    return (x.double() * float(s)).float().clamp(-f, f).to(dtype).double()


def gelu64(z):
    return 0.5 * z * (1 + torch.tanh(0.7978845608028654 * (z + 0.044715 * z**3)))


def test_fused_forward_equals_float64_reference_delayed():
    """Delayed scaling, fused: y equals a float64 reference of the fused arithmetic (fc1: bias in
    float16, GELU on the unrounded product, e4m3 with fc2's input scale; fc2: its bias), and fc2's input
    amax pushed into its history is max |h| of that GELU output (from fc1's GEMM)."""
    m = block(DELAYED, seed=1)
    s1, s2 = m.fc1.fp8_state, m.fc2.fp8_state
    x = torch.randn(32, 32, dtype=BF16)
    weight_scales = None
    for _ in range(2):  # (the second step runs on scales from the first step's amax)
        # (delayed: a tensor is quantized with the scale held before the call; the weights' FP8
        # copies are made once per weight version: in the first step, with the scales held then)
        sx, sh = float(s1.scale[0]), float(s2.scale[0])
        if weight_scales is None:
            weight_scales = float(s1.scale[1]), float(s2.scale[1])
        sw1, sw2 = weight_scales
        w1, w2 = m.fc1.weight.detach(), m.fc2.weight.detach()
        with torch.no_grad():
            y = m(x)
        qx = ref_q(x, sx, E4)
        qw1 = ref_q(w1, sw1, E4)
        z = (qx @ qw1.T) / (sx * sw1) + m.fc1.bias.detach().half().double()
        h = gelu64(z)
        qh = ref_q(h, sh, E4)
        y_ref = (qh @ ref_q(w2, sw2, E4).T) / (sh * sw2) + m.fc2.bias.detach().double()
        assert rel(y, y_ref) < 2e-2
        assert float(s2.amax_history[0, 0]) == pytest.approx(float(h.abs().max()), rel=1e-2)


@pytest.mark.parametrize("dtype", [BF16, torch.float16], ids=["bf16", "fp16"])
def test_delayed_fused_aux_is_float16_pre_activation_in_layer_dtype(dtype):
    """Delayed scaling, fused fc1 (e4m3 D): the aux saved for the backward's dgelu pass is the float32
    pre-activation rounded to float16 (cuBLASLt's default aux over an FP8 D, the type it runs), kept
    in float16, (hidden, tokens) column-major; with ``aux_dtype`` (the custom operator) in that dtype."""
    from nvmath.torch._fp8_epilogs import FP8EpilogGemms
    from nvmath.torch._fp8_linear import FP8GemmCache

    m = block(DELAYED, dtype=dtype, seed=4)
    f1, f2 = m.fc1, m.fc2
    x = torch.randn(32, 32, dtype=dtype)
    with torch.no_grad():
        _, qxt, inv_x, _, _, aux = _fp8_mlp.mlp_forward(
            x, f1.weight, f1.bias, f2.weight, f2.bias, f1.fp8_state, f2.fp8_state, FP8GemmCache(), FP8EpilogGemms()
        )  # fmt: skip
    qw1, _, inv_w1 = f1.fp8_state.weight_fp8(f1.weight)
    b1 = f1.bias.detach().half().float()[:, None]  # (float16 over an FP8 D)
    z = (qw1.float() @ qxt.float()) * (inv_w1.float() * inv_x.float()) + b1
    assert aux.dtype == torch.float16 and aux.shape == (64, 32) and aux.stride() == (1, 64)
    assert torch.equal(aux, z.half())
    t = block(DELAYED, dtype=dtype, seed=4)  # (a twin in the same state as m before its call)
    with torch.no_grad():
        *_, aux2 = _fp8_mlp.mlp_forward(
            x, t.fc1.weight, t.fc1.bias, t.fc2.weight, t.fc2.bias, t.fc1.fp8_state, t.fc2.fp8_state,
            FP8GemmCache(), FP8EpilogGemms(), aux_dtype=dtype,
        )  # fmt: skip
    assert aux2.dtype == dtype and aux2.stride() == (1, 64) and torch.equal(aux2, aux.to(dtype))


@pytest.mark.parametrize("recipe", [DELAYED, fp8.CurrentScaling()], ids=["delayed", "current"])
def test_fused_close_to_unfused(recipe):
    """The fused block's outputs and gradients are within FP8 tolerance of the unfused block's."""
    a, b = block(recipe, seed=2), block(recipe, seed=2)
    x, g = torch.randn(64, 32, dtype=BF16), torch.randn(64, 48, dtype=BF16)
    for _ in range(3):
        for u, v in zip(step(a, x, g), step(b, x, g, fused=_fp8_mlp.NO_FUSION)):
            assert rel(u, v) < 0.08
        a.zero_grad()
        b.zero_grad()


def test_row_major_dgrad_swaps_a_column_major_gemm(monkeypatch):
    """fc2's dgrad is handed to the dgelu pass row-major: a GEMM that returns a column-major D is
    copied once and then replaced, for that problem, by the swapped GEMM's transpose (row-major)."""
    monkeypatch.setattr(_fp8_mlp, "_SWAPPED", set())
    calls = []

    def colmajor_gemm(qa, qb, inv_a, inv_b, dtype):
        calls.append((qa.shape, qb.shape))
        return ((qa.float() @ qb.float().T) * (inv_a * inv_b)).to(dtype).T.contiguous().T

    qa, qb = torch.randn(32, 16).to(E4), torch.randn(48, 16).to(E4)
    one = torch.tensor(1.0)
    want = (qa.float() @ qb.float().T).to(BF16)
    for _ in range(2):
        d = _fp8_mlp._row_major(colmajor_gemm, qa, qb, one, one, BF16)
        assert d.is_contiguous() and torch.equal(d, want)
    assert calls == [((32, 16), (48, 16)), ((48, 16), (32, 16))]


def test_which_blocks_take_the_fused_path(monkeypatch):
    """GELU blocks in bf16 / fp16 with one recipe run fused; ReLU, float32 and mixed recipes run as two
    FP8 Linear layers."""
    calls = []
    real = _fp8_mlp.fp8_mlp
    monkeypatch.setattr(_fp8_mlp, "fp8_mlp", lambda *a, **k: calls.append(1) or real(*a, **k))
    x = torch.randn(16, 32)
    for dtype, act, fused in ((BF16, "gelu", True), (torch.float16, "gelu", True),
                              (torch.float32, "gelu", False), (BF16, "relu", False)):  # fmt: skip
        calls.clear()
        m = nt.MLP(32, 64, 48, activation=act, fp8=DELAYED, dtype=dtype)
        m(x.to(dtype))
        assert bool(calls) == fused, (dtype, act)
    calls.clear()
    m = nt.MLP(32, 64, 48, dtype=BF16)
    m.fc2.fp8_state = FP8LinearState(fp8.CurrentScaling())
    with fp8.fp8_autocast(DELAYED):
        m.fc1(x.to(BF16))  # (fc1 takes the autocast's recipe; fc2's state has another one)
        with pytest.raises(ValueError, match="one recipe per layer"):
            m(x.to(BF16))
    assert not calls


def test_nonfinite_input_poisons_and_skips_step():
    """An inf in the input: the fused block's output is NaN, fc1's found_inf is set and
    optimizer_step skips the step (parameters unchanged), as for FP8 Linear layers."""
    m = block(DELAYED, seed=3)
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    x = torch.randn(16, 32, dtype=BF16)
    x[3, 4] = float("inf")
    y = m(x)
    y.float().sum().backward()
    assert torch.isnan(y).any()
    assert int(m.fc1.fp8_state.found_inf.sum()) > 0
    before = [p.clone() for p in m.parameters()]
    assert not fp8.optimizer_step(opt, m)
    assert all(torch.equal(p, q) for p, q in zip(m.parameters(), before))


def test_mlp_compiles_fullgraph_as_fused_block():
    """torch.compile(fullgraph=True) of an FP8 MLP traces the fused block's custom ops
    (nvmath::fp8_mlp): outputs, gradients and both scaling states equal the eager block's."""
    m = block(DELAYED, seed=4)
    twin = block(DELAYED, seed=4)
    compiled = torch.compile(m, fullgraph=True, backend="aot_eager")
    x = torch.randn(32, 32, dtype=BF16)
    for _ in range(3):
        xa, xb = x.clone().requires_grad_(), x.clone().requires_grad_()
        ya, yb = compiled(xa), twin(xb)
        ya.float().sum().backward()
        yb.float().sum().backward()
        assert torch.equal(ya, yb) and torch.equal(xa.grad, xb.grad)
        for p, q in zip(m.parameters(), twin.parameters()):
            assert torch.equal(p.grad, q.grad)
        for u, v in zip(states(m), states(twin)):
            assert torch.equal(u, v)
        m.zero_grad()
        twin.zero_grad()


def test_mlp_custom_op_fake_kernels():
    """The fused block's custom ops: fake kernels agree with the real ones (torch.library.opcheck)."""
    from nvmath.torch import _fp8_ops

    m = block(fp8.CurrentScaling(), seed=5)
    f1, f2 = m.fc1, m.fc2
    x = torch.randn(32, 32, dtype=BF16)
    args = (x, f1.weight, f1.bias, f2.weight, f2.bias, f1.fp8_state.op_number, f2.fp8_state.op_number)
    torch.library.opcheck(_fp8_ops.fp8_mlp_op, args, test_utils=("test_faketensor",))
    y, qx, inv_x, qh, inv_h, aux = _fp8_ops.fp8_mlp_op(*args)
    g = torch.randn_like(y)
    bargs = (g, qx, inv_x, qh, inv_h, aux, f1.weight, f2.weight, *args[5:], BF16, BF16, [True] * 5)
    torch.library.opcheck(_fp8_ops.fp8_mlp_backward_op, bargs, test_utils=("test_faketensor",))


# ---------------------------------------------------------------- H200
def _fp8_gpu():
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    cc = torch.cuda.get_device_capability()
    if cc < (8, 9):
        pytest.skip(f"FP8 needs compute capability 8.9; this GPU has {cc[0]}.{cc[1]}")


@pytest.mark.gpu
@pytest.mark.parametrize("cast", [True, False], ids=["cast-kernels", "cast-off"])
@pytest.mark.parametrize("recipe", [DELAYED, fp8.CurrentScaling()], ids=["delayed", "current"])
def test_gpu_fused_block_runs_fused_and_matches_unfused(recipe, cast, monkeypatch):
    """On the H200 every fused stage plans (report() empty: otherwise it names cuBLASLt's refusal),
    the fused block is within FP8 tolerance of the unfused one and of the CPU emulation, and no
    fused GEMM is planned again after the first step; with the cast-transpose kernels (the default)
    and switched off (NVMATH_FP8_FUSED_CAST=0: the former path, fc2's dgrad with cuBLASLt's DGELU)."""
    from nvmath.torch import _fp8_cast
    from nvmath.torch._fp8_epilogs import FP8EpilogGemms

    monkeypatch.setattr(_fp8_cast, "ENABLED", cast)
    _fp8_gpu()
    n = (256, 1024, 512)
    a, b, c = (block(recipe, seed=5, n=n) for _ in range(3))
    a, b = a.cuda(), b.cuda()
    gemms = FP8EpilogGemms()
    x, g = torch.randn(512, 256, dtype=BF16), torch.randn(512, 512, dtype=BF16)
    plans = None
    for _ in range(3):
        fused = step(a, x.cuda(), g.cuda(), fused=gemms)
        assert gemms.report() == {}
        unfused = step(b, x.cuda(), g.cuda(), fused=_fp8_mlp.NO_FUSION)
        emulated = step(c, x, g)
        for u, v, w in zip(fused, unfused, emulated):
            assert rel(u.cpu(), v.cpu()) < 0.08 and rel(u.cpu(), w) < 0.08
        plans = gemms.plans if plans is None else plans
        assert gemms.plans == plans
        for m in (a, b, c):
            m.zero_grad()
    gemms.clear()


@pytest.mark.gpu
def test_gpu_compiled_fp8_mlp_inductor():
    """torch.compile(fullgraph=True, inductor) of a bf16 FP8 MLP on the GPU (the fused block's custom ops):
    equal to the eager block up to run-to-run float32 sum order."""
    _fp8_gpu()
    m = block(DELAYED, seed=6, n=(256, 1024, 256)).cuda()
    twin = block(DELAYED, seed=6, n=(256, 1024, 256)).cuda()
    compiled = torch.compile(m, fullgraph=True)
    x = torch.randn(512, 256, dtype=BF16, device="cuda")
    for _ in range(3):
        xa, xb = x.clone().requires_grad_(), x.clone().requires_grad_()
        ya, yb = compiled(xa), twin(xb)
        ya.float().sum().backward()
        yb.float().sum().backward()
        assert rel(ya, yb) < 0.08 and rel(xa.grad, xb.grad) < 0.08
        m.zero_grad()
        twin.zero_grad()


def test_compiled_layers_check_capability_in_the_operator(monkeypatch):
    """Under torch.compile the compute-capability check of the recipe runs inside the custom operator
    (eager code), not in the traced module code: a refusal still raises, naming the capability."""
    from nvmath.torch import _fp8_linear

    m = block(DELAYED, seed=7)

    def refuse(recipe, device):
        raise RuntimeError("FP8 GEMMs need a GPU of compute capability >= 8.9; device x has 8.0")

    monkeypatch.setattr(_fp8_linear, "check_recipe", refuse)
    compiled = torch.compile(m, fullgraph=True, backend="aot_eager")
    with pytest.raises(RuntimeError, match="compute capability"):
        compiled(torch.randn(16, 32, dtype=BF16))


@pytest.mark.gpu
@pytest.mark.parametrize("recipe", [DELAYED, fp8.CurrentScaling()], ids=["delayed", "current"])
def test_gpu_cuda_graph_training_step_equals_eager(recipe):
    """A whole FP8 MLP training step (the fused block forward and backward, its cast kernels and
    scaling-state updates, and an SGD step) captured in one CUDA graph after a warm-up: every replay
    on new data gives what the eager twin's step gives -- the loss, the weights, the biases and the
    scaling state (scales, amax histories, flags) bit for bit: the same kernels in the same order,
    with the weights moving each step (their FP8 copies remade inside the graph)."""
    import copy

    _fp8_gpu()
    torch.manual_seed(3)
    model = nt.MLP(256, 1024, 256, fp8=recipe, device="cuda", dtype=BF16)
    twin = copy.deepcopy(model)
    opt, opt_twin = (torch.optim.SGD(m.parameters(), lr=1e-2) for m in (model, twin))
    data = [tuple(torch.randn(512, 256, device="cuda", dtype=BF16) for _ in range(2)) for _ in range(6)]
    static_x, static_g = (t.clone() for t in data[0])

    def step(m, o, x, g):
        loss = (m(x).float() * g.float()).sum()
        loss.backward()
        o.step()
        return loss.detach()

    def eager(x, g):
        opt_twin.zero_grad(set_to_none=True)
        return step(twin, opt_twin, x, g)

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # (warm-up: plans the GEMMs, compiles the kernels)
        for x, g in data[:2]:
            static_x.copy_(x)
            static_g.copy_(g)
            opt.zero_grad(set_to_none=True)
            step(model, opt, static_x, static_g)
    torch.cuda.current_stream().wait_stream(side)
    for x, g in data[:2]:
        eager(x, g)
    opt.zero_grad(set_to_none=True)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_loss = step(model, opt, static_x, static_g)
    for x, g in data[2:]:
        static_x.copy_(x)
        static_g.copy_(g)
        graph.replay()
        want = eager(x, g)
        torch.cuda.synchronize()
        assert torch.equal(static_loss, want)
        for (name, got), ref in zip(model.state_dict().items(), twin.state_dict().values()):
            assert torch.equal(got, ref), name
    assert int(model.fc1.fp8_state.found_inf.sum()) == 0
