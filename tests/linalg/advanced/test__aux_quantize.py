"""Tests of nvmath.linalg.advanced._aux_quantize: the FP8 aux quantization kernel.

Without a GPU: the kernel source compiles with NVRTC for the FP8 architectures (NVRTC needs no GPU)
and uses the saturating conversion instruction; the launch sizes its grid and zeroes the amax first
(cuda.core's launch replaced by a recorder); other dtypes are refused. On the GPU: the kernel's output
bits against torch's own FP8 conversion of ``s * x`` (saturated first: torch turns e4m3fn overflow
into NaN and e5m2 overflow into infinity, cuBLASLt-style ``satfinite`` clamps), zeros in the
padding rows, and the amax of the unscaled real rows.
"""

from __future__ import annotations

import contextlib
import re

import numpy as np
import pytest
from nvrtc_probe import compile_ptx

from nvmath._internal import nvrtc, streams
from nvmath.linalg.advanced import _aux_quantize as Q


def _nvrtc_compile(arch: str) -> str:
    """PTX of the kernel source for ``arch`` (skips without a loadable NVRTC)."""
    return compile_ptx(Q._SOURCE, "aux.cu", Q._NAMES.values(), arch)


@pytest.mark.parametrize("arch", ["sm_89", "sm_90"])
def test_source_compiles_with_the_saturating_conversion(arch):
    """Every (wide, FP8) instantiation compiles for Ada / Hopper and converts with cvt.rn.satfinite."""
    ptx = _nvrtc_compile(arch)
    assert bytes([32])[0] == 32  # CPython's shared one-byte b" " is intact (NVRTC wrote into bytearrays)
    assert "cvt.rn.satfinite.e4m3x2.f32" in ptx and "cvt.rn.satfinite.e5m2x2.f32" in ptx
    assert "cvt.f32.f16" in ptx and re.search(r"(atom|red)\.global\.max\.u32", ptx)


@pytest.mark.parametrize(("wide", "fp8"), [("float8_e4m3fn", "float8_e4m3fn"), ("float32", "bfloat16"),
                                           ("complex64", "float8_e5m2")])  # fmt: skip
def test_kernels_refuse_other_dtypes(wide, fp8):
    """Only float16/bfloat16/float32/float64 to e4m3/e5m2: anything else is a ValueError naming both."""
    with pytest.raises(ValueError, match=f"{wide} -> {fp8}"):
        Q.kernels(wide, fp8, 0)


@pytest.fixture
def launches(monkeypatch):
    core = pytest.importorskip("cuda.core")
    calls = []
    monkeypatch.setattr(
        core, "launch", lambda stream, config, kernel, *args: calls.append((config, kernel, args))
    )
    monkeypatch.setattr(streams, "stream_ctx", lambda handle: contextlib.nullcontext())
    return calls


class _Handle:
    core = "stream"


@pytest.mark.parametrize(("total", "blocks"), [(1, 1), (256, 1), (257, 2), (10**9, Q.QUANTIZE_BLOCKS)])
def test_quantize_zeroes_amax_then_launches(launches, total, blocks):
    """With an amax the one-thread zeroing kernel runs first; the quantization grid covers ``total``
    with at most QUANTIZE_BLOCKS blocks of nvrtc.BLOCK threads; arguments in the kernel's order."""
    Q.quantize("k", "z", 0x1000, 0x2000, 0x3000, 0x4000, rows=10, ld=16, total=total, stream=_Handle())
    (zcfg, zkernel, zargs), (cfg, kernel, args) = launches
    assert zkernel == "z" and zargs == (0x4000,)
    assert kernel == "k" and [int(x) for x in args] == [0x1000, 0x2000, 0x3000, 0x4000, 10, 16, total]
    assert isinstance(args[0], np.uintp) and isinstance(args[-1], np.int64)
    assert _x(cfg.grid) == blocks and _x(cfg.block) == nvrtc.BLOCK and _x(zcfg.grid) == _x(zcfg.block) == 1


def _x(dim):
    """The x extent of a LaunchConfig dimension (an int or a tuple, by cuda.core version)."""
    return dim if isinstance(dim, int) else tuple(dim)[0]


def test_quantize_without_amax_is_one_launch(launches):
    """No amax address: no zeroing kernel, a null amax argument."""
    Q.quantize("k", "z", 1, 2, 3, 0, rows=8, ld=8, total=64, stream=_Handle())
    ((_, kernel, args),) = launches
    assert kernel == "k" and int(args[3]) == 0


