"""FP8 recipes and scaling state (nvmath.torch._fp8) against a float64 reference of the same arithmetic.

The reference: ``s = (F / amax) / 2**margin`` in float64, ``x * s`` rounded to float32, clamped to +-F
and rounded to the FP8 format by torch's float8 cast (round to nearest even); dequantized as
``q / s``. Recipes, formats, history handling, the non-finite amax skip-step policy and state_dict.
"""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

from nvmath.torch import fp8

E4, E5 = torch.float8_e4m3fn, torch.float8_e5m2


def ref_scale(amax: float, fp8_max: float, margin: int) -> float:
    return (fp8_max / amax) / 2.0**margin


def ref_quantize(x: torch.Tensor, s: float, dtype: torch.dtype) -> torch.Tensor:
    """float64 reference: x*s in float32 (as the GPU does), saturated, cast by torch."""
    f = fp8.FP8_MAX[dtype]
    xs = (x.double() * torch.tensor(s, dtype=torch.float32).double()).float()
    return xs.double().clamp(-f, f).to(dtype)


# ---------------------------------------------------------------- recipes
def test_recipe_defaults_and_formats():
    """HYBRID: e4m3 forward, e5m2 gradients; E4M3 everywhere; strings accepted."""
    d = fp8.DelayedScaling()
    assert d.fp8_format is fp8.Format.HYBRID and d.amax_history_len == 1024 and d.amax_compute_algo == "max"
    assert d.fp8_format.dtype("input") == E4 and d.fp8_format.dtype("grad_output") == E5
    c = fp8.CurrentScaling(margin=2, fp8_format="e4m3")
    assert c.fp8_format.dtype("grad_output") == E4 and c.margin == 2


@pytest.mark.parametrize(
    "kwargs, word",
    [({"margin": -1}, "margin"), ({"margin": 1.5}, "margin"), ({"fp8_format": "e5m2"}, "fp8_format"),
     ({"amax_history_len": 0}, "amax_history_len"), ({"amax_compute_algo": "mean"}, "amax_compute_algo")],
)  # fmt: skip
def test_recipe_bad_arguments(kwargs, word):
    """Bad recipe arguments raise ValueError naming the argument."""
    with pytest.raises(ValueError, match=word):
        fp8.DelayedScaling(**kwargs)


def test_mxfp8_refused_on_cpu():
    """MXFP8 block scaling is refused on CPU tensors, naming the capability it needs."""
    from nvmath.torch._fp8 import check_recipe

    with pytest.raises(RuntimeError, match="10.0"):
        check_recipe(fp8.MXFP8BlockScaling(), torch.device("cpu"))
    with pytest.raises(TypeError, match="recipe"):
        check_recipe("delayed", torch.device("cpu"))


def test_fp8_refused_below_cc_89(monkeypatch):
    """An FP8 recipe on a GPU of compute capability < 8.9 is refused, naming the capability."""
    from nvmath.torch import _fp8

    monkeypatch.setattr(_fp8.torch.cuda, "get_device_capability", lambda device=None: (8, 0))
    with pytest.raises(RuntimeError, match=r"8\.9.*8\.0"):
        _fp8.check_recipe(fp8.CurrentScaling(), torch.device("cuda", 0))
    monkeypatch.setattr(_fp8.torch.cuda, "get_device_capability", lambda device=None: (9, 0))
    with pytest.raises(RuntimeError, match=r"10\.0.*9\.0"):
        _fp8.check_recipe(fp8.MXFP8BlockScaling(), torch.device("cuda", 0))


