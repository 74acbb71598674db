"""Fused FP8 GEMM configurations (nvmath.torch._fp8_epilogs): what goes to the planned Matmul, the
torch emulation against a float64 reference, refusals falling back; on the fake GPU the real planner
accepts every configuration the FP8 MLP block uses; on the H200 the fused GEMMs against the emulation."""

from __future__ import annotations

import typing

import pytest

torch = pytest.importorskip("torch")

from nvmath.torch import _capture, _fp8_mlp
from nvmath.torch._fp8_epilogs import FP8EpilogGemms, GemmConfig, emulate

E4, E5, BF16, F16 = torch.float8_e4m3fn, torch.float8_e5m2, torch.bfloat16, torch.float16


def rel(a, b):
    return float((a.double() - b.double()).norm() / b.double().norm())


def fp8_operand(shape, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=g) * 3).to(dtype)


def gelu64(z):
    return 0.5 * z * (1 + torch.tanh(0.7978845608028654 * (z + 0.044715 * z**3)))


def test_block_configs_name_epilog_dtypes_and_scales():
    """fc1 under delayed scaling: GELU_AUX_BIAS, e4m3 D with result_amax, a float16 bias and cuBLASLt's
    default float16 aux (C is float16 over an FP8 D; no aux type asked for: cuBLASLt 13.1 refuses a
    bfloat16 one there); otherwise D, bias and aux in the layer's dtype."""
    c = _fp8_mlp.fc1_config(BF16, True, E4)
    assert (c.epilog, c.result, c.bias, c.aux_type, c.aux_dtype, c.result_amax, c.fp8_result) == (
        "GELU_AUX_BIAS", E4, F16, None, F16, True, True)  # fmt: skip
    c = _fp8_mlp.fc1_config(F16, False, None)
    assert (c.epilog, c.result, c.bias, c.aux_type, c.aux_dtype, c.result_amax) == (
        "GELU_AUX", F16, None, None, F16, False)  # fmt: skip
    assert _fp8_mlp.fc1_config(BF16, True, None).aux_dtype == BF16
    assert GemmConfig("GELU_AUX", E4, aux_type=BF16).aux_dtype == BF16
    assert _fp8_mlp.fc2_config(BF16) == GemmConfig("BIAS", BF16, bias=BF16)
    assert _fp8_mlp.dgelu_config(BF16) == GemmConfig("DGELU", BF16)


def test_matmul_arguments():
    """The options and plan arguments a config gives the Matmul (result type, result_amax, epilog,
    the aux type preference)."""
    from nvmath._internal.dtypes import CudaDataType
    from nvmath.linalg.advanced import MatmulEpilog

    options, plan = _fp8_mlp.fc1_config(BF16, True, E4).matmul_arguments()
    assert options == {"result_type": CudaDataType.CUDA_R_8F_E4M3, "result_amax": True}
    assert plan == {"epilog": MatmulEpilog.GELU_AUX_BIAS}  # (no aux type: cuBLASLt's default)
    _, plan = GemmConfig("GELU_AUX", BF16, aux_type=F16).matmul_arguments()
    assert plan["preferences"] == {"epilog": {"aux_type": CudaDataType.CUDA_R_16F}}
    options, plan = _fp8_mlp.dgelu_config(F16).matmul_arguments()
    assert options == {"result_type": CudaDataType.CUDA_R_16F} and plan == {"epilog": MatmulEpilog.DGELU}


@pytest.mark.parametrize(
    "kwargs, message",
    [({"epilog": "DRELU", "result": BF16}, "epilog must be one of"),
     ({"epilog": "BIAS", "result": BF16, "result_amax": True}, "result_amax needs an FP8 result")],
)  # fmt: skip
def test_bad_config_refused(kwargs, message):
    """An epilog the block does not use, or result_amax over a wide D, raise ValueError."""
    with pytest.raises(ValueError, match=message):
        GemmConfig(**kwargs)


