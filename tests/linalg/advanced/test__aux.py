"""Tests of nvmath.linalg.advanced._aux on the fake GPU (CPU only): the planning decisions and the
execute plumbing of an FP8 GELU aux that the library quantizes.

cuBLASLt is the numpy emulation of ``matmul_fakes.py`` (it writes the GELU pre-activation where
``EPILOGUE_AUX_POINTER`` points); the quantization kernel is replaced by a numpy emulation that reads
and writes the addresses it is given (``ml_dtypes`` FP8, saturated as ``cvt.rn.satfinite`` does), so
the tests check that the planner asks cuBLASLt for a wide aux, schedules the kernel after the matmul
on the same stream with the right buffers and the current scale, and returns only the FP8 aux and
its amax -- against a float64 numpy reference.
"""

from __future__ import annotations


import numpy as np
import pytest

import nvmath.linalg.advanced as adv
from nvmath._internal import caches, dtypes
from nvmath._internal.dtypes import CudaDataType as T
from nvmath.bindings import cublasLt as lt_bindings
from nvmath.linalg.advanced import MatmulEpilog as E
from nvmath.linalg.advanced import _aux_quantize

import matmul_fakes as F  # (tests/linalg/advanced is on sys.path: see conftest.py)

pytest.importorskip("ml_dtypes")

FP8_MAX = {"float8_e4m3fn": 448.0, "float8_e5m2": 57344.0}


