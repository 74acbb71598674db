"""The cuBLASLt matmul on a GPU: numerics against float64 references, epilogs against torch autograd,
lifecycle, autotuning, algorithm serialisation, CUDA graphs, streams and the stateless plan cache."""

from __future__ import annotations

import io

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import nvmath.linalg.advanced as adv
from nvmath._internal.dtypes import CudaDataType
from nvmath.linalg.advanced import MatmulEpilog as E

pytestmark = pytest.mark.gpu

TOL = {
    "float16": 5e-3,
    "bfloat16": 2e-2,
    "float32": 1e-5,
    "float64": 1e-12,
    "complex64": 1e-5,
    "complex128": 1e-12,
}
HYP = settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))


@pytest.fixture(scope="module")
def torch():
    """torch with CUDA (skip otherwise)."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA device")
    return torch


def tdtype(torch, name):
    return getattr(torch, name)


def rand(torch, shape, name, layout="row", seed=0):
    """Never-zero values in a layout: row, col (column-major), prow / pcol (padded leading dimension)."""
    g = torch.Generator(device="cuda").manual_seed(seed)
    dt = tdtype(torch, name)
    shape = tuple(shape)
    mem = shape if layout in ("row", "prow") else shape[:-2] + (shape[-1], shape[-2])
    if layout in ("prow", "pcol"):
        mem = mem[:-1] + (mem[-1] + 3,)
    real = torch.float64
    x = (torch.rand(mem, generator=g, device="cuda", dtype=real) + 0.5) * (
        torch.randint(0, 2, mem, generator=g, device="cuda") * 2 - 1
    )
    if dt.is_complex:
        x = torch.complex(x, torch.rand(mem, generator=g, device="cuda", dtype=real) - 0.5)
    x = x.to(dt)
    if layout in ("prow", "pcol"):
        x = x[..., : (shape[-1] if layout == "prow" else shape[-2])]
    return x if layout in ("row", "prow") else x.transpose(-1, -2)


def rel_err(torch, got, want):
    got = got.to(torch.complex128 if got.is_complex() else torch.float64)
    want = want.to(got.dtype)
    assert got.shape == want.shape, (got.shape, want.shape)
    assert torch.isfinite(got.abs()).all()
    return float((got - want).norm() / max(float(want.norm()), 1e-30))


def ref(torch, x):
    return x.to(torch.complex128 if x.is_complex() else torch.float64)


# ----------------------------------------------------------------------------- numerics
@HYP
@given(
    dtype=st.sampled_from(sorted(TOL)),
    m=st.integers(1, 40), n=st.integers(1, 40), k=st.integers(1, 40),
    la=st.sampled_from(["row", "col", "prow", "pcol"]), lb=st.sampled_from(["row", "col", "prow", "pcol"]),
    batch=st.sampled_from(["none", "a", "b", "both", "expand"]), with_c=st.booleans(),
)  # fmt: skip
def test_dtype_layout_batch_numerics(torch, dtype, m, n, k, la, lb, batch, with_c):
    """Every dtype x layout x batch mode (with and without c) matches a float64 reference."""
    bs = (3,)
    a = rand(torch, (bs if batch in ("a", "both") else ()) + (m, k), dtype, la, 1)
    b = rand(torch, (bs if batch in ("b", "both") else ()) + (k, n), dtype, lb, 2)
    if batch == "expand":
        a = a.expand(*bs, m, k)
    c = rand(torch, (m, n), dtype, "row", 3) if with_c else None
    out = adv.matmul(a, b, c, alpha=0.75, beta=-0.5 if with_c else None)
    want = 0.75 * (ref(torch, a) @ ref(torch, b)) + (-0.5 * ref(torch, c) if with_c else 0)
    assert out.dtype == a.dtype and out.device == a.device
    assert rel_err(torch, out, want) < TOL[dtype] * max(1, k**0.5 / 4)


@pytest.mark.parametrize(
    "m,n,k", [(1, 1, 1), (1, 17, 9), (13, 1, 7), (11, 9, 1), (7, 5, 4099), (33, 65, 129)]
)
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_edge_extents(torch, m, n, k, dtype):
    """M, N or K = 1, a large K and non-multiples of 8."""
    a, b = rand(torch, (m, k), dtype, seed=4), rand(torch, (k, n), dtype, "col", 5)
    with adv.Matmul(a, b) as mm:
        mm.plan()
        out = mm.execute()
    assert rel_err(torch, out, ref(torch, a) @ ref(torch, b)) < TOL[dtype] * max(1, k**0.5 / 4)


def test_vectors_and_column_broadcast_c(torch):
    """1-D promotion (vector results) and c of shape (M, 1) broadcast over columns."""
    a, v = rand(torch, (9, 6), "float32"), rand(torch, (6,), "float32", seed=1)
    assert rel_err(torch, adv.matmul(a, v), ref(torch, a) @ ref(torch, v)) < 1e-5
    assert adv.matmul(v, v).shape == ()
    b, c = rand(torch, (6, 5), "float32", seed=2), rand(torch, (9, 1), "float32", seed=3)
    out = adv.matmul(a, b, c, beta=2.0)
    assert rel_err(torch, out, ref(torch, a) @ ref(torch, b) + 2 * ref(torch, c)) < 1e-5


def test_mixed_precision_and_compute_types(torch):
    """bf16 inputs with a float32 c give a float32 result; TF32 compute is close to fp32."""
    a, b = rand(torch, (64, 48), "bfloat16"), rand(torch, (48, 32), "bfloat16", seed=1)
    c = rand(torch, (64, 32), "float32", seed=2)
    out = adv.matmul(a, b, c, beta=1.0)
    assert out.dtype == torch.float32
    assert rel_err(torch, out, ref(torch, a) @ ref(torch, b) + ref(torch, c)) < 1e-5
    x, y = rand(torch, (128, 256), "float32"), rand(torch, (256, 64), "float32", seed=3)
    fast = adv.matmul(x, y, options={"compute_type": adv.MatmulComputeType.COMPUTE_32F_FAST_TF32})
    assert rel_err(torch, fast, ref(torch, x) @ ref(torch, y)) < 5e-3


def test_conjugation(torch):
    """qualifiers and torch's lazy conjugation bit conjugate a / b."""
    a, b = rand(torch, (12, 7), "complex64"), rand(torch, (7, 5), "complex64", "col", 1)
    q = np.zeros(3, dtype=adv.matrix_qualifiers_dtype)
    q["is_conjugate"] = [True, False, False]
    want = ref(torch, a).conj() @ ref(torch, b)
    assert rel_err(torch, adv.matmul(a, b, qualifiers=q), want) < 1e-5
    assert rel_err(torch, adv.matmul(a.conj(), b), want) < 1e-5


