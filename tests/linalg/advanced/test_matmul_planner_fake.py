"""The Matmul planner and the stateless matmul end to end on a fake GPU (CPU only).

cuBLASLt's descriptors are real (host-side objects); its heuristic and matmul are numpy emulations
reading them (see ``matmul_fakes.py``), so these tests check the planner's plumbing -- layouts,
ops, pointers, epilog attributes, aux outputs, resets, lifecycle, the plan cache -- against numpy.
"""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import nvmath.linalg.advanced as adv
from nvmath._internal import caches
from nvmath._errors import InvalidMatmulState
from nvmath.linalg.advanced import MatmulEpilog as E
from nvmath.linalg.advanced import _plan
from nvmath.linalg.advanced._layout import Order

import matmul_fakes as F  # (tests/linalg/advanced is on sys.path: see conftest.py)


_aligned = F.aligned


def _rand(rng, shape, dtype=np.float32):
    x = rng.uniform(0.5, 1.5, shape) * rng.choice([-1, 1], shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.uniform(-1, 1, shape)
    return _aligned(x.astype(dtype))


def _layout(arr, kind):
    """The same values in another memory layout: 'C', 'F' (column-major) or 'P' (padded rows)."""
    if kind == "C":
        return np.ascontiguousarray(arr)
    if kind == "F":  # each matrix column-major, batch axes outermost
        return np.swapaxes(np.ascontiguousarray(np.swapaxes(arr, -1, -2)), -1, -2)
    pad = np.zeros(arr.shape[:-1] + (arr.shape[-1] + 3,), dtype=arr.dtype)
    pad[..., : arr.shape[-1]] = arr
    return pad[..., : arr.shape[-1]]


def _close(got, want, tol=2e-5):
    got = np.asarray(got, dtype=np.complex128)
    want = np.asarray(want, dtype=np.complex128)
    assert got.shape == want.shape
    assert np.all(np.isfinite(got))
    assert np.linalg.norm(got - want) <= tol * max(np.linalg.norm(want), 1e-30)


# ----------------------------------------------------------------------------- numerics
@pytest.mark.parametrize("la", ["C", "F", "P"])
@pytest.mark.parametrize("lb", ["C", "F", "P"])
def test_layouts_match_numpy(lt, rng, la, lb):
    """Row-major, column-major and padded operands give numpy's product without copies."""
    a, b = _layout(_rand(rng, (9, 5)), la), _layout(_rand(rng, (5, 7)), lb)
    with adv.Matmul(F.fake(a), F.fake(b)) as mm:
        mm.plan()
        _close(mm.execute().array, a @ b)


@pytest.mark.parametrize(
    "ashape,bshape",
    [((4, 6, 5), (5, 3)), ((6, 5), (4, 5, 3)), ((2, 4, 6, 5), (2, 4, 5, 3)), ((1, 4, 6, 5), (4, 5, 3))],
)
def test_batches_and_broadcast(lt, rng, ashape, bshape):
    """Batched operands (one, both, broadcast batch axes) follow numpy.matmul."""
    a, b = _rand(rng, ashape), _rand(rng, bshape)
    _close(adv.matmul(F.fake(a), F.fake(b)).array, a @ b)


def test_vectors_are_promoted(lt, rng):
    """1-D operands are promoted as numpy does; vector @ vector is 0-D."""
    a, b, v = _rand(rng, (4, 6)), _rand(rng, (6,)), _rand(rng, (4,))
    _close(adv.matmul(F.fake(a), F.fake(b)).array, a @ b)
    _close(adv.matmul(F.fake(v), F.fake(a)).array, v @ a)
    _close(adv.matmul(F.fake(b), F.fake(b)).array, b @ b)


@pytest.mark.parametrize("c_cols", [7, 1])
def test_alpha_beta_and_c(lt, rng, c_cols):
    """alpha * a @ b + beta * c, with c full or broadcast over columns."""
    a, b, c = _rand(rng, (9, 5)), _rand(rng, (5, 7)), _rand(rng, (9, c_cols))
    out = adv.matmul(F.fake(a), F.fake(b), F.fake(c), alpha=0.5, beta=-2.0)
    _close(out.array, 0.5 * a @ b - 2.0 * c)


def test_inplace_writes_into_c(lt, rng):
    """inplace=True returns c itself, updated."""
    a, b, c = _rand(rng, (6, 5)), _rand(rng, (5, 4)), _rand(rng, (6, 4))
    want = a @ b + c
    fc = F.fake(c)
    out = adv.matmul(F.fake(a), F.fake(b), fc, beta=1, options={"inplace": True})
    assert out is fc
    _close(c, want)


def test_conjugation_through_qualifiers(lt, rng):
    """qualifiers conjugate a and b (OP_C) for complex operands."""
    a, b = _rand(rng, (6, 5), np.complex64), _rand(rng, (5, 4), np.complex64)
    q = np.zeros(3, dtype=adv.matrix_qualifiers_dtype)
    q["is_conjugate"] = [True, True, False]
    _close(adv.matmul(F.fake(a), F.fake(b), qualifiers=q).array, a.conj() @ b.conj())


@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
def test_double_precision(lt, rng, dtype):
    """float64 and complex128 plan with their own compute and scale types."""
    a, b = _rand(rng, (6, 5), dtype), _rand(rng, (5, 4), dtype)
    _close(adv.matmul(F.fake(a), F.fake(b), alpha=2.0).array, 2.0 * a @ b, 1e-12)


def _relu(x):
    return np.maximum(x, 0)


@pytest.mark.parametrize(
    "epilog,fn",
    [
        (E.RELU, _relu),
        (E.GELU, lambda x: F.gelu_tanh(x)),
        (E.BIAS, None),
        (E.RELU_BIAS, _relu),
        (E.GELU_BIAS, lambda x: F.gelu_tanh(x)),
    ],
)
def test_forward_epilogs(lt, rng, epilog, fn):
    """Activation and bias epilogs (bias along M, as nvmath-python)."""
    a, b = _rand(rng, (9, 5)), _rand(rng, (5, 7))
    inputs, pre = {}, a @ b
    if epilog in (E.BIAS, E.RELU_BIAS, E.GELU_BIAS):
        bias = _rand(rng, (9,))
        inputs, pre = {"bias": F.fake(bias)}, pre + bias[:, None]
    out = adv.matmul(F.fake(a), F.fake(b), epilog=epilog, epilog_inputs=inputs or None)
    _close(out.array, fn(pre) if fn else pre)


def test_bias_along_n_plans_the_transposed_product(lt, rng):
    """A bias of length N (x @ W.T + b) fuses: the result is row-major and correct."""
    x, w, bias = _rand(rng, (6, 8)), _rand(rng, (5, 8)), _rand(rng, (5,))
    with adv.Matmul(F.fake(x), F.fake(w.T)) as mm:
        mm.plan(epilog=E.RELU_BIAS, epilog_inputs={"bias": F.fake(bias)})
        out = mm.execute().array
    _close(out, _relu(x @ w.T + bias))
    assert out.strides == (5 * 4, 4)


def test_relu_aux_then_drelu_bgrad(lt, rng):
    """RELU_AUX_BIAS returns the bitmask that DRELU_BGRAD consumes (backward of ReLU and bias)."""
    a, b, bias = _rand(rng, (10, 6)), _rand(rng, (6, 7)), _rand(rng, (10,))
    _, aux = adv.matmul(F.fake(a), F.fake(b), epilog=E.RELU_AUX_BIAS, epilog_inputs={"bias": F.fake(bias)})
    pre = a @ b + bias[:, None]
    mask = aux["relu_aux"]
    assert mask.array.dtype == np.uint8 and mask.array.shape == (16, 7)
    g, h = _rand(rng, (10, 3)), _rand(rng, (3, 7))
    dz, grads = adv.matmul(F.fake(g), F.fake(h), epilog=E.DRELU_BGRAD, epilog_inputs={"relu_aux": mask})
    want = (g @ h) * (pre > 0)
    _close(dz.array, want)
    _close(grads["drelu_bgrad"].array, want.sum(axis=1))


@pytest.mark.parametrize("kind", ["relu", "gelu"])
def test_unbatched_aux_broadcast_over_a_batched_backward(lt, rng, kind):
    """DRELU / DGELU with the aux of an unbatched forward pass over a batched problem: the one aux
    masks every batch entry, as nvmath-python accepts (read from a batched copy: test__aux_broadcast)."""
    a, b = _rand(rng, (10, 6)), _rand(rng, (6, 7))
    forward = E.RELU_AUX if kind == "relu" else E.GELU_AUX
    _, aux = adv.matmul(F.fake(a), F.fake(b), epilog=forward)
    pre = a @ b
    g, h = _rand(rng, (3, 10, 4)), _rand(rng, (3, 4, 7))
    backward = E.DRELU if kind == "relu" else E.DGELU
    dz = adv.matmul(F.fake(g), F.fake(h), epilog=backward, epilog_inputs={f"{kind}_aux": aux[f"{kind}_aux"]})
    grad = (pre > 0) if kind == "relu" else F.gelu_tanh_grad(pre.astype(np.float64))
    _close(dz.array, (g @ h) * grad, 1e-4)


def test_gelu_aux_then_dgelu(lt, rng):
    """GELU_AUX returns the pre-activation that DGELU consumes."""
    a, b = _rand(rng, (9, 6)), _rand(rng, (6, 7))
    _, aux = adv.matmul(F.fake(a), F.fake(b), epilog=E.GELU_AUX)
    pre = a @ b
    _close(aux["gelu_aux"].array[:9], pre)
    g, h = _rand(rng, (9, 2)), _rand(rng, (2, 7))
    dz, grads = adv.matmul(
        F.fake(g), F.fake(h), epilog=E.DGELU_BGRAD, epilog_inputs={"gelu_aux": aux["gelu_aux"]}
    )
    want = (g @ h) * F.gelu_tanh_grad(pre.astype(np.float64))
    _close(dz.array, want, 1e-4)
    _close(grads["dgelu_bgrad"].array, want.sum(axis=1), 1e-4)


@pytest.mark.parametrize("epilog,name", [(E.BGRADA, "bgrada"), (E.BGRADB, "bgradb")])
def test_bias_gradients(lt, rng, epilog, name):
    """BGRADA / BGRADB return the sums of a over K / of b over K."""
    a, b = np.asfortranarray(_rand(rng, (8, 5))), _rand(rng, (5, 6))
    out, aux = adv.matmul(F.fake(a), F.fake(b), epilog=epilog)
    _close(out.array, a @ b)
    _close(aux[name].array, a.sum(axis=1) if name == "bgrada" else b.sum(axis=0))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    m=st.integers(1, 9), n=st.integers(1, 9), k=st.integers(1, 9), la=st.sampled_from("CFP"),
    lb=st.sampled_from("CFP"), batch=st.sampled_from(["none", "a", "b", "both"]), with_c=st.booleans(),
)  # fmt: skip
def test_sampled_problems(lt, m, n, k, la, lb, batch, with_c):
    """Random extents, layouts, batches and c agree with numpy (hypothesis)."""
    rng = np.random.default_rng(m * 100 + n * 10 + k)
    a = _layout(_rand(rng, ((3,) if batch in ("a", "both") else ()) + (m, k)), la)
    b = _layout(_rand(rng, ((3,) if batch in ("b", "both") else ()) + (k, n)), lb)
    c = _rand(rng, (m, n)) if with_c else None
    out = adv.matmul(F.fake(a), F.fake(b), F.fake(c) if with_c else None, beta=0.5 if with_c else None)
    _close(out.array, a @ b + (0.5 * c if with_c else 0))


