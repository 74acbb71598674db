"""Tests of nvmath.torch._fp8_cast: the cast-transpose, dgelu-cast-transpose-dbias and FP8 transpose
kernels of the FP8 layers.

CPU: the source compiles with NVRTC for Ada / Hopper (every instantiation, the saturating conversion);
the grid walks every tile once; a Python transcription of the kernel's index arithmetic (block, tile,
thread, the shared tile's transposed read) writes every element of ``q`` and ``q.T`` once with the
quantized value; the torch path (CPU, fallbacks) equals the layers' former ops; the launch arguments
(a recorder instead of cuda.core's launch); ``quantize_pair`` updates a scaling state exactly as
``ScalingState.quantize`` does (one pass delayed, an amax pass first under current scaling); the
switch (``NVMATH_FP8_FUSED_CAST=0``) brings back the former ops. And the kernels' own CUDA source run
on host threads (``fp8_cast_host.py``: g++, one std::thread per CUDA thread, only the PTX conversions
replaced): q, q.T, amax and partial sums bit for bit against torch and emulate_partials.
GPU (H200): the kernels' bits against torch's unfused ops (quantize, ``q.T.contiguous()``, amax,
column sums in the kernel's order), the dgelu pass against ``gelu_backward``.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from nvrtc_probe import compile_ptx

torch = pytest.importorskip("torch")

from nvmath.torch import _fp8_cast as C
from nvmath.torch import fp8
from nvmath.torch._fp8 import ROLES, ScalingState, quantize

E4, E5, BF16, F16, F32 = torch.float8_e4m3fn, torch.float8_e5m2, torch.bfloat16, torch.float16, torch.float32


def _ptx(arch: str) -> str:
    return compile_ptx(C._SOURCE, "cast.cu", C._NAMES.values(), arch)


@pytest.mark.parametrize("arch", ["sm_89", "sm_90"])
def test_source_compiles_every_instantiation(arch):
    """All 14 cast-transpose instantiations, the 6 grouped cast-transposes (no aux), the 12
    vectorized cast-transposes (plain and grouped), the 7 amax reductions and the 3 grouped ones, the
    current-scaling update, the grouped state update and scales and the transpose compile; the
    conversion saturates (cvt.rn.satfinite), the dgelu value is rounded to bfloat16 / float16, the
    amax is an atomic max, the reductions load 16-byte vectors and keep them in registers."""
    ptx = _ptx(arch)
    assert len(re.findall(r"\.entry", ptx)) == len(C._NAMES) == 46
    assert "div.rn.f32" in ptx  # (the update's 1 / amax: IEEE division, as torch's reciprocal)
    assert "ld.global.nc.v4" in ptx and ".local" not in ptx
    for instr in ("satfinite.e4m3x2.f32", "satfinite.e5m2x2.f32", "cvt.rn.bf16.f32", "cvt.rn.f16.f32"):
        assert instr in ptx
    assert re.search(r"(atom|red)\.(shared|global)\.max\.u32", ptx)


# ---------------------------------------------------------------- tiling
@pytest.mark.parametrize(
    ("rows", "cols"), [(2, 2), (64, 64), (130, 66), (8192, 16384), (16384, 4096), (10**6, 16)]
)
def test_grid_walks_every_tile_once(rows, cols):
    """gridDim.x covers the columns in 64-wide strips; the block rows walk every 64-row tile exactly
    once; about TARGET_BLOCKS blocks (never more block rows than tiles, nor than CUDA's grid.y limit)."""
    gx, gy = C.grid(rows, cols)
    tiles = -(-rows // 64)
    assert gx * 64 >= cols > (gx - 1) * 64
    assert 1 <= gy <= min(tiles, C.MAX_GRID_Y)
    walked = sorted(t for by in range(gy) for t in C.tiles_of_block_row(rows, gy, by))
    assert walked == list(range(tiles))
    assert gx * gy <= max(C.TARGET_BLOCKS + gx, gx)


def _kernel_in_python(x, aux, scale, dtype, colsum):
    """The kernel's index arithmetic transcribed (vectorized over the 32 x-threads): returns q, qt, the
    write counts of each, amax and partial (the values through torch's own rounding)."""
    rows, cols = x.shape
    gx, gy = C.grid(rows, cols)
    v_all = x.float() if aux is None else torch.ops.aten.gelu_backward(x, aux, approximate="tanh").float()
    qv = quantize(v_all, scale, dtype).view(torch.uint8) if scale is not None else None
    q = torch.zeros(rows * cols, dtype=torch.uint8)
    qt = torch.zeros(rows * cols, dtype=torch.uint8)
    nq, nqt = torch.zeros(rows * cols, dtype=torch.int32), torch.zeros(rows * cols, dtype=torch.int32)
    partial = np.zeros((gy, cols), dtype=np.float32)
    amax = 0.0
    tx = np.arange(32)
    for bx in range(gx):
        for by in range(gy):
            sums = np.zeros((8, 64), dtype=np.float32)
            c = bx * 64 + 2 * tx
            for t in C.tiles_of_block_row(rows, gy, by):
                r0 = t * 64
                tile = np.zeros((64, 66), dtype=np.uint8)
                for ty in range(8):
                    for k in range(8):
                        lr, r = ty + 8 * k, r0 + ty + 8 * k
                        ok = (c < cols) & (r < rows)
                        for j in (0, 1):  # (the two columns of the 4-byte load)
                            cc = c[ok] + j
                            if r >= rows or not len(cc):
                                continue
                            vals = v_all[r, cc].numpy()
                            amax = max(amax, float(np.abs(vals).max()))
                            sums[ty, 2 * tx[ok] + j] += vals
                            if qv is not None:
                                idx = torch.as_tensor(r * cols + cc)
                                q[idx] = qv[r, cc]
                                nq[idx] += 1
                                tile[lr, 2 * tx[ok] + j] = qv[r, cc].numpy()
                if qv is None:
                    continue
                for ty in range(8):
                    for k in range(8):
                        lc = ty + 8 * k
                        cc, rr = bx * 64 + lc, r0 + 2 * tx
                        ok = (cc < cols) & (rr < rows)
                        for j in (0, 1):
                            idx = torch.as_tensor(cc * rows + rr[ok] + j)
                            qt[idx] = torch.as_tensor(tile[2 * tx[ok] + j, lc])
                            nqt[idx] += 1
            if colsum:
                acc = sums[0].copy()
                for j in range(1, 8):
                    acc += sums[j]
                n = min(64, cols - bx * 64)
                partial[by, bx * 64 : bx * 64 + n] = acc[:n]
    return q, qt, nq, nqt, amax, partial


@pytest.mark.parametrize(("rows", "cols"), [(2, 2), (64, 64), (130, 66), (66, 194)])
@pytest.mark.parametrize("dgelu", [False, True], ids=["cast", "dgelu"])
def test_kernel_index_math_writes_every_element_once(rows, cols, dgelu):
    """The transcribed kernel writes each element of q and of q.T exactly once, q equals the quantized
    values, q.T equals q transposed, the amax is max |v|, and the partial column sums add up to the
    column sums (the order of :func:`emulate_partials`, bit for bit)."""
    torch.manual_seed(rows + cols)
    x = torch.randn(rows, cols, dtype=BF16)
    aux = torch.randn(rows, cols, dtype=BF16) if dgelu else None
    scale = torch.tensor(3.0)
    q, qt, nq, nqt, amax, partial = _kernel_in_python(x, aux, scale, E4, True)
    assert bool((nq == 1).all()) and bool((nqt == 1).all())
    want = C.torch_cast_transpose(x, scale, E4, aux=aux, colsum=True)
    assert torch.equal(q.view(rows, cols), want.q.view(torch.uint8))
    assert torch.equal(qt.view(cols, rows), want.q.view(torch.uint8).T.contiguous())
    assert amax == float(want.amax)
    v = x if aux is None else torch.ops.aten.gelu_backward(x, aux, approximate="tanh")
    assert np.array_equal(partial, C.emulate_partials(v.float().numpy()))
    np.testing.assert_allclose(partial.sum(0), v.double().sum(0).numpy(), rtol=1e-4, atol=1e-3)


def test_emulate_partials_shape_and_sums():
    """emulate_partials gives (gridDim.y, C) rows that add up to the column sums."""
    v = np.random.default_rng(0).standard_normal((1000, 130)).astype(np.float32)
    p = C.emulate_partials(v)
    assert p.shape == (C.grid(1000, 130)[1], 130)
    np.testing.assert_allclose(p.sum(0), v.astype(np.float64).sum(0), rtol=1e-4, atol=1e-4)


# ---------------------------------------------------------------- the torch path
@pytest.mark.parametrize("dtype", [E4, E5])
def test_torch_path_equals_the_layers_former_ops(dtype):
    """On CPU tensors cast_transpose is torch's quantize (NaN-poisoned on a non-finite amax), q.T
    contiguous, amax_of and the float32 column sums; with aux, of gelu_backward's output."""
    torch.manual_seed(1)
    x, z, s = torch.randn(48, 32, dtype=BF16), torch.randn(48, 32, dtype=BF16), torch.tensor(7.0)
    for aux in (None, z):
        v = x if aux is None else torch.ops.aten.gelu_backward(x, z, approximate="tanh")
        r = C.cast_transpose(x, s, dtype, aux=aux, colsum=True)
        assert torch.equal(r.q.float(), quantize(v, s, dtype).float())
        assert r.qt.is_contiguous() and torch.equal(r.qt.float(), r.q.T.float())
        assert float(r.amax) == float(v.float().abs().max())
        assert torch.equal(r.colsum, v.float().sum(0))
    only = C.cast_transpose(x, None, dtype)
    assert only.q is None and only.qt is None and only.colsum is None
    bad = x.clone()
    bad[3, 4] = float("inf")
    assert torch.isnan(C.cast_transpose(bad, s, dtype).q.float()).all()


def test_torch_path_float16_aux_of_a_bfloat16_gradient():
    """A float16 aux (cuBLASLt's over an FP8 D) with a bfloat16 gradient: the GELU derivative of the
    float16 values in float32, rounded once to bfloat16 (what the kernel computes)."""
    torch.manual_seed(2)
    x, z, s = torch.randn(32, 16, dtype=BF16), torch.randn(32, 16, dtype=F16), torch.tensor(2.0)
    r = C.cast_transpose(x, s, E5, aux=z, colsum=True)
    v = torch.ops.aten.gelu_backward(x.float(), z.float(), approximate="tanh").to(BF16)
    assert torch.equal(r.q.float(), quantize(v, s, E5).float()) and torch.equal(r.colsum, v.float().sum(0))


def test_transpose_on_cpu_is_a_contiguous_transpose():
    """transpose() of a CPU FP8 tensor is q.T.contiguous()."""
    q = torch.randn(32, 16).to(E4)
    t = C.transpose(q)
    assert t.shape == (16, 32) and t.is_contiguous() and torch.equal(t.float(), q.T.float())


def test_kernel_shape_rules():
    """The kernel takes 2-D contiguous tensors with even sizes and 2-element-aligned data; others
    (and CPU tensors) take the torch path."""
    x = torch.zeros(4, 6, dtype=BF16)
    assert C._kernel_shape_ok(x)
    assert not C._kernel_shape_ok(torch.zeros(3, 6, dtype=BF16))
    assert not C._kernel_shape_ok(torch.zeros(4, 5, dtype=BF16))
    assert not C._kernel_shape_ok(torch.zeros(6, 4, dtype=BF16).T)
    assert not C._kernel_shape_ok(torch.zeros(2, 4, 6, dtype=BF16))
    assert not C._kernel_shape_ok(torch.zeros(4, 8, dtype=BF16)[:, 1:7].contiguous()[0:0])
    assert not C._kernel_shape_ok(torch.zeros(26, dtype=BF16)[1:25].view(4, 6))  # (2-byte aligned only)
    assert not C.available(x)  # (a CPU tensor)


@pytest.fixture
def recorder(cast_recorder, monkeypatch):
    """:func:`cast_recorder` with every tensor shape taken by the kernels."""
    monkeypatch.setattr(C, "_kernel_shape_ok", lambda x: True)
    return cast_recorder


def test_launch_arguments(recorder):
    """One launch of the (wide, fp8, dgelu) instantiation on grid() with 32 x 8 threads; pointers of x,
    aux, q, q.T, the scale, the amax (zeroed first) and the partial sums ((gridDim.y, C) float32), then
    rows and columns; an amax-only pass passes null q, q.T and scale; the transpose launches alike."""
    x, z = torch.ones(256, 192, dtype=BF16), torch.ones(256, 192, dtype=BF16)
    r = C.cast_transpose(x, torch.tensor(2.0), E5, aux=z, colsum=True)
    ((config, kernel, args),) = recorder
    assert kernel == (BF16, E5, BF16)
    assert tuple(config.grid)[:2] == C.grid(256, 192) and tuple(config.block)[:2] == C.THREADS
    assert int(args[0]) == x.data_ptr() and int(args[1]) == z.data_ptr()
    assert int(args[2]) == r.q.data_ptr() and int(args[3]) == r.qt.data_ptr()
    assert r.q.shape == (256, 192) and r.qt.shape == (192, 256) and r.q.dtype == E5
    assert all(int(a) != 0 for a in args[4:7]) and (int(args[7]), int(args[8])) == (256, 192)
    assert r.colsum.shape == (192,) and float(r.amax) == 0.0
    recorder.clear()
    r = C.cast_transpose(x, None, E4)
    ((config, kernel, args),) = recorder
    assert kernel == ("amax", BF16, None) and r.q is None and r.colsum is None
    assert tuple(config.grid)[:2] == (C.amax_blocks(x.numel(), 2), 1) and tuple(config.block)[:2] == C.THREADS
    assert int(args[0]) == x.data_ptr() and int(args[1]) == 0 and int(args[2]) != 0
    assert int(args[3]) == x.numel() and float(r.amax) == 0.0
    recorder.clear()
    C.cast_transpose(x, None, E5, aux=z)
    ((config, kernel, args),) = recorder
    assert kernel == ("amax", BF16, BF16) and int(args[1]) == z.data_ptr()
    recorder.clear()
    C.cast_transpose(x, None, E4, colsum=True)  # (the sums: the cast-transpose's amax-only pass)
    ((config, kernel, args),) = recorder
    assert kernel == ("vector", BF16, E4) and int(args[6]) != 0  # (192 columns: whole 8-vectors)
    recorder.clear()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(C, "VECTOR_AMAX", False)
        mp.setattr(C, "VECTOR_CAST", False)
        r = C.cast_transpose(x, None, E4)
    ((config, kernel, args),) = recorder
    assert kernel == (BF16, E4, None) and r.q is None
    assert [int(a) for a in (args[1], args[2], args[3], args[4], args[6])] == [0] * 5
    recorder.clear()
    q = torch.zeros(64, 128, dtype=E4)
    t = C.transpose(q)
    ((config, kernel, args),) = recorder
    assert kernel == "transpose" and t.shape == (128, 64) and (int(args[2]), int(args[3])) == (64, 128)


def test_vector_amax_applies_to_aligned_whole_vectors(monkeypatch):
    """The vectorized amax takes 16-byte aligned tensors of a whole number of 16-byte vectors (x and the
    aux); anything else runs the cast-transpose's amax-only pass; NVMATH_FP8_VECTOR_AMAX=0 never."""
    base = torch.zeros(4096, dtype=BF16)
    assert base.data_ptr() % 16 == 0
    x = base[:1024].view(32, 32)
    assert C.vector_amax_applies(x, None) and C.vector_amax_applies(x, base[2048:3072].view(32, 32))
    assert not C.vector_amax_applies(base[2:1026].view(32, 32), None)  # (4-byte aligned)
    assert not C.vector_amax_applies(base[:36].view(6, 6), None)  # (36 elements: 4.5 vectors)
    assert not C.vector_amax_applies(x, base[2:1026].view(32, 32))
    assert C.vector_amax_applies(torch.zeros(6, 2, dtype=F32), None)  # (float32: 4 per vector)
    monkeypatch.setattr(C, "VECTOR_AMAX", False)
    assert not C.vector_amax_applies(x, None)


@pytest.mark.parametrize(
    ("numel", "size", "blocks"),
    [(8, 2, 1), (8192, 2, 1), (8200, 2, 2), (8192 * 16384, 2, C.AMAX_BLOCKS), (4096, 4, 1)],
)
def test_amax_blocks(numel, size, blocks):
    """One block per 256 threads x AMAX_UNROLL vectors of 16 bytes, at least one, at most AMAX_BLOCKS."""
    assert C.amax_blocks(numel, size) == blocks


@pytest.mark.parametrize(("value", "on"), [(None, True), ("1", True), ("0", False), ("no", False)])
def test_vector_amax_and_prefetch_environment_switches(value, on):
    """NVMATH_FP8_VECTOR_AMAX: unset or 1 -> the vectorized amax; 0 / no -> the cast-transpose's pass.
    NVMATH_FP8_CAST_PREFETCH likewise, written into the kernel source as NVMATH_CT_PREFETCH."""
    import os
    import subprocess
    import sys

    names = ("NVMATH_FP8_VECTOR_AMAX", "NVMATH_FP8_CAST_PREFETCH")
    env = {k: v for k, v in os.environ.items() if k not in names}
    if value is not None:
        env.update(dict.fromkeys(names, value))
    code = (
        "from nvmath.torch import _fp8_cast as C; "
        "print(C.VECTOR_AMAX, C.PREFETCH, f'#define NVMATH_CT_PREFETCH {int(C.PREFETCH)}' in C._SOURCE)"
    )
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == [str(on), str(on), "True"]


def test_current_update_launch(recorder, monkeypatch):
    """current_update launches the one-thread update with the amax, the role's scale, history and flag
    elements, a new scalar for the used scale, fp8_max and 2**margin; not on CPU tensors or with the
    kernels off (None: the caller's torch update runs)."""
    st = ScalingState(fp8.CurrentScaling(margin=2))
    amax = torch.tensor([3.0])
    used = C.current_update(amax[0], st.scale[2], st.amax_history[0, 2], st.found_inf[2], 57344.0, 2)
    ((config, kernel, args),) = recorder
    assert kernel == "current_scale" and tuple(config.grid)[:2] == (1, 1)
    assert tuple(config.block)[:2] == (1, 1)
    ptrs = [t.data_ptr() for t in (amax, st.scale[2], st.amax_history[0, 2], st.found_inf[2])]
    assert [int(a) for a in args[:4]] == ptrs and int(args[4]) == used.data_ptr()
    assert float(args[5]) == 57344.0 and float(args[6]) == 4.0 and used.shape == ()
    monkeypatch.setattr(C, "ENABLED", False)
    assert C.current_update(amax[0], st.scale[2], st.amax_history[0, 2], st.found_inf[2], 57344.0, 2) is None
    monkeypatch.undo()
    assert C.current_update(amax[0], st.scale[2], st.amax_history[0, 2], st.found_inf[2], 57344.0, 2) is None


def test_kernels_looked_up_once_per_device(monkeypatch):
    """The kernels of a device come from the NVRTC cache once, then from a per-device dictionary (no
    key rebuilt per launch); a build that fails is not kept (None, and the kernels go out of use)."""
    from nvmath._internal import nvrtc

    calls = []

    def compiled(source, names, device_id, **kwargs):
        calls.append(device_id)
        if device_id == 3:
            raise RuntimeError("NVRTC_ERROR_COMPILATION")
        return {k: (device_id, k) for k in names}

    monkeypatch.setattr(nvrtc, "compiled_kernels", compiled)
    monkeypatch.setattr(C, "_LOADED", {})
    monkeypatch.setattr(C, "_broken", [])
    k0 = C._kernels(0)
    assert C._kernels(0) is k0 and C._kernels(1)[("amax", BF16, None)] == (1, ("amax", BF16, None))
    assert calls == [0, 1] and not C.broken()
    assert C._kernels(3) is None and 3 not in C._LOADED and C.broken()


def test_switched_off_runs_the_former_ops(monkeypatch):
    """ENABLED false (NVMATH_FP8_FUSED_CAST=0): not in use, no tensor takes the kernel, transpose is
    torch's, weight gradients come out of the GEMM in float32 (then cast), and quantize_pair is the
    state's quantize plus torch's transpose and sum."""
    monkeypatch.setattr(C, "ENABLED", False)
    monkeypatch.setattr(C, "_kernel_shape_ok", lambda x: True)
    monkeypatch.setattr(torch.Tensor, "is_cuda", property(lambda self: True))
    assert not C.in_use() and C.wgrad_dtype(BF16) == F32
    assert not C.available(torch.zeros(4, 6, dtype=BF16))
    monkeypatch.setattr(C, "_launch", lambda *a: pytest.fail("a kernel launched while switched off"))
    q = torch.randn(8, 4).to(E4)
    assert torch.equal(C.transpose(q).float(), q.T.float())
    monkeypatch.undo()
    monkeypatch.setattr(C, "ENABLED", False)
    st, twin = ScalingState(fp8.CurrentScaling()), ScalingState(fp8.CurrentScaling())
    x = torch.randn(16, 8, dtype=BF16)
    q, qt, s, sums = C.quantize_pair(st, x, "input", colsum=True)
    q2, s2 = twin.quantize(x, "input")
    assert torch.equal(q.float(), q2.float()) and torch.equal(s, s2) and torch.equal(qt.float(), q.T.float())
    assert torch.equal(sums, x.float().sum(0))


@pytest.mark.parametrize(
    ("var", "attr"), [("NVMATH_FP8_FUSED_CAST", "ENABLED"), ("NVMATH_FP8_VECTOR_CAST", "VECTOR_CAST")]
)
@pytest.mark.parametrize(("value", "on"), [(None, True), ("1", True), ("0", False), ("off", False)])
def test_environment_switch(var, attr, value, on):
    """NVMATH_FP8_FUSED_CAST (the cast kernels) and NVMATH_FP8_VECTOR_CAST (their vectorized
    cast-transposes): unset or 1 -> on; 0 / off -> off (read at import)."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != var}
    if value is not None:
        env[var] = value
    code = f"from nvmath.torch import _fp8_cast; print(_fp8_cast.{attr})"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == str(on)


def test_refused_launch_falls_back_for_the_process(recorder, monkeypatch):
    """A launch cuda.core refuses: logged, the torch path computes this call, and the kernels are not
    used again in this process (in_use() false)."""
    import cuda.core

    def refuse(*args):
        raise RuntimeError("CUDA_ERROR_INVALID_VALUE")

    monkeypatch.setattr(cuda.core, "launch", refuse)
    monkeypatch.setattr(C, "_broken", [])
    x = torch.randn(4, 6, dtype=BF16)
    r = C.cast_transpose(x, torch.tensor(2.0), E4)
    assert torch.equal(r.q.float(), quantize(x, torch.tensor(2.0), E4).float())
    assert C.broken() and not C.in_use()


# ---------------------------------------------------------------- the scaling state
@pytest.mark.parametrize("recipe", [fp8.DelayedScaling(amax_history_len=4), fp8.CurrentScaling(margin=1)],
                         ids=["delayed", "current"])  # fmt: skip
def test_quantize_pair_updates_the_state_as_quantize(recipe):
    """quantize_pair's q, scale and the state's buffers equal ScalingState.quantize's, step after step;
    q.T is q transposed; delayed scaling runs one pass, current scaling an amax pass first."""
    a, b = ScalingState(recipe), ScalingState(recipe)
    for i in range(3):
        x = torch.randn(64, 32, dtype=BF16) * (i + 1)
        q, qt, s, sums = C.quantize_pair(a, x, "grad_output", colsum=True)
        q2, s2 = b.quantize(x, "grad_output")
        assert torch.equal(q.float(), q2.float()) and torch.equal(s, s2)
        assert torch.equal(qt.float(), q.T.float())
        assert torch.equal(sums, x.float().sum(0))
        for u, v in zip(a.buffers(), b.buffers()):
            assert torch.equal(u, v)
    passes = []

    def run(scale):
        passes.append(scale is None)
        return None, torch.tensor(2.0)

    a.quantize_by("input", run)
    assert passes == ([False] if recipe.delayed else [True, False])


def test_quantize_by_nonfinite_amax_poisons_and_flags():
    """A non-finite amax from the pass: the scale returned is NaN, the history and scale are kept,
    found_inf counts it."""
    st = ScalingState(fp8.DelayedScaling(amax_history_len=2))
    before = [t.clone() for t in (st.scale, st.amax_history)]
    _, s = st.quantize_by("input", lambda scale: (None, torch.tensor(float("inf"))))
    assert torch.isnan(s) and int(st.found_inf[0]) == 1
    assert torch.equal(st.scale, before[0]) and torch.equal(st.amax_history, before[1])


# ---------------------------------------------------------------- H200
def _gpu():
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    if torch.cuda.get_device_capability() < (8, 9):
        pytest.skip("FP8 needs compute capability 8.9")


@pytest.mark.gpu
@pytest.mark.parametrize("wide", [BF16, F16, F32], ids=["bf16", "fp16", "fp32"])
@pytest.mark.parametrize("dtype", [E4, E5], ids=["e4m3", "e5m2"])
@pytest.mark.parametrize(("rows", "cols"), [(130, 66), (1024, 768), (8192, 4096)])
def test_gpu_cast_transpose_bit_exact(wide, dtype, rows, cols):
    """The kernel's q is torch's saturating quantize bit for bit, q.T its transpose, the amax
    max |x|, the column sums those of emulate_partials (the kernel's order) summed by torch."""
    _gpu()
    torch.manual_seed(rows)
    x = (torch.randn(rows, cols, device="cuda") * 100).to(wide)
    s = torch.tensor(1.5, device="cuda")
    assert C.available(x)
    r = C.cast_transpose(x, s, dtype, colsum=True)
    torch.cuda.synchronize()
    assert not C.broken()
    want = quantize(x, s, dtype)
    assert torch.equal(r.q.view(torch.uint8), want.view(torch.uint8))
    assert torch.equal(r.qt.view(torch.uint8), want.view(torch.uint8).T.contiguous())
    assert float(r.amax) == float(x.float().abs().max())
    partial = torch.from_numpy(C.emulate_partials(x.float().cpu().numpy())).cuda()
    assert torch.equal(r.colsum, partial.sum(0))
    only = C.cast_transpose(x, None, dtype)
    assert only.q is None and float(only.amax) == float(r.amax)


@pytest.mark.gpu
@pytest.mark.parametrize(("wide", "aux_dtype"), [(BF16, BF16), (F16, F16), (BF16, F16)],
                         ids=["bf16", "fp16", "bf16-fp16aux"])  # fmt: skip
@pytest.mark.parametrize(("rows", "cols"), [(130, 66), (2048, 4096)])
def test_gpu_dgelu_cast_transpose_matches_gelu_backward(wide, aux_dtype, rows, cols):
    """dz = dh * gelu'(z) rounded to the layer dtype: torch's gelu_backward up to the float32 formula's
    last bits (FMA contraction, tanhf), so at least 99% of the FP8 bytes equal torch's quantize of
    gelu_backward and the rest one FP8 step away; q.T the transpose; the column sums and amax those
    of the values."""
    _gpu()
    torch.manual_seed(cols)
    dh = torch.randn(rows, cols, device="cuda").to(wide)
    z = (torch.randn(rows, cols, device="cuda") * 3).to(aux_dtype)
    s = torch.tensor(4.0, device="cuda")
    assert C.available(dh, z)
    r = C.cast_transpose(dh, s, E5, aux=z, colsum=True)
    ref = torch.ops.aten.gelu_backward(dh.float(), z.float(), approximate="tanh").to(wide)
    want = quantize(ref, s, E5).view(torch.uint8)
    assert _within_one_fp8_step(r.q.view(torch.uint8).cpu().numpy(), want.cpu().numpy())
    assert torch.equal(r.qt.view(torch.uint8), r.q.view(torch.uint8).T.contiguous())
    torch.testing.assert_close(r.amax, ref.float().abs().max(), rtol=1e-2, atol=0)
    torch.testing.assert_close(r.colsum, ref.float().sum(0), rtol=1e-2, atol=1e-2)


@pytest.mark.gpu
@pytest.mark.parametrize("wide", [BF16, F16, F32], ids=["bf16", "fp16", "fp32"])
@pytest.mark.parametrize("dgelu", [False, True], ids=["plain", "dgelu"])
@pytest.mark.parametrize(("rows", "cols"), [(130, 66), (1024, 768), (8192, 16384)])
def test_gpu_vector_amax_equals_the_tiled_pass(wide, dgelu, rows, cols, monkeypatch):
    """The amax-only pass (current scaling's first pass) by the vectorized reduction is the
    cast-transpose kernel's amax-only pass bit for bit (130 x 66 bfloat16: not whole vectors, the tiled
    pass itself), and max |x| for the plain pass; a NaN wins."""
    _gpu()
    torch.manual_seed(rows)
    x = (torch.randn(rows, cols, device="cuda") * 100).to(wide)
    aux = (torch.randn(rows, cols, device="cuda") * 3).to(wide) if dgelu else None
    vec = C.cast_transpose(x, None, E5, aux=aux).amax
    monkeypatch.setattr(C, "VECTOR_AMAX", False)
    tiled = C.cast_transpose(x, None, E5, aux=aux).amax
    torch.cuda.synchronize()
    assert not C.broken() and torch.equal(vec, tiled)
    if not dgelu:
        assert float(vec) == float(x.float().abs().max())
    monkeypatch.setattr(C, "VECTOR_AMAX", True)
    x.view(-1)[rows * cols // 2] = float("nan")
    assert torch.isnan(C.cast_transpose(x, None, E5, aux=aux).amax)


@pytest.mark.gpu
def test_gpu_current_update_equals_the_torch_update():
    """On the GPU, current scaling's one-launch update leaves every buffer as the torch update does,
    bit for bit, and returns the same scale (NaN where that is NaN), for finite, zero, tiny, huge and
    non-finite amaxes, both roles' formats, margins 0 and 2."""
    _gpu()
    for margin in (0, 2):
        for amax in AMAXES:
            a, b = (ScalingState(fp8.CurrentScaling(margin=margin)).cuda() for _ in range(2))
            x = torch.tensor(amax, device="cuda")
            for role in ("input", "grad_output"):
                _, ua = a.quantize_by(role, lambda s: (None, x), finish=C.current_update)
                _, ub = b.quantize_by(role, lambda s: (None, x))
                assert torch.equal(ua, ub) or (torch.isnan(ua) and torch.isnan(ub)), (margin, amax, role)
            for name, buf in a.state_dict().items():
                assert torch.equal(buf, b.state_dict()[name]), (margin, amax, name)


@pytest.mark.gpu
@pytest.mark.parametrize(("rows", "cols"), [(130, 66), (8192, 16384)])
def test_gpu_fp8_transpose_bit_exact(rows, cols):
    """The FP8 transpose kernel equals q.T.contiguous() bit for bit."""
    _gpu()
    q = torch.randint(0, 256, (rows, cols), dtype=torch.uint8, device="cuda").view(E4)
    t = C.transpose(q)
    assert torch.equal(t.view(torch.uint8), q.view(torch.uint8).T.contiguous())


@pytest.mark.gpu
def test_gpu_kernels_launch_from_the_autograd_thread():
    """The kernels launch from torch's autograd thread (no current context there): an FP8 MLP block's
    backward runs them (no CUDA_ERROR_INVALID_CONTEXT) and they did not fall back."""
    import nvmath.torch as nt

    _gpu()
    m = nt.MLP(256, 1024, 256, fp8=fp8.DelayedScaling(), dtype=BF16).cuda()
    x = torch.randn(512, 256, dtype=BF16, device="cuda", requires_grad=True)
    m(x).float().sum().backward()
    torch.cuda.synchronize()
    assert not C.broken() and torch.isfinite(x.grad).all()


def _within_one_fp8_step(a, b, frac=0.99):
    """FP8 codes ``a``, ``b`` (uint8): at least ``frac`` equal, the rest one step apart (the float32
    GELU derivative's last bits differ between implementations: torch's CPU tanh is not CUDA's
    tanhf, and where gelu' cancels the float32 result keeps few correct bits)."""
    a, b = np.asarray(a).astype(np.int32), np.asarray(b).astype(np.int32)
    same_sign = (a >> 7) == (b >> 7)
    near = np.where(same_sign, np.abs((a & 0x7F) - (b & 0x7F)) <= 1, ((a & 0x7F) <= 1) & ((b & 0x7F) <= 1))
    return bool(near.all()) and float((a == b).mean()) >= frac


# ---------------------------------------------------------------- the CUDA source on host threads
def _host_build(tmp_path_factory, prefetch=None):
    import importlib.util
    import pathlib

    path = pathlib.Path(__file__).with_name("fp8_cast_host.py")
    spec = importlib.util.spec_from_file_location("fp8_cast_host", path)
    fp8_cast_host = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fp8_cast_host)
    built = fp8_cast_host.build(tmp_path_factory.mktemp("cast_host"), prefetch)
    if built is None:
        pytest.skip("no g++ to build the host emulation of the kernels")
    return built


@pytest.fixture(scope="module")
def host(tmp_path_factory):
    """The kernels' own source compiled for the CPU (fp8_cast_host: one std::thread per CUDA thread)."""
    return _host_build(tmp_path_factory)


def _bits(t):
    return t.contiguous().view(torch.int16 if t.element_size() == 2 else torch.int32).numpy().view(
        np.uint16 if t.element_size() == 2 else np.float32
    )  # fmt: skip


@pytest.mark.parametrize(
    ("rows", "cols", "gy"), [(2, 2, None), (130, 66, None), (66, 194, None), (320, 70, 2), (194, 66, 2)]
)
@pytest.mark.parametrize(
    ("wide", "fp8_dtype"), [(BF16, E4), (F16, E5), (F32, E4)], ids=["bf16", "fp16", "fp32"]
)
def test_kernel_source_on_host_threads_cast(host, rows, cols, gy, wide, fp8_dtype):
    """The kernel's own code (tiles, bounds, shared tile, warp/block reductions; gy=2: blocks walking
    several tiles) run on host threads: q is torch's saturating quantize bit for bit, q.T its
    transpose, the amax max |x|, the partial sums those of emulate_partials; the amax-only pass writes
    nothing but the amax and the sums."""
    torch.manual_seed(rows * cols)
    x = (torch.randn(rows, cols) * 200).to(wide)
    got = host.cast(_bits(x), str(wide).split(".")[-1], 1.5, fp8_dtype == E5, gy=gy)
    want = quantize(x, torch.tensor(1.5), fp8_dtype).view(torch.uint8).numpy()
    assert np.array_equal(got["q"], want) and np.array_equal(got["qt"], want.T)
    assert got["amax"] == float(x.float().abs().max())
    assert np.array_equal(got["partial"], C.emulate_partials(x.float().numpy(), gy))
    only = host.cast(_bits(x), str(wide).split(".")[-1], None, fp8_dtype == E5, gy=gy)
    assert only["q"] is None and only["amax"] == got["amax"]
    assert np.array_equal(only["partial"], got["partial"])


@pytest.mark.parametrize(("rows", "cols"), [(130, 66), (64, 128)])
@pytest.mark.parametrize(("wide", "aux_dtype"), [(BF16, BF16), (F16, F16), (BF16, F16), (F32, F32)],
                         ids=["bf16", "fp16", "bf16-fp16aux", "fp32"])  # fmt: skip
def test_kernel_source_on_host_threads_dgelu(host, rows, cols, wide, aux_dtype):
    """The dgelu-cast-transpose-dbias instantiations on host threads: the values are torch's
    gelu_backward rounded to the gradient's dtype up to the float32 formula's last bits (at least 99%
    of the e5m2 bytes equal, the rest one step away), q.T the transpose, the sums those of the values."""
    torch.manual_seed(cols)
    dh, z = torch.randn(rows, cols).to(wide), (torch.randn(rows, cols) * 3).to(aux_dtype)
    name = str(wide).split(".")[-1]
    got = host.cast(_bits(dh), name, 4.0, True, aux=_bits(z), aux_wide=str(aux_dtype).split(".")[-1])
    v = torch.ops.aten.gelu_backward(dh.float(), z.float(), approximate="tanh").to(wide)
    want = quantize(v, torch.tensor(4.0), E5).view(torch.uint8).numpy()
    assert _within_one_fp8_step(got["q"], want) and np.array_equal(got["qt"], got["q"].T)
    np.testing.assert_allclose(got["amax"], float(v.float().abs().max()), rtol=1e-2)
    np.testing.assert_allclose(got["partial"].sum(0), v.float().sum(0).numpy(), rtol=1e-2, atol=5e-2)


def test_kernel_source_on_host_threads_prefetch_changes_nothing(host, tmp_path_factory):
    """The plain cast-transpose with its next tile's loads issued early (PREFETCH, the default) and
    with each tile's loads at its start give the same bytes, amax and partial sums (one tile per block
    row, several, a partial last tile; the dgelu pass, the same schedule in both builds, alike)."""
    other = _host_build(tmp_path_factory, prefetch=not C.PREFETCH)
    torch.manual_seed(11)
    for rows, cols, gy in ((130, 66, None), (320, 70, 2), (194, 66, 2)):
        x, z = (torch.randn(rows, cols) * 50).to(BF16), (torch.randn(rows, cols) * 3).to(F16)
        for aux in (None, z):
            args = {"aux": None, "aux_wide": None, "gy": gy}
            if aux is not None:
                args.update(aux=_bits(aux), aux_wide="float16")
            a = host.cast(_bits(x), "bfloat16", 2.0, True, **args)
            b = other.cast(_bits(x), "bfloat16", 2.0, True, **args)
            assert np.array_equal(a["q"], b["q"]) and np.array_equal(a["qt"], b["qt"])
            assert a["amax"] == b["amax"]
            assert np.array_equal(a["partial"], b["partial"])


@pytest.mark.parametrize(
    ("rows", "cols", "blocks"), [(2, 4, None), (64, 66, None), (64, 130, 1), (96, 98, 2)]
)
@pytest.mark.parametrize("wide", [BF16, F16, F32], ids=["bf16", "fp16", "fp32"])
def test_kernel_source_on_host_threads_amax(host, rows, cols, blocks, wide):
    """The vectorized amax reduction on host threads (blocks=1, 2: threads looping over several rounds
    of four vectors, the last round partial) is max |x| bit for bit, the cast-transpose's amax-only
    pass's value; a NaN anywhere wins."""
    torch.manual_seed(rows + cols)
    x = (torch.randn(rows, cols) * 300).to(wide)
    name = str(wide).split(".")[-1]
    got = host.amax(_bits(x), name, blocks=blocks)
    assert got == float(x.float().abs().max()) == host.cast(_bits(x), name, None, False)["amax"]
    x.view(-1)[-1] = float("nan")
    assert np.isnan(host.amax(_bits(x), name, blocks=blocks))


@pytest.mark.parametrize(("rows", "cols", "blocks"), [(64, 66, None), (96, 98, 2)])
@pytest.mark.parametrize(("wide", "aux_dtype"), [(BF16, BF16), (F16, F16), (BF16, F16), (F32, F32)],
                         ids=["bf16", "fp16", "bf16-fp16aux", "fp32"])  # fmt: skip
def test_kernel_source_on_host_threads_amax_dgelu(host, rows, cols, blocks, wide, aux_dtype):
    """The dgelu amax reduction on host threads equals the dgelu cast-transpose's amax-only pass bit for
    bit (the same rounded values, the same maximum) and max |gelu_backward| to the formula's last bits."""
    torch.manual_seed(cols)
    dh, z = torch.randn(rows, cols).to(wide), (torch.randn(rows, cols) * 3).to(aux_dtype)
    name, aux_name = str(wide).split(".")[-1], str(aux_dtype).split(".")[-1]
    got = host.amax(_bits(dh), name, aux=_bits(z), aux_wide=aux_name, blocks=blocks)
    tiled = host.cast(_bits(dh), name, None, True, aux=_bits(z), aux_wide=aux_name, colsum=False)
    assert got == tiled["amax"]
    v = torch.ops.aten.gelu_backward(dh.float(), z.float(), approximate="tanh").to(wide)
    np.testing.assert_allclose(got, float(v.float().abs().max()), rtol=1e-2)


AMAXES = [1.0, 3.3e-5, 250.0, 0.0, -0.0, float("inf"), float("nan"), 1e-38, 5e-39, 1e-45, 3.0e38, 2.0**-126]


@pytest.mark.parametrize("margin", [0, 1, 3])
@pytest.mark.parametrize("fmt", [fp8.Format.HYBRID, fp8.Format.E4M3], ids=["hybrid", "e4m3"])
def test_kernel_source_current_scale_equals_the_torch_update(host, margin, fmt):
    """The current-scaling update kernel (one launch per quantize) leaves the role's scale, history and
    found_inf as ScalingState's lean torch sequence does, bit for bit, and returns the same scale
    (NaN where that is NaN), for finite, zero, tiny (reciprocal overflowing), huge and non-finite
    amaxes, every margin and both formats."""
    for role in ("input", "grad_output"):
        for amax in AMAXES:
            st = ScalingState(fp8.CurrentScaling(margin=margin, fp8_format=fmt))
            i = ROLES.index(role)
            with torch.no_grad():
                st.scale[i] = 0.75
                st.amax_history[0, i] = 2.5
                st.found_inf[i] = 2
            a = torch.tensor(amax, dtype=F32)
            before = (float(st.scale[i]), float(st.amax_history[0, i]), int(st.found_inf[i]))
            _, used = st.quantize_by(role, lambda scale: (None, a))
            sc, hi, fl, got = host.current_scale(amax, *before, fp8.FP8_MAX[st.dtype(role)], margin)
            assert sc.view(np.uint32)[0] == np.float32(st.scale[i]).view(np.uint32), (role, amax)
            assert hi.view(np.uint32)[0] == np.float32(st.amax_history[0, i]).view(np.uint32), (role, amax)
            assert int(fl[0]) == int(st.found_inf[i]), (role, amax)
            if np.isnan(float(used)):
                assert np.isnan(got[0]), (role, amax)
            else:
                assert got.view(np.uint32)[0] == np.float32(used).view(np.uint32), (role, amax)


def test_quantize_by_uses_the_finish_update(monkeypatch):
    """Current scaling: quantize_by hands the amax and the role's buffer elements to finish (the
    kernel's launcher) and runs the second pass with the state's scale, which finish updated; finish
    returning None falls back to the torch update; delayed scaling never calls it."""
    st = ScalingState(fp8.CurrentScaling())
    seen, scales = [], []

    def finish(amax, scale, hist, found_inf, fp8_max, margin):
        seen.append((float(amax), scale.data_ptr(), hist.data_ptr(), found_inf.data_ptr(), fp8_max, margin))
        scale.fill_(7.0)
        return torch.tensor(7.0)

    def run(scale):
        scales.append(None if scale is None else float(scale))
        return "out", torch.tensor(2.0)

    out, used = st.quantize_by("grad_output", run, finish=finish)
    assert out == "out" and float(used) == 7.0 and scales == [None, 7.0]
    ptrs = tuple(t.data_ptr() for t in (st.scale[2], st.amax_history[0, 2], st.found_inf[2]))
    assert seen == [(2.0, *ptrs, 57344.0, 0)]
    scales.clear()
    out, used = st.quantize_by("input", run, finish=lambda *a: None)
    assert float(used) == 448.0 / 2.0 and scales == [None, 224.0]
    delayed = ScalingState(fp8.DelayedScaling(amax_history_len=2))
    delayed.quantize_by("input", run, finish=lambda *a: pytest.fail("finish under delayed scaling"))


@pytest.mark.parametrize(("rows", "cols", "gy"), [(2, 2, None), (130, 66, None), (320, 70, 2)])
def test_kernel_source_on_host_threads_transpose(host, rows, cols, gy):
    """The FP8 transpose kernel on host threads equals the numpy transpose byte for byte."""
    q = np.random.default_rng(rows).integers(0, 256, (rows, cols), dtype=np.uint8)
    assert np.array_equal(host.transpose(q, gy), q.T)


def test_launch_grid_arguments(recorder):
    """launch_grid makes one launch of the named kernel over the given 3-D grid of 32 x 8 threads, with
    the arguments as given (the grouped cast-transpose: groups on blockIdx.z); the configuration is
    reused for the same grid."""
    args = (np.uintp(1), np.int64(2))
    assert C.launch_grid(torch.device("cuda", 0), ("grouped", BF16, E4), (3, 2, 8), args)
    assert C.launch_grid(torch.device("cuda", 0), ("grouped", BF16, E4), (3, 2, 8), args)
    (c1, k1, a1), (c2, _, _) = recorder
    assert k1 == ("grouped", BF16, E4) and a1 == args and c1 is c2
    assert tuple(c1.grid) == (3, 2, 8) and tuple(c1.block)[:2] == C.THREADS


def test_launch_configuration_made_once_per_grid(monkeypatch):
    """``_launch`` makes the ``(grid, block)`` pair of a grid and block once and reuses it (nothing made
    per launch): the same object for the same grid, the grid and block it was asked for, another for
    another grid; cuda.core's LaunchConfig of a pair is made once too."""
    import types

    from nvmath._internal import caches, kernel_launch
    from nvmath.torch import _fp8_cast

    seen = []
    monkeypatch.setattr(_fp8_cast, "_launch_on", lambda device_id, key, dims, args: not seen.append(dims))
    monkeypatch.setattr(_fp8_cast, "_DIMS", caches.Memo("launch dimensions (test)", 8))
    x = types.SimpleNamespace(device=types.SimpleNamespace(index=0), shape=(64, 64))
    assert _fp8_cast._launch(x, "k", 1, blocks=6) and _fp8_cast._launch(x, "k", 2, blocks=6)
    assert _fp8_cast._launch(x, "k", 3, blocks=7)
    assert seen[0] is seen[1] and seen[2] is not seen[0]
    assert seen[0] == ((6, 1, 1), (*_fp8_cast.THREADS, 1)) and seen[2][0] == (7, 1, 1)
    pytest.importorskip("cuda.core")
    config = kernel_launch.core_config(seen[0])
    assert kernel_launch.core_config(seen[1]) is config
    assert tuple(config.grid) == (6, 1, 1) and tuple(config.block) == (*_fp8_cast.THREADS, 1)