class FakeKernels:
    """Records the quantization launches and does them in numpy."""

    def __init__(self, lt):
        self.lt = lt
        self.calls: list[dict] = []

    def kernels(self, wide_dtype, fp8_dtype, device_id):
        return ("quantize", wide_dtype, fp8_dtype), "zero"

    def quantize(self, kernel, zero, wide, out, scale, amax, *, rows, ld, total, stream):
        _, wide_dtype, fp8_dtype = kernel
        s = float(F._view(scale, (1,), (1,), "float32")[0])
        self.calls.append(
            dict(after_matmuls=len(self.lt.matmul_calls), stream=stream.ptr, scale=s, rows=rows, ld=ld,
                 total=total, wide_dtype=wide_dtype, fp8_dtype=fp8_dtype, amax=amax)
        )  # fmt: skip
        w = F._view(wide, (total // ld, ld), (ld, 1), wide_dtype).astype(np.float32)
        q = F._view(out, (total // ld, ld), (ld, 1), fp8_dtype)
        limit = FP8_MAX[fp8_dtype]
        q[:, :rows] = np.clip(w[:, :rows] * np.float32(s), -limit, limit).astype(q.dtype)
        q[:, rows:] = 0
        if amax:
            F._view(amax, (1,), (1,), "float32")[0] = np.abs(w[:, :rows]).max()


@pytest.fixture
def kern(lt, monkeypatch):
    k = FakeKernels(lt)
    monkeypatch.setattr(_aux_quantize, "kernels", k.kernels)
    monkeypatch.setattr(_aux_quantize, "quantize", k.quantize)
    return k


def _scale(value):
    """A device float32 scale of shape (1,) (the fake GPU cannot upload numbers)."""
    return F.fake(F.aligned(np.array([value], dtype=np.float32)))


def _rand(rng, shape):
    return F.aligned(rng.uniform(-2, 2, shape).astype(np.float32))


def _quantized(x, s, fp8_dtype):
    """The float64 reference quantized: s * x in float32, saturated, rounded to the FP8 dtype."""
    limit = FP8_MAX[fp8_dtype]
    y = np.clip((x.astype(np.float32) * np.float32(s)), -limit, limit)
    return y.astype(dtypes.to_numpy_dtype(fp8_dtype)).astype(np.float64)


def _check_aux(aux, pre, s, fp8_dtype, amax=True):
    m, n = pre.shape[-2:]
    q = aux["gelu_aux"].array
    rows = -(-m // 8) * 8
    assert q.dtype == dtypes.to_numpy_dtype(fp8_dtype)
    assert q.shape == pre.shape[:-2] + (rows, n)
    assert q.strides[-2:] == (1, rows)  # column-major, nvmath-python's padded layout
    np.testing.assert_array_equal(q[..., :m, :].astype(np.float64), _quantized(pre, s, fp8_dtype))
    if amax:
        assert aux["gelu_aux_amax"].array.shape == (1,)
        assert aux["gelu_aux_amax"].array[0] == pytest.approx(np.abs(pre).max(), rel=1e-6)


def _desc_get(mm, name):
    return int(lt_bindings.matmul_desc_get(mm._plan.desc.ptr, lt_bindings.MatmulDescAttribute[name]))


@pytest.mark.parametrize("aux_type", [T.CUDA_R_8F_E4M3, T.CUDA_R_8F_E5M2], ids=["e4m3", "e5m2"])
def test_fp8_aux_is_quantized_by_the_library(lt, kern, rng, aux_type):
    """GELU_AUX with an FP8 aux_type and aux_amax: cuBLASLt gets the wide (D's float32) aux pointer and
    no AUX scale, amax or type; one kernel launch after the matmul, on its stream, returns the FP8 aux
    (reference quantized, padded rows included in the shape) and the amax of the unscaled pre-activation."""
    a, b = _rand(rng, (13, 5)), _rand(rng, (5, 7))
    fp8_dtype = dtypes.from_cuda_data_type(aux_type)
    with adv.Matmul(F.fake(a), F.fake(b)) as mm:
        mm.plan(epilog=E.GELU_AUX, preferences={"epilog": {"aux_type": aux_type, "aux_amax": True}},
                epilog_inputs={"aux_quantization_scale": _scale(0.25)})  # fmt: skip
        assert _desc_get(mm, "EPILOGUE_AUX_SCALE_POINTER") == 0
        assert _desc_get(mm, "EPILOGUE_AUX_AMAX_POINTER") == 0
        assert _desc_get(mm, "EPILOGUE_AUX_DATA_TYPE") in (-1, int(T.CUDA_R_32F))  # unset: D's type
        out, aux = mm.execute()
    pre = a.astype(np.float64) @ b
    assert set(aux) == {"gelu_aux", "gelu_aux_amax"}
    np.testing.assert_allclose(out.array, F.gelu_tanh(pre), rtol=1e-5, atol=1e-6)
    _check_aux(aux, pre, 0.25, fp8_dtype)
    (call,) = kern.calls
    assert call["after_matmuls"] == 1 and call["stream"] == lt.matmul_calls[0]["stream"]
    assert (call["rows"], call["ld"], call["total"], call["wide_dtype"]) == (13, 16, 16 * 7, "float32")


def test_fp8_aux_without_amax_and_with_bias(lt, kern, rng):
    """GELU_AUX_BIAS with an FP8 aux and no aux_amax: no amax output, no amax written; the bias enters the
    quantized pre-activation."""
    a, b, bias = _rand(rng, (16, 8)), _rand(rng, (8, 4)), _rand(rng, (16,))
    out, aux = adv.matmul(
        F.fake(a), F.fake(b), epilog=E.GELU_AUX_BIAS,
        preferences={"epilog": {"aux_type": T.CUDA_R_8F_E4M3}},
        epilog_inputs={"bias": F.fake(bias), "aux_quantization_scale": _scale(2.0)},
    )  # fmt: skip
    pre = a.astype(np.float64) @ b + bias[:, None]
    assert set(aux) == {"gelu_aux"}
    _check_aux(aux, pre, 2.0, "float8_e4m3fn", amax=False)
    assert kern.calls[-1]["amax"] == 0


def test_fp8_aux_batched(lt, kern, rng):
    """A batched product quantizes every batch's aux (total counts the batch; one launch)."""
    a, b = _rand(rng, (3, 10, 8)), _rand(rng, (3, 8, 5))
    _, aux = adv.matmul(
        F.fake(a), F.fake(b), epilog=E.GELU_AUX,
        preferences={"epilog": {"aux_type": T.CUDA_R_8F_E4M3, "aux_amax": True}},
        epilog_inputs={"aux_quantization_scale": _scale(0.5)},
    )  # fmt: skip
    pre = a.astype(np.float64) @ b
    _check_aux(aux, pre, 0.5, "float8_e4m3fn")
    assert (kern.calls[-1]["ld"], kern.calls[-1]["total"]) == (16, 3 * 16 * 5)


def test_fp8_aux_repeated_execute_and_reset(lt, kern, rng):
    """Each execute launches the quantization once, into fresh outputs; reset_operands with new
    operands and a new aux_quantization_scale reaches the next launch."""
    a, b = _rand(rng, (8, 6)), _rand(rng, (6, 9))
    with adv.Matmul(F.fake(a), F.fake(b)) as mm:
        mm.plan(epilog=E.GELU_AUX, preferences={"epilog": {"aux_type": T.CUDA_R_8F_E4M3, "aux_amax": True}},
                epilog_inputs={"aux_quantization_scale": _scale(0.5)})  # fmt: skip
        _, first = mm.execute()
        _, second = mm.execute()
        assert first["gelu_aux"].array.ctypes.data != second["gelu_aux"].array.ctypes.data
        pre = a.astype(np.float64) @ b
        _check_aux(first, pre, 0.5, "float8_e4m3fn")
        _check_aux(second, pre, 0.5, "float8_e4m3fn")
        a2 = _rand(rng, (8, 6))
        mm.reset_operands(a=F.fake(a2), epilog_inputs={"aux_quantization_scale": _scale(0.125)})
        _, third = mm.execute()
    assert [c["scale"] for c in kern.calls] == [0.5, 0.5, 0.125]
    assert [c["after_matmuls"] for c in kern.calls] == [1, 2, 3]
    _check_aux(third, a2.astype(np.float64) @ b, 0.125, "float8_e4m3fn")


def test_fp8_aux_kernels_are_loaded_at_plan_time(lt, kern, rng, monkeypatch):
    """The kernels are compiled/loaded by plan(), not by execute() (nothing to load while capturing)."""
    loads = []
    monkeypatch.setattr(_aux_quantize, "kernels", lambda *args: loads.append(args) or kern.kernels(*args))
    a, b = _rand(rng, (8, 4)), _rand(rng, (4, 8))
    with adv.Matmul(F.fake(a), F.fake(b)) as mm:
        mm.plan(epilog=E.GELU_AUX, preferences={"epilog": {"aux_type": T.CUDA_R_8F_E5M2}},
                epilog_inputs={"aux_quantization_scale": _scale(1.0)})  # fmt: skip
        assert loads == [("float32", "float8_e5m2", 0)]
        mm.execute()
        mm.execute()
    assert len(loads) == 1 and len(kern.calls) == 2


def test_wide_aux_runs_no_kernel(lt, kern, rng):
    """A wide GELU aux (no aux_type) is cuBLASLt's alone: no quantization launch."""
    a, b = _rand(rng, (8, 4)), _rand(rng, (4, 8))
    _, aux = adv.matmul(F.fake(a), F.fake(b), epilog=E.GELU_AUX)
    assert set(aux) == {"gelu_aux"} and not kern.calls


def test_failed_kernel_load_leaves_the_previous_plan(lt, kern, rng, monkeypatch):
    """If the FP8 aux kernels cannot be loaded, plan() raises and the previous plan stays installed
    and runs (the new plan's cuBLASLt objects are closed)."""
    a, b = _rand(rng, (8, 4)), _rand(rng, (4, 8))
    with adv.Matmul(F.fake(a), F.fake(b)) as mm:
        mm.plan(epilog=E.GELU_AUX)
        before = mm._plan

        def broken(*args):
            raise RuntimeError("NVRTC failed")

        monkeypatch.setattr(_aux_quantize, "kernels", broken)
        closed = []
        monkeypatch.setattr(type(before), "close", lambda self: closed.append(self))
        with pytest.raises(RuntimeError, match="NVRTC failed"):
            mm.plan(epilog=E.GELU_AUX, preferences={"epilog": {"aux_type": T.CUDA_R_8F_E4M3}},
                    epilog_inputs={"aux_quantization_scale": _scale(1.0)})  # fmt: skip
        assert mm._plan is before and len(closed) == 1 and closed[0] is not before
        _, aux = mm.execute()
    assert set(aux) == {"gelu_aux"} and aux["gelu_aux"].array.dtype == np.float32
    np.testing.assert_allclose(aux["gelu_aux"].array, a.astype(np.float64) @ b, rtol=1e-5)


def test_stateless_calls_reuse_the_plan_with_each_calls_scale(lt, kern, rng):
    """Repeated stateless matmul calls with an FP8 aux plan once (the kernels too) and quantize with
    each call's own aux_quantization_scale and operands."""
    adv.plan_cache.clear()
    b = _rand(rng, (6, 9))
    prefs = {"epilog": {"aux_type": T.CUDA_R_8F_E4M3, "aux_amax": True}}
    for s in (0.5, 0.25, 4.0):
        a = _rand(rng, (8, 6))
        _, aux = adv.matmul(F.fake(a), F.fake(b), epilog=E.GELU_AUX, preferences=prefs,
                            epilog_inputs={"aux_quantization_scale": _scale(s)})  # fmt: skip
        _check_aux(aux, a.astype(np.float64) @ b, s, "float8_e4m3fn")
    assert lt.heuristic_calls == 1
    assert [c["scale"] for c in kern.calls] == [0.5, 0.25, 4.0]


def test_host_operands_get_host_fp8_aux(lt, kern, rng):
    """Host operands: the FP8 aux and its amax come back as host tensors (the internal wide aux never)."""
    a, b = _rand(rng, (8, 5)), _rand(rng, (5, 3))
    scale = F.FakeHostTensor(np.array([0.5], dtype=np.float32))
    out, aux = adv.matmul(
        F.FakeHostTensor(a), F.FakeHostTensor(b), epilog=E.GELU_AUX,
        preferences={"epilog": {"aux_type": T.CUDA_R_8F_E5M2, "aux_amax": True}},
        epilog_inputs={"aux_quantization_scale": scale},
    )  # fmt: skip
    assert isinstance(out, F.FakeHostTensor) and set(aux) == {"gelu_aux", "gelu_aux_amax"}
    assert all(isinstance(t, F.FakeHostTensor) for t in aux.values())
    _check_aux(aux, a.astype(np.float64) @ b, 0.5, "float8_e5m2")