# ----------------------------------------------------------------------------- planner behaviour
def test_plan_returns_algorithms_and_honours_the_limit(lt, rng):
    """plan() returns the heuristic's algorithms; preferences.limit caps the request."""
    a, b = _rand(rng, (4, 4)), _rand(rng, (4, 4))
    with adv.Matmul(F.fake(a), F.fake(b)) as mm:
        assert len(mm.plan()) == 3
        assert len(mm.plan(preferences={"limit": 2})) == 2
        assert mm.algorithms == tuple(mm.algorithms)


def test_preference_has_workspace_cap_and_real_alignments(lt, rng):
    """The preference offers 32 MiB of workspace by default and the operands' real alignments."""
    base = _rand(rng, (65,))
    a, b = base[1:].reshape(8, 8), _rand(rng, (8, 8))
    with adv.Matmul(F.fake(a), F.fake(b)) as mm:
        mm.plan()
    pref = lt.preferences[-1]
    assert pref["MAX_WORKSPACE_BYTES"] == 32 << 20
    assert {pref["MIN_ALIGNMENT_A_BYTES"], pref["MIN_ALIGNMENT_B_BYTES"]} >= {4}
    with adv.Matmul(F.fake(a), F.fake(b), options={"memory_limit": "1 MiB"}) as mm:
        mm.plan()
    assert lt.preferences[-1]["MAX_WORKSPACE_BYTES"] == 1 << 20