def test_inplace(torch):
    """inplace=True writes alpha * a @ b + beta * c into c and returns it."""
    a, b = rand(torch, (2, 16, 8), "float32"), rand(torch, (2, 8, 12), "float32", seed=1)
    c = rand(torch, (2, 16, 12), "float32", "col", 2)
    want = ref(torch, a) @ ref(torch, b) + 0.5 * ref(torch, c)
    out = adv.matmul(a, b, c, beta=0.5, options={"inplace": True})
    assert out is c and rel_err(torch, c, want) < 1e-5


def test_numpy_and_cupy_operands(torch):
    """numpy operands come back as numpy (via the GPU); cupy operands stay cupy."""
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((20, 9)), rng.standard_normal((9, 7))
    out = adv.matmul(a, b, alpha=2.0)
    assert isinstance(out, np.ndarray) and np.allclose(out, 2 * a @ b, rtol=1e-12)
    ta = torch.tensor(a, dtype=torch.float32)
    assert adv.matmul(ta, ta.T).device.type == "cpu"
    cupy = pytest.importorskip("cupy")
    ca, cb = cupy.asarray(a), cupy.asarray(b)
    cout = adv.matmul(ca, cb)
    assert isinstance(cout, cupy.ndarray) and np.allclose(cupy.asnumpy(cout), a @ b, rtol=1e-12)


