"""The FP8 GroupedLinear's grouped kernels and in-place GEMMs (nvmath.torch._grouped_fp8_kernels,
._grouped_fp8_state, ._grouped_fp8_gemms): the grouped cast-transpose launch (its row offsets and grid;
on the host build of the kernel source each group's bytes, amax and partial sums equal the plain
kernel's launch over that group alone, bit for bit), the scaling-state update and current scaling's
scales as kernels (the host build equals the torch update bit for bit), the per-group GEMMs written
straight into the layer's results on the fake GPU; GPU: the same against the per-group and torch
paths."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import nvmath.torch as nt
from nvmath.torch import fp8

RECIPES = [fp8.CurrentScaling(), fp8.DelayedScaling()]


def rel(a, b):
    return float((a.double() - b.double()).norm() / max(float(b.double().norm()), 1e-30))


def test_grouped_launch_offsets_and_grid():
    """The grouped launch's row-offset table covers every group (an empty range for groups without
    rows), its grid is (column strips, the most grid rows any group's own launch has, groups) and each
    group's partial sums get that many rows."""
    from nvmath.torch import _fp8_cast
    from nvmath.torch import _grouped_fp8_kernels as K

    counts = [32, 0, 16, 80, 0]
    offsets, shape, rows = K.grouped_launch(K.bounds_of(counts), 5, 64)
    assert offsets == [0, 32, 32, 48, 128, 128] and shape == (1, 2, 5) and rows == 2
    moe = [4096, 3072, 2560, 2048, 1792, 1280, 1024, 512]
    offsets, shape, rows = K.grouped_launch(K.bounds_of(moe), 8, 4096)
    assert offsets[-1] == sum(moe) and shape == (*_fp8_cast.grid(4096, 4096), 8) and rows == shape[1]


def test_grouped_kernel_equals_one_launch_per_group_bit_for_bit(host):
    """The grouped cast-transpose (host build) writes, for every group, exactly what the plain kernel
    launched over that group's rows alone writes: FP8 bytes in both orders, amax and the partial column
    sums bit for bit (its grid rows the group's own; the rows beyond them stay zero)."""
    import numpy as np

    from nvmath.torch import _fp8_cast
    from nvmath.torch import _grouped_fp8_kernels as K

    torch.manual_seed(21)
    counts, cols = [96, 0, 32, 160], 128
    monkey_grid = _fp8_cast.TARGET_BLOCKS
    bounds = K.bounds_of(counts)
    x = (torch.randn(sum(counts), cols) * 5).to(torch.bfloat16)
    scale = torch.tensor([30.0, 1.0, 3.0, 50.0])
    offsets, shape, rows = K.grouped_launch(bounds, 4, cols)
    q = torch.zeros(x.shape, dtype=torch.uint8)
    qt = torch.zeros(x.numel(), dtype=torch.uint8)
    amax = torch.zeros(4, dtype=torch.float32)
    partial = torch.zeros((4, rows, cols), dtype=torch.float32)
    table = torch.tensor(offsets, dtype=torch.int64)
    ptrs = [t.data_ptr() for t in (x, q, qt, scale, amax, partial, table)]
    assert host.lib.host_cast_grouped(0, 0, *ptrs, cols, rows, monkey_grid, *shape) == 0
    bits = x.view(torch.int16).numpy().view(np.uint16)
    for g, s, e in bounds:
        one = host.cast(bits[s:e], "bfloat16", float(scale[g]), False)
        gy = _fp8_cast.grid(e - s, cols)[1]
        assert np.array_equal(q[s:e].numpy(), one["q"])
        assert np.array_equal(qt[s * cols : e * cols].view(cols, e - s).numpy(), one["qt"])
        assert amax[g].item() == one["amax"]
        assert np.array_equal(partial[g, :gy].numpy().view(np.uint32), one["partial"].view(np.uint32))
        assert not partial[g, gy:].any()
    assert amax[1].item() == 0 and not partial[1].any()


def test_current_scaling_second_pass_measures_into_the_first_pass_amaxes(host, monkeypatch):
    """Current scaling quantizes in two passes; the quantizing pass takes the amax-only pass's tensor
    (no zeros of its own): the host-built grouped kernel run again into amaxes it already wrote leaves
    them bit for bit (a max of equal values, inf and NaN groups too), and quantize_role hands the first
    pass's tensor (the caller's amax_out where given) to the second."""
    import numpy as np

    from nvmath.torch import _fp8_cast
    from nvmath.torch import _grouped_fp8_kernels as K
    from nvmath.torch._grouped_fp8_state import GroupedScalingState

    counts, cols = [64, 32, 96], 64
    bounds = K.bounds_of(counts)
    x = (torch.randn(sum(counts), cols) * 3).to(torch.bfloat16)
    x[70, 3], x[100, 5] = float("inf"), float("nan")
    offsets, shape, rows = K.grouped_launch(bounds, 3, cols)
    table = torch.tensor(offsets, dtype=torch.int64)
    amax = torch.zeros(3, dtype=torch.float32)
    first = [x.data_ptr(), 0, 0, 0, amax.data_ptr(), 0, table.data_ptr()]
    assert host.lib.host_cast_grouped(0, 0, *first, cols, rows, _fp8_cast.TARGET_BLOCKS, *shape) == 0
    once = amax.numpy().view(np.uint32).copy()
    q, qt = torch.zeros(x.shape, dtype=torch.uint8), torch.zeros(x.numel(), dtype=torch.uint8)
    scale = torch.tensor([2.0, 4.0, 8.0])
    second = [x.data_ptr(), q.data_ptr(), qt.data_ptr(), scale.data_ptr(), amax.data_ptr(), 0,
              table.data_ptr()]
    assert host.lib.host_cast_grouped(0, 0, *second, cols, rows, _fp8_cast.TARGET_BLOCKS, *shape) == 0
    assert np.array_equal(amax.numpy().view(np.uint32), once) and amax[0] > 0 and amax[1] == float("inf")

    passes = []
    real = K.quantize_groups

    def seen(x, bounds, groups, dtype, scale, colsum=False, amax_out=None, *more):
        made = real(x, bounds, groups, dtype, scale, colsum, amax_out, *more)
        passes.append((amax_out, made.amax))
        return made

    monkeypatch.setattr(K, "quantize_groups", seen)
    state = GroupedScalingState(fp8.CurrentScaling(), 3)
    out = torch.zeros(3)
    K.quantize_role(state, "input", x.float(), bounds, amax_out=out)
    K.quantize_role(state, "grad_output", x.float(), bounds)
    (given, a1), (second_in, a2), (none, b1), (second_b, b2) = passes
    assert given is out and a1 is out and second_in is out and a2 is out
    assert none is None and second_b is b1 and b2 is b1


GROUPED_RECIPES = [
    fp8.CurrentScaling(), fp8.DelayedScaling(amax_history_len=1),
    fp8.DelayedScaling(amax_history_len=5, margin=1),
    fp8.DelayedScaling(amax_history_len=300, amax_compute_algo="most_recent"),
    fp8.DelayedScaling(amax_history_len=600),
]  # fmt: skip


@pytest.mark.parametrize("recipe", GROUPED_RECIPES, ids=["current", "d1", "d5-margin", "d300-recent", "d600"])
def test_grouped_record_kernel_equals_the_torch_update(host, recipe):
    """The grouped state update's kernel (host build; one block per role and group, the history shifted
    in chunks of 256) leaves the state exactly as the torch operations of GroupedScalingState.record
    do -- scales, histories, found_inf -- and returns the same scales (NaN where an amax is not
    finite), over steps with groups that did not run (the input role only), a zero amax, inf and NaN."""
    import ctypes

    from nvmath.torch import _grouped_fp8_state as S

    torch.manual_seed(23)
    groups = 5
    twin, state = S.GroupedScalingState(recipe, groups), S.GroupedScalingState(recipe, groups)
    for step in range(4):
        amax = torch.rand(2, groups) * 10
        amax[0, 1], amax[1, 3] = (float("inf"), float("nan")) if step == 2 else (0.0, amax[1, 3])
        used = twin.scale[:2].clone() if recipe.delayed else torch.rand(2, groups) + 0.5
        active = torch.tensor([True, False, True, True, step != 1])
        want = twin.record("input", amax, used, active, active_rows=1)
        out = torch.empty(2, groups)
        i = S.ROLES.index("input")
        hist = state.amax_history[:, i]
        ptr = lambda t: ctypes.c_void_p(t.data_ptr())  # noqa: E731
        host.lib.host_grouped_record(
            ptr(amax), ptr(used), ptr(active), 1, ptr(hist), ptr(state.scale[i]), ptr(state.found_inf[i]),
            ptr(out), 2, groups, hist.shape[0], hist.stride(0), int(recipe.delayed),
            int(getattr(recipe, "amax_compute_algo", "") == "max"), fp8.FP8_MAX[state.dtype("input")],
            2.0**recipe.margin,
        )  # fmt: skip
        torch.testing.assert_close(out, want, rtol=0, atol=0, equal_nan=True)
        for name in ("scale", "amax_history", "found_inf"):
            assert torch.equal(getattr(state, name), getattr(twin, name)), name
    # (step 2: the weight role's NaN of group 3 counts; the input's inf of group 1, which did not run, not)
    assert state.found_inf.tolist() == [[0] * 5, [0, 0, 0, 1, 0], [0] * 5]


@pytest.mark.parametrize("recipe", GROUPED_RECIPES[1:], ids=["d1", "d5-margin", "d300-recent", "d600"])
def test_grouped_record_kernel_with_used_the_state_scales_themselves(host, recipe):
    """Delayed scaling's forward hands the state's own (2, G) scale rows as ``used`` (a view, no copy):
    the update kernel (host build) reads each group's used scale before it writes that group's new
    one, so the state and the returned 1 / used equal the torch update's given a copy of the scales."""
    import ctypes

    from nvmath.torch import _grouped_fp8_state as S

    torch.manual_seed(29)
    groups = 5
    twin, state = S.GroupedScalingState(recipe, groups), S.GroupedScalingState(recipe, groups)
    ptr = lambda t: ctypes.c_void_p(t.data_ptr())  # noqa: E731
    for step in range(4):
        amax = torch.rand(2, groups) * 10
        amax[1, 2] = float("inf") if step == 2 else amax[1, 2]
        active = torch.tensor([True, step != 1, True, True, False])
        want = twin.record("input", amax, twin.scale[:2].clone(), active, active_rows=1)
        used = state.forward_scales()
        assert used.data_ptr() == state.scale.data_ptr()
        out = torch.empty(2, groups)
        hist = state.amax_history[:, 0]
        host.lib.host_grouped_record(
            ptr(amax), ptr(used), ptr(active), 1, ptr(hist), ptr(state.scale[0]), ptr(state.found_inf[0]),
            ptr(out), 2, groups, hist.shape[0], hist.stride(0), 1,
            int(recipe.amax_compute_algo == "max"), fp8.FP8_MAX[state.dtype("input")], 2.0**recipe.margin,
        )  # fmt: skip
        torch.testing.assert_close(out, want, rtol=0, atol=0, equal_nan=True)
        for name in ("scale", "amax_history", "found_inf"):
            assert torch.equal(getattr(state, name), getattr(twin, name)), name


@pytest.mark.parametrize("margin", [0, 2])
def test_grouped_scale_kernel_equals_scale_from_amax(host, margin):
    """Current scaling's per-group scales by the kernel (host build) equal the torch sequence bit for bit:
    fp8_max / amax / 2**margin, the old scale where the amax is 0, inf, NaN or so small that the
    quotient overflows."""
    import ctypes

    from nvmath.torch import _grouped_fp8_state as S

    groups = 300  # (more than one block of 256)
    state = S.GroupedScalingState(fp8.CurrentScaling(margin=margin), groups)
    state.scale.uniform_(0.5, 2.0)
    amax = torch.rand(groups) * 100
    amax[:5] = torch.tensor([0.0, float("inf"), float("nan"), 1e-40, 448.0])
    want = state.current_scale("grad_output", amax)
    out = torch.empty(groups)
    i = S.ROLES.index("grad_output")
    ptr = lambda t: ctypes.c_void_p(t.data_ptr())  # noqa: E731
    fmax = fp8.FP8_MAX[state.dtype("grad_output")]
    host.lib.host_grouped_scale(ptr(amax), ptr(state.scale[i]), ptr(out), groups, fmax, 2.0**margin)
    assert torch.equal(out, want) and torch.equal(out[:4], state.scale[i, :4])


def test_grouped_gemms_write_into_the_layer_results(fake_gpu, monkeypatch):
    """On the grouped planners every GEMM runs on addresses straight into its rows of one ``y`` /
    ``dx`` and its slice of the (G, N, K) ``dw`` (no pointer-swap execute, no copy): the layer's
    outputs and gradients equal the CPU emulation of a twin layer."""
    from nvmath.torch import _grouped_fp8_gemms as R

    runner = R.GroupedFP8Gemms()
    runner.cpu_planned = True
    monkeypatch.setattr(R, "grouped_fp8_gemms", runner)
    monkeypatch.setattr(R, "D_ALIGNMENT", 16)  # (CPU allocations are 64-byte aligned; CUDA's 512)

    def refuse(*args, **kwargs):
        raise AssertionError("a product ran other than on addresses into the layer's result")

    monkeypatch.setattr(R.GroupedFP8Gemms, "_swap_execute", staticmethod(refuse))
    fits = R._fits
    monkeypatch.setattr(R, "_fits", lambda t, layout: fits(t, layout) or refuse())
    torch.manual_seed(22)
    counts = [32, 0, 16, 48]
    for dtype in (torch.bfloat16, torch.float32):  # (bias fused into the GEMM / added after it)
        layer = nt.GroupedLinear(4, 64, 32, dtype=dtype, fp8=fp8.DelayedScaling())
        twin = nt.GroupedLinear(4, 64, 32, dtype=dtype, fp8=fp8.DelayedScaling())
        twin.load_state_dict(layer.state_dict())
        x, g = torch.randn(sum(counts), 64, dtype=dtype), torch.randn(sum(counts), 32, dtype=dtype)
        for _ in range(2):
            runner.cpu_planned = True
            xg = x.clone().requires_grad_()
            got = torch.autograd.grad(layer(xg, counts), [xg, layer.weight, layer.bias], grad_outputs=g)
            runner.cpu_planned = False
            xw = x.clone().requires_grad_()
            want = torch.autograd.grad(twin(xw, counts), [xw, twin.weight, twin.bias], grad_outputs=g)
            for a, b in zip(got, want):
                assert rel(a, b) < (1e-6 if dtype == torch.float32 else 1e-2)
            assert not got[1][1].any()  # (group 1 has no tokens: zero weight gradient)
        assert runner.enabled and all(e.address is not None for e in runner._entries.values())
    runner.clear()



# ---------------------------------------------------------------- GPU
@pytest.mark.gpu
def test_gpu_grouped_cast_equals_one_launch_per_group():
    """On the GPU the one grouped cast-transpose launch writes, for every group, the FP8 bytes (both
    orders) and amax of the plain kernel run over that group's rows alone, bit for bit, and its column
    sums to float32 rounding; groups without rows read 0."""
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA device")
    from nvmath.torch import _fp8_cast
    from nvmath.torch import _grouped_fp8_kernels as K

    torch.manual_seed(24)
    counts, cols = [4096, 0, 512, 1040, 16], 4096
    bounds = K.bounds_of(counts)
    x = torch.randn(sum(counts), cols, device="cuda", dtype=torch.bfloat16) * 3
    scale = torch.rand(5, device="cuda") * 50 + 1
    got = K._kernel_run(x, bounds, 5, torch.float8_e4m3fn, scale, True)
    assert got is not None
    for g, s, e in bounds:
        one = _fp8_cast.cast_transpose(x[s:e], scale[g], torch.float8_e4m3fn, colsum=True)
        assert torch.equal(got.q[s:e].view(torch.uint8), one.q.view(torch.uint8))
        assert torch.equal(got.transposed(s, e).view(torch.uint8), one.qt.view(torch.uint8))
        assert torch.equal(got.amax[g], one.amax)
        torch.testing.assert_close(got.colsum[g], one.colsum, rtol=1e-6, atol=1e-3)
    assert got.amax[1] == 0 and not got.colsum[1].any()


@pytest.mark.gpu
@pytest.mark.parametrize("recipe", [*RECIPES, fp8.DelayedScaling(amax_history_len=16, margin=1)],
                         ids=["current", "delayed", "delayed-16-margin"])  # fmt: skip
def test_gpu_state_kernels_equal_the_torch_update(recipe, monkeypatch):
    """On the GPU the grouped state's update kernel and current scaling's per-group scale kernel leave
    the state and return the scales exactly as the torch operations do, over steps with an inactive
    group, a zero amax and a non-finite one."""
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA device")
    from nvmath.torch import _fp8_cast
    from nvmath.torch import _grouped_fp8_state as S

    torch.manual_seed(25)
    kernel, twin = (S.GroupedScalingState(recipe, 6, "cuda") for _ in range(2))
    for step in range(4):
        amax = torch.rand(2, 6, device="cuda") * 10
        amax[0, 1] = 0.0
        if step == 2:
            amax[1, 4] = float("inf")
        active = torch.tensor([True, True, False, True, True, step != 1], device="cuda")
        used_k = kernel.current_scale("input", amax[0]) if not recipe.delayed else kernel.scale[0].clone()
        got = kernel.record("input", amax, torch.stack((used_k, kernel.scale[1])), active, active_rows=1)
        with monkeypatch.context() as m:
            m.setattr(_fp8_cast, "grouped_record", lambda *a, **k: None)
            m.setattr(_fp8_cast, "grouped_scale", lambda *a, **k: None)
            used_t = twin.current_scale("input", amax[0]) if not recipe.delayed else twin.scale[0].clone()
            want = twin.record("input", amax, torch.stack((used_t, twin.scale[1])), active, active_rows=1)
        assert torch.equal(used_k, used_t)
        torch.testing.assert_close(got, want, rtol=0, atol=0, equal_nan=True)
        for name in ("scale", "amax_history", "found_inf"):
            assert torch.equal(getattr(kernel, name), getattr(twin, name)), name


def _kernel_params(name: str) -> list[str]:
    """The C parameter declarations of kernel ``name`` in the kernels' source, in order."""
    import re

    from nvmath.torch._fp8_cast_source import SOURCE

    m = re.search(rf"\b{name}\s*\((.*?)\)\s*\{{", SOURCE, re.S)
    assert m, name
    return [" ".join(p.split()) for p in m.group(1).split(",")]


def _width_kind(param: str) -> tuple[int, str]:
    """(bytes, kind) a kernel parameter takes by value: pointers 8, long long 8, int 4, float 4."""
    if "*" in param:
        return 8, "u"
    kinds = {"long long": (8, "i"), "int": (4, "i"), "float": (4, "f")}
    for ctype, wk in kinds.items():
        if param.split()[-2:-1] == [ctype.split()[-1]] or param.startswith(ctype):
            return wk
    raise AssertionError(f"unexpected parameter {param!r}")


def test_grouped_cast_launch_arguments_match_the_kernel_parameters():
    """The grouped cast-transpose's argument vector has the kernel's parameters, in order and in their
    widths (a launch passes raw bytes: a missing ``aux`` shifted every later argument and made the
    kernel read out of bounds on the H200; the host build, called from C, could not see it)."""
    import numpy as np

    from nvmath.torch._grouped_fp8_kernels import launch_args

    x = torch.zeros((32, 16), dtype=torch.bfloat16)
    amax, table = torch.zeros(2), torch.zeros(3, dtype=torch.int64)
    args = launch_args(x, None, None, None, amax, None, table, 16, 1)
    params = _kernel_params("nvmath_cast_transpose_grouped")
    assert len(args) == len(params), (params, args)
    for arg, param in zip(args, params):
        width, kind = _width_kind(param)
        assert np.asarray(arg).dtype.itemsize == width and np.asarray(arg).dtype.kind == kind, (param, arg)
    assert int(args[0]) == x.data_ptr() and int(args[1]) == 0  # x, then aux (none in this pass)
    assert int(args[5]) == amax.data_ptr() and int(args[7]) == table.data_ptr()