def test_algorithms_argument_skips_the_heuristic(lt, rng):
    """plan(algorithms=...) reuses given algorithms without a heuristic query."""
    a, b = _rand(rng, (4, 4)), _rand(rng, (4, 4))
    with adv.Matmul(F.fake(a), F.fake(b)) as mm:
        algs = mm.plan()
        calls = lt.heuristic_calls
        saved = [adv.Algorithm.from_numpy(x.as_numpy()) for x in algs[1:]]
        assert mm.plan(algorithms=saved) == tuple(saved)
        assert lt.heuristic_calls == calls
        mm.execute(algorithm=saved[1])
        assert lt.matmul_calls[-1]["algo"] == 102


def test_reset_operands_swaps_pointers(lt, rng):
    """reset_operands() reuses the plan with new data (and new alpha/beta)."""
    a, b, c = _rand(rng, (5, 4)), _rand(rng, (4, 3)), _rand(rng, (5, 3))
    with adv.Matmul(F.fake(a), F.fake(b), F.fake(c), beta=1.0) as mm:
        mm.plan()
        a2, c2 = _rand(rng, (5, 4)), _rand(rng, (5, 3))
        mm.reset_operands(a=F.fake(a2), c=F.fake(c2), alpha=3.0)
        _close(mm.execute().array, 3.0 * a2 @ b + c2)
        mm.reset_operands_unchecked(b=F.fake(b * 2))
        _close(mm.execute().array, 6.0 * a2 @ b + c2)
    assert lt.heuristic_calls == 1


def test_reset_epilog_inputs_repoints_the_bias(lt, rng):
    """reset_operands(epilog_inputs=...) points the descriptor at the new bias."""
    a, b, bias = _rand(rng, (5, 4)), _rand(rng, (4, 3)), _rand(rng, (5,))
    with adv.Matmul(F.fake(a), F.fake(b)) as mm:
        mm.plan(epilog=E.BIAS, epilog_inputs={"bias": F.fake(bias)})
        bias2 = _rand(rng, (5,))
        mm.reset_operands(epilog_inputs={"bias": F.fake(bias2)})
        _close(mm.execute().array, a @ b + bias2[:, None])


def test_release_then_reset_everything(lt, rng):
    """After release_operands() execute() refuses until every operand is supplied again."""
    a, b = _rand(rng, (5, 4)), _rand(rng, (4, 3))
    mm = adv.Matmul(F.fake(a), F.fake(b))
    mm.plan()
    mm.release_operands()
    with pytest.raises(InvalidMatmulState, match="release_operands"):
        mm.execute()
    with pytest.raises(ValueError, match="missing: b"):
        mm.reset_operands(a=F.fake(a))
    mm.reset_operands(a=F.fake(a), b=F.fake(b))
    _close(mm.execute().array, a @ b)
    mm.free()


def test_failed_plan_keeps_the_previous_plan(lt, rng):
    """A plan() that fails leaves the previous plan in place and usable."""
    a, b = _rand(rng, (5, 4)), _rand(rng, (4, 3))
    with adv.Matmul(F.fake(a), F.fake(b)) as mm:
        first = mm.plan()
        with pytest.raises(ValueError, match="bias"):
            mm.plan(epilog=E.BIAS)
        assert mm.algorithms == first
        _close(mm.execute().array, a @ b)