# ----------------------------------------------------------------------------- epilogs
def _act(torch, kind):
    return torch.relu if kind == "relu" else (lambda x: torch.nn.functional.gelu(x, approximate="tanh"))


@pytest.mark.parametrize("kind", ["relu", "gelu"])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_forward_aux_and_backward_epilogs_match_autograd(torch, kind, dtype):
    """*_AUX_BIAS forward and D*_BGRAD backward agree with torch autograd of act(a @ b + bias)."""
    m, k, n, k2 = 48, 32, 40, 24
    a, b = rand(torch, (m, k), dtype), rand(torch, (k, n), dtype, "col", 1)
    bias = rand(torch, (m,), dtype, seed=2)
    fwd = E.RELU_AUX_BIAS if kind == "relu" else E.GELU_AUX_BIAS
    y, aux = adv.matmul(a, b, epilog=fwd, epilog_inputs={"bias": bias})
    z = (ref(torch, a) @ ref(torch, b) + ref(torch, bias)[:, None]).requires_grad_(True)
    act = _act(torch, kind)(z)
    assert rel_err(torch, y, act.detach()) < TOL[dtype]
    g, h = rand(torch, (m, k2), dtype, seed=3), rand(torch, (k2, n), dtype, "col", 4)
    upstream = ref(torch, g) @ ref(torch, h)
    act.backward(upstream)
    bwd = E.DRELU_BGRAD if kind == "relu" else E.DGELU_BGRAD
    name = f"{kind}_aux"
    dz, grads = adv.matmul(g, h, epilog=bwd, epilog_inputs={name: aux[name]})
    assert rel_err(torch, dz, z.grad) < 3 * TOL[dtype]
    assert rel_err(torch, grads[f"d{kind}_bgrad"], z.grad.sum(1)) < 3 * TOL[dtype]
    plain = E.DRELU if kind == "relu" else E.DGELU
    assert (
        rel_err(torch, adv.matmul(g, h, epilog=plain, epilog_inputs={name: aux[name]}), z.grad)
        < 3 * TOL[dtype]
    )


@pytest.mark.parametrize("epilog", [E.RELU, E.GELU, E.BIAS, E.RELU_BIAS, E.GELU_BIAS, E.RELU_AUX, E.GELU_AUX])
def test_forward_epilogs(torch, epilog):
    """Activation / bias epilogs (batched, bias over rows) against torch."""
    a, b = rand(torch, (2, 24, 16), "float32"), rand(torch, (2, 16, 20), "float32", seed=1)
    bias = rand(torch, (2, 24, 1), "float32", seed=2)
    z = ref(torch, a) @ ref(torch, b)
    inputs = None
    if epilog in (E.BIAS, E.RELU_BIAS, E.GELU_BIAS):
        inputs, z = {"bias": bias}, z + ref(torch, bias)
    out = adv.matmul(a, b, epilog=epilog, epilog_inputs=inputs)
    if isinstance(out, tuple):
        out, aux = out
        assert set(aux) == {"relu_aux" if epilog == E.RELU_AUX else "gelu_aux"}
    kind = {
        E.RELU: "relu",
        E.RELU_BIAS: "relu",
        E.RELU_AUX: "relu",
        E.GELU: "gelu",
        E.GELU_BIAS: "gelu",
        E.GELU_AUX: "gelu",
    }
    want = _act(torch, kind[epilog])(z) if epilog in kind else z
    assert rel_err(torch, out, want) < 1e-5


def test_bias_along_n_is_linear(torch):
    """x @ W.T + b (bias of length N) fuses and equals torch.nn.functional.linear (+ GELU)."""
    x, w = rand(torch, (64, 96), "bfloat16"), rand(torch, (80, 96), "bfloat16", seed=1)
    bias = rand(torch, (80,), "bfloat16", seed=2)
    out = adv.matmul(x, w.T, epilog=E.GELU_BIAS, epilog_inputs={"bias": bias})
    want = torch.nn.functional.gelu(
        torch.nn.functional.linear(ref(torch, x), ref(torch, w), ref(torch, bias)), approximate="tanh"
    )
    assert out.shape == (64, 80) and rel_err(torch, out, want) < 2e-2