def test_emulation_equals_float64_reference():
    """emulate(): fc1 (bias rounded to float16, GELU on the float32 accumulator, e4m3 D with its scale,
    the amax before the scale, the aux in float16) and DGELU equal a float64 reference."""
    qa, qb = fp8_operand((32, 64), E4, 0), fp8_operand((16, 64), E4, 1)
    ia, ib, s = torch.tensor(0.25), torch.tensor(0.5), torch.tensor(3.0)
    bias = torch.randn(32, dtype=BF16)
    d, ex = emulate(_fp8_mlp.fc1_config(BF16, True, E4), qa, qb, ia, ib, d_scale=s, bias=bias)
    z = qa.double() @ qb.double().T * 0.125 + bias.to(F16).double()[:, None]
    h = gelu64(z)
    assert d.dtype == E4 and torch.equal(d, (h * 3).float().clamp(-448, 448).to(E4))
    assert float(ex["result_amax"]) == pytest.approx(float(h.abs().max()), rel=1e-6)
    assert ex["gelu_aux"].dtype == F16 and rel(ex["gelu_aux"], z) < 1e-3  # (float16: 2^-11 relative)
    qg = fp8_operand((16, 64), E5, 2)
    dz, _ = emulate(GemmConfig("DGELU", BF16), qa, qg, ia, ib, gelu_aux=ex["gelu_aux"])
    aux = ex["gelu_aux"].double().requires_grad_()
    gelu64(aux).sum().backward()
    dgelu = aux.grad  # d gelu / dz, elementwise
    assert rel(dz, (qa.double() @ qg.double().T * 0.125) * dgelu) < 1e-2


def test_refusal_is_remembered_and_reported(monkeypatch):
    """A config cuBLASLt refuses at planning: supported() is False (tried once per problem, a lookup
    after that), report() names it; another config still plans."""
    gemms = FP8EpilogGemms()
    calls = []

    def refuse(cfg, *args, **kwargs):
        calls.append(cfg.epilog)
        if cfg.epilog == "BIAS":
            raise ValueError("no algorithm")

    monkeypatch.setattr(gemms, "_planned", refuse)
    qa, qb = fp8_operand((32, 64), E4, 0), fp8_operand((16, 64), E4, 1)
    monkeypatch.setattr(torch.Tensor, "is_cuda", property(lambda self: True))
    monkeypatch.setattr(_capture, "_is_capturing", lambda: False)  # (CPU torch: no capture query)
    cfg = _fp8_mlp.fc2_config(BF16)
    assert not gemms.supported(cfg, qa, qb) and not gemms.supported(cfg, qa, qb)
    assert gemms.supported(GemmConfig("DGELU", BF16), qa, qb, aux_dtype=BF16)
    assert gemms.supported(GemmConfig("DGELU", BF16), qa, qb, aux_dtype=BF16)
    assert calls == ["BIAS", "DGELU"]
    ((what, why),) = gemms.report().items()
    assert "BIAS" in what and "no algorithm" in why


class _Recorder:
    """Stands in for nvmath.linalg.advanced.Matmul: records the constructor and plan arguments."""

    made: typing.ClassVar[list] = []

    def __init__(self, a, b, **kwargs):
        self.args = {"a": a, "b": b, **kwargs}
        _Recorder.made.append(self)

    def plan(self, **kwargs):
        self.args["plan"] = kwargs

    def execute(self):
        return torch.zeros(self.args["a"].shape[0], self.args["b"].shape[1]), {"result_amax": torch.ones(1)}

    def reset_operands(self, **kwargs):
        self.args["reset"] = kwargs

    def release_operands(self):
        pass

    def free(self):
        pass


def test_planned_path_passes_scales_bias_and_epilog(monkeypatch):
    """The planned path hands Matmul the FP8 operands (b transposed: the TN layout), the dequantization
    scales of a and b and the D scale, the bias as a float16 column, the epilog and the aux type; a
    second call resets operands, scales and bias on the same planner."""
    import nvmath.linalg.advanced as adv

    _Recorder.made = []
    monkeypatch.setattr(adv, "Matmul", _Recorder)
    gemms = FP8EpilogGemms()
    qa, qb = fp8_operand((32, 64), E4, 0), fp8_operand((16, 64), E4, 1)
    cfg = _fp8_mlp.fc1_config(BF16, True, E4)
    ia, ib, s = torch.tensor(0.25), torch.tensor(0.5), torch.tensor(3.0)
    bias = torch.randn(32, dtype=BF16)
    for _ in range(2):
        gemms._planned(cfg, qa, qb, ia, ib, s, bias.to(cfg.bias), None)
    (mm,) = _Recorder.made
    a = mm.args
    assert a["a"] is qa and a["b"].data_ptr() == qb.data_ptr() and a["b"].shape == (64, 16)
    assert a["b"].stride() == (1, 64)  # qb.T: K-contiguous (the TN layout)
    assert set(a["quantization_scales"]) == {"a", "b", "d"} and float(a["quantization_scales"]["d"]) == 3.0
    assert a["options"]["result_amax"] and a["plan"]["epilog"].name == "GELU_AUX_BIAS"
    assert a["plan"]["epilog_inputs"]["bias"].dtype == F16 and a["plan"]["epilog_inputs"]["bias"].shape == (
        32,
        1,
    )
    assert (
        a["reset"]["quantization_scales"].keys() == {"a", "b", "d"} and "bias" in a["reset"]["epilog_inputs"]
    )
    assert gemms.plans == 1