@pytest.mark.parametrize("fail_at", ["matrix_layout_create", "matmul_preference_create", "matmul_desc_create"])
def test_library_failure_inside_plan_leaks_nothing_and_plan_works_after(lt, rng, monkeypatch, fail_at):
    """A cuBLASLt failure in the middle of plan() (a descriptor, layout or preference create) raises,
    every descriptor created before it is destroyed (or kept by the recycling pools, whose clear()
    destroys it), and the same planner then plans and executes."""
    from handle_counter import HandleCounter

    from nvmath.bindings import cublasLt
    from nvmath.linalg.advanced import _descriptors

    def settled():
        _descriptors.LAYOUTS.clear()
        _descriptors.DESCRIPTORS.clear()
        return counter.snapshot()

    counter = HandleCounter(monkeypatch, ("cublasLt",))
    real = getattr(cublasLt, fail_at)
    calls = []

    def failing(*args):
        calls.append(args)
        if len(calls) == 1:
            raise cublasLt.cuBLASLtError(13)  # CUBLAS_STATUS_EXECUTION_FAILED, once
        return real(*args)

    monkeypatch.setattr(cublasLt, fail_at, failing)
    a, b = _rand(rng, (6, 4)), _rand(rng, (4, 5))
    mm = adv.Matmul(F.fake(a), F.fake(b))
    with pytest.raises(cublasLt.cuBLASLtError):
        mm.plan()
    assert settled() == {}
    mm.plan()
    assert counter.snapshot()  # the plan's descriptor and layouts are alive
    _close(mm.execute().array, a @ b)
    mm.free()
    assert settled() == {}


def test_lifecycle_states(lt, rng):
    """execute before plan and any use after free raise InvalidMatmulState; free is idempotent."""
    mm = adv.Matmul(F.fake(_rand(rng, (3, 3))), F.fake(_rand(rng, (3, 3))))
    with pytest.raises(InvalidMatmulState, match="before plan"):
        mm.execute()
    with pytest.raises(InvalidMatmulState, match="before plan"):
        mm.autotune()
    mm.plan()
    mm.free()
    mm.free()
    for call in (mm.execute, mm.plan, mm.release_operands, lambda: mm.reset_operands(alpha=1)):
        with pytest.raises(InvalidMatmulState, match="after free"):
            call()


def test_autotune_with_cached_winner(lt, rng, tmp_path, monkeypatch):
    """A stored autotuning result is reused (moved first) without timing anything."""
    from nvmath.linalg.advanced import _autotune_cache

    cache = _autotune_cache.AutotuneCache(tmp_path / "tune.json")
    monkeypatch.setattr(_autotune_cache, "autotune_cache", cache)
    monkeypatch.setattr(adv._autotune, "autotune_cache", cache)
    a, b = _rand(rng, (4, 4)), _rand(rng, (4, 4))
    with adv.Matmul(F.fake(a), F.fake(b)) as mm:
        algs = mm.plan()
        cache.store(adv._autotune.cache_key(mm._spec, mm._plan), algs[2].to_bytes(), median_ms=1.0)
        mm.autotune(iterations=3)
        assert mm.algorithms[0].to_bytes()[:64] == algs[2].to_bytes()[:64]
        mm.execute()
        assert lt.matmul_calls[-1]["algo"] == 102
    assert cache.hits == 1


def test_applicable_algorithm_ids(lt, rng):
    """applicable_algorithm_ids() asks cuBLASLt for the ids of the dtype combination."""
    with adv.Matmul(F.fake(_rand(rng, (3, 3))), F.fake(_rand(rng, (3, 3)))) as mm:
        assert mm.applicable_algorithm_ids(limit=2) == (10, 11)


def test_stream_reaches_cublaslt(lt, rng):
    """execute(stream=int) runs on that stream; the default is the library stream (0 here)."""
    with adv.Matmul(F.fake(_rand(rng, (3, 3))), F.fake(_rand(rng, (3, 3)))) as mm:
        mm.plan()
        mm.execute()
        assert lt.matmul_calls[-1]["stream"] in (0, None)
        mm.execute(stream=2)
        assert lt.matmul_calls[-1]["stream"] == 2


@pytest.mark.parametrize("workspace", [0, 4096])
def test_done_events_on_mortal_streams(rng, monkeypatch, workspace):
    """On a stream its owner may destroy, every execute records the done event when outputs come from
    our own allocator (the fake package's), after the workspace's first binding when one is used."""
    from nvmath._internal import streams

    fake = F.install(monkeypatch, F.FakeLt(workspace=workspace))
    recorded = []
    monkeypatch.setattr(streams, "record_done", lambda handle: recorded.append(handle.ptr))
    mortal = streams.StreamHandle(0x5000, 0, "numpy", 0x5000, mortal=True)
    a, b = _rand(rng, (4, 3)), _rand(rng, (3, 5))
    with adv.Matmul(F.fake(a), F.fake(b)) as mm:
        mm.plan()
        for _ in range(3):
            _close(mm.execute(stream=mortal).array, a @ b)
    assert fake.matmul_calls[-1]["stream"] == 0x5000 and fake.matmul_calls[-1]["ws_size"] == workspace
    assert recorded == [0x5000] * (4 if workspace else 3)  # (the workspace's binding, then one per call)


# ----------------------------------------------------------------------------- stateless cache
def test_stateless_cache_hits_skip_planning(lt, rng):
    """Repeated stateless calls of one problem plan once; another layout plans again."""
    adv.plan_cache.clear()
    before = adv.plan_cache.stats
    a, b = _rand(rng, (6, 5)), _rand(rng, (5, 4))
    for _ in range(5):
        _close(adv.matmul(F.fake(_rand(rng, (6, 5))), F.fake(b)).array.shape, (6, 4))
    assert lt.heuristic_calls == 1
    adv.matmul(F.fake(np.asfortranarray(a)), F.fake(b))
    assert lt.heuristic_calls == 2
    stats = adv.plan_cache.stats
    assert (stats.hits - before.hits, stats.misses - before.misses) == (4, 2)


