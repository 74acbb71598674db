"""FP8 GELU aux outputs and amax as nvmath-python 1.0 documents them, on a Hopper GPU (cuBLASLt 13.1).

``preferences={"epilog": {"aux_type": CUDA_R_8F_E4M3, "aux_amax": True}}`` with
``epilog_inputs={"aux_quantization_scale": s}`` returns the pre-activation quantized to FP8 (times
``s``) as ``"gelu_aux"`` and its absolute maximum as ``"gelu_aux_amax"``. References are float64 from
torch; GELU is the tanh approximation.
"""

from __future__ import annotations

import math

import pytest

import nvmath.linalg.advanced as adv
from nvmath._errors import CudaLibraryError
from nvmath._internal.dtypes import CudaDataType as T

pytestmark = pytest.mark.gpu

E4M3, E5M2, BF16, F16, F32 = (
    T.CUDA_R_8F_E4M3, T.CUDA_R_8F_E5M2, T.CUDA_R_16BF, T.CUDA_R_16F, T.CUDA_R_32F,
)  # fmt: skip


@pytest.fixture(scope="module")
def torch():
    """torch with a CUDA device of compute capability 8.9+ (FP8), else skip."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA device")
    if torch.cuda.get_device_capability() < (8, 9):
        pytest.skip("FP8 needs compute capability 8.9")
    return torch


def fp8(torch, shape, seed):
    """Quarters in [-1, 1] (exact in e4m3) on the GPU."""
    g = torch.Generator(device="cuda").manual_seed(seed)
    x = torch.randint(-4, 5, shape, generator=g, device="cuda", dtype=torch.int32).double() / 4
    return x.to(torch.float8_e4m3fn)


def gelu(torch, x):
    return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))


def operands(torch, m=64, n=48, k=32):
    a = fp8(torch, (m, k), 1)
    b = fp8(torch, (n, k), 2).T  # column-major: cuBLASLt's TN layout for FP8
    return a, b, a.double() @ b.double()


def rel_err(torch, got, want):
    return float(torch.linalg.norm(got.double() - want) / torch.linalg.norm(want))


def test_fp8_gelu_aux_with_fp8_aux_and_amax(torch):
    """The issue's case: e4m3 operands, GELU_AUX, e4m3 aux with scale 0.1 and aux amax."""
    a, b, pre = operands(torch)
    scales = {"a": 1.0, "b": 1.0, "d": 1.0}
    out, aux = adv.matmul(
        a, b, epilog=adv.MatmulEpilog.GELU_AUX, quantization_scales=scales,
        preferences={"epilog": {"aux_type": E4M3, "aux_amax": True}},
        epilog_inputs={"aux_quantization_scale": 0.1},
    )  # fmt: skip
    assert out.dtype == torch.float8_e4m3fn
    assert set(aux) == {"gelu_aux", "gelu_aux_amax"}
    assert aux["gelu_aux"].dtype == torch.float8_e4m3fn
    assert rel_err(torch, out, gelu(torch, pre)) < 0.07
    m = pre.shape[0]
    assert rel_err(torch, aux["gelu_aux"][:m], pre * 0.1) < 0.07
    amax = float(aux["gelu_aux_amax"].double().item())
    assert amax == pytest.approx(float(pre.abs().max()), rel=0.02)


@pytest.mark.parametrize("aux_type", [E4M3, E5M2], ids=["e4m3", "e5m2"])
@pytest.mark.parametrize("amax", [False, True], ids=["", "amax"])
@pytest.mark.parametrize("bias", [False, True], ids=["", "bias"])
def test_fp8_gelu_aux_combinations_on_fp8_result(torch, aux_type, amax, bias):
    """Every FP8 aux type with and without amax and bias, on an FP8 (e4m3) result: correct values, or
    (xfail) a typed cuBLASLt error for a combination cuBLASLt does not run -- never a wrong result."""
    a, b, pre = operands(torch)
    m = pre.shape[0]
    inputs = {"aux_quantization_scale": 0.5}
    epilog = adv.MatmulEpilog.GELU_AUX
    if bias:
        vec = torch.linspace(-0.5, 0.5, m, device="cuda", dtype=torch.float16)
        inputs["bias"] = vec
        pre = pre + vec.double()[:, None]
        epilog = adv.MatmulEpilog.GELU_AUX_BIAS
    try:
        out, aux = adv.matmul(
            a, b, epilog=epilog, quantization_scales={"a": 1.0, "b": 1.0, "d": 1.0},
            preferences={"epilog": {"aux_type": aux_type, "aux_amax": amax}}, epilog_inputs=inputs,
        )  # fmt: skip
    except CudaLibraryError as exc:  # a combination cuBLASLt 13.1 does not run: a typed error, reported
        pytest.xfail(f"cuBLASLt refuses this combination: {exc}")
    tol = 0.07 if aux_type == E4M3 else 0.14
    assert rel_err(torch, out, gelu(torch, pre)) < 0.07
    assert rel_err(torch, aux["gelu_aux"][:m], pre * 0.5) < tol
    assert ("gelu_aux_amax" in aux) == amax
    if amax:
        assert float(aux["gelu_aux_amax"].double().item()) == pytest.approx(float(pre.abs().max()), rel=0.02)


@pytest.mark.parametrize("result", [BF16, F16], ids=["bf16", "f16"])
def test_fp8_gelu_aux_default_aux_on_wide_result(torch, result):
    """An FP8 product with a bf16 / fp16 result: the aux defaults to the result's dtype, no aux scale."""
    a, b, pre = operands(torch)
    out, aux = adv.matmul(
        a, b, epilog=adv.MatmulEpilog.GELU_AUX, quantization_scales={"a": 1.0, "b": 1.0},
        options={"result_type": result},
    )  # fmt: skip
    m = pre.shape[0]
    assert rel_err(torch, out, gelu(torch, pre)) < 1e-2
    assert rel_err(torch, aux["gelu_aux"][:m], pre) < 1e-2


def test_fp8_result_amax(torch):
    """``result_amax=True`` with an FP8 result returns the absolute maximum of the unscaled result."""
    a, b, pre = operands(torch)
    out, aux = adv.matmul(
        a, b, quantization_scales={"a": 1.0, "b": 1.0, "d": 0.5}, options={"result_amax": True}
    )
    assert rel_err(torch, out, pre * 0.5) < 0.07
    assert float(aux["result_amax"].double().item()) == pytest.approx(float(pre.abs().max()), rel=0.02)