# ------------------------------------------------------------------------------ GPU
FP8_MAX = {"float8_e4m3fn": 448.0, "float8_e5m2": 57344.0}


@pytest.fixture(scope="module")
def torch():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available() or torch.cuda.get_device_capability() < (8, 9):
        pytest.skip("needs a CUDA device of compute capability 8.9+ (FP8)")
    return torch


def _reference(torch, wide, s, fp8):
    """torch's conversion of float32(s * x), saturated first (what cvt.rn.satfinite does)."""
    limit = FP8_MAX[fp8]
    y = wide.float() * torch.tensor(s, dtype=torch.float32, device=wide.device)
    return torch.clamp(y, -limit, limit).to(getattr(torch, fp8))


def _run(torch, wide, rows, s, fp8, amax=True):
    out = torch.full(wide.shape, 0x55, dtype=torch.uint8, device="cuda")  # poison (a finite FP8 value)
    scale = torch.tensor([s], dtype=torch.float32, device="cuda")
    am = torch.full((1,), float("nan"), dtype=torch.float32, device="cuda")  # poison: zeroed by the launch
    kernel, zero = Q.kernels(str(wide.dtype).removeprefix("torch."), fp8, 0)
    handle = streams.get_stream(None, device_id=0, package="torch")
    ld = wide.shape[-1]  # wide is (columns, ld) row-major: each row of it is one aux column
    Q.quantize(kernel, zero, wide.data_ptr(), out.data_ptr(), scale.data_ptr(), am.data_ptr() if amax else 0,
               rows=rows, ld=ld, total=wide.numel(), stream=handle)  # fmt: skip
    torch.cuda.synchronize()
    return out.view(getattr(torch, fp8)), am


@pytest.mark.gpu
@pytest.mark.parametrize("wide_dtype", ["float16", "bfloat16", "float32", "float64"])
@pytest.mark.parametrize("fp8", ["float8_e4m3fn", "float8_e5m2"])
def test_gpu_kernel_matches_torch_conversion(torch, wide_dtype, fp8):
    """Random values over the whole FP8 range (subnormals, ties, saturation): the kernel's FP8 bits
    equal torch's conversion of the saturated float32 product; padding rows become 0 and stay out of
    the amax, which is max |x| over the real rows, before scaling."""
    g = torch.Generator(device="cuda").manual_seed(3)
    cols, ld, rows = 37, 24, 21
    x = torch.randn(cols, ld, generator=g, device="cuda", dtype=torch.float64)
    x = x * torch.exp2(torch.randint(-12, 12, (cols, ld), generator=g, device="cuda").double())
    x[:, rows:] = 1e4  # padding: garbage that must not reach the output or the amax
    wide = x.to(getattr(torch, wide_dtype))
    s = 3.0 if fp8 == "float8_e4m3fn" else 200.0  # pushes the largest values past the FP8 maximum
    q, amax = _run(torch, wide, rows, s, fp8)
    want = _reference(torch, wide[:, :rows], s, fp8)
    got = q[:, :rows]
    assert torch.equal(got.view(torch.uint8), want.view(torch.uint8))
    assert (got.float().abs() == FP8_MAX[fp8]).any()  # some values saturated
    assert torch.equal(q[:, rows:].view(torch.uint8), torch.zeros_like(q[:, rows:].view(torch.uint8)))
    assert float(amax) == float(wide[:, :rows].float().abs().max())


@pytest.mark.gpu
def test_gpu_kernel_nan_infinity_and_no_amax(torch):
    """NaN stays NaN, +-infinity saturates to +-448 (e4m3); a NaN in the real rows makes the amax NaN;
    without an amax address nothing else is written."""
    wide = torch.tensor([[1.0, float("nan"), float("inf"), -float("inf"), -0.5, 7.0, 7.0, 7.0]],
                        dtype=torch.float32, device="cuda")  # fmt: skip
    q, amax = _run(torch, wide, 5, 1.0, "float8_e4m3fn")
    got = q[0, :5].float().tolist()
    assert got[0] == 1.0 and got[1] != got[1] and got[2:] == [448.0, -448.0, -0.5]
    assert float(amax) != float(amax)
    q, amax = _run(torch, wide[:, [0, 4, 5, 6]].contiguous(), 2, 2.0, "float8_e4m3fn", amax=False)
    assert q[0, :2].float().tolist() == [2.0, -1.0] and float(amax) != float(amax)  # poison untouched