def test_stateless_results_follow_new_data(lt, rng):
    """A cache hit computes with the new operands, alpha and epilog inputs."""
    b = _rand(rng, (5, 4))
    for alpha in (1.0, -0.5):
        a, bias = _rand(rng, (6, 5)), _rand(rng, (6,))
        out = adv.matmul(
            F.fake(a), F.fake(b), alpha=alpha, epilog=E.BIAS, epilog_inputs={"bias": F.fake(bias)}
        )
        _close(out.array, alpha * a @ b + bias[:, None])


def test_stateless_cache_disabled_plans_every_call(lt, rng):
    """plan_cache.enabled = False plans (and frees) on every call; the heuristic result is memoised."""
    a, b = _rand(rng, (3, 3)), _rand(rng, (3, 3))
    adv.plan_cache.enabled = False
    try:
        adv.matmul(F.fake(a), F.fake(b))
        adv.matmul(F.fake(a), F.fake(b))
        assert len(lt.matmul_calls) == 2 and len(adv.plan_cache) == 0
        assert lt.heuristic_calls == 1 and len(_plan.HEURISTICS) == 1
    finally:
        adv.plan_cache.enabled = True


# ----------------------------------------------------------------------------- host operands, streams, tuning
def test_host_operands_are_copied_and_results_come_back(lt, rng):
    """Host operands run on device copies (dense), results return as host tensors; resets copy data."""
    a = _layout(_rand(rng, (6, 5)), "P")  # padded on the host, dense on the device
    b, c = _rand(rng, (5, 4)), _layout(_rand(rng, (6, 4)), "F")  # aux epilogs need a column-major c
    with adv.Matmul(F.FakeHostTensor(a), F.FakeHostTensor(b), F.FakeHostTensor(c), beta=0.5) as mm:
        mm.plan(epilog=E.RELU_AUX)
        out, aux = mm.execute()
        assert isinstance(out, F.FakeHostTensor) and isinstance(aux["relu_aux"], F.FakeHostTensor)
        _close(out.array, np.maximum(a @ b + 0.5 * c, 0))
        a2 = _layout(_rand(rng, (6, 5)), "P")
        mm.reset_operands(a=F.FakeHostTensor(a2))
        _close(mm.execute()[0].array, np.maximum(a2 @ b + 0.5 * c, 0))


def test_host_inplace_updates_the_callers_c(lt, rng):
    """inplace=True with host operands writes the result back into the caller's c."""
    a, b, c = _rand(rng, (6, 5)), _rand(rng, (5, 4)), _rand(rng, (6, 4))
    want = a @ b + c
    hc = F.FakeHostTensor(c)
    out = adv.matmul(F.FakeHostTensor(a), F.FakeHostTensor(b), hc, beta=1.0, options={"inplace": True})
    assert out is hc
    _close(c, want)


def test_capturing_stream_gets_a_handle_without_driver_queries(monkeypatch):
    """A current stream that captures a CUDA graph gets a handle built without querying the driver."""
    from nvmath._internal import devices, streams

    monkeypatch.setattr(streams, "is_capturing", lambda ptr: True)
    monkeypatch.setattr(streams, "_INT_CACHE", {})
    monkeypatch.setattr(devices, "init_driver", lambda: None)
    monkeypatch.setattr(devices, "driver", lambda: pytest.fail("the driver was queried"))
    monkeypatch.setattr(streams, "_torch_current_mortal", lambda device_id, ptr: False)
    resolver = streams.CallerStream(0, "torch")
    resolver.current = lambda device_id: 0xABC0
    handle, current = resolver.resolve(None)
    assert (handle.ptr, handle.device_id, handle.ctx, current) == (0xABC0, 0, None, True)


def test_autotune_orders_by_measurement_and_stores(lt, rng, tmp_path, monkeypatch):
    """autotune() applies the measured order (and prune) and stores the winner in an enabled cache."""
    from nvmath.linalg.advanced import _autotune, _autotune_cache

    cache = _autotune_cache.AutotuneCache(tmp_path / "tune.json")
    monkeypatch.setattr(_autotune, "autotune_cache", cache)
    monkeypatch.setattr(
        _autotune, "tune", lambda run, count, *a: ([1, 0, 2], [(2.0, 0.1), (1.0, 0.1), (3.0, 0.1)])
    )
    with adv.Matmul(F.fake(_rand(rng, (4, 4))), F.fake(_rand(rng, (4, 4)))) as mm:
        algs = mm.plan()
        mm.autotune(iterations=2, prune=2)
        assert mm.algorithms == (algs[1], algs[0])
        mm.execute()
        assert lt.matmul_calls[-1]["algo"] == 101
    assert len(cache) == 1


# ----------------------------------------------------------------------------- heuristics memo
def test_second_planner_of_a_problem_reuses_the_heuristic(lt, rng):
    """A second Matmul of the same plain problem skips the heuristic query and gets equal algorithms."""
    a, b = F.fake(_rand(rng, (4, 6))), F.fake(_rand(rng, (6, 5)))
    with adv.Matmul(a, b) as m1:
        first = [alg.as_numpy().tobytes() for alg in m1.plan()]
    with adv.Matmul(a, b) as m2:
        again = [alg.as_numpy().tobytes() for alg in m2.plan()]
        _close(m2.execute().array, a.array @ b.array)
    assert lt.heuristic_calls == 1 and first == again


def test_memoised_algorithms_are_independent_objects(lt, rng):
    """Changing an algorithm of one planner (a settable config field) does not leak into the next."""
    a, b = F.fake(_rand(rng, (4, 6))), F.fake(_rand(rng, (6, 5)))
    with adv.Matmul(a, b) as m1:
        m1.plan()[0].split_k = 4
    with adv.Matmul(a, b) as m2:
        assert m2.plan()[0].split_k != 4
    assert lt.heuristic_calls == 1


