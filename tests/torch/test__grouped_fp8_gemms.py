"""FP8 GroupedLinear under CUDA graph capture (nvmath.torch._grouped_fp8_gemms, ._grouped_fp8_kernels):
planners and scale-slot indices a capture used are pinned (never evicted nor dropped until clear());
first-time planning, a new scale-slot index or an unseen counts mask inside a capture raise
CaptureError (and leave the grouped planners on); inside a capture the forward quantizes the weight
again whatever its version. CPU: the capture check patched, the planners on the fake GPU. GPU: a
captured forward + backward replayed with changed inputs and weights equals an eager twin."""

from __future__ import annotations

import copy

import pytest

torch = pytest.importorskip("torch")

import nvmath.torch as nt
from nvmath.torch import _grouped_fp8_gemms as R
from nvmath.torch import _grouped_fp8_kernels as K
from nvmath.torch import _capture, fp8
from nvmath.torch._capture import CaptureError

E4 = torch.float8_e4m3fn
RECIPES = [fp8.CurrentScaling(), fp8.DelayedScaling(amax_history_len=4)]


def aligned(t):
    """A copy of contiguous ``t`` on 256 bytes (the runner's key holds alignments; CPU allocations vary)."""
    n = t.numel() * t.element_size()
    buf = torch.empty(n + 1024, dtype=torch.uint8)
    off = (-buf.data_ptr()) % 512
    out = buf[off : off + n].view(t.dtype).view(t.shape)
    out.copy_(t)
    return out


def fp8_operands(seed=0):
    torch.manual_seed(seed)
    a = aligned((torch.randn(32, 64) * 4).to(E4))
    b = aligned((torch.randn(16, 64) * 4).to(E4))
    return a, b


def set_capturing(monkeypatch, on):
    """Pose as inside (``on``) or outside a CUDA graph capture for the grouped FP8 code."""
    for module in (R, K, _capture):
        monkeypatch.setattr(module, "capturing", lambda t: on)


def reference(a, b, inv_a, inv_b, dtype):
    """float64 reference of ``(a @ b.T) * inv_a * inv_b`` rounded to ``dtype``."""
    return ((a.double() @ b.double().T) * float(inv_a) * float(inv_b)).to(dtype)


@pytest.fixture
def runner(fake_gpu):
    """A small grouped runner on the fake GPU (CPU tensors planned)."""
    r = R.GroupedFP8Gemms(maxsize=2)
    r.cpu_planned = True
    yield r
    r.clear()


def test_planner_a_capture_ran_is_pinned_and_kept(runner, monkeypatch):
    """A planner run inside a capture is pinned: later problems beyond maxsize evict unpinned planners
    instead (the newest kept too); the products stay right; clear() unpins and frees all."""
    a, b = fp8_operands()
    inv = torch.tensor([0.5, 0.25])
    want = reference(a, b, 0.5, 0.25, torch.float32)
    assert torch.allclose(runner.run("forward", [(0, a, b)], inv[:1], inv[1:], torch.float32)[0], want)
    set_capturing(monkeypatch, True)
    runner.run("forward", [(0, a, b)], inv[:1], inv[1:], torch.float32)
    set_capturing(monkeypatch, False)
    (pinned,) = [k for k in runner._pinned if k in runner._entries]
    for dtype in (torch.bfloat16, torch.float16):  # (two new problems: the second is beyond maxsize)
        out = runner.run("dgrad", [(0, a, b)], inv[:1], inv[1:], dtype)[0]
        assert torch.allclose(out.double(), reference(a, b, 0.5, 0.25, dtype).double(), rtol=1e-2)
    assert pinned in runner._entries and len(runner._entries) == 2 and runner.plans == 3
    assert runner.enabled
    runner.clear()
    assert not runner._pinned and not runner._entries


