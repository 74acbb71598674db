"""Tests of the FP8 layers' vectorized cast kernels (nvmath.torch._fp8_cast_vector_source, launched by
nvmath.torch._fp8_cast and ._grouped_fp8_kernels).

CPU: the whole kernel source compiles under NVRTC for Ada and Hopper with the vectorized kernels'
16-byte loads and stores and byte permutes; on host threads (fp8_cast_host.py: the kernels' own code,
only the PTX conversions replaced) the vectorized cast-transpose -- plain and grouped -- writes the
64 x 64 kernel's FP8 bytes in both orders, amax and partial column sums bit for bit (partial tiles,
rows that are not a multiple of 16, columns not a multiple of 256, several tiles per block, empty
groups), and the grouped amax reduction gives every group's max |x|; the launches choose the
vectorized kernels where the rows are whole aligned 8-vectors (a recorder instead of cuda.core's
launch) and the old ones elsewhere. GPU (H200): the same against torch's quantize, float64 sums and
the 64 x 64 kernels.
"""

from __future__ import annotations

import itertools
import re

import numpy as np
import pytest
from nvrtc_probe import compile_ptx

torch = pytest.importorskip("torch")

from nvmath.torch import _fp8_cast as C
from nvmath.torch import _grouped_fp8_kernels as K
from nvmath.torch._fp8 import quantize

E4, E5, BF16, F16, F32 = torch.float8_e4m3fn, torch.float8_e5m2, torch.bfloat16, torch.float16, torch.float32
WIDE = {BF16: "bfloat16", F16: "float16", F32: "float32"}
VARIANT = {BF16: 0, F16: 1, F32: 2}


def _bits(t):
    return t.contiguous().view(torch.int16 if t.element_size() == 2 else torch.int32).numpy().view(
        np.uint16 if t.element_size() == 2 else np.float32
    )  # fmt: skip


def _ptx(arch: str) -> str:
    names = [n for k, n in C._NAMES.items() if isinstance(k, tuple) and k[0] in ("vector", "grouped_vector",
                                                                                 "grouped_amax")]  # fmt: skip
    ptx = compile_ptx(C._SOURCE, "cast.cu", names, arch)
    entries = re.findall(r"\.entry\s+(\w+)", ptx)  # (the extern "C" kernels are always there)
    assert len([e for e in entries if "_vec" in e or "amax_grouped" in e]) == len(names) == 15
    return ptx


@pytest.mark.parametrize("arch", ["sm_89", "sm_90"])
def test_vector_kernels_compile_with_wide_accesses(arch):
    """The 12 vectorized cast-transposes and 3 grouped amax reductions compile under NVRTC: 16-byte
    read-only loads of x, 16-byte stores (q.T), 8-byte stores (q), byte permutes for the transposed
    words, the pair conversion saturating, the amax an atomic max."""
    ptx = _ptx(arch)
    for instr in ("ld.global.nc.v4.u32", "st.global.v4.u32", "st.global.v2.u32", "prmt.b32",
                  "satfinite.e4m3x2.f32", "satfinite.e5m2x2.f32"):  # fmt: skip
        assert instr in ptx, instr
    assert re.search(r"(atom|red)\.(shared|global)\.max\.u32", ptx)


def _old_and_vec(host, x, wide, scale, e5m2, gy=None, colsum=True):
    name = WIDE[wide]
    return (host.cast(_bits(x), name, scale, e5m2, colsum=colsum, gy=gy),
            host.cast_vec(_bits(x), name, scale, e5m2, colsum=colsum, gy=gy))  # fmt: skip


@pytest.mark.parametrize(
    ("rows", "cols", "gy"),
    [(2, 8, None), (64, 256, None), (130, 264, None), (200, 520, 2), (98, 16, 1), (320, 72, 2)],
    ids=["2x8", "64x256", "130x264", "200x520-gy2", "98x16-gy1", "320x72-gy2"],
)
@pytest.mark.parametrize(("wide", "fp8_dtype"), [(BF16, E4), (F16, E5), (F32, E4), (BF16, E5)],
                         ids=["bf16-e4m3", "fp16-e5m2", "fp32-e4m3", "bf16-e5m2"])  # fmt: skip