# ---------------------------------------------------------------- the real planner on the fake GPU
@pytest.mark.parametrize("name", ["fc1_fp8", "fc1_wide", "fc2", "dgelu"])
def test_fake_gpu_planner_accepts_block_configs(fake_gpu, name):
    """The library's own checks (dtypes, scales, bias dtype, aux type, result_amax) accept every fused
    configuration of the FP8 MLP block, and the result and aux come back with the expected shapes."""
    m, n, k = 32, 16, 64
    qa, qb = fp8_operand((m, k), E4, 0), fp8_operand((n, k), E4 if name != "dgelu" else E5, 1)
    ia, ib, s = torch.tensor([0.25]), torch.tensor([0.5]), torch.tensor([2.0])
    cfg = {"fc1_fp8": _fp8_mlp.fc1_config(BF16, True, E4), "fc1_wide": _fp8_mlp.fc1_config(BF16, True, None),
           "fc2": _fp8_mlp.fc2_config(BF16), "dgelu": _fp8_mlp.dgelu_config(BF16)}[name]  # fmt: skip
    bias = torch.randn(m).to(cfg.bias) if cfg.has_bias else None
    aux = torch.randn(n, m).to(BF16).mT if name == "dgelu" else None
    gemms = FP8EpilogGemms()
    d, ex = gemms._planned(cfg, qa, qb, ia, ib, s if cfg.fp8_result else None, bias, aux), {}
    if isinstance(d, tuple):
        d, ex = d
    assert d.shape == (m, n) and d.dtype == cfg.result
    if cfg.gelu_aux_out:
        assert ex["gelu_aux"].shape == (m, n) and ex["gelu_aux"].dtype == cfg.aux_dtype
    if cfg.result_amax:
        assert ex["result_amax"].shape == (1,)
    if not cfg.fp8_result:  # (the emulated cuBLASLt applies no D scale: compare the wide results)
        want = emulate(cfg, qa, qb, ia, ib, bias=bias, gelu_aux=aux)[0]
        assert rel(d, want) < 1e-2
    gemms.clear()