# ---------------------------------------------------------------- quantize / scale math
@pytest.mark.parametrize("dtype", [E4, E5])
@pytest.mark.parametrize("margin", [0, 1, 3])
def test_scale_and_quantize_match_float64_reference(dtype, margin):
    """scale_from_amax and quantize equal the float64 reference; dequantize is within half an ulp."""
    g = torch.Generator().manual_seed(margin)
    x = torch.randn(64, 48, generator=g, dtype=torch.float64) * 3.7
    amax = float(x.abs().max())
    s = fp8.scale_from_amax(torch.tensor(amax), torch.tensor(1.0), fp8.FP8_MAX[dtype], margin)
    assert math.isclose(float(s), ref_scale(amax, fp8.FP8_MAX[dtype], margin), rel_tol=1e-6)
    q = fp8.quantize(x, s, dtype)
    want = ref_quantize(x, float(s), dtype)
    assert q.dtype == dtype and torch.equal(q.view(torch.uint8), want.view(torch.uint8))
    mant = 3 if dtype == E4 else 2
    err = (fp8.dequantize(q, s).double() - x).abs()
    assert bool((err <= x.abs() * 2.0 ** -(mant + 1) + 2.0**-9 / float(s)).all())


def test_quantize_saturates_finite_and_nans_nonfinite():
    """Finite values beyond the format saturate to +-max; a tensor with inf or NaN quantizes to all NaN
    (never a saturated value in place of the non-finite one)."""
    q = fp8.quantize(torch.tensor([1e6, -1e6, 1.0]), torch.tensor(1.0), E4).float()
    assert q.tolist() == [448.0, -448.0, 1.0]
    for bad in (float("inf"), float("-inf"), float("nan")):
        x = torch.tensor([1.0, bad, 2.0], dtype=torch.bfloat16)
        assert bool(fp8.quantize(x, torch.tensor(1.0), E5).float().isnan().all())
    assert float(fp8.amax_of(torch.tensor([], dtype=torch.bfloat16))) == 0.0


def test_scale_keeps_old_on_zero_or_nonfinite_amax():
    """An amax of 0, inf or NaN keeps the previous scale."""
    old = torch.tensor(0.25)
    for a in (0.0, float("inf"), float("nan")):
        assert float(fp8.scale_from_amax(torch.tensor(a), old, 448.0, 0)) == 0.25


# ---------------------------------------------------------------- scaling state
def test_current_scaling_uses_this_tensors_amax():
    """Current scaling quantizes a tensor with the scale of its own amax."""
    st = fp8.ScalingState(fp8.CurrentScaling(margin=1))
    x = torch.randn(32, 16, dtype=torch.float64) * 10
    q, s = st.quantize(x, "input")
    want_s = ref_scale(float(x.abs().max()), 448.0, 1)
    assert math.isclose(float(s), want_s, rel_tol=1e-6)
    assert torch.equal(q.view(torch.uint8), ref_quantize(x, float(s), E4).view(torch.uint8))


@pytest.mark.parametrize("algo", ["max", "most_recent"])
def test_delayed_scaling_uses_history(algo):
    """Delayed scaling quantizes with the scale of earlier amaxes, then pushes this amax into the history."""
    st = fp8.ScalingState(fp8.DelayedScaling(amax_history_len=3, amax_compute_algo=algo))
    amaxes = [4.0, 16.0, 2.0, 1.0, 0.5]
    expect_scale = 1.0
    hist: list[float] = []
    for a in amaxes:
        x = torch.tensor([a, -a / 2, 0.1])
        q, s = st.quantize(x, "grad_output")
        assert math.isclose(float(s), expect_scale, rel_tol=1e-6)  # the scale from *earlier* amaxes
        assert torch.equal(q.view(torch.uint8), ref_quantize(x, float(s), E5).view(torch.uint8))
        hist = ([a] + hist)[:3]
        reduced = max(hist) if algo == "max" else hist[0]
        expect_scale = ref_scale(reduced, 57344.0, 0)
    assert st.amax_history[:, 2].tolist() == hist


def test_nonfinite_amax_skips_update_and_optimizer_step():
    """A non-finite amax leaves history and scale as they were, flags it, and optimizer_step skips the step."""
    lin = torch.nn.Linear(2, 2)
    st = fp8.ScalingState(fp8.DelayedScaling(amax_history_len=4))
    lin.add_module("fp8_state", st)
    st.quantize(torch.tensor([3.0]), "input")
    before = {k: v.clone() for k, v in st.state_dict().items() if k != "found_inf"}
    q, _ = st.quantize(torch.tensor([1.0, float("inf")]), "input")
    assert bool(q.float().isnan().all())
    for k, v in before.items():
        assert torch.equal(st.state_dict()[k], v), k
    assert st.nonfinite_count() == 1
    opt = torch.optim.SGD(lin.parameters(), lr=1.0)
    for p in lin.parameters():
        p.grad = torch.ones_like(p)
    w0 = lin.weight.detach().clone()
    assert fp8.optimizer_step(opt, lin) is False and torch.equal(lin.weight, w0)
    assert st.nonfinite_count() == 0
    assert fp8.optimizer_step(opt, lin) is True and not torch.equal(lin.weight, w0)