def test_vector_cast_equals_the_tiled_kernel_on_host_threads(host, rows, cols, gy, wide, fp8_dtype):
    """The vectorized cast-transpose writes the 64 x 64 kernel's q, q.T, amax and partial column sums
    bit for bit (q torch's saturating quantize, q.T its transpose, the sums the order of
    emulate_partials); partial tiles, rows not a multiple of 16 (narrow transposed stores), columns not
    a multiple of 256, blocks walking several tiles (gy), values past the FP8 range (saturated); the
    amax-only pass with sums writes the same amax and sums; without sums (one block row per tile) the
    same bytes and amax."""
    torch.manual_seed(rows * cols + int(fp8_dtype == E5))
    x = (torch.randn(rows, cols) * 200).to(wide)
    x.view(-1)[rows * cols // 3] = 1e5 if wide != F16 else 6e4
    old, vec = _old_and_vec(host, x, wide, 1.5, fp8_dtype == E5, gy)
    want = quantize(x, torch.tensor(1.5), fp8_dtype).view(torch.uint8).numpy()
    assert np.array_equal(vec["q"], want) and np.array_equal(vec["qt"], want.T)
    assert np.array_equal(vec["q"], old["q"]) and np.array_equal(vec["qt"], old["qt"])
    assert vec["amax"] == old["amax"] == float(x.float().abs().max())
    assert np.array_equal(vec["partial"].view(np.uint32), old["partial"].view(np.uint32))
    assert np.array_equal(vec["partial"], C.emulate_partials(x.float().numpy(), gy))
    np.testing.assert_allclose(vec["partial"].sum(0, dtype=np.float64), x.double().sum(0).numpy(), rtol=1e-4,
                               atol=1e-2)  # fmt: skip
    only = host.cast_vec(_bits(x), WIDE[wide], None, fp8_dtype == E5, gy=gy)
    assert only["q"] is None and only["amax"] == vec["amax"]
    assert np.array_equal(only["partial"].view(np.uint32), vec["partial"].view(np.uint32))
    if gy is None:  # (without sums: vector_grid's one block row per tile)
        alone = host.cast_vec(_bits(x), WIDE[wide], 1.5, fp8_dtype == E5, colsum=False)
        assert np.array_equal(alone["q"], want) and np.array_equal(alone["qt"], want.T)
        assert alone["amax"] == vec["amax"] and alone["partial"] is None


def _grouped(host, fn, x, counts, scale, e5m2, colsum, vec):
    """Run the grouped cast-transpose (``vec``: the vectorized one) over x's groups on host threads."""
    bounds = K.bounds_of(counts)
    groups, cols = len(counts), x.shape[1]
    offsets, shape, prow = K.grouped_launch(bounds, groups, cols)
    if vec:
        shape = (C.vector_grid(1, cols)[0], *shape[1:])
    q = torch.zeros(x.shape, dtype=torch.uint8) if scale is not None else None
    qt = torch.zeros(x.numel(), dtype=torch.uint8) if scale is not None else None
    amax = torch.zeros(groups, dtype=torch.float32)
    partial = torch.zeros((groups, prow, cols), dtype=torch.float32) if colsum else None
    table = torch.tensor(offsets, dtype=torch.int64)
    ptr = lambda t: None if t is None else t.data_ptr()
    args = [ptr(t) for t in (x, q, qt, scale, amax, partial, table)]
    assert fn(VARIANT[x.dtype], int(e5m2), *args, cols, prow, C.TARGET_BLOCKS, *shape) == 0
    return q, qt, amax, partial


@pytest.mark.parametrize("wide", [BF16, F16, F32], ids=["bf16", "fp16", "fp32"])
@pytest.mark.parametrize("scaled", [True, False], ids=["quantize", "amax-sums"])
def test_grouped_vector_cast_equals_the_grouped_kernel_on_host_threads(host, wide, scaled):
    """The vectorized grouped cast-transpose writes the grouped 64 x 64 kernel's bytes (q, and each
    group's q.T block at start * C), amaxes and partial sums bit for bit, over an odd number of groups
    with empty ones, groups of rows not a multiple of 64 nor of 16, 264 columns; the bytes are torch's
    quantize of each group with its scale."""
    torch.manual_seed(7)
    counts, cols = [96, 0, 40, 130, 2], 264
    x = (torch.randn(sum(counts), cols) * 40).to(wide)
    scale = torch.tensor([30.0, 1.0, 3.0, 50.0, 0.5]) if scaled else None
    lib = host.lib
    old = _grouped(host, lib.host_cast_grouped, x, counts, scale, False, True, False)
    vec = _grouped(host, lib.host_cast_grouped_vec, x, counts, scale, False, True, True)
    for a, b in zip(old, vec):
        assert (a is None) == (b is None)
        assert a is None or torch.equal(a.view(torch.uint8), b.view(torch.uint8))
    q, qt, amax, partial = vec
    for g, s, e in K.bounds_of(counts):
        assert amax[g] == x[s:e].float().abs().max()
        torch.testing.assert_close(partial[g].double().sum(0), x[s:e].double().sum(0), rtol=1e-4, atol=1e-2)
        if scaled:
            want = quantize(x[s:e], scale[g], E4).view(torch.uint8)
            assert torch.equal(q[s:e], want) and torch.equal(K.transposed_block(qt, cols, s, e), want.T)
    assert amax[1] == 0 and not partial[1].any()


@pytest.mark.parametrize("wide", [BF16, F16, F32], ids=["bf16", "fp16", "fp32"])
@pytest.mark.parametrize("blocks", [1, 3], ids=["1-block", "3-blocks"])
def test_grouped_amax_is_each_groups_max_on_host_threads(host, wide, blocks):
    """The grouped amax reduction gives every group's max |x| (its contiguous rows only: a huge value
    in the next group does not leak), 0 for groups without rows, +inf for a group holding one, NaN
    for a group holding a NaN, one block or several per group (grid-stride, a partial last round)."""
    torch.manual_seed(8)
    counts, cols = [33, 0, 7, 160, 1, 64], 24
    x = (torch.randn(sum(counts), cols) * 10).to(wide)
    offsets = K.grouped_launch(K.bounds_of(counts), len(counts), cols)[0]
    x[offsets[3]] = 4096.0  # (group 3's first row, right after group 2's last)
    x[offsets[4], 5] = float("inf")
    x[offsets[5] + 10, 3] = float("nan")
    amax = torch.zeros(len(counts), dtype=torch.float32)
    table = torch.tensor(offsets, dtype=torch.int64)
    args = (VARIANT[wide], x.data_ptr(), amax.data_ptr(), table.data_ptr(), cols, blocks, len(counts))
    assert host.lib.host_amax_grouped(*args) == 0
    want = [x[s:e].double().abs().max().item() if e > s else 0.0 for s, e in itertools.pairwise(offsets)]
    assert amax[:5].tolist() == want[:5] and amax[3] == 4096.0 and amax[4] == float("inf")
    assert torch.isnan(amax[5])


# ---------------------------------------------------------------- launch selection (no GPU)
@pytest.fixture
def recorder(cast_recorder, monkeypatch):
    """:func:`cast_recorder`."""
    return cast_recorder


def test_cast_transpose_launches_the_vector_kernel_where_it_applies(recorder, monkeypatch):
    """A plain cast-transpose of whole aligned 8-vectors launches ``nvmath_cast_transpose_vec`` on
    vector_grid() (256-column block columns, grid()'s block rows) with the plain kernel's arguments;
    66 columns, a misaligned x, a DGELU aux or NVMATH_FP8_VECTOR_CAST off launch the 64 x 64 kernel."""
    x = torch.ones(320, 264, dtype=BF16)
    r = C.cast_transpose(x, torch.tensor(2.0), E4, colsum=True)
    ((config, kernel, args),) = recorder
    assert kernel == ("vector", BF16, E4) and C._NAMES[kernel] == "nvmath_cast_transpose_vec<nvmath_bf16, 0>"
    assert tuple(config.grid) == (2, C.grid(320, 264)[1], 1) and tuple(config.block)[:2] == C.THREADS
    assert int(args[0]) == x.data_ptr() and int(args[1]) == 0 and int(args[2]) == r.q.data_ptr()
    assert (int(args[7]), int(args[8])) == (320, 264) and r.colsum.shape == (264,)
    misaligned = torch.ones(320 * 264 + 4, dtype=BF16)[4:].view(320, 264)  # (8-byte aligned)
    assert not C.vector_cast_applies(misaligned) and C.vector_cast_applies(x)
    for other, aux in ((torch.ones(320, 66, dtype=BF16), None), (misaligned, None), (x, x)):
        recorder.clear()
        C.cast_transpose(other, torch.tensor(2.0), E4, aux=aux)
        assert recorder[0][1] == (BF16, E4, None if aux is None else BF16), (other.shape, aux is None)
    recorder.clear()
    C.cast_transpose(x, torch.tensor(2.0), E4)  # (no sums: one block row per tile)
    assert tuple(recorder[0][0].grid) == (2, 5, 1) and recorder[0][1] == ("vector", BF16, E4)
    recorder.clear()
    monkeypatch.setattr(C, "VECTOR_CAST", False)
    C.cast_transpose(x, torch.tensor(2.0), E4)
    assert recorder[0][1] == (BF16, E4, None)


def test_vector_grid():
    """One block column per 256 columns; with sums the block rows of grid() (the partial sums' rows),
    without them one per 64-row tile, at most MAX_GRID_Y."""
    assert C.vector_grid(16384, 4096) == (16, C.grid(16384, 4096)[1]) == (16, 32)
    assert C.vector_grid(16384, 4096, sums=False) == (16, 256)
    assert C.vector_grid(130, 264) == (2, C.grid(130, 264)[1]) and C.vector_grid(130, 264, False) == (2, 3)
    assert C.vector_grid(2, 8) == (1, 1) == C.vector_grid(2, 8, False)
    assert C.vector_grid(10**8, 8, False) == (1, C.MAX_GRID_Y)


def test_grouped_launches_choose_the_vector_kernels(recorder, monkeypatch):
    """The grouped quantization launches the vectorized grouped cast-transpose (the same argument
    vector, a quarter of the block columns) for whole aligned 8-vectors and current scaling's
    amax-only pass as the grouped amax reduction ((blocks of the largest group, groups) grid: x, amax,
    the row offsets, cols) into the given zeros; 66 columns or the switches off: the 64 x 64 kernel."""
    counts = [128, 0, 64, 64]
    x = torch.ones(sum(counts), 512, dtype=BF16)
    bounds = K.bounds_of(counts)
    monkeypatch.setattr(K, "device_table", lambda what, values, dtype, like, counts: torch.tensor(values))
    got = K._kernel_run(x, bounds, 4, E4, torch.ones(4), True)
    ((config, kernel, args),) = recorder
    assert kernel == ("grouped_vector", BF16, E4) and tuple(config.grid) == (2, 2, 4) and len(args) == 11
    assert got.q.shape == x.shape and got.colsum.shape == (4, 512)
    recorder.clear()
    out = torch.zeros(4)
    got = K._kernel_run(x, bounds, 4, E4, None, False, out)
    ((config, kernel, args),) = recorder
    assert kernel == ("grouped_amax", BF16) and C._NAMES[kernel] == "nvmath_amax_grouped<nvmath_bf16>"
    assert tuple(config.grid) == (K.grouped_amax_blocks(128 * 512, 2, 4), 4, 1) and got.amax is out
    assert got.q is None
    assert int(args[0]) == x.data_ptr() and int(args[1]) == out.data_ptr() and int(args[3]) == 512
    recorder.clear()
    K._kernel_run(torch.ones(sum(counts), 66, dtype=BF16), bounds, 4, E4, None, False)
    K._kernel_run(torch.ones(sum(counts), 66, dtype=BF16), bounds, 4, E4, torch.ones(4), False)
    monkeypatch.setattr(C, "VECTOR_CAST", False)
    monkeypatch.setattr(C, "VECTOR_AMAX", False)
    K._kernel_run(x, bounds, 4, E4, None, False)
    K._kernel_run(x, bounds, 4, E4, torch.ones(4), False)
    assert [kernel for _, kernel, _ in recorder] == [("grouped", BF16, E4)] * 4


def test_grouped_cast_of_odd_groups_takes_the_torch_path(recorder, monkeypatch):
    """A group of an odd number of rows (the total even) launches no cast-transpose (its transposed
    block is not 2-byte aligned: the GPU's stores would fault) -- quantize_groups computes torch's
    values -- while the amax-only pass still runs the grouped reduction (any rows)."""
    counts = [7, 0, 9]
    x = torch.randn(sum(counts), 64).to(BF16)
    bounds = K.bounds_of(counts)
    monkeypatch.setattr(K, "device_table", lambda what, values, dtype, like, counts: torch.tensor(values))
    assert K._kernel_run(x, bounds, 3, E4, torch.ones(3), False) is None
    assert K._kernel_run(x, bounds, 3, E4, None, True) is None
    assert recorder == []
    got = K.quantize_groups(x, bounds, 3, E4, torch.tensor([2.0, 1.0, 4.0]))  # (the torch path)
    assert recorder == []
    assert torch.equal(got.q[7:].view(torch.uint8), quantize(x[7:], torch.tensor(4.0), E4).view(torch.uint8))
    made = K._kernel_run(x, bounds, 3, E4, None, False, torch.zeros(3))
    assert made is not None and recorder[0][1] == ("grouped_amax", BF16)


@pytest.mark.parametrize(
    ("numel", "groups", "blocks"),
    [(8, 1, 1), (4096 * 4096, 8, 256), (4096 * 4096, 1, C.AMAX_BLOCKS), (512 * 64, 8, 4), (10**9, 5000, 1)],
)
def test_grouped_amax_blocks(numel, groups, blocks):
    """Blocks per group: amax_blocks of the largest group, at most 2 * AMAX_BLOCKS / groups, at least 1."""
    assert K.grouped_amax_blocks(numel, 2, groups) == blocks


# ---------------------------------------------------------------- GPU
def _gpu():
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA device")
    if torch.cuda.get_device_capability() < (8, 9):
        pytest.skip("FP8 needs compute capability 8.9")


@pytest.mark.gpu
@pytest.mark.parametrize("wide", [BF16, F16, F32], ids=["bf16", "fp16", "fp32"])
@pytest.mark.parametrize("dtype", [E4, E5], ids=["e4m3", "e5m2"])
@pytest.mark.parametrize(("rows", "cols"), [(130, 264), (1000, 776), (8192, 4096)])
def test_gpu_vector_cast_equals_torch_and_the_tiled_kernel(wide, dtype, rows, cols, monkeypatch):
    """On the GPU the vectorized cast-transpose's q is torch's saturating quantize bit for bit, q.T its
    transpose, the amax max |x|, the column sums those of emulate_partials summed by torch (and the
    float64 sums to float32 rounding); the 64 x 64 kernel (NVMATH_FP8_VECTOR_CAST off) writes the same
    bits; rows not a multiple of the tile or of 16 (narrow transposed stores)."""
    _gpu()
    torch.manual_seed(rows + cols)
    x = (torch.randn(rows, cols, device="cuda") * 100).to(wide)
    s = torch.tensor(1.5, device="cuda")
    assert C.available(x) and C.vector_cast_applies(x)
    r = C.cast_transpose(x, s, dtype, colsum=True)
    monkeypatch.setattr(C, "VECTOR_CAST", False)
    t = C.cast_transpose(x, s, dtype, colsum=True)
    torch.cuda.synchronize()
    assert not C.broken()
    want = quantize(x, s, dtype).view(torch.uint8)
    assert torch.equal(r.q.view(torch.uint8), want)
    assert torch.equal(r.qt.view(torch.uint8), want.T.contiguous())
    assert torch.equal(r.q.view(torch.uint8), t.q.view(torch.uint8))
    assert torch.equal(r.qt.view(torch.uint8), t.qt.view(torch.uint8))
    assert float(r.amax) == float(x.float().abs().max()) and torch.equal(r.amax, t.amax)
    partial = torch.from_numpy(C.emulate_partials(x.float().cpu().numpy())).cuda()
    assert torch.equal(r.colsum, partial.sum(0)) and torch.equal(r.colsum, t.colsum)
    torch.testing.assert_close(r.colsum.double(), x.double().sum(0), rtol=1e-4, atol=1e-2)


@pytest.mark.gpu
@pytest.mark.parametrize("wide", [BF16, F16, F32], ids=["bf16", "fp16", "fp32"])
@pytest.mark.parametrize("dtype", [E4, E5], ids=["e4m3", "e5m2"])
@pytest.mark.parametrize("counts", [[4096, 0, 512, 1040, 16, 1234], [6, 0, 0], [640] * 7],
                         ids=["uneven", "tiny", "seven"])  # fmt: skip
def test_gpu_grouped_vector_kernels_equal_torch(wide, dtype, counts, monkeypatch):
    """On the GPU the vectorized grouped cast-transpose writes, per group, torch's quantize with the
    group's scale (both orders), the group's max |x| and its column sums (float64 reference to float32
    rounding), and exactly the grouped 64 x 64 kernel's bits; the grouped amax reduction (current
    scaling's first pass) gives the same amaxes; empty groups read 0; odd group counts and sizes."""
    _gpu()
    torch.manual_seed(len(counts) + sum(counts))
    groups, cols = len(counts), 2048
    x = (torch.randn(sum(counts), cols, device="cuda") * 3).to(wide)
    scale = torch.rand(groups, device="cuda") * 50 + 1
    bounds = K.bounds_of(counts)
    got = K._kernel_run(x, bounds, groups, dtype, scale, True)
    first = K._kernel_run(x, bounds, groups, dtype, None, False)
    monkeypatch.setattr(C, "VECTOR_CAST", False)
    monkeypatch.setattr(C, "VECTOR_AMAX", False)
    old = K._kernel_run(x, bounds, groups, dtype, scale, True)
    old_first = K._kernel_run(x, bounds, groups, dtype, None, False)
    torch.cuda.synchronize()
    assert got is not None and first is not None and not C.broken()
    assert torch.equal(got.q.view(torch.uint8), old.q.view(torch.uint8))
    assert torch.equal(got.qt.view(torch.uint8), old.qt.view(torch.uint8))
    assert torch.equal(got.amax, old.amax) and torch.equal(first.amax, got.amax)
    assert torch.equal(old_first.amax, got.amax)
    assert torch.equal(got.colsum, old.colsum)
    for g, s, e in bounds:
        want = quantize(x[s:e], scale[g], dtype).view(torch.uint8)
        assert torch.equal(got.q[s:e].view(torch.uint8), want)
        assert torch.equal(got.transposed(s, e).view(torch.uint8), want.T.contiguous())
        assert float(got.amax[g]) == float(x[s:e].float().abs().max())
        torch.testing.assert_close(got.colsum[g].double(), x[s:e].double().sum(0), rtol=1e-4, atol=1e-2)
    for g in range(groups):
        if not counts[g]:
            assert got.amax[g] == 0 and not got.colsum[g].any()
