"""The compiled per-group GEMM call of the FP8 GroupedLinear (nvmath.torch._grouped_fp8_group,
``nvmath._fastcall.MatmulGroup``): on the fake GPU with torch CPU tensors posing as package-"torch"
CUDA tensors and the emulated ``cublasLtMatmul`` behind a real C function (so the launches' callers are
compiled), a product's GEMMs of every group run in one C call after the first per-group run, with
results bit-identical to the per-group runs (bias fused or not); a closed launch makes the call launch
nothing (the per-group runs take over and the group is built again); a failed launch raises the
bindings' error; the pure-Python path builds no group. GPU: a layer's steps with the compiled group
equal, bit for bit, the same steps with per-group launches."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from compiled_hit_helpers import recording_c_function  # noqa: E402
from fastcall_probes import FastCall, needs_extension  # noqa: E402

from nvmath._internal import fastpath  # noqa: E402
from nvmath.bindings import cublasLt  # noqa: E402
from nvmath.torch import _grouped_fp8_gemms as R  # noqa: E402
from nvmath.torch import _grouped_fp8_group as GG  # noqa: E402
from nvmath.torch import _grouped_fp8_kernels as K  # noqa: E402
from nvmath.torch import fp8  # noqa: E402

RECIPES = [fp8.CurrentScaling(), fp8.DelayedScaling(amax_history_len=4)]
COUNTS = [32, 16, 0, 48]
_STATUS = [0]  # the status the emulated cublasLtMatmul returns (0: it computes)


@pytest.fixture
def compiled(torch_fakes, monkeypatch):
    """``(nvmath.torch, calls, runner)``: the fake GPU as package "torch", the compiled path on, the
    emulated cublasLtMatmul behind a C function, a fresh grouped
    runner on CPU tensors; ``calls`` lists the emulated cublasLtMatmul's calls."""
    monkeypatch.setattr(fastpath, "_COMPILED", FastCall)
    nt = torch_fakes.install_as_torch(monkeypatch)
    calls: list = []
    cfunc = recording_c_function(16, cublasLt._p_cublasLtMatmul, calls, _STATUS)
    monkeypatch.setattr(cublasLt, "_p_cublasLtMatmul", cfunc)
    runner = R.GroupedFP8Gemms()
    runner.cpu_planned = True
    monkeypatch.setattr(R, "grouped_fp8_gemms", runner)
    monkeypatch.setattr(R, "_align", lambda t: 256)  # (CUDA's allocator: 512-byte blocks; the CPU's vary)
    monkeypatch.setattr(R, "D_ALIGNMENT", 16)
    # (and a signature without the bases' addresses modulo 256, which CPU allocations vary)
    monkeypatch.setattr(K, "signature", lambda counts, *ts: (tuple(counts), *(
        None if t is None else (t.shape, t.stride(), t.dtype, t.device) for t in ts)))
    yield nt, calls, runner
    runner.clear()
    nt.default_cache.clear()


def groups(runner) -> list:
    """The compiled groups the runner holds now (built, not dropped)."""
    return [memo.group for memo in runner._memo.values() if memo.group]


def steps(nt, layer, x, gs, counts):
    """``(y, dx, dw, db)`` of each step (the weight's version bumped before each, as after an optimizer
    step)."""
    out = []
    params = [x, layer.weight] + ([layer.bias] if layer.bias is not None else [])
    for g in gs:
        torch.autograd.graph.increment_version([layer.weight])
        y = layer(x, counts)
        out.append((y.detach().clone(), *torch.autograd.grad(y, params, grad_outputs=g)))
    return out


def twins(nt, recipe, dtype, bias=True):
    torch.manual_seed(3)
    a = nt.GroupedLinear(len(COUNTS), 64, 32, bias=bias, dtype=dtype, fp8=recipe)
    b = nt.GroupedLinear(len(COUNTS), 64, 32, bias=bias, dtype=dtype, fp8=recipe)
    b.load_state_dict(a.state_dict())
    return a, b