@pytest.mark.parametrize("epilog,name", [(E.BGRADA, "bgrada"), (E.BGRADB, "bgradb")])
def test_bias_gradient_epilogs(torch, epilog, name):
    """BGRADA / BGRADB reduce a / b over K (their layouts as cuBLASLt needs them)."""
    a, b = rand(torch, (40, 24), "float32", "col"), rand(torch, (24, 30), "float32", seed=1)
    out, aux = adv.matmul(a, b, epilog=epilog)
    assert rel_err(torch, out, ref(torch, a) @ ref(torch, b)) < 1e-5
    want = ref(torch, a).sum(1) if name == "bgrada" else ref(torch, b).sum(0)
    assert rel_err(torch, aux[name], want) < 1e-5


def test_fp8_with_scales_and_amax(torch):
    """e4m3 x e4m3 (TN layout) with tensor-wide scales: bf16 result, and an FP8 result with amax."""
    cc = torch.cuda.get_device_capability()
    if cc < (8, 9):
        pytest.skip("FP8 needs compute capability 8.9")
    a = (torch.rand(64, 32, device="cuda") - 0.5).to(torch.float8_e4m3fn)
    b = (torch.rand(48, 32, device="cuda") - 0.5).to(torch.float8_e4m3fn).T
    want = 2.0 * 0.5 * (ref(torch, a) @ ref(torch, b))
    scales = {"a": 2.0, "b": 0.5}
    out = adv.matmul(a, b, quantization_scales=scales, options={"result_type": CudaDataType.CUDA_R_16BF})
    assert out.dtype == torch.bfloat16 and rel_err(torch, out, want) < 1e-2
    d_scale = torch.ones(1, device="cuda")
    q, aux = adv.matmul(a, b, quantization_scales={**scales, "d": d_scale}, options={"result_amax": True})
    assert q.dtype == torch.float8_e4m3fn and rel_err(torch, q, want) < 8e-2
    assert abs(float(aux["result_amax"]) - float(want.abs().max())) <= 0.1 * float(want.abs().max())


# ----------------------------------------------------------------------------- planner behaviour
def test_reset_replan_release(torch):
    """reset_operands swaps data; re-planning with an epilog works; release forces a full reset."""
    a, b = rand(torch, (32, 16), "float32"), rand(torch, (16, 8), "float32", seed=1)
    with adv.Matmul(a, b) as mm:
        mm.plan()
        a2 = rand(torch, (32, 16), "float32", seed=5)
        mm.reset_operands(a=a2)
        assert rel_err(torch, mm.execute(), ref(torch, a2) @ ref(torch, b)) < 1e-5
        mm.plan(epilog=E.RELU)
        assert rel_err(torch, mm.execute(), torch.relu(ref(torch, a2) @ ref(torch, b))) < 1e-5
        mm.release_operands()
        with pytest.raises(adv.InvalidMatmulState):
            mm.execute()
        mm.reset_operands(a=a, b=b)
        assert rel_err(torch, mm.execute(), torch.relu(ref(torch, a) @ ref(torch, b))) < 1e-5


def test_algorithm_save_load(torch):
    """An algorithm saved with np.save and loaded back plans and runs without the heuristic."""
    a, b = rand(torch, (128, 64), "bfloat16"), rand(torch, (64, 96), "bfloat16", seed=1)
    with adv.Matmul(a, b) as mm:
        algs = mm.plan()
        buf = io.BytesIO()
        np.save(buf, algs[-1].as_numpy())
        ids = mm.applicable_algorithm_ids()
        assert algs[0].algorithm_id in ids or len(ids) > 0
        caps = algs[0].capabilities
        assert caps.min_alignment_a_bytes is not None and algs[0].tile is not None
    buf.seek(0)
    loaded = adv.Algorithm.from_numpy(np.load(buf))
    with adv.Matmul(a, b) as mm:
        mm.plan(algorithms=[loaded])
        out = mm.execute(algorithm=loaded)
    assert rel_err(torch, out, ref(torch, a) @ ref(torch, b)) < 2e-2


