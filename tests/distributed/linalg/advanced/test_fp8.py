"""FP8 in the distributed matmul against the numpy-computing fake cuBLASMp (mm_fakes.py): tensor-wide
quantization scales given as numbers or as float32 device tensors, a wide or an FP8 result,
``result_amax`` (this rank's block, before the D scale), ``c`` of the result's dtype, resetting the
scales; the type and scale rules (what nvmath-python requires) raised on every rank."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from dist_fakes import SingleRank, ThreadGroup
from mm_fakes import FakeDevice, gather, ok, parts, run

import nvmath.distributed as nd
from nvmath._internal.dtypes import CudaDataType
from nvmath.distributed.distribution import Slab
from nvmath.distributed.linalg.advanced import Matmul, MatmulQuantizationScales, matmul

F8 = ml_dtypes.float8_e4m3fn


def fp8_problem(nranks, seed=0):
    rng = np.random.default_rng(seed)
    m, k, n = 4 * nranks, 16, 2 * nranks
    A = rng.uniform(-2, 2, (m, k)).astype(F8)
    B = rng.uniform(-2, 2, (k, n)).astype(ml_dtypes.float8_e5m2)
    pa, _ = parts(A, Slab.X, nranks, "C")  # FP8 runs as op(A) = A^T (TN): a row-major, b column-major
    pb, _ = parts(B, Slab.Y, nranks, "F")
    _, index = parts(np.zeros((m, n)), Slab.X, nranks, "F")
    return A.astype(np.float64) @ B.astype(np.float64), pa, pb, index, (m, n)


@pytest.mark.parametrize("nranks", [1, 2])
@pytest.mark.parametrize("scale_kind", ["number", "tensor", "dataclass"])
def test_fp8_wide_result(env, nranks, scale_kind):
    """e4m3 x e5m2 with a float32 result: D = alpha * scale_a * scale_b * A @ B, scales as numbers,
    float32 device tensors of one element, or a MatmulQuantizationScales."""
    group = SingleRank() if nranks == 1 else ThreadGroup(nranks)
    env(group)
    ab, pa, pb, index, shape = fp8_problem(nranks)
    if scale_kind == "number":
        scales = {"a": 0.5, "b": 4.0}
    elif scale_kind == "tensor":
        scales = {"a": FakeDevice(np.array([0.5], np.float32)), "b": FakeDevice(np.array(4.0, np.float32))}
    else:
        scales = MatmulQuantizationScales(a=0.5, b=4.0)
    options = {"inplace": False, "result_type": CudaDataType.CUDA_R_32F}
    results = ok(run(group, lambda r: matmul(pa[r], pb[r], distributions=[Slab.X, Slab.Y, Slab.X], alpha=1.5,
                                             quantization_scales=scales, options=options)))  # fmt: skip
    assert all(res.dtype == np.float32 for res in results)
    np.testing.assert_allclose(gather(results, index, shape), 1.5 * 2.0 * ab, rtol=1e-6)


def test_fp8_result_with_amax_and_reset(env):
    """An FP8 result with a D scale returns (d, {"result_amax"}): d = fp8(scale_d * D) and the amax
    is max |D| of this rank's block before the D scale; reset_operands with a new a scale changes
    both."""
    group = ThreadGroup(2)
    env(group)
    ab, pa, pb, index, shape = fp8_problem(2, seed=1)
    scales = {"a": 1.0, "b": 1.0, "d": 0.25}
    mms = [None, None]

    def body(r):
        mms[r] = Matmul(pa[r], pb[r], distributions=[Slab.X, Slab.Y, Slab.X], quantization_scales=scales,
                        options={"inplace": False, "result_amax": True})  # fmt: skip
        mms[r].plan()
        first = mms[r].execute()
        first = (first[0].copy(), {k: v.copy() for k, v in first[1].items()})
        mms[r].reset_operands(quantization_scales={"a": 2.0})
        second = mms[r].execute()
        mms[r].free()
        return first, second

    results = ok(group.run(body))
    for which, factor in ((0, 1.0), (1, 2.0)):
        d_parts = [res[which][0] for res in results]
        assert all(d.dtype == F8 for d in d_parts)
        expected = (0.25 * factor * ab).astype(F8).astype(np.float64)
        np.testing.assert_array_equal(gather([d.astype(np.float64) for d in d_parts], index, shape), expected)
        for r, res in enumerate(results):
            rows, cols = index[r]
            amax = res[which][1]["result_amax"]
            assert amax.dtype == np.float32 and amax.shape == (1,)
            np.testing.assert_allclose(amax[0], np.abs(factor * ab[np.ix_(rows, cols)]).max(), rtol=1e-6)


def test_fp8_with_c(env):
    """c of the result's dtype (bfloat16) is added with beta; in place into c."""
    env(SingleRank())
    ab, pa, pb, _, shape = fp8_problem(1, seed=2)
    C = np.random.default_rng(5).standard_normal(shape).astype(ml_dtypes.bfloat16)
    c = FakeDevice(np.asfortranarray(C))
    d = matmul(pa[0], pb[0], c, distributions=[Slab.X, Slab.Y, Slab.X], beta=1.0,
               quantization_scales={"a": 1.0, "b": 1.0})  # fmt: skip
    assert d is c.tensor and d.dtype == ml_dtypes.bfloat16
    expected = (ab + C.astype(np.float64)).astype(ml_dtypes.bfloat16).astype(np.float64)
    np.testing.assert_allclose(d.astype(np.float64), expected, rtol=1e-2)