@needs_extension
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16-bias-fused"])
@pytest.mark.parametrize("recipe", RECIPES, ids=["current", "delayed"])
def test_compiled_group_is_bit_identical_to_per_group_runs(compiled, monkeypatch, recipe, dtype):
    """Four training steps: from the second on, the three products (forward with its bias epilogue in
    bf16, dgrad, wgrad) run as one compiled call each, launching the same GEMMs (same arguments, same
    order) as the per-group runs of a twin layer without groups, whose outputs, gradients and scaling
    state equal this layer's bit for bit."""
    nt, calls, runner = compiled
    layer, twin = twins(nt, recipe, dtype)
    x = torch.randn(sum(COUNTS), 64, dtype=dtype).requires_grad_()
    gs = [torch.randn(sum(COUNTS), 32, dtype=dtype) for _ in range(4)]
    start = len(calls)
    got = steps(nt, layer, x, gs, COUNTS)
    made = groups(runner)
    assert len(made) == 3 and all(g.group.calls == 3 for g in made)
    assert all(g.group.size == 3 for g in made)  # (3 groups with tokens)
    ours = calls[start:]
    runner.clear()
    monkeypatch.setattr(R, "build_group", lambda runs: None)
    start = len(calls)
    want = steps(nt, twin, x, gs, COUNTS)
    assert not groups(runner)
    assert len(calls) - start == len(ours) == 4 * 3 * 3
    for step_got, step_want in zip(got, want):
        for a, b in zip(step_got, step_want):
            assert torch.equal(a, b)
    for name in ("scale", "amax_history"):
        assert torch.equal(getattr(layer.fp8_state, name), getattr(twin.fp8_state, name))


@needs_extension
def test_a_closed_launch_launches_nothing(compiled):
    """A member's launch closed (its planner re-planned or freed) makes the group's call return False
    before launching anything (no member runs, also those before it)."""
    nt, calls, runner = compiled
    layer, _ = twins(nt, fp8.DelayedScaling(), torch.float32, bias=False)
    x = torch.randn(sum(COUNTS), 64)
    with torch.no_grad():
        layer(x, COUNTS)
        layer(x, COUNTS)
    (built,) = groups(runner)
    served = built.group.calls
    launch = list(runner._entries.values())[-1].mm.launcher  # (the group's last member)
    n = built.group.size
    launch.close()
    try:
        before = len(calls)
        assert built((0,) * n, (0,) * n, (0,) * n, None) is False
        assert len(calls) == before and built.group.calls == served
    finally:
        launch.closed = False


@needs_extension
def test_a_refused_call_runs_per_group_and_builds_the_group_again(compiled):
    """Another current device than the group's: the group launches nothing, the per-group runs compute
    the product (equal to before), and the group is built anew after them."""
    nt, calls, runner = compiled
    layer, _ = twins(nt, fp8.DelayedScaling(), torch.float32, bias=False)
    x = torch.randn(sum(COUNTS), 64)
    with torch.no_grad():
        layer(x, COUNTS)
        want = layer(x, COUNTS)
        (built,) = groups(runner)
        built._device = lambda: 1
        before = len(calls)
        got = layer(x, COUNTS)
        (again,) = groups(runner)
    assert again is not built and built.group.calls == 1 and again.group.calls == 0
    assert len(calls) - before == 3  # (per group)
    assert torch.equal(got, want)


@needs_extension
def test_a_failed_launch_raises_the_bindings_error(compiled):
    """A nonzero cublasLtMatmul status inside the group's call raises ``cuBLASLtError`` with the status."""
    nt, calls, runner = compiled
    layer, _ = twins(nt, fp8.CurrentScaling(), torch.float32, bias=False)
    x = torch.randn(sum(COUNTS), 64)
    with torch.no_grad():
        layer(x, COUNTS)
        layer(x, COUNTS)
    (built,) = groups(runner)
    n = built.group.size
    _STATUS[0] = 13  # (CUBLAS_STATUS_EXECUTION_FAILED)
    try:
        with pytest.raises(cublasLt.cuBLASLtError) as error:
            built((0,) * n, (0,) * n, (0,) * n, None)
    finally:
        _STATUS[0] = 0
    assert error.value.status == 13