def _median_ms(torch, fn, reps=25):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(reps):
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return float(np.median(times))


def test_autotune_never_slower_than_first_choice(torch):
    """After autotune the chosen algorithm is not slower than the heuristic's first choice."""
    a, b = rand(torch, (64, 4096), "float32"), rand(torch, (4096, 4096), "float32", "col", 1)
    with adv.Matmul(a, b) as mm:
        first = mm.plan()[0]
        mm.autotune(iterations=10)
        chosen = mm.algorithms[0]
        t_first = _median_ms(torch, lambda: mm.execute(algorithm=first))
        t_chosen = _median_ms(torch, lambda: mm.execute(algorithm=chosen))
    assert t_chosen <= t_first * 1.10 + 0.005, (t_chosen, t_first)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "complex64"])
def test_row_order_formulation_computes_the_product(torch, dtype):
    """The ORDER_ROW formulation autotuning may install gives the product (batched, padded, with c)."""
    from nvmath.linalg.advanced import _plan

    a = rand(torch, (2, 37, 19), dtype, "prow")
    b = rand(torch, (19, 23), dtype, "row", 1)
    c = rand(torch, (2, 37, 23), dtype, "row", 2)
    with adv.Matmul(a, b, c, alpha=0.5, beta=2.0) as mm:
        first = mm.plan()[0]
        handle = mm._get_stream(None)
        alt = _plan.row_plan(
            mm._spec, mm._slots, mm._scales, mm._plan_prefs, mm._plan, handle, mm._handle(), mm._log
        )
        if alt is None:
            pytest.skip(f"cuBLASLt has no ORDER_ROW algorithm for {dtype} here (a capability, not a bug)")
        assert alt.problem.a.order == 1
        mm._commit(alt, retire=True)
        want = 0.5 * (ref(torch, a) @ ref(torch, b)) + 2.0 * ref(torch, c)
        assert rel_err(torch, mm.execute(), want) < TOL[dtype] * 2
        assert rel_err(torch, mm.execute(algorithm=first), want) < TOL[dtype] * 2  # the replaced one


def test_autotune_over_both_formulations_stays_correct(torch):
    """Autotuning a row-major fp32 skinny product (both formulations timed) still gives the product."""
    a, b = rand(torch, (1077, 135), "float32"), rand(torch, (135, 241), "float32", seed=1)
    with adv.Matmul(a, b) as mm:
        mm.plan()
        mm.autotune(iterations=3)
        assert rel_err(torch, mm.execute(), ref(torch, a) @ ref(torch, b)) < TOL["float32"] * 4


def test_wide_workspace_candidates_compute_the_product(torch):
    """A skinny fp32 product whose split-K kernels need more than 32 MiB: the heuristic offers them
    under autotuning's cap, each runs with its own workspace and gives the product; after autotuning,
    every kept algorithm does too and the workspace fits the chosen one."""
    from nvmath.linalg.advanced import _plan

    a, b = rand(torch, (4096, 4096), "float32"), rand(torch, (4096, 1024), "float32", seed=1)
    want = ref(torch, a) @ ref(torch, b)
    with adv.Matmul(a, b) as mm:
        mm.plan()
        planned = len(mm.algorithms)
        _plan.widen(mm._plan, mm._spec, mm._plan_prefs, mm._handle(), mm._log)
        for algorithm in mm.algorithms[planned:]:
            assert rel_err(torch, mm.execute(algorithm=algorithm), want) < TOL["float32"] * 4
    with adv.Matmul(a, b) as mm:
        mm.plan()
        mm.autotune(iterations=3)
        for algorithm in mm.algorithms:
            assert rel_err(torch, mm.execute(algorithm=algorithm), want) < TOL["float32"] * 4
        assert mm.launcher.workspace_size >= mm.algorithms[0].workspace_size


