"""FP8 outer-vector and 128-element block scales on a Hopper GPU, against dequantized float64 references.

Every product is compared with ``(a.double() * expanded a scale) @ (b.double() * expanded b scale)``
computed by torch. Skipped below compute capability 9.0 or cuBLASLt 12.9 (the reason says which).
"""

from __future__ import annotations

import pytest

import nvmath.linalg.advanced as adv
from nvmath._errors import NotSupportedError
from nvmath._internal.dtypes import CudaDataType
from nvmath.bindings import cublasLt as lt
from nvmath.linalg.advanced import _handles

pytestmark = pytest.mark.gpu

BF16_RESULT = {"result_type": CudaDataType.CUDA_R_16BF}
MODES = {"outer": 3, "vec": 4, "blk": 5}


@pytest.fixture(scope="module")
def torch():
    """torch with a CUDA device of compute capability 9.0+ and cuBLASLt 12.9+ (skip otherwise)."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA device")
    cc = torch.cuda.get_device_capability()
    if cc < (9, 0):
        pytest.skip(
            f"outer-vector / block FP8 scales need compute capability 9.0; this GPU has {cc[0]}.{cc[1]}"
        )
    version = _handles.cublaslt_version()
    if version < 120900:
        pytest.skip(f"outer-vector / block FP8 scales need cuBLASLt 12.9 (120900); loaded: {version}")
    return torch


def cdiv(x, y):
    return -(-x // y)


def fp8(torch, shape, seed, dtype=None):
    """Quarters in [-2, 2] (exact in e4m3 and e5m2) on the GPU."""
    g = torch.Generator(device="cuda").manual_seed(seed)
    x = torch.randint(-8, 9, shape, generator=g, device="cuda", dtype=torch.int32).double() / 4
    return x.to(dtype or torch.float8_e4m3fn)


def operands(torch, m, n, k, seed=0, b_dtype=None):
    """a (m x k, row-major) and b (k x n, column-major: the transpose of a row-major n x k): the TN layout."""
    return fp8(torch, (m, k), seed), fp8(torch, (n, k), seed + 1, b_dtype).T


def scale_shape(name, mode, m, n, k):
    kb = cdiv(k, 128)
    if name == "a":
        return {"outer": (m,), "vec": (m, kb), "blk": (cdiv(m, 128), kb)}[mode]
    return {"outer": (1, n), "vec": (kb, n), "blk": (kb, cdiv(n, 128))}[mode]


def native(torch, name, mode, values):
    """``values`` in the layout cuBLASLt reads (so the planner uses the tensor in place)."""
    if mode == "outer" or (name, mode) == ("b", "vec"):
        return values.contiguous()
    if mode == "vec":  # a: (M, KB) contiguous along M
        return values.T.contiguous().T
    rows, kb = values.shape if name == "a" else values.T.shape
    l4 = cdiv(kb, 4) * 4
    padded = torch.full((rows, l4), float("nan"), device="cuda")
    padded[:, :kb] = values if name == "a" else values.T
    return padded[:, :kb] if name == "a" else padded[:, :kb].T


def make_scales(torch, pair, m, n, k, layout="native", seed=7):
    """Random a / b scales in [0.5, 2] of the pair's modes: ``(values, tensors)``."""
    g = torch.Generator(device="cuda").manual_seed(seed)
    values, tensors = {}, {}
    for name, mode in zip("ab", pair):
        shape = scale_shape(name, mode, m, n, k)
        values[name] = torch.rand(shape, generator=g, device="cuda") * 1.5 + 0.5
        tensors[name] = (
            native(torch, name, mode, values[name]) if layout == "native" else values[name].contiguous()
        )
    return values, tensors