@pytest.mark.parametrize(
    "change",
    ["shape", "dtype", "preferences", "epilog"],
)
def test_memo_key_separates_what_the_heuristic_sees(lt, rng, change):
    """Another shape, dtype or preference queries again; a bias epilog (pointer input) is never memoised."""
    a, b = _rand(rng, (4, 6)), _rand(rng, (6, 5))
    with adv.Matmul(F.fake(a), F.fake(b)) as m:
        m.plan()
    kwargs, plan_kw = {}, {}
    if change == "shape":
        a = _rand(rng, (8, 6))
    elif change == "dtype":
        a, b = a.astype(np.float64), b.astype(np.float64)
    elif change == "preferences":
        plan_kw["preferences"] = {"limit": 2}
    else:
        plan_kw = {"epilog": E.BIAS, "epilog_inputs": {"bias": F.fake(_rand(rng, (4,)))}}
    for _ in range(2 if change == "epilog" else 1):
        with adv.Matmul(F.fake(a), F.fake(b), **kwargs) as m:
            m.plan(**plan_kw)
    assert lt.heuristic_calls == (3 if change == "epilog" else 2)


def test_memo_is_bounded_and_clearable(lt, rng):
    """The memo keeps its most recent problems within its size and forgets everything on clear()."""
    assert _plan.HEURISTICS.maxsize >= 1
    _plan.HEURISTICS.resize(2)
    for m in (3, 4, 5):
        with adv.Matmul(F.fake(_rand(rng, (m, 6))), F.fake(_rand(rng, (6, 5)))) as mm:
            mm.plan()
    assert len(_plan.HEURISTICS) == 2 and lt.heuristic_calls == 3
    with adv.Matmul(F.fake(_rand(rng, (3, 6))), F.fake(_rand(rng, (6, 5)))) as mm:
        mm.plan()  # the least recent problem was evicted: asked again
    assert lt.heuristic_calls == 4
    _plan.HEURISTICS.clear()
    assert len(_plan.HEURISTICS) == 0


# ----------------------------------------------------------------------------- ORDER_ROW formulation
def _tune_picking(index, seen):
    """A fake tune() that records the candidate count and puts candidate ``index`` first."""

    def tune(run, count, *args):
        seen.append(count)
        for i in range(count):
            run(i)  # every candidate must run (fixed buffers, valid arguments)
        order = [index] + [i for i in range(count) if i != index]
        return order, [(1.0, 0.0)] * count

    return tune


def test_autotune_can_switch_to_the_row_order_formulation(lt, rng, monkeypatch):
    """An ORDER_ROW candidate that wins is installed: later executions use its layouts, results stay right."""
    from nvmath.linalg.advanced import _autotune

    seen: list[int] = []
    monkeypatch.setattr(_autotune, "tune", _tune_picking(4, seen))
    a, b = _rand(rng, (2, 5, 4)), _rand(rng, (4, 3))
    with adv.Matmul(F.fake(a), F.fake(b)) as mm:
        mm.plan()
        assert not mm._plan.problem.a.order  # the default: column-major, transposed problem
        mm.autotune(iterations=2)
        p = mm._plan.problem
        assert seen == [6] and not p.transposed and (p.a.order, p.d.order) == (Order.ROW, Order.ROW)
        assert len(mm.algorithms) == 3
        _close(mm.execute().array, a @ b)
        assert lt.matmul_calls[-1]["algo"] == 101  # the ORDER_ROW plan's second candidate
        a2 = _rand(rng, (2, 5, 4))
        mm.reset_operands(a=F.fake(a2))
        _close(mm.execute().array, a2 @ b)


def test_autotune_keeps_the_default_formulation_when_it_wins(lt, rng, monkeypatch):
    """A default-formulation winner keeps the installed plan; the ORDER_ROW plan is closed."""
    from nvmath.linalg.advanced import _autotune

    seen: list[int] = []
    monkeypatch.setattr(_autotune, "tune", _tune_picking(1, seen))
    a, b = _rand(rng, (5, 4)), _rand(rng, (4, 3))
    with adv.Matmul(F.fake(a), F.fake(b)) as mm:
        algs = mm.plan()
        plan = mm._plan
        mm.autotune(iterations=2)
        assert seen == [6] and mm._plan is plan and mm.algorithms[0] is algs[1]
        _close(mm.execute().array, a @ b)


@pytest.mark.parametrize("case", ["bias epilog", "given algorithms", "column-major a"])
def test_autotune_tries_only_the_default_formulation(lt, rng, monkeypatch, case):
    """No ORDER_ROW candidates with an epilog, with algorithms given to plan(), or column-major operands."""
    from nvmath.linalg.advanced import _autotune

    seen: list[int] = []
    monkeypatch.setattr(_autotune, "tune", _tune_picking(0, seen))
    a, b = _rand(rng, (5, 4)), _rand(rng, (4, 3))
    if case == "column-major a":
        a = np.asfortranarray(a)
    with adv.Matmul(F.fake(a), F.fake(b)) as mm:
        if case == "bias epilog":
            mm.plan(epilog=E.BIAS, epilog_inputs={"bias": F.fake(_rand(rng, (5,)))})
        elif case == "given algorithms":
            with adv.Matmul(F.fake(a), F.fake(b)) as other:
                mm.plan(algorithms=[adv.Algorithm.from_numpy(x.as_numpy()) for x in other.plan()])
        else:
            mm.plan()
        mm.autotune(iterations=2)
    assert seen == [3]