def test_more_problems_than_maxsize_stay_on_the_planners(runner, caplog):
    """Beyond maxsize the least recently used planner is freed before the next is planned (its scale
    slots reused): the runner stays on with maxsize planners (before, the slot buffer ran out at
    maxsize + 1 problems and the runner switched itself off)."""
    a, b = fp8_operands(3)
    inv = torch.ones(1)
    with caplog.at_level("WARNING"):
        for kind in ("forward", "dgrad", "wgrad", "forward-bias"):
            out = runner.run(kind, [(0, a, b)], inv, inv, torch.float32)[0]
            assert torch.allclose(out, reference(a, b, 1, 1, torch.float32))
    assert runner.enabled and runner.plans == 4 and len(runner._entries) == 2
    assert "failed" not in caplog.text


def test_all_planners_pinned_switches_off_with_a_clear_reason(runner, monkeypatch, caplog):
    """When every one of maxsize planners is pinned by a capture, a new problem cannot get scale slots:
    logged with the fix (a larger maxsize, or clear()), the runner switches off (the layer then runs the
    FP8 Linear caches)."""
    a, b = fp8_operands(4)
    inv = torch.ones(1)
    for kind in ("forward", "dgrad"):
        runner.run(kind, [(0, a, b)], inv, inv, torch.float32)
        set_capturing(monkeypatch, True)
        runner.run(kind, [(0, a, b)], inv, inv, torch.float32)
        set_capturing(monkeypatch, False)
    with caplog.at_level("WARNING"):
        assert runner.run("wgrad", [(0, a, b)], inv, inv, torch.float32) is None
    assert not runner.enabled and "pinned by captured CUDA graphs" in caplog.text


def test_scale_index_a_capture_used_survives_eviction(runner, monkeypatch):
    """The scale-slot index tensor a captured product wrote through is kept when the runner drops its
    other indices (on an eviction): the graph replays its memory."""
    a, b = fp8_operands(1)
    inv = torch.ones(1)
    set_capturing(monkeypatch, False)
    runner.run("forward", [(0, a, b)], inv, inv, torch.float32)
    set_capturing(monkeypatch, True)
    runner.run("forward", [(0, a, b)], inv, inv, torch.float32)
    captured = {k: v for k, v in runner._index.items() if k in runner._pinned}
    assert len(captured) == 1
    set_capturing(monkeypatch, False)
    for dtype in (torch.bfloat16, torch.float16):  # (beyond maxsize: an eviction drops indices)
        runner.run("forward", [(0, a, b)], inv, inv, dtype)
    for k, v in captured.items():
        assert runner._index.get(k) is v


def test_first_planning_or_new_index_inside_a_capture_raises(runner, monkeypatch):
    """Inside a capture a problem not planned before, or known planners run together for the first time
    (a new scale-slot index: a host-to-device copy), raise CaptureError naming the fix; the runner stays
    on (not switched to the FP8 Linear caches) and plans nothing."""
    a, b = fp8_operands(2)
    inv = torch.ones(2)
    runner.run("forward", [(0, a, b)], inv, inv, torch.float32)
    runner.run("forward", [(1, a, b)], inv, inv, torch.float32)
    plans = runner.plans
    set_capturing(monkeypatch, True)
    with pytest.raises(CaptureError, match="warm-up"):
        runner.run("forward", [(0, a, b), (1, a, b)], inv, inv, torch.float32)
    with pytest.raises(CaptureError, match="warm-up"):
        runner.run("wgrad", [(0, a, b)], inv, inv, torch.float32)
    assert runner.enabled and runner.plans == plans
    set_capturing(monkeypatch, False)
    outs = runner.run("forward", [(0, a, b), (1, a, b)], inv, inv, torch.float32)
    assert all(torch.allclose(o, reference(a, b, 1, 1, torch.float32)) for o in outs)


def test_counts_mask_inside_a_capture(monkeypatch):
    """The (G,) mask of groups with tokens: counts seen before the capture are found inside it and kept
    for the process (the cache's clearing spares them); unseen counts raise CaptureError naming them."""
    x = torch.empty(0)
    counts = [16, 0, 16, 7]
    monkeypatch.setattr(K, "_CAPTURED", {})
    mask = K.active_groups(counts, x)
    assert mask.tolist() == [True, False, True, True]
    set_capturing(monkeypatch, True)
    assert K.active_groups(counts, x) is mask
    K._TABLES.clear()
    assert K.active_groups(counts, x) is mask
    assert K.active_groups([16, 16, 16, 16], x) is None  # (all groups have tokens: no mask)
    with pytest.raises(CaptureError, match=r"\[0, 16, 16, 16\]"):
        K.active_groups([0, 16, 16, 16], x)