def expand(torch, name, mode, s, m, n, k):
    """The scale of every element of a (m x k) or b (k x n), in float64."""
    s = s.double()
    rows = torch.arange(m if name == "a" else n, device="cuda")[:, None]
    cols = torch.arange(k, device="cuda")[None, :]
    if mode == "outer":
        full = s.reshape(-1, 1).expand(rows.numel(), k)
    elif mode == "vec":
        full = (s if name == "a" else s.T)[rows, cols // 128]
    else:
        full = (s if name == "a" else s.T)[rows // 128, cols // 128]
    return full if name == "a" else full.T


def reference(torch, a, b, values, pair):
    m, k = a.shape
    n = b.shape[1]
    af = a.double() * expand(torch, "a", pair[0], values["a"], m, n, k)
    bf = b.double() * expand(torch, "b", pair[1], values["b"], m, n, k)
    return af @ bf


def rel_err(torch, got, want):
    return float(torch.linalg.norm(got.double() - want) / torch.linalg.norm(want))


PAIRS = [("outer", "outer"), ("vec", "blk"), ("vec", "vec"), ("blk", "vec")]
SIZES = [(256, 384, 512), (192, 272, 320), (128, 128, 128), (64, 48, 80)]  # K = 320, 80: partial K-blocks


@pytest.mark.parametrize("pair", PAIRS, ids="-".join)
@pytest.mark.parametrize("size", SIZES, ids=lambda s: "x".join(map(str, s)))
def test_modes_against_dequantized_reference(torch, pair, size):
    """Each mode pair (including the DeepSeek-style vec/blk recipe) matches the dequantized product."""
    m, n, k = size
    a, b = operands(torch, m, n, k)
    values, tensors = make_scales(torch, pair, m, n, k)
    with adv.Matmul(a, b, quantization_scales=tensors, options=BF16_RESULT) as mm:
        assert not any(s.copied for s in mm._scales.values())
        mm.plan()
        out = mm.execute()
    assert out.dtype == torch.bfloat16 and out.shape == (m, n)
    assert rel_err(torch, out, reference(torch, a, b, values, pair)) < 1e-2


@pytest.mark.parametrize("pair", PAIRS, ids="-".join)
def test_direct_orientation_with_c(torch, pair):
    """A column-major c makes the product direct (cuBLASLt's A is a): modes follow the operands."""
    m, n, k = 192, 256, 320
    a, b = operands(torch, m, n, k, seed=3)
    values, tensors = make_scales(torch, pair, m, n, k)
    c = torch.randn(n, m, device="cuda", dtype=torch.bfloat16).T
    with adv.Matmul(a, b, c, beta=0.5, quantization_scales=tensors) as mm:
        mm.plan()
        assert not mm._plan.problem.transposed
        attrs = mm._plan.desc.attributes
        assert (attrs["A_SCALE_MODE"], attrs["B_SCALE_MODE"]) == (MODES[pair[0]], MODES[pair[1]])
        out = mm.execute()
    want = reference(torch, a, b, values, pair) + 0.5 * c.double()
    assert rel_err(torch, out, want) < 1e-2


@pytest.mark.parametrize("pair", PAIRS, ids="-".join)
def test_other_layouts_are_copied(torch, pair):
    """C-contiguous scales in another layout are copied into cuBLASLt's (same result)."""
    m, n, k = 256, 272, 448
    a, b = operands(torch, m, n, k, seed=5)
    values, tensors = make_scales(torch, pair, m, n, k, layout="C")
    out = adv.matmul(a, b, quantization_scales=tensors, options=BF16_RESULT)
    assert rel_err(torch, out, reference(torch, a, b, values, pair)) < 1e-2


def test_mixed_fp8_dtypes_and_alpha(torch):
    """e4m3 x e5m2 with vec/blk scales and alpha."""
    m, n, k = 128, 256, 384
    a, b = operands(torch, m, n, k, seed=9, b_dtype=torch.float8_e5m2)
    pair = ("vec", "blk")
    values, tensors = make_scales(torch, pair, m, n, k)
    out = adv.matmul(a, b, alpha=0.25, quantization_scales=tensors, options=BF16_RESULT)
    assert rel_err(torch, out, 0.25 * reference(torch, a, b, values, pair)) < 1e-2


def test_reset_operands_with_new_scales(torch):
    """reset_operands swaps operands and scales (copied or in place) without re-planning."""
    m, n, k = 256, 256, 512
    pair = ("vec", "blk")
    a, b = operands(torch, m, n, k, seed=11)
    values, tensors = make_scales(torch, pair, m, n, k)
    with adv.Matmul(a, b, quantization_scales=tensors, options=BF16_RESULT) as mm:
        mm.plan()
        assert rel_err(torch, mm.execute(), reference(torch, a, b, values, pair)) < 1e-2
        a2, _ = operands(torch, m, n, k, seed=12)
        values2, tensors2 = make_scales(torch, pair, m, n, k, layout="C", seed=13)
        mm.reset_operands(a=a2, quantization_scales=tensors2)
        assert mm._scales["a"].copied and mm._scales["b"].copied
        assert rel_err(torch, mm.execute(), reference(torch, a2, b, values2, pair)) < 1e-2
        before = {n: v.clone() for n, v in values2.items()}
        tensors2["b"].mul_(2)  # a copied scale does not see in-place changes until it is reset
        assert rel_err(torch, mm.execute(), reference(torch, a2, b, before, pair)) < 1e-2
        mm.reset_operands(quantization_scales=tensors2)
        assert rel_err(torch, mm.execute(), reference(torch, a2, b, tensors2, pair)) < 1e-2


def test_deepseek_style_quantization(torch):
    """Quantize float activations per (row, 128 columns) and weights per 128x128 block: x @ w.T is recovered."""
    m, n, k = 256, 512, 640
    g = torch.Generator(device="cuda").manual_seed(21)
    x = torch.randn(m, k, generator=g, device="cuda")
    w = torch.randn(n, k, generator=g, device="cuda")
    fmax = torch.finfo(torch.float8_e4m3fn).max
    xs = x.view(m, k // 128, 128).abs().amax(-1) / fmax  # (M, KB)
    xq = (x.view(m, k // 128, 128) / xs[..., None]).view(m, k).to(torch.float8_e4m3fn)
    ws = w.view(n // 128, 128, k // 128, 128).abs().amax((1, 3)) / fmax  # (NB, KB)
    wq = (w.view(n // 128, 128, k // 128, 128) / ws[:, None, :, None]).view(n, k).to(torch.float8_e4m3fn)
    out = adv.matmul(xq, wq.T, quantization_scales={"a": xs, "b": ws.T}, options=BF16_RESULT)
    assert rel_err(torch, out, reference(torch, xq, wq.T, {"a": xs, "b": ws.T}, ("vec", "blk"))) < 1e-2
    assert rel_err(torch, out, x.double() @ w.double().T) < 8e-2  # FP8 rounding: about 4 % here


def planned_or_skip(torch, *args, **kwargs):
    """A planned Matmul; skip when cuBLASLt has no algorithm for it (a capability, not a bug)."""
    mm = adv.Matmul(*args, **{k: v for k, v in kwargs.items() if k not in ("epilog", "epilog_inputs")})
    try:
        mm.plan(epilog=kwargs.get("epilog"), epilog_inputs=kwargs.get("epilog_inputs"))
    except (NotSupportedError, lt.cuBLASLtError) as exc:
        mm.free()
        pytest.skip(f"cuBLASLt {_handles.cublaslt_version()} cannot plan this: {exc}")
    return mm


@pytest.mark.parametrize("result", [CudaDataType.CUDA_R_16F, CudaDataType.CUDA_R_32F], ids=["f16", "f32"])
@pytest.mark.parametrize("pair", [("outer", "outer"), ("vec", "blk")], ids="-".join)
def test_other_result_types_when_supported(torch, pair, result):
    """float16 / float32 results are right where cuBLASLt has an algorithm for them."""
    m, n, k = 128, 256, 256
    a, b = operands(torch, m, n, k, seed=15)
    values, tensors = make_scales(torch, pair, m, n, k)
    with planned_or_skip(torch, a, b, quantization_scales=tensors, options={"result_type": result}) as mm:
        out = mm.execute()
    assert rel_err(torch, out, reference(torch, a, b, values, pair)) < 5e-3


@pytest.mark.parametrize("m", [1, 6, 18])
def test_rows_not_multiple_of_four_when_supported(torch, m):
    """A VEC128 scale of a with M % 4 != 0 (leading dimension M, no padding) is right where cuBLASLt runs it."""
    n, k = 256, 384
    a, b = operands(torch, m, n, k, seed=17)
    pair = ("vec", "blk")
    values, tensors = make_scales(torch, pair, m, n, k)
    with planned_or_skip(torch, a, b, quantization_scales=tensors, options=BF16_RESULT) as mm:
        out = mm.execute()
    assert rel_err(torch, out, reference(torch, a, b, values, pair)) < 1e-2


def test_bias_epilog_when_supported(torch):
    """A BIAS epilog with outer-vector scales is right where cuBLASLt has an algorithm for it."""
    m, n, k = 128, 256, 256
    a, b = operands(torch, m, n, k, seed=19)
    pair = ("outer", "outer")
    values, tensors = make_scales(torch, pair, m, n, k)
    bias = torch.randn(n, device="cuda", dtype=torch.bfloat16)
    with planned_or_skip(
        torch, a, b, quantization_scales=tensors, options=BF16_RESULT, epilog=adv.MatmulEpilog.BIAS,
        epilog_inputs={"bias": bias},
    ) as mm:  # fmt: skip
        out = mm.execute()
    want = reference(torch, a, b, values, pair) + bias.double()
    assert rel_err(torch, out, want) < 1e-2