@needs_extension
def test_group_arguments_are_checked():
    """``MatmulGroup`` refuses members that are not compiled parts and calls with address tuples of the
    wrong length, naming what it takes."""
    from nvmath import _fastcall

    with pytest.raises(ValueError, match="non-empty tuple"):
        _fastcall.MatmulGroup((), 0)
    with pytest.raises(TypeError, match="compiled_parts dicts"):
        _fastcall.MatmulGroup((1,), 0)
    with pytest.raises(KeyError, match="call"):
        _fastcall.MatmulGroup(({},), 0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16-bias-fused"])
def test_pure_path_runs_members_on_base_offsets_bit_identically(compiled, monkeypatch, dtype):
    """Pure-Python path (no group can be built): a memoised product runs each member's address run on
    the bases' addresses plus the members' offsets (no views made), equal bit for bit to a twin whose
    products make the views every step."""
    nt, calls, runner = compiled
    monkeypatch.setattr(fastpath, "_COMPILED", None)
    layer, twin = twins(nt, fp8.DelayedScaling(), dtype, bias=dtype == torch.bfloat16)
    x = torch.randn(sum(COUNTS), 64, dtype=dtype).requires_grad_()
    gs = [torch.randn(sum(COUNTS), 32, dtype=dtype) for _ in range(3)]
    got = steps(nt, layer, x, gs, COUNTS)
    assert not groups(runner) and all(m.offsets is not None for m in runner._memo.values())
    runner.clear()
    monkeypatch.setattr(R, "_offsets", lambda *args: None)
    want = steps(nt, twin, x, gs, COUNTS)
    for step_got, step_want in zip(got, want):
        for a, b in zip(step_got, step_want):
            assert torch.equal(a, b)


def test_pure_path_builds_no_group(monkeypatch):
    """With the compiled path off there is no group: the per-group runs launch every GEMM."""
    monkeypatch.setattr(fastpath, "_COMPILED", None)
    assert GG.build([object()]) is None


@pytest.mark.gpu
@pytest.mark.parametrize("recipe", RECIPES, ids=["current", "delayed"])
def test_gpu_compiled_group_equals_per_group_launches(recipe, monkeypatch):
    """On the GPU (compiled path on): an 8-group bf16 layer's steps with each product's GEMMs in one
    compiled call equal, bit for bit, a twin's steps with per-group launches (groups switched off)."""
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA device")
    if torch.cuda.get_device_capability() < (8, 9):
        pytest.skip("FP8 needs compute capability 8.9")
    import nvmath.torch as nt
    from nvmath.torch._grouped_fp8_gemms import grouped_fp8_gemms

    if not fastpath.available():
        pytest.skip("the compiled path is off (nvmath._fastcall not built or NVMATH_PURE_PYTHON set)")
    counts = [256, 128, 0, 512, 64, 128, 16, 432]
    torch.manual_seed(5)
    layer = nt.GroupedLinear(8, 512, 256, dtype=torch.bfloat16, device="cuda", fp8=recipe)
    twin = nt.GroupedLinear(8, 512, 256, dtype=torch.bfloat16, device="cuda", fp8=recipe)
    twin.load_state_dict(layer.state_dict())
    x = torch.randn(sum(counts), 512, dtype=torch.bfloat16, device="cuda").requires_grad_()
    gs = [torch.randn(sum(counts), 256, dtype=torch.bfloat16, device="cuda") for _ in range(4)]
    grouped_fp8_gemms.clear()
    got = steps(nt, layer, x, gs, counts)
    made = groups(grouped_fp8_gemms)
    assert len(made) == 3 and all(g.group.calls >= 2 for g in made)
    grouped_fp8_gemms.clear()
    monkeypatch.setattr(R, "build_group", lambda runs: None)
    want = steps(nt, twin, x, gs, counts)
    torch.cuda.synchronize()
    for step_got, step_want in zip(got, want):
        for a, b in zip(step_got, step_want):
            assert torch.equal(a, b)
    grouped_fp8_gemms.clear()