@pytest.mark.parametrize("recipe", RECIPES, ids=["current", "delayed"])
def test_forward_inside_a_capture_quantizes_the_weight_again(recipe, monkeypatch):
    """Inside a capture the layer's forward makes the weight's FP8 copies again whatever the version
    (the graph then holds the quantization: each replay quantizes the weight's values of that moment),
    the backward reuses the forward's; outside a capture the version decides. With the weight changed
    in place between steps, the steps equal an eager twin's (outputs, gradients, scaling state)."""
    torch.manual_seed(3)
    layer = nt.GroupedLinear(2, 32, 16, fp8=recipe)
    x, counts = torch.randn(32, 32), [16, 16]
    for _ in range(2):
        layer(x, counts).sum().backward()
    assert layer.fp8_state.weight_updates == 1
    set_capturing(monkeypatch, True)
    layer(x, counts).sum().backward()  # (the weight's version has not moved)
    assert layer.fp8_state.weight_updates == 2
    twin = copy.deepcopy(layer)
    for step in range(2):  # (weights changed in place: the twin quantizes them again by their version)
        delta = 0.05 * torch.randn_like(layer.weight)
        with torch.no_grad():
            layer.weight.add_(delta)
            twin.weight.add_(delta)
        xa, xb = x.clone().requires_grad_(), x.clone().requires_grad_()
        ya = layer(xa, counts)
        ya.sum().backward()
        set_capturing(monkeypatch, False)
        yb = twin(xb, counts)
        yb.sum().backward()
        set_capturing(monkeypatch, True)
        assert layer.fp8_state.weight_updates == 3 + step  # (one per forward, none in the backward)
        assert torch.equal(ya, yb) and torch.equal(xa.grad, xb.grad)
        for name, buf in layer.fp8_state.named_buffers():
            assert torch.equal(buf, twin.fp8_state.get_buffer(name)), name