def test_narrow_workspace_candidates_compute_the_product(torch):
    """A decode-shaped bf16 product with bias (torch.nn.Linear 14336->4096 on 64 tokens): under 32 MiB
    cuBLASLt offers only split-K kernels; autotuning's 1 MiB query adds kernels without split-K, each
    gives the product, and so does the autotuned plan."""
    from nvmath.linalg.advanced import _plan

    x, w = rand(torch, (64, 14336), "bfloat16"), rand(torch, (4096, 14336), "bfloat16", seed=1)
    bias = rand(torch, (4096, 1), "bfloat16", seed=2)[:, 0]
    want = ref(torch, w) @ ref(torch, x).T + ref(torch, bias)[:, None]
    inputs = {"bias": bias}
    with adv.Matmul(w, x.T) as mm:
        mm.plan(epilog=adv.MatmulEpilog.BIAS, epilog_inputs=inputs)
        planned = len(mm.algorithms)
        _plan.widen(mm._plan, mm._spec, mm._plan_prefs, mm._handle(), mm._log)
        assert any(a.split_k == 1 for a in mm.algorithms[planned:])
        for algorithm in mm.algorithms:
            assert rel_err(torch, mm.execute(algorithm=algorithm), want) < TOL["bfloat16"] * 4
    with adv.Matmul(w, x.T) as mm:
        mm.plan(epilog=adv.MatmulEpilog.BIAS, epilog_inputs=inputs)
        mm.autotune(iterations=5)
        assert rel_err(torch, mm.execute(), want) < TOL["bfloat16"] * 4


def test_autotune_cache_skips_tuning(torch, tmp_path):
    """With the autotune cache on, a second planner of the problem reuses the stored winner."""
    a, b = rand(torch, (256, 512), "bfloat16"), rand(torch, (512, 256), "bfloat16", seed=1)
    adv.autotune_cache.enable(tmp_path / "tune.json")
    try:
        with adv.Matmul(a, b) as mm:
            mm.plan()
            mm.autotune(iterations=3)
            winner = mm.algorithms[0].to_bytes()[:64]
        fresh = adv.AutotuneCache(tmp_path / "tune.json")  # what another process would see
        assert len(fresh) == 1
        hits = adv.autotune_cache.hits
        adv.autotune_cache.disable()
        adv.autotune_cache.enable(tmp_path / "tune.json")
        with adv.Matmul(a, b) as mm:
            mm.plan()
            mm.autotune(iterations=3)
            assert mm.algorithms[0].to_bytes()[:64] == winner
        assert adv.autotune_cache.hits == hits + 1
    finally:
        adv.autotune_cache.disable()


def test_cached_algorithm_is_checked_by_cublaslt_before_use(torch, tmp_path, monkeypatch):
    """A cached record goes through cublasLtMatmulAlgoCheck before use: one with a garbage
    configuration (right size, 0xFF algo bytes) is ignored, autotuning runs, the result is right."""
    import json

    from nvmath.bindings import cublasLt
    from nvmath.linalg.advanced import _autotune_cache

    a, b = rand(torch, (128, 256), "float32"), rand(torch, (256, 64), "float32", seed=1)
    path = tmp_path / "tune.json"
    adv.autotune_cache.enable(path)
    try:
        with adv.Matmul(a, b) as mm:
            mm.plan()
            mm.autotune(iterations=2)
        entries = json.loads(path.read_text())["entries"]
        (key,) = entries
        record = bytearray.fromhex(entries[key]["algorithm"])
        record[:64] = b"\xff" * 64
        entries[key]["algorithm"] = record.hex()
        path.write_text(_autotune_cache.render(entries))
        checks = []
        real = cublasLt.matmul_algo_check
        monkeypatch.setattr(cublasLt, "matmul_algo_check", lambda *args: checks.append(args) or real(*args))
        adv.autotune_cache.disable()
        adv.autotune_cache.enable(path)
        with adv.Matmul(a, b) as mm:
            mm.plan()
            mm.autotune(iterations=2)
            assert mm.algorithms[0].to_bytes()[:64] != b"\xff" * 64
            out = mm.execute()
        assert checks, "the cached record was used without cublasLtMatmulAlgoCheck"
        assert rel_err(torch, out, ref(torch, a) @ ref(torch, b)) < 1e-5
    finally:
        adv.autotune_cache.disable()


