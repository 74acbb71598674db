"""FP8 outer-vector and block scales end to end on the fake GPU (CPU only).

The fake ``cublasLtMatmul`` (``matmul_fakes.py``) reads A_SCALE_MODE / B_SCALE_MODE and the scale
tensors with the layouts cuBLASLt documents, so these tests check the planner's plumbing: mode
inference, which scale feeds cuBLASLt's A and B in either orientation, layout copies, resets, the
plan cache, and that misuse is reported before any GPU work. The numerics on a real GPU are in
``test_matmul_scaling_gpu.py``.
"""

from __future__ import annotations


import ml_dtypes
import numpy as np
import pytest

import nvmath.linalg.advanced as adv
from nvmath._internal.dtypes import CudaDataType
from nvmath.linalg.advanced import _device

import matmul_fakes as F  # (tests/linalg/advanced is on sys.path: see conftest.py)

M, N, K = 160, 144, 320  # partial 128-blocks along every axis: MB = NB = 2, KB = 3 (L4 = 4)
KB, MB, NB = 3, 2, 2
F32_RESULT = {"result_type": CudaDataType.CUDA_R_32F}
SHAPES = {
    ("a", "outer"): (M,),
    ("a", "vec"): (M, KB),
    ("a", "blk"): (MB, KB),
    ("b", "outer"): (1, N),
    ("b", "vec"): (KB, N),
    ("b", "blk"): (KB, NB),
}
NATIVE = {  # the element strides cuBLASLt reads (the layouts of _scaling's docstring)
    ("a", "outer"): (1,),
    ("a", "vec"): (1, M),
    ("a", "blk"): (4, 1),
    ("b", "outer"): (N, 1),
    ("b", "vec"): (N, 1),
    ("b", "blk"): (1, 4),
}
MODE_VALUES = {"outer": 3, "vec": 4, "blk": 5}


def laid_out(values, strides):
    """``values`` (float32) in memory with element ``strides``, 256-byte aligned, NaN in the gaps."""
    values = np.asarray(values, dtype=np.float32)
    span = 1 + sum((e - 1) * s for e, s in zip(values.shape, strides))
    raw = np.empty(span * 4 + 256, dtype=np.uint8)
    start = -raw.ctypes.data % 256
    flat = raw[start : start + span * 4].view(np.float32)
    flat[:] = np.nan
    out = np.lib.stride_tricks.as_strided(flat, values.shape, tuple(s * 4 for s in strides))
    out[...] = values
    return out


def fp8_operands(rng, m=M, n=N, k=K, dtype=ml_dtypes.float8_e4m3fn):
    """a (m x k, row-major) and b (k x n, column-major): quarters, exact in FP8."""
    raw_a = rng.integers(-8, 9, (m, k)) / 4
    raw_b = rng.integers(-8, 9, (n, k)) / 4
    a = _aligned8(raw_a, dtype)
    b = _aligned8(raw_b, dtype).T
    return a, b


def _aligned8(x, dtype):
    raw = np.empty(x.size + 256, dtype=np.uint8)
    start = -raw.ctypes.data % 256
    out = raw[start : start + x.size].view(dtype).reshape(x.shape)
    out[...] = x.astype(dtype)
    return out