# ---------------------------------------------------------------- GPU
@pytest.mark.gpu
@pytest.mark.parametrize("recipe", RECIPES, ids=["current", "delayed"])
def test_gpu_cuda_graph_forward_backward_replays_with_new_inputs_and_weights(recipe):
    """A bf16 FP8 GroupedLinear's forward + backward captured in a CUDA graph after a warm-up (uneven
    counts with an empty group), the input, output gradient and weight changed in place between replays
    (as data loading and an optimizer outside the graph would): every replay gives the eager twin's
    output, input / weight / bias gradients and scaling state bit for bit; the planners it used are
    pinned and the grouped planners stayed on."""
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA device")
    if torch.cuda.get_device_capability() < (8, 9):
        pytest.skip("FP8 needs compute capability 8.9")
    torch.manual_seed(6)
    counts = [128, 0, 64, 256]
    layer = nt.GroupedLinear(4, 256, 512, device="cuda", dtype=torch.bfloat16, fp8=recipe)
    twin = copy.deepcopy(layer)
    static_x = torch.randn(sum(counts), 256, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    static_g = torch.randn(sum(counts), 512, device="cuda", dtype=torch.bfloat16)

    def run(m, x, g):
        y = m(x, counts)
        y.backward(g)
        return y.detach()

    def eager(x, g):
        twin.zero_grad(set_to_none=True)
        xx = x.detach().clone().requires_grad_()
        return run(twin, xx, g), xx.grad

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            run(layer, static_x, static_g)
    torch.cuda.current_stream().wait_stream(side)
    for _ in range(2):
        eager(static_x, static_g)
    layer.zero_grad(set_to_none=True)
    static_x.grad = None
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_y = run(layer, static_x, static_g)
    for i in range(3):
        delta = 0.02 * torch.randn_like(layer.weight)
        with torch.no_grad():
            layer.weight.add_(delta)
            twin.weight.add_(delta)
            static_x.copy_(torch.randn_like(static_x) * (i + 1))
            static_g.copy_(torch.randn_like(static_g))
        graph.replay()
        y, dx = eager(static_x, static_g)
        torch.cuda.synchronize()
        assert torch.equal(static_y, y) and torch.equal(static_x.grad, dx)
        assert torch.equal(layer.weight.grad, twin.weight.grad)
        assert torch.equal(layer.bias.grad, twin.bias.grad)
        assert not layer.weight.grad[1].any()
        for name, buf in layer.fp8_state.named_buffers():
            assert torch.equal(buf, twin.fp8_state.get_buffer(name)), name
    assert R.grouped_fp8_gemms.enabled and R.grouped_fp8_gemms._pinned


def test_signature_memo_looks_planners_up_once_and_forgets_them_on_eviction(runner, monkeypatch):
    """With a signature the runner looks its planners up (and checks the results' layouts) once: later
    calls with it run the memoised planners on the new operands' addresses (right products); another
    signature looks up again; freeing a planner (an eviction) forgets every memo."""
    monkeypatch.setattr(R, "D_ALIGNMENT", 16)  # (CPU allocations are 64-byte aligned)
    looked = []
    look_up = R.GroupedFP8Gemms._look_up
    def counted(self, *args):
        looked.append(args[0])
        return look_up(self, *args)

    monkeypatch.setattr(R.GroupedFP8Gemms, "_look_up", counted)
    inv = torch.tensor([0.5, 0.25])
    for seed in range(3):
        a, b = fp8_operands(seed)
        out = torch.empty(32, 16)
        got = runner.run("forward", [(0, a, b)], inv[:1], inv[1:], torch.float32, out=[out], signature=("s",))
        assert got[0] is out and torch.allclose(out, reference(a, b, 0.5, 0.25, torch.float32))
    assert looked == ["forward"]
    runner.run("dgrad", [(0, a, b)], inv[:1], inv[1:], torch.float32, out=[out], signature=("s",))
    assert looked == ["forward", "dgrad"] and len(runner._memo) == 2
    runner.run("wgrad", [(0, a, b)], inv[:1], inv[1:], torch.float32, out=[out], signature=("s",))  # (evicts)
    assert len(runner._memo) == 1 and runner.plans == 3


@pytest.mark.parametrize("rows", [(0, 1), (1, 0), (2, 0)], ids=["a-first", "b-first", "three-rows"])
def test_scales_source_fills_the_slots_as_the_two_scale_tensors(runner, monkeypatch, rows):
    """``run(..., scales=(src, row_a, row_b))`` fills every group's planner slots from the rows of the
    caller's (R, G) tensor (one index_put_, no op joining the scales): the products equal those of the
    two scale tensors given alone and the float64 reference; a row that is neither scale (NaN here)
    reaches no planner's slot, only the scratch slot."""
    monkeypatch.setattr(R, "D_ALIGNMENT", 16)  # (CPU allocations are 64-byte aligned)
    (a0, b0), (a1, b1) = fp8_operands(1), fp8_operands(2)
    inv_a, inv_b = torch.tensor([0.5, 0.125]), torch.tensor([0.25, 2.0])
    src = torch.full((3, 2), float("nan"))
    src[rows[0]], src[rows[1]] = inv_a, inv_b
    problems = [(0, a0, b0), (1, a1, b1)]
    for scales in (None, (src, *rows), None, (src, *rows)):  # (the memo's index made per source layout)
        outs = [torch.empty(32, 16), torch.empty(32, 16)]
        runner.run("forward", problems, inv_a, inv_b, torch.float32, out=outs, signature=("s",),
                   scales=scales)  # fmt: skip
        for k, (a, b) in enumerate(((a0, b0), (a1, b1))):
            want = reference(a, b, inv_a[k], inv_b[k], torch.float32)
            assert torch.equal(outs[k], want) or torch.allclose(outs[k], want, rtol=1e-6, atol=0)
    used = [s for e in runner._entries.values() for s in e.slots]
    assert not runner._slots[torch.device("cpu")][used].isnan().any()