# ----------------------------------------------------------------------------- wide-workspace candidates
@pytest.fixture(autouse=True)
def _clear_caches_after():
    """Tests that install the fake GPU themselves (``_wide_fake``) leave no fake plan or memo behind."""
    yield
    caches.clear_all()


def _wide_fake(monkeypatch):
    """The fake GPU whose heuristic offers one more algorithm (marker 200, 48 MiB) above a 32 MiB cap."""
    return F.install(monkeypatch, F.FakeLt(wide=1))


def test_autotune_times_the_candidates_of_a_larger_workspace(rng, monkeypatch):
    """With the default memory_limit, autotune asks the heuristic again with a 1 GiB cap and times the
    new candidate; when it wins it runs with its 48 MiB workspace, the product stays right."""
    from nvmath.linalg.advanced import _autotune

    fake = _wide_fake(monkeypatch)
    seen: list[int] = []
    monkeypatch.setattr(_autotune, "tune", _tune_picking(3, seen))
    a, b = np.asfortranarray(_rand(rng, (5, 4))), _rand(rng, (4, 3))  # no ORDER_ROW formulation
    with adv.Matmul(F.fake(a), F.fake(b)) as mm:
        mm.plan()
        assert [a.workspace_size for a in mm.algorithms] == [0, 0, 0]
        mm.autotune(iterations=2)
        assert seen == [4] and [p["MAX_WORKSPACE_BYTES"] for p in fake.preferences] == [32 << 20, 1 << 30, 1 << 20]
        assert mm.algorithms[0].workspace_size == 48 << 20 and len(mm.algorithms) == 4
        _close(mm.execute().array, a @ b)
        call = fake.matmul_calls[-1]
        assert call["algo"] == 200 and call["ws_size"] == 48 << 20 and call["ws"] != 0


def test_autotune_times_the_candidates_of_a_narrow_workspace(rng, monkeypatch):
    """Autotune also asks the heuristic with a 1 MiB cap (where it offers kernels without split-K) and
    times those candidates too; a winning one runs with no workspace and gives the product."""
    from nvmath.linalg.advanced import _autotune

    fake = F.install(monkeypatch, F.FakeLt(narrow=1))
    seen: list[int] = []
    monkeypatch.setattr(_autotune, "tune", _tune_picking(3, seen))
    a, b = np.asfortranarray(_rand(rng, (5, 4))), _rand(rng, (4, 3))  # no ORDER_ROW formulation
    with adv.Matmul(F.fake(a), F.fake(b)) as mm:
        mm.plan()
        mm.autotune(iterations=2)
        assert seen == [4] and fake.preferences[-1]["MAX_WORKSPACE_BYTES"] == 1 << 20
        _close(mm.execute().array, a @ b)
        assert fake.matmul_calls[-1]["algo"] == 300 and fake.matmul_calls[-1]["ws_size"] == 0


def test_autotune_drops_a_losing_wide_candidate_and_its_workspace(rng, monkeypatch):
    """When a planned algorithm wins, the wide candidate is dropped, so executions need no 48 MiB."""
    from nvmath.linalg.advanced import _autotune

    fake = _wide_fake(monkeypatch)
    monkeypatch.setattr(_autotune, "tune", _tune_picking(1, []))
    a, b = np.asfortranarray(_rand(rng, (5, 4))), _rand(rng, (4, 3))
    with adv.Matmul(F.fake(a), F.fake(b)) as mm:
        mm.plan()
        mm.autotune(iterations=2)
        assert len(mm.algorithms) == 3 and all(x.workspace_size == 0 for x in mm.algorithms)
        assert mm._workspace.size == 0  # the tuning workspace was given back
        _close(mm.execute().array, a @ b)
        assert fake.matmul_calls[-1]["algo"] == 101 and fake.matmul_calls[-1]["ws_size"] == 0


def test_autotune_adds_wide_candidates_to_both_formulations(rng, monkeypatch):
    """Row-major operands: the default and the ORDER_ROW formulation each get their wide candidate."""
    from nvmath.linalg.advanced import _autotune

    _wide_fake(monkeypatch)
    seen: list[int] = []
    monkeypatch.setattr(_autotune, "tune", _tune_picking(7, seen))
    a, b = _rand(rng, (5, 4)), _rand(rng, (4, 3))
    with adv.Matmul(F.fake(a), F.fake(b)) as mm:
        mm.plan()
        mm.autotune(iterations=2)
        assert seen == [8] and mm._plan.problem.a.order == Order.ROW
        assert mm.algorithms[0].workspace_size == 48 << 20
        _close(mm.execute().array, a @ b)


@pytest.mark.parametrize("case", ["explicit memory_limit", "given algorithms"])
def test_autotune_asks_for_no_wide_candidates(rng, monkeypatch, case):
    """An explicit memory_limit is the cap of planning and autotuning alike (autotune asks only under the
    smaller 1 MiB cap); plan(algorithms=...) means no heuristic query at all."""
    from nvmath.linalg.advanced import _autotune

    fake = _wide_fake(monkeypatch)
    seen: list[int] = []
    monkeypatch.setattr(_autotune, "tune", _tune_picking(0, seen))
    a, b = np.asfortranarray(_rand(rng, (5, 4))), _rand(rng, (4, 3))
    options = {"memory_limit": 16 << 20} if case == "explicit memory_limit" else None
    with adv.Matmul(F.fake(a), F.fake(b), options=options) as mm:
        if case == "given algorithms":
            with adv.Matmul(F.fake(a), F.fake(b)) as other:
                mm.plan(algorithms=[adv.Algorithm.from_numpy(x.as_numpy()) for x in other.plan()])
        else:
            mm.plan()
        calls = fake.heuristic_calls
        mm.autotune(iterations=2)
        asked = [p["MAX_WORKSPACE_BYTES"] for p in fake.preferences[calls:]]
        assert seen == [3] and asked == ([1 << 20] if case == "explicit memory_limit" else [])