# ---------------------------------------------------------------- H200
@pytest.fixture
def fp8_gpu():
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    cc = torch.cuda.get_device_capability()
    if cc < (8, 9):
        pytest.skip(f"FP8 needs compute capability 8.9; this GPU has {cc[0]}.{cc[1]}")


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["fc1_fp8", "fc1_wide", "fc2", "dgelu"])
def test_gpu_fused_gemm_matches_emulation(fp8_gpu, name):
    """Each fused configuration plans on cuBLASLt (a refusal fails here, naming cuBLASLt's reason) and
    equals the CPU emulation within FP8 tolerance (an e4m3 D: one e4m3 step, 1/16 relative)."""
    m, n, k = 256, 512, 1024
    qa = fp8_operand((m, k), E4, 0)
    qb = fp8_operand((n, k), E4 if name != "dgelu" else E5, 1)
    ia, ib, s = torch.tensor(0.02), torch.tensor(0.03), torch.tensor(20.0)
    cfg = {"fc1_fp8": _fp8_mlp.fc1_config(BF16, True, E4), "fc1_wide": _fp8_mlp.fc1_config(BF16, True, None),
           "fc2": _fp8_mlp.fc2_config(BF16), "dgelu": _fp8_mlp.dgelu_config(BF16)}[name]  # fmt: skip
    bias = torch.randn(m).to(BF16)
    aux = torch.randn(n, m).to(BF16).mT if name == "dgelu" else None
    gemms = FP8EpilogGemms()
    cuda = {"qa": qa.cuda(), "qb": qb.cuda(), "aux": None if aux is None else aux.mT.contiguous().cuda().mT}
    ok = gemms.supported(cfg, cuda["qa"], cuda["qb"], aux_dtype=None if aux is None else BF16)
    assert ok, gemms.report()
    kw = {"d_scale": s.cuda() if cfg.fp8_result else None, "bias": bias.cuda() if cfg.has_bias else None,
          "gelu_aux": cuda["aux"]}  # fmt: skip
    d, ex = gemms(cfg, cuda["qa"], cuda["qb"], ia.cuda(), ib.cuda(), **kw)
    want, wex = emulate(cfg, qa, qb, ia, ib, d_scale=s if cfg.fp8_result else None,
                        bias=bias if cfg.has_bias else None, gelu_aux=aux)  # fmt: skip
    assert d.shape == want.shape and d.dtype == want.dtype
    assert rel(d.cpu().float(), want.float()) < (0.07 if cfg.fp8_result else 1e-2)
    for key, value in wex.items():
        assert ex[key].dtype == value.dtype, key  # (fc1_fp8: cuBLASLt's default float16 aux)
        assert rel(ex[key].cpu().float().reshape(value.shape), value.float()) < 1e-2, key
    gemms.clear()


# ---------------------------------------------------------------- CUDA graph capture
def test_untried_config_inside_a_capture_raises_not_refused(monkeypatch):
    """supported() of a problem not tried before a capture raises CaptureError (the warm-up fix) and
    records no refusal (the next eager call still tries it); a verdict made before the capture is
    answered inside it (a lookup)."""
    from nvmath.torch._capture import CaptureError

    gemms = FP8EpilogGemms()
    monkeypatch.setattr(gemms, "_planned", lambda *args, **kwargs: None)
    monkeypatch.setattr(torch.Tensor, "is_cuda", property(lambda self: True))
    qa, qb = fp8_operand((32, 64), E4, 0), fp8_operand((16, 64), E4, 1)
    cfg = _fp8_mlp.fc2_config(BF16)
    monkeypatch.setattr(_capture, "_is_capturing", lambda: True)
    with pytest.raises(CaptureError, match="warm-up"):
        gemms.supported(cfg, qa, qb)
    assert not gemms.report()
    monkeypatch.setattr(_capture, "_is_capturing", lambda: False)
    assert gemms.supported(cfg, qa, qb)
    monkeypatch.setattr(_capture, "_is_capturing", lambda: True)
    assert gemms.supported(cfg, qa, qb)


def test_planners_run_inside_a_capture_are_pinned(monkeypatch):
    """A planner executed inside a CUDA graph capture is pinned: later problems beyond maxsize evict
    the others (least recently used first), never it; clear() frees all and unpins."""
    import nvmath.linalg.advanced as adv

    freed = []

    class Planner(_Recorder):
        def free(self):
            freed.append(self.args["a"].shape[0])

    _Recorder.made = []
    monkeypatch.setattr(adv, "Matmul", Planner)
    gemms = FP8EpilogGemms(maxsize=2)
    cfg = _fp8_mlp.fc2_config(BF16)
    one, bias = torch.ones(()), None
    ops = [(fp8_operand((16 * (i + 1), 64), E4, i), fp8_operand((16, 64), E4, 9)) for i in range(4)]
    gemms._planned(cfg, *ops[0], one, one, None, bias, None)
    monkeypatch.setattr(_capture, "_is_capturing", lambda: True)
    monkeypatch.setattr(torch.Tensor, "is_cuda", property(lambda self: True))
    gemms._planned(cfg, *ops[0], one, one, None, bias, None)  # (a hit inside the capture: pinned)
    monkeypatch.setattr(_capture, "_is_capturing", lambda: False)
    for qa, qb in ops[1:]:
        gemms._planned(cfg, qa, qb, one, one, None, bias, None)
    assert freed == [32, 48]  # (16 pinned; 32 then 48 the least recently used unpinned)
    assert sorted(k[1][0] for k in gemms._planners) == [16, 64]
    gemms.clear()
    assert sorted(freed) == [16, 32, 48, 64] and not gemms._pinned