@pytest.mark.parametrize(
    ("change", "error", "match"),
    [({"scales": {"a": 1.0}}, ValueError, r"need the scales \['a', 'b'\]"),
     ({"scales": {"a": 1.0, "b": 1.0, "c": 1.0}}, ValueError, "need the scales"),
     ({"scales": {"a": 1.0, "b": 1.0}, "result_type": None}, ValueError, r"\['a', 'b', 'd'\]"),
     ({"amax": True}, ValueError, "result_amax needs an FP8 result"),
     ({"scales": {"a": FakeDevice(np.ones(1)), "b": 1.0}}, ValueError, "float32 tensor"),
     ({"scales": {"a": FakeDevice(np.ones(2, np.float32)), "b": 1.0}}, ValueError, "shape"),
     ({"scales": ["a"]}, TypeError, "MatmulQuantizationScales"),
     ({"result_type": CudaDataType.CUDA_R_64F}, ValueError, "FP8 operands give"),
     ({"c": "float32"}, ValueError, "c must have the result's dtype"),
     ({"b": "float8_e5m2", "a": "float8_e5m2"}, ValueError, "not both float8_e5m2"),
     ({"b": "float32"}, ValueError, "a=float8_e4m3fn, b=float32"),
     ({"a_order": "F"}, ValueError, "op\\(A\\) = A\\^T")],
)  # fmt: skip
def test_fp8_rules(env, change, error, match):
    """Missing or extra scales, an amax without an FP8 result, a scale that is not float32 of one
    element, an impossible result type, c of another dtype, e5m2 x e5m2, FP8 with non-FP8, an FP8
    layout other than TN: typed errors naming what is allowed."""
    env(SingleRank())
    dt = {"float8_e4m3fn": F8, "float8_e5m2": ml_dtypes.float8_e5m2, "float32": np.float32}
    a = FakeDevice(np.ascontiguousarray(np.ones((4, 4)).astype(dt[change.get("a", "float8_e4m3fn")])))
    b = FakeDevice(np.asfortranarray(np.ones((4, 4)).astype(dt[change.get("b", "float8_e4m3fn")])))
    if change.get("a_order") == "F":
        a = FakeDevice(np.asfortranarray(a.tensor))
    c = FakeDevice(np.ones((4, 4), np.float32, order="F")) if "c" in change else None
    options = {"inplace": c is not None, "result_amax": change.get("amax", False),
               "result_type": change.get("result_type", CudaDataType.CUDA_R_32F)}  # fmt: skip
    if "c" in change:
        options["result_type"] = CudaDataType.CUDA_R_16BF
    with pytest.raises(error, match=match):
        Matmul(a, b, c, distributions=[Slab.X] * 3, beta=None if c is None else 1.0,
               quantization_scales=change.get("scales", {"a": 1.0, "b": 1.0}), options=options)  # fmt: skip