def test_cuda_graph_capture_of_execute(torch):
    """execute() can be captured in a CUDA graph (torch.cuda.graph) and replayed with new data."""
    a, b = rand(torch, (64, 32), "float32"), rand(torch, (32, 48), "float32", seed=1)
    mm = adv.Matmul(a, b)
    mm.plan()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        mm.execute()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = mm.execute()
    a.copy_(rand(torch, (64, 32), "float32", seed=7))
    graph.replay()
    torch.cuda.synchronize()
    assert rel_err(torch, out, ref(torch, a) @ ref(torch, b)) < 1e-5
    mm.free()


def test_stream_ordering(torch):
    """Work is ordered on the given stream: writes queued before execute() on it are seen."""
    a, b = rand(torch, (512, 512), "float32"), rand(torch, (512, 512), "float32", seed=1)
    s = torch.cuda.Stream()
    with adv.Matmul(a, b) as mm:
        mm.plan()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(20):
                a.mul_(1.0)
            a.fill_(1.0)
            out = mm.execute(stream=s)
        s.synchronize()
    assert rel_err(torch, out, torch.ones_like(ref(torch, a)) @ ref(torch, b)) < 1e-5


def test_stateless_cache_hits(torch):
    """Repeated stateless calls of one problem plan once."""
    adv.plan_cache.clear()
    a, b = rand(torch, (16, 16), "float32"), rand(torch, (16, 16), "float32", seed=1)
    for _ in range(5):
        adv.matmul(a, b)
    stats = adv.plan_cache.stats
    assert stats.size == 1 and stats.hits >= 4


def test_stateless_plans_share_one_workspace_and_raw_keys_find_adapter_plans(torch):
    """Cached plans of two problems share the one workspace of the device (given at construction, its
    lock is their entries' lock); a call with wrapped operands finds the plan a raw call made."""
    from nvmath._internal.tensors import wrap
    from nvmath.linalg.advanced import _stateless

    adv.plan_cache.clear()
    a, b = rand(torch, (64, 32), "float32"), rand(torch, (32, 48), "float32", seed=1)
    c, d = rand(torch, (16, 16), "float32", seed=2), rand(torch, (16, 8), "float32", seed=3)
    assert rel_err(torch, adv.matmul(a, b), ref(torch, a) @ ref(torch, b)) < 1e-5
    assert rel_err(torch, adv.matmul(c, d), ref(torch, c) @ ref(torch, d)) < 1e-5
    entries = [adv.plan_cache.get(k) for k in adv.plan_cache.keys()]
    assert len(entries) == 2 and entries[0].lock is entries[1].lock is not None
    assert len(_stateless.workspaces) == 1
    before = adv.plan_cache.stats
    assert rel_err(torch, adv.matmul(wrap(a), wrap(b)), ref(torch, a) @ ref(torch, b)) < 1e-5
    after = adv.plan_cache.stats
    assert (after.hits - before.hits, after.size) == (1, 2)
    adv.plan_cache.clear()
    assert len(_stateless.workspaces) == 0


@pytest.mark.slow
def test_create_execute_free_does_not_leak(torch):
    """1,000 create/plan/execute/free cycles leave no device memory behind."""
    a, b = rand(torch, (64, 64), "float32"), rand(torch, (64, 64), "float32", seed=1)
    for _ in range(10):
        with adv.Matmul(a, b) as mm:
            mm.plan()
            mm.execute()
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    for _ in range(1000):
        with adv.Matmul(a, b) as mm:
            mm.plan()
            mm.execute()
    torch.cuda.synchronize()
    assert torch.cuda.memory_allocated() <= base