def test_failed_autotune_keeps_the_planned_candidates(rng, monkeypatch):
    """An autotune that fails leaves the planned algorithms as they were (no wide candidate stays)."""
    from nvmath.linalg.advanced import _autotune

    _wide_fake(monkeypatch)

    def broken(*args, **kwargs):
        raise RuntimeError("timing failed")

    monkeypatch.setattr(_autotune, "tune", broken)
    a, b = np.asfortranarray(_rand(rng, (5, 4))), _rand(rng, (4, 3))
    with adv.Matmul(F.fake(a), F.fake(b)) as mm:
        planned = mm.plan()
        with pytest.raises(RuntimeError, match="timing failed"):
            mm.autotune(iterations=2)
        assert mm.algorithms == planned
        _close(mm.execute().array, a @ b)


def test_autotune_cache_remembers_the_row_order_winner(lt, rng, tmp_path, monkeypatch):
    """The winner is stored under its formulation's key; a second planner takes it without timing."""
    from nvmath.linalg.advanced import _autotune, _autotune_cache

    cache = _autotune_cache.AutotuneCache(tmp_path / "tune.json")
    monkeypatch.setattr(_autotune, "autotune_cache", cache)
    seen: list[int] = []
    monkeypatch.setattr(_autotune, "tune", _tune_picking(5, seen))
    a, b = _rand(rng, (5, 4)), _rand(rng, (4, 3))
    for _ in range(2):
        with adv.Matmul(F.fake(a), F.fake(b)) as mm:
            mm.plan()
            mm.autotune(iterations=2)
            assert (
                mm._plan.problem.a.order == Order.ROW
                and mm.algorithms[0].as_numpy()["algo"]["data"][7] == 102
            )
            _close(mm.execute().array, a @ b)
    assert seen == [6] and cache.hits == 1


def test_algorithms_held_from_before_a_formulation_switch_still_run(lt, rng, monkeypatch):
    """execute(algorithm=...) with an algorithm of the replaced formulation still computes the product."""
    from nvmath.linalg.advanced import _autotune

    monkeypatch.setattr(_autotune, "tune", _tune_picking(3, []))
    a, b = _rand(rng, (5, 4)), _rand(rng, (4, 3))
    with adv.Matmul(F.fake(a), F.fake(b)) as mm:
        first = mm.plan()[0]
        mm.autotune(iterations=2)
        assert mm._plan.problem.a.order == Order.ROW and first not in mm.algorithms
        _close(mm.execute(algorithm=first).array, a @ b)
        assert lt.matmul_calls[-1]["algo"] == 100
        _close(mm.execute(algorithm=mm.algorithms[1]).array, a @ b)
        with pytest.raises(ValueError, match="not one of this Matmul's algorithms"):
            mm.execute(algorithm=adv.Algorithm.from_numpy(first.as_numpy()))
        mm.plan()  # re-planning drops the replaced formulation
        assert mm._retired is None


def test_saved_row_order_winner_plans_in_its_formulation(lt, rng, monkeypatch):
    """plan(algorithms=...) with algorithms only the ORDER_ROW formulation accepts plans that one; an
    algorithm neither accepts keeps the default formulation's error."""
    from nvmath.bindings import cublasLt as blt

    def row_only_check(handle, desc, a, b, c, d, algo, result):
        rec = np.frombuffer((ctypes.c_char * F.HEUR.itemsize).from_address(result), dtype=F.HEUR)
        marker = int(np.frombuffer((ctypes.c_char * 64).from_address(algo), dtype=np.uint64)[7])
        rec[0]["workspace_size"] = 0
        rec[0]["state"] = 0 if F._layout(a)["ORDER"] == 1 and marker != 999 else 7
        return 0

    monkeypatch.setattr(blt, "_p_cublasLtMatmulAlgoCheck", row_only_check)
    a, b = _rand(rng, (5, 4)), _rand(rng, (4, 3))
    with adv.Matmul(F.fake(a), F.fake(b)) as mm:
        saved = [adv.Algorithm.from_numpy(x.as_numpy()) for x in mm.plan()]
    with adv.Matmul(F.fake(a), F.fake(b)) as mm:
        mm.plan(algorithms=saved)
        assert mm._plan.problem.a.order == Order.ROW
        _close(mm.execute().array, a @ b)
    bad = saved[0].as_numpy()
    bad["algo"]["data"][7] = 999
    with adv.Matmul(F.fake(a), F.fake(b)) as mm, pytest.raises(ValueError, match="cannot run this problem"):
        mm.plan(algorithms=[adv.Algorithm.from_numpy(bad)])


def test_planner_is_not_picklable_and_refuses_overlapping_threads(lt, rng):
    """The advanced Matmul refuses pickling with a reason, and execute() while another thread is
    recorded inside a method of the object gets InvalidMatmulState (the shared state guard)."""
    import pickle

    a, b = _rand(rng, (4, 3)), _rand(rng, (3, 2))
    with adv.Matmul(F.fake(a), F.fake(b)) as mm:
        with pytest.raises(TypeError, match="Matmul objects cannot be pickled"):
            pickle.dumps(mm)
        mm.plan()
        mm._lifecycle.owner = -1  # as if another thread were inside a method
        with pytest.raises(InvalidMatmulState, match="another thread"):
            mm.execute()
        mm._lifecycle.owner = None
        _close(mm.execute().array, a @ b)