def test_state_dict_round_trip():
    """Scales, amax histories and flags are buffers: they round-trip through state_dict."""
    a = fp8.ScalingState(fp8.DelayedScaling(amax_history_len=5))
    for v in (1.0, 7.0, 3.0):
        a.quantize(torch.tensor([v]), "weight")
    b = fp8.ScalingState(fp8.DelayedScaling(amax_history_len=5))
    b.load_state_dict(a.state_dict())
    assert set(a.state_dict()) == {"scale", "amax_history", "found_inf"}
    for k in a.state_dict():
        assert torch.equal(a.state_dict()[k], b.state_dict()[k])


def test_fp8_autocast_nesting():
    """fp8_autocast sets the current recipe; nested blocks and enabled=False restore on exit."""
    r1, r2 = fp8.DelayedScaling(), fp8.CurrentScaling()
    assert fp8.current_recipe() is None
    with fp8.fp8_autocast(r1):
        assert fp8.current_recipe() is r1
        with fp8.fp8_autocast(r2):
            assert fp8.current_recipe() is r2
        with fp8.fp8_autocast(r2, enabled=False):
            assert fp8.current_recipe() is None
        assert fp8.current_recipe() is r1
    assert fp8.current_recipe() is None
    with pytest.raises(TypeError, match="recipe"), fp8.fp8_autocast("hybrid"):
        pass


def test_fp8_autocast_blocks_counts_open_blocks_of_every_thread():
    """The layers' per-call flag (``_fp8.autocast_blocks``) has one entry per open block, enabled or not,
    also after an exception in a block; another thread's open block makes it non-empty while this
    thread's recipe stays ``None`` (the layers then ask ``current_recipe``)."""
    import threading

    from nvmath.torch import _fp8

    assert _fp8.autocast_blocks == []
    with fp8.fp8_autocast(fp8.CurrentScaling()), fp8.fp8_autocast(enabled=False):
        assert len(_fp8.autocast_blocks) == 2
    assert _fp8.autocast_blocks == []
    with pytest.raises(KeyError), fp8.fp8_autocast(fp8.CurrentScaling()):
        raise KeyError("inside")
    assert _fp8.autocast_blocks == []
    opened, release, seen = threading.Event(), threading.Event(), []

    def other() -> None:
        with fp8.fp8_autocast(fp8.CurrentScaling()):
            opened.set()
            release.wait(10)

    thread = threading.Thread(target=other)
    thread.start()
    try:
        assert opened.wait(10)
        seen.append((len(_fp8.autocast_blocks), fp8.current_recipe()))
    finally:
        release.set()
        thread.join(10)
    assert seen == [(1, None)] and _fp8.autocast_blocks == []


# ---------------------------------------------------------------- GPU: the one-pass kernel
@pytest.mark.gpu
@pytest.mark.parametrize("wide", [torch.bfloat16, torch.float16, torch.float32])
@pytest.mark.parametrize("dtype", [E4, E5])
def test_gpu_fused_quantize_equals_torch_path(wide, dtype):
    """The one-pass CUDA kernel gives the same FP8 bits as torch's quantize and the same amax
    (finite inputs, values beyond the format included: both saturate)."""
    if not torch.cuda.is_available() or torch.cuda.get_device_capability() < (8, 9):
        pytest.skip("needs a CUDA GPU of compute capability 8.9+ (cvt.rn.satfinite to FP8)")
    from nvmath.torch import _fp8_kernels

    x = (torch.randn(1000, 257, device="cuda") * 50).to(wide)
    s = torch.tensor(7.3, device="cuda")
    out = _fp8_kernels.fused_quantize(x, s, dtype)
    assert out is not None, "the FP8 quantization kernels did not build"
    q, amax = out
    want = fp8.quantize(x, s, dtype)
    assert torch.equal(q.view(torch.uint8), want.view(torch.uint8))
    assert float(amax) == float(x.float().abs().max())