def test_fp8_scale_problem_raises_on_every_rank(env):
    """A scale missing on rank 1 only is found by the one collective check: both ranks raise."""
    group = ThreadGroup(2)
    env(group)
    _, pa, pb, _, _ = fp8_problem(2)
    scales = [{"a": 1.0, "b": 1.0}, {"a": 1.0}]
    results = group.run(lambda r: Matmul(pa[r], pb[r], distributions=[Slab.X, Slab.Y, Slab.X],
                                         quantization_scales=scales[r],
                                         options={"inplace": False, "result_type": 0}))  # fmt: skip
    assert isinstance(results[1], ValueError) and "need the scales" in str(results[1])
    assert isinstance(results[0], ValueError) and "rank(s) [1]" in str(results[0])
    assert nd.get_context() is not None


def test_reset_refusals(env):
    """reset_operands refuses a scale the plan does not use, a scale of another dtype, and epilog
    inputs when the plan has no epilog taking them; the plan keeps working."""
    env(SingleRank())
    ab, pa, pb, _, _ = fp8_problem(1)
    with Matmul(pa[0], pb[0], distributions=[Slab.X, Slab.Y, Slab.X], quantization_scales={"a": 1.0, "b": 1.0},
                options={"inplace": False, "result_type": CudaDataType.CUDA_R_32F}) as mm:  # fmt: skip
        mm.plan()
        with pytest.raises(ValueError, match=r"this Matmul uses \['a', 'b'\]"):
            mm.reset_operands(quantization_scales={"d": 1.0})
        with pytest.raises(ValueError, match="float32 tensor"):
            mm.reset_operands(quantization_scales={"a": FakeDevice(np.ones(1))})
        with pytest.raises(ValueError, match="without an epilog"):
            mm.reset_operands(epilog_inputs={"bias": FakeDevice(np.zeros(4, np.float32))})
        mm.reset_operands(quantization_scales={"b": FakeDevice(np.array([3.0], np.float32))})
        np.testing.assert_allclose(mm.execute(), 3.0 * ab, rtol=1e-6)


def test_fp8_result_has_its_own_16bit_c(env, caplog):
    """An FP8 result's C is a bfloat16 buffer of D's layout apart from D (cuBLASLt refuses C == D with
    two descriptors, the failure seen on the H200), on the one cuBLASMp grid of a one-rank plan; the
    DEBUG log states the call's types, descriptors and attributes."""
    caplog.set_level("DEBUG", logger="nvmath.distributed.linalg.advanced")
    group = SingleRank()
    lib = env(group)
    _, pa, pb, _, _ = fp8_problem(1)
    d, _ = matmul(pa[0], pb[0], distributions=[Slab.X, Slab.Y, Slab.X], quantization_scales={"a": 1, "b": 1, "d": 1},
                  options={"inplace": False, "result_amax": True})  # fmt: skip
    descriptors = {h: v for h, v in lib.objects.items() if isinstance(v, tuple) and len(v) == 9}
    assert sorted(v[7] for v in descriptors.values()) == [14, 28, 28, 29]  # c bf16, a and d e4m3, b e5m2
    assert sum(1 for c in lib.calls if c[1] == "grid_create") == 1
    assert d.dtype == F8
    text = caplog.text
    assert "C is bfloat16 scratch" in text and "d=float8_e4m3fn" in text and "'D_SCALE_POINTER', '0x" in text