def expand(name, mode, s, m=M, n=N, k=K):
    """The scale of every element of a (m x k) or b (k x n) described by a scale tensor."""
    s = np.asarray(s, dtype=np.float64)
    rows, kk = np.arange(m if name == "a" else n)[:, None], np.arange(k)[None, :]
    if mode == "scalar":
        full = np.broadcast_to(s.reshape(()), (rows.size, k))
    elif mode == "outer":
        full = np.broadcast_to(s.reshape(-1, 1), (rows.size, k))
    elif mode == "vec":
        full = (s if name == "a" else s.T)[rows, kk // 128]
    else:
        full = (s if name == "a" else s.T)[rows // 128, kk // 128]
    return full if name == "a" else full.T


def scales_for(rng, pair, layout="native"):
    """Values and tensors of the a / b scales of a mode pair (native or C-contiguous layout)."""
    values, tensors = {}, {}
    for name, mode in zip("ab", pair):
        shape = SHAPES[(name, mode)]
        values[name] = rng.uniform(0.5, 2.0, shape).astype(np.float32)
        strides = NATIVE[(name, mode)] if layout == "native" else None
        tensors[name] = laid_out(values[name], strides or _c_strides(shape))
    return values, tensors


def _c_strides(shape):
    return tuple(int(np.prod(shape[i + 1 :])) for i in range(len(shape)))


def reference(a, b, values, pair, c=None, beta=0.0):
    af = a.astype(np.float64) * expand("a", pair[0], values["a"])
    bf = b.astype(np.float64) * expand("b", pair[1], values["b"])
    out = af @ bf
    return out if c is None else out + beta * c


def close(got, want):
    got = np.asarray(got, dtype=np.float64)
    assert got.shape == want.shape and np.all(np.isfinite(got))
    assert np.linalg.norm(got - want) <= 1e-6 * np.linalg.norm(want)


PAIRS = [("outer", "outer"), ("vec", "blk"), ("vec", "vec"), ("blk", "vec")]


@pytest.mark.parametrize("pair", PAIRS)
@pytest.mark.parametrize("transposed", [True, False])
def test_modes_match_dequantized_reference(lt, rng, pair, transposed):
    """Each mode pair gives the dequantized product, in both orientations, with A/B modes swapped
    along with the operands in the transposed product."""
    a, b = fp8_operands(rng)
    values, tensors = scales_for(rng, pair)
    c = None if transposed else laid_out(rng.uniform(-1, 1, (M, N)), (1, M))  # column-major c
    ops = (F.fake(a), F.fake(b)) + (() if c is None else (F.fake(c),))
    qs = {n: F.fake(t) for n, t in tensors.items()}
    with adv.Matmul(*ops, beta=None if c is None else 0.5, quantization_scales=qs, options=F32_RESULT) as mm:
        mm.plan()
        problem, attrs = mm._plan.problem, mm._plan.desc.attributes
        assert problem.transposed == transposed
        first, second = (pair[1], pair[0]) if transposed else pair
        assert (attrs["A_SCALE_MODE"], attrs["B_SCALE_MODE"]) == (MODE_VALUES[first], MODE_VALUES[second])
        assert not any(s.copied for s in mm._scales.values())  # native layouts are used in place
        close(mm.execute().array, reference(a, b, values, pair, c, 0.5))


@pytest.mark.parametrize(
    ("pair", "copied"),
    [
        (("outer", "outer"), (False, False)),
        (("vec", "blk"), (True, True)),  # C-contiguous (M, KB) and (KB, NB) run along the wrong axis
        (("vec", "vec"), (True, False)),  # b's (KB, N) C-contiguous is cuBLASLt's layout
        (("blk", "vec"), (True, False)),  # (MB, KB) rows of 3 need padding to 4
    ],
)
def test_other_layouts_are_copied_once(lt, rng, pair, copied):
    """Scales in another layout are copied into cuBLASLt's at construction; results are unchanged."""
    a, b = fp8_operands(rng)
    values, tensors = scales_for(rng, pair, layout="C")
    qs = {n: F.fake(t) for n, t in tensors.items()}
    with adv.Matmul(F.fake(a), F.fake(b), quantization_scales=qs, options=F32_RESULT) as mm:
        assert (mm._scales["a"].copied, mm._scales["b"].copied) == copied
        mm.plan()
        close(mm.execute().array, reference(a, b, values, pair))
        mm.execute()
        assert (mm._scales["a"].copied, mm._scales["b"].copied) == copied


def test_misaligned_scale_is_copied(lt, rng):
    """A scale in cuBLASLt's layout but not 16-byte aligned is copied."""
    a, b = fp8_operands(rng)
    values, tensors = scales_for(rng, ("outer", "outer"))
    shifted = laid_out(np.concatenate([[0.0], values["a"]]), (1,))[1:]
    with adv.Matmul(F.fake(a), F.fake(b), quantization_scales={"a": F.fake(shifted), "b": F.fake(tensors["b"])},
                    options=F32_RESULT) as mm:  # fmt: skip
        assert mm._scales["a"].copied and not mm._scales["b"].copied
        mm.plan()
        close(mm.execute().array, reference(a, b, values, ("outer", "outer")))


def test_host_operands_and_scales(lt, rng):
    """Host operands and host scales are copied to the device (in cuBLASLt's layout)."""
    a, b = fp8_operands(rng)
    values, tensors = scales_for(rng, ("vec", "blk"), layout="C")
    host = F.FakeHostTensor
    qs = {n: host(t) for n, t in tensors.items()}
    with adv.Matmul(host(a), host(b), quantization_scales=qs, options=F32_RESULT) as mm:
        assert all(s.copied for s in mm._scales.values())
        mm.plan()
        close(mm.execute().array, reference(a, b, values, ("vec", "blk")))


def test_reset_operands_replaces_scales(lt, rng):
    """reset_operands swaps new scales in (copying when needed); a bad one changes nothing."""
    a, b = fp8_operands(rng)
    pair = ("vec", "blk")
    _, tensors = scales_for(rng, pair)
    with adv.Matmul(F.fake(a), F.fake(b), quantization_scales={n: F.fake(t) for n, t in tensors.items()},
                    options=F32_RESULT) as mm:  # fmt: skip
        mm.plan()
        first = mm.execute().array.copy()
        new_values, new_tensors = scales_for(rng, pair, layout="C")
        mm.reset_operands(quantization_scales={n: F.fake(t) for n, t in new_tensors.items()})
        assert mm._scales["a"].copied
        close(mm.execute().array, reference(a, b, new_values, pair))
        _, native = scales_for(rng, pair)
        before = {n: s.ptr for n, s in mm._scales.items()}
        bad = {"a": F.fake(native["a"]), "b": F.fake(laid_out(np.ones((KB, N)), (N, 1)))}
        with pytest.raises(ValueError, match=r"planned as a BLK128x128_32F scale.*shape \(3, 2\)"):
            mm.reset_operands(a=F.fake(a), quantization_scales=bad)
        with pytest.raises(ValueError, match="a number replaces only a tensor-wide scale"):
            mm.reset_operands(quantization_scales={"a": 2.0})
        assert {n: s.ptr for n, s in mm._scales.items()} == before
        close(mm.execute().array, reference(a, b, new_values, pair))
        mm.reset_operands(quantization_scales={n: F.fake(t) for n, t in tensors.items()})
        assert not any(s.copied for s in mm._scales.values())
        close(mm.execute().array, first)


def test_stateless_matmul_reuses_the_plan_with_new_scales(lt, rng):
    """The stateless matmul caches the block-scaled plan and uses each call's scales."""
    a, b = fp8_operands(rng)
    pair = ("vec", "blk")
    hits = adv.plan_cache.stats.hits
    for _ in range(2):
        values, tensors = scales_for(rng, pair, layout="C")
        qs = {n: F.fake(t) for n, t in tensors.items()}
        out = adv.matmul(F.fake(a), F.fake(b), quantization_scales=qs, options=F32_RESULT)
        close(out.array, reference(a, b, values, pair))
    assert adv.plan_cache.stats.hits == hits + 1


def test_autotune_signature_includes_the_modes(lt, rng):
    """Plans of one problem with other scale modes never share autotuning results."""
    a, b = fp8_operands(rng)
    signatures = []
    for pair in (("outer", "outer"), ("vec", "blk")):
        _, tensors = scales_for(rng, pair)
        qs = {n: F.fake(t) for n, t in tensors.items()}
        with adv.Matmul(F.fake(a), F.fake(b), quantization_scales=qs, options=F32_RESULT) as mm:
            mm.plan()
            signatures.append(mm._plan.signature(mm._spec))
    tensor_wide = {n: F.fake(laid_out([1.0], (1,))) for n in "ab"}
    with adv.Matmul(F.fake(a), F.fake(b), quantization_scales=tensor_wide, options=F32_RESULT) as mm:
        mm.plan()
        signatures.append(mm._plan.signature(mm._spec))
    assert len(set(signatures)) == 3
    assert len(signatures[2]) == len(signatures[0]) - 1  # tensor-wide keys are as before


def test_old_device_is_rejected_before_copies(lt, rng, monkeypatch):
    """On compute capability 8.9 the planner names the device's capability (no scale is copied)."""
    a, b = fp8_operands(rng)
    _, tensors = scales_for(rng, ("vec", "blk"))
    monkeypatch.setattr(_device, "device_info", lambda d: _device.DeviceInfo("Ada", (8, 9), 24 << 30))
    qs = {n: F.fake(t) for n, t in tensors.items()}
    with pytest.raises(ValueError, match=r"compute capability >= 9.0 \(Hopper\); this device has 8.9"):
        adv.Matmul(F.fake(a), F.fake(b), quantization_scales=qs, options=F32_RESULT)


# ----------------------------------------------------------------------------- errors before GPU work
def _host_case(rng, **kw):
    """A constructor call on numpy operands (no GPU exists here: checks must come first)."""
    a, b = fp8_operands(rng)
    scales = kw.pop("scales")
    return lambda: adv.Matmul(a, b, quantization_scales=scales, **kw)


@pytest.mark.parametrize(
    ("scales", "kw", "exc", "match"),
    [
        ({"a": np.ones((M, KB), np.float32), "b": np.ones((KB, NB), np.float32)}, {}, ValueError,
         "the result dtype is float8_e4m3fn"),
        ({"a": np.ones((M, 5), np.float32), "b": 1.0}, F32_RESULT, ValueError, "fits no scaling mode"),
        ({"a": np.ones((MB, KB), np.float32), "b": np.ones((KB, NB), np.float32)}, F32_RESULT, ValueError,
         "not two 128x128 block scales"),
        ({"a": np.ones((M, KB), np.float64), "b": np.ones((KB, NB), np.float32)}, F32_RESULT, ValueError,
         "float32 tensor; got dtype float64"),
        ({"a": np.ones(M, np.float32), "b": np.ones(N, np.float32)}, {**F32_RESULT, "block_scaling": True},
         ValueError, "block_scaling=True"),
        ({"a": np.ones(M, np.float32), "b": np.ones(N, np.float32), "d": np.ones(2, np.float32)},
         {"result_type": CudaDataType.CUDA_R_8F_E4M3}, ValueError, "scale 'd' must be a number"),
    ],
)  # fmt: skip
def test_constructor_errors_before_gpu_work(rng, scales, kw, exc, match):
    """Bad scales raise typed errors naming the value (on a machine without a GPU)."""
    with pytest.raises(exc, match=match):
        _host_case(rng, scales=scales, options=kw)()


def test_scale_of_another_package_is_refused(rng, torch):
    """A torch scale for numpy operands raises TypeError naming both packages (torch imported only here)."""
    scales = {"a": np.ones(M, np.float32), "b": torch.ones(N)}
    with pytest.raises(TypeError, match="torch tensor but the operands are numpy"):
        _host_case(rng, scales=scales, options=F32_RESULT)()


def test_batched_problem_is_rejected(rng):
    """Outer-vector / block scales apply to one matrix: a batch is refused, with the fix."""
    a, b = fp8_operands(rng)
    a3 = np.stack([a, a])
    with pytest.raises(ValueError, match=r"batch of 2: fold the batch into M"):
        adv.Matmul(a3, b, quantization_scales={"a": np.ones(M, np.float32), "b": np.ones(N, np.float32)},
                   options=F32_RESULT)  # fmt: skip