@pytest.mark.gpu
def test_gpu_fused_quantize_in_a_thread_without_context():
    """The quantize kernel launches from a thread where no driver context is current (as torch's
    autograd engine runs a backward): the library makes the device's context current itself."""
    if not torch.cuda.is_available() or torch.cuda.get_device_capability() < (8, 9):
        pytest.skip("needs a CUDA GPU of compute capability 8.9+ (cvt.rn.satfinite to FP8)")
    import threading

    from nvmath._internal import devices
    from nvmath.torch import _fp8_kernels

    x = (torch.randn(300, 64, device="cuda") * 20).to(torch.bfloat16)
    s = torch.tensor(3.0, device="cuda")
    want = fp8.quantize(x, s, E4)
    seen: dict = {}

    def work() -> None:
        try:
            seen["context"] = devices.current_context()
            seen["out"] = _fp8_kernels.fused_quantize(x, s, E4)
        except BaseException as exc:  # noqa: BLE001 (reported on the main thread)
            seen["error"] = exc

    t = threading.Thread(target=work)
    t.start()
    t.join()
    assert "error" not in seen, seen.get("error")
    assert seen["context"] == 0  # the premise: nothing was current in that thread
    q, amax = seen["out"]
    torch.cuda.synchronize()
    assert torch.equal(q.view(torch.uint8), want.view(torch.uint8))
    assert float(amax) == float(x.float().abs().max())


@pytest.mark.gpu
def test_gpu_state_nonfinite_poisons_scale():
    """On CUDA (fused path) a non-finite input leaves the state as it was, flags it, and returns a NaN scale."""
    if not torch.cuda.is_available() or torch.cuda.get_device_capability() < (8, 9):
        pytest.skip("needs a CUDA GPU of compute capability 8.9+")
    st = fp8.ScalingState(fp8.DelayedScaling(amax_history_len=4), device="cuda")
    st.quantize(torch.ones(64, device="cuda", dtype=torch.bfloat16) * 3, "input")
    before = st.amax_history.clone(), st.scale.clone()
    x = torch.ones(64, device="cuda", dtype=torch.bfloat16)
    x[5] = float("inf")
    _, s = st.quantize(x, "input")
    assert bool(s.isnan()) and st.nonfinite_count() == 1
    assert torch.equal(st.amax_history, before[0]) and torch.equal(st.scale, before[1])


def test_state_stays_float32_when_the_model_is_cast():
    """model.to(torch.bfloat16) / .half() casts the parameters, not the FP8 scales and amax histories."""
    m = torch.nn.Module()
    m.fp8_state = fp8.ScalingState(fp8.DelayedScaling(amax_history_len=3))
    m.fp8_state.quantize(torch.tensor([3.0]), "input")
    want = m.fp8_state.scale.clone()
    m.to(torch.bfloat16).half()
    st = m.fp8_state
    assert st.scale.dtype == st.amax_history.dtype == torch.float32 and st.found_inf.dtype == torch.int32
    assert torch.equal(st.scale, want)


def test_nan_kept_per_device_but_not_from_inside_a_capture(monkeypatch):
    """The NaN the non-finite path selects is made once per device and kept; inside a CUDA graph
    capture a fresh one is made and not kept (its fill would run only on replay)."""
    from nvmath.torch import _fp8

    monkeypatch.setattr(_fp8, "_NANS", {})
    t = torch.ones(())
    monkeypatch.setattr(_fp8, "capturing", lambda t: True)
    inside = _fp8._nan_like(t)
    assert math.isnan(float(inside)) and not _fp8._NANS
    monkeypatch.setattr(_fp8, "capturing", lambda t: False)
    kept = _fp8._nan_like(t)
    assert _fp8._nan_like(t) is kept and kept is not inside and math.isnan(float(kept))
