"""nvmath.distributed.linalg.advanced.Matmul / matmul against a fake cuBLASMp that computes with numpy
(mm_fakes.py): results on 1-4 thread-ranks for slab, block and block-cyclic distributions, Fortran
and C local orders, transposes, in place or not, against numpy float64; the cuBLASMp call sequence;
bad input raised on every rank; the lifecycle; the workspace registered with cuBLASMp; what is not
implemented yet says so. Epilogs and FP8 are in test_epilogs.py / test_fp8.py."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from dist_fakes import SingleRank, ThreadGroup
from mm_fakes import FakeDevice, gather, ok, parts, run

import nvmath.distributed as nd
import nvmath.distributed.linalg.advanced as dla
from nvmath.distributed.distribution import BlockCyclic, BlockNonCyclic, ProcessGrid, Slab
from nvmath.distributed.linalg.advanced import matmul
from nvmath.distributed.linalg.advanced._planner import InvalidMatmulState, Matmul


def grids(nranks):
    return {
        "slab": (Slab.X, Slab.Y, Slab.X),
        "block": tuple(BlockNonCyclic(ProcessGrid(shape=(nranks, 1))) for _ in range(3)),
        "cyclic": tuple(BlockCyclic(ProcessGrid(shape=(nranks, 1)), (2, 3)) for _ in range(3)),
    }


@pytest.mark.parametrize("nranks", [1, 2, 4])
@pytest.mark.parametrize("kind", ["slab", "block", "cyclic"])
@pytest.mark.parametrize(
    ("order_a", "order_b", "order_c"), [("F", "F", "F"), ("C", "F", "C"), ("C", "C", "F")]
)
@pytest.mark.parametrize("dtype", ["float64", "complex64"])
def test_matmul_matches_numpy(env, nranks, kind, order_a, order_b, order_c, dtype):
    """alpha A @ B + beta C, in place into c, equals numpy's float64 result for every distribution
    kind and any mix of Fortran / C local orders (C orders become transposes cuBLASMp runs)."""
    group = SingleRank() if nranks == 1 else ThreadGroup(nranks)
    env(group)
    rng = np.random.default_rng(0)
    m, k, n = 8, 12, 4 * nranks
    make = (
        (lambda s: rng.standard_normal(s) + 1j * rng.standard_normal(s))
        if "complex" in dtype
        else rng.standard_normal
    )
    A, B, C = (make(s).astype(dtype) for s in ((m, k), (k, n), (m, n)))
    da, db, dc = grids(nranks)[kind]
    pa, _ = parts(A, da, nranks, order_a)
    pb, _ = parts(B, db, nranks, order_b)
    pc, index = parts(C, dc, nranks, order_c)
    results = ok(run(group, lambda r: matmul(pa[r], pb[r], pc[r], distributions=[da, db, dc], alpha=2.0,
                                             beta=0.5)))  # fmt: skip
    assert all(res is pc[r].tensor for r, res in enumerate(results))  # in place
    expected = 2.0 * A.astype(np.complex128 if "complex" in dtype else np.float64) @ B + 0.5 * C
    tol = 1e-12 if dtype == "float64" else 1e-4
    np.testing.assert_allclose(gather(results, index, (m, n)), expected, rtol=tol, atol=tol * 10)


def test_two_by_two_grid_transposes_and_new_result(env):
    """On a 2x2 block grid, op(a) = a.T through qualifiers and a new (not in-place) Fortran result
    without c; the input c is left untouched when inplace=False."""
    group = ThreadGroup(4)
    lib = env(group)
    dist = BlockNonCyclic(ProcessGrid(shape=(2, 2), layout=ProcessGrid.Layout.COL_MAJOR))
    rng = np.random.default_rng(1)
    A, B = rng.standard_normal((6, 5)), rng.standard_normal((6, 7))
    pa, _ = parts(A, dist, 4, "F")
    pb, _ = parts(B, dist, 4, "C")
    q = np.zeros(2, dtype=[("is_transpose", "<i4"), ("is_conjugate", "<i4")])
    q[0]["is_transpose"] = 1
    results = ok(group.run(lambda r: matmul(pa[r], pb[r], distributions=[dist, dist, dist], qualifiers=q,
                                            options={"inplace": False})))  # fmt: skip
    _, index = parts(np.zeros((5, 7)), dist, 4, "F")
    np.testing.assert_allclose(gather(results, index, (5, 7)), A.T @ B, rtol=1e-12, atol=1e-12)
    grids_made = [c for c in lib.calls if c[1] == "grid_create"]
    assert (
        len(grids_made) == 4 * 2
    )  # one grid per rank for F-ordered a / d, one transposed for the C-ordered b
    assert not lib.live  # matmul() frees everything


def test_call_sequence_and_attributes(env):
    """Handle, grid, descriptors, matmul descriptor with TRANSA/TRANSB and the algorithm, buffer
    query; execute sets the stream and passes the workspaces; free destroys everything."""
    group = SingleRank()
    lib = env(group)
    a, b, c = (FakeDevice(np.asfortranarray(np.ones((4, 4)))) for _ in range(3))
    options = {"algo_type": dla.MatmulAlgoType.SPLIT_P2P, "sm_count_communication": 2}
    with Matmul(a, b, c, distributions=[Slab.X] * 3, beta=1.0, options=options) as mm:
        mm.plan()
        mm.execute(stream=5)
        mm.execute(release_workspace=True, stream=5)
        mm.execute(stream=5)
    names = [c[1] for c in lib.calls]
    assert names[:5] == ["create", "grid_create", "matrix_descriptor_create", "matrix_descriptor_create",
                         "matrix_descriptor_create"]  # fmt: skip
    attrs = {c[2]: c[3] for c in lib.calls if c[1] == "set_attribute"}
    assert attrs == {
        "TRANSA": 0,
        "TRANSB": 0,
        "ALGO_TYPE": 0,
        "COMMUNICATION_SM_COUNT": 2,
    }  # one rank: DEFAULT
    assert names.count("matmul") == 3 and ("set_stream" in names) and not lib.live
    # the workspace is cublasMpMalloc'd (registered) at the first execute, freed by release_workspace,
    # registered again at the next execute and freed (deregistered) by free()
    assert [n for n in names if n in ("malloc", "free", "matmul")] == ["malloc", "matmul", "matmul", "free",
                                                                      "malloc", "matmul", "free"]  # fmt: skip
    assert names.index("free", names.index("malloc", 10)) < names.index("grid_destroy")
    np.testing.assert_allclose(c.tensor, 1 + 3 * 4 * 1, rtol=0)  # c += a @ b three times (beta=1)


def test_multicast_algorithm_without_nvls_runs_as_default(env, monkeypatch, caplog):
    """FUSED where NCCL_NVLS_ENABLE=0 is asked of cuBLASMp as DEFAULT on 2 ranks (a warning says
    why) and gives the product; SPLIT_P2P is kept there."""
    monkeypatch.setenv("NCCL_NVLS_ENABLE", "0")
    group = ThreadGroup(2)
    lib = env(group)
    g = np.arange(48, dtype=np.float64).reshape(8, 6) / 7
    pa, _ = parts(g, Slab.X, 2, "F")
    pb, _ = parts(g.T.copy(), Slab.Y, 2, "F")
    _, index = parts(np.zeros((8, 8)), Slab.X, 2, "F")
    dists = [Slab.X, Slab.Y, Slab.X]
    for algo, asked in ((dla.MatmulAlgoType.FUSED, 0), (dla.MatmulAlgoType.SPLIT_P2P, 1)):
        options = {"inplace": False, "algo_type": algo}
        results = ok(run(group, lambda r, o=options: matmul(pa[r], pb[r], distributions=dists, options=o)))
        np.testing.assert_allclose(gather(results, index, (8, 8)), g @ g.T, rtol=1e-12)
        set_algos = [c[3] for c in lib.calls if c[1] == "set_attribute" and c[2] == "ALGO_TYPE"]
        assert set_algos[-2:] == [asked, asked]
    assert "FUSED needs NVLink multicast" in caplog.text


def test_workspace_of_zero_bytes_is_still_allocated(env):
    """cuBLASMp may need no device workspace at one rank: a registered one is allocated anyway (never
    a null d_work; every rank enters the collective cublasMpMalloc) and the call gets the 0 bytes
    the size query answered."""
    lib = env(SingleRank())
    lib.sizes = (0, 0)
    a, b = (FakeDevice(np.asfortranarray(np.ones((4, 4)))) for _ in range(2))
    d = matmul(a, b, distributions=[Slab.X, Slab.Y, Slab.X], options={"inplace": False})
    np.testing.assert_allclose(d, 4.0, rtol=0)
    assert [c[2] for c in lib.calls if c[1] == "malloc"] == [1 << 16] and not lib.live


def test_ranks_register_workspaces_of_one_size(env):
    """Ranks whose size queries differ allocate one workspace size, the largest (cublasMpMalloc's
    registration is collective over symmetric memory); each call still gets its own rank's size
    (the fake checks it)."""
    group = ThreadGroup(2)
    lib = env(group)
    lib.sizes = {0: (300_000, 128), 1: (500_000, 64)}
    g = np.arange(48, dtype=np.float64).reshape(8, 6)
    pa, _ = parts(g, Slab.X, 2, "F")
    pb, _ = parts(g.T.copy(), Slab.Y, 2, "F")
    _, index = parts(np.zeros((8, 8)), Slab.X, 2, "F")
    dists, options = [Slab.X, Slab.Y, Slab.X], {"inplace": False}
    results = ok(run(group, lambda r: matmul(pa[r], pb[r], distributions=dists, options=options)))
    np.testing.assert_allclose(gather(results, index, (8, 8)), g @ g.T, rtol=1e-12)
    assert [c[2] for c in lib.calls if c[1] == "malloc"] == [500_000, 500_000]


def test_rank_problems_raise_on_every_rank(env):
    """A dtype differing on rank 1 is a RankDisagreementError on both ranks; an operand rank 1 alone
    cannot use (a strided local block) raises there and on rank 0 (naming rank 1); local shapes that
    are not the distribution's raise on every rank; nothing is created."""
    group = ThreadGroup(2)
    lib = env(group)
    ops = [FakeDevice(np.ones((2, 4), order="F")), FakeDevice(np.ones((2, 4), dtype=np.float32, order="F"))]
    results = group.run(
        lambda r: Matmul(ops[r], ops[r], distributions=[Slab.X] * 3, options={"inplace": False})
    )
    assert all(isinstance(e, nd.RankDisagreementError) and "rank(s) [1]" in str(e) for e in results), results
    strided = [FakeDevice(np.ones((2, 4), order="F")), FakeDevice(np.ones((4, 8))[::2, ::2])]
    results = group.run(
        lambda r: Matmul(strided[r], strided[r], distributions=[Slab.X] * 3, options={"inplace": False})
    )
    assert isinstance(results[1], ValueError) and "Fortran or C order" in str(results[1])
    assert isinstance(results[0], ValueError) and "rank(s) [1]" in str(results[0])
    odd = [FakeDevice(np.ones((1, 4), order="F")), FakeDevice(np.ones((3, 4), order="F"))]
    results = group.run(
        lambda r: Matmul(odd[r], odd[r], distributions=[Slab.X] * 3, options={"inplace": False})
    )
    assert all(isinstance(e, ValueError) and "rank(s) [0, 1]" in str(e) for e in results), results
    assert not [c for c in lib.calls if c[1] == "create"]


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [({"distributions": [Slab.X] * 2}, TypeError, r"\[dist_a, dist_b, dist_c\]"),
     ({"options": {"inplace": True}, "c": None}, ValueError, "inplace"),
     ({"beta": None}, ValueError, "beta is required"),
     ({"quantization_scales": {"a": 1.0}}, ValueError, "need FP8 operands"),
     ({"quantization_scales": {"e": 1.0}}, TypeError, "unknown names"),
     ({"options": {"result_amax": True}}, ValueError, "need FP8 operands"),
     ({"options": {"block_scaling": True}}, NotImplementedError, "block_scaling"),
     ({"options": {"result_type": 0}}, NotImplementedError, "result type"),
     ({"alpha": 1j}, TypeError, "alpha")],
)  # fmt: skip
def test_bad_and_unsupported_arguments(env, kwargs, error, match):
    """Bad arguments raise typed errors (scales and amax on non-FP8 operands among them); what is not
    implemented (MXFP8 block scaling, a float64 problem with a float32 result) raises
    NotImplementedError."""
    env(SingleRank())
    a = FakeDevice(np.ones((4, 4), order="F"))
    args = {"c": FakeDevice(np.ones((4, 4), order="F")), "distributions": [Slab.X] * 3, "beta": 1.0} | kwargs
    with pytest.raises(error, match=match):
        Matmul(a, a, **args)


def test_plan_arguments_and_lifecycle(env):
    """plan(preferences=...) raises NotImplementedError and an unknown epilog ValueError; execute
    before plan raises; a live plan blocks finalize; reset_operands checks layouts; free is idempotent."""
    env(SingleRank())
    a = FakeDevice(np.ones((4, 4), order="F"))
    mm = Matmul(a, a, distributions=[Slab.X] * 3, options={"inplace": False})
    with pytest.raises(InvalidMatmulState, match="before plan"):
        mm.execute()
    with pytest.raises(NotImplementedError, match="preferences"):
        mm.plan(preferences={"x": 1})
    with pytest.raises(ValueError, match="not a cuBLASMp epilog"):
        mm.plan(epilog=3)
    with pytest.raises(TypeError, match="MatmulEpilog"):
        mm.plan(epilog="RELU")
    mm.plan()
    with pytest.raises(RuntimeError, match="plan"):
        nd.finalize()
    with pytest.raises(ValueError, match="planned package, shape"):
        mm.reset_operands(a=FakeDevice(np.ones((4, 4))))  # C order: another layout
    mm.reset_operands(a=FakeDevice(2 * np.ones((4, 4), order="F")))
    np.testing.assert_allclose(mm.execute(), 8.0)
    mm.reset_operands_unchecked(b=FakeDevice(3 * np.ones((4, 4), order="F")))
    np.testing.assert_allclose(mm.execute(), 24.0)
    mm.release_operands()
    with pytest.raises(InvalidMatmulState, match="release_operands"):
        mm.execute()
    mm.free()
    mm.free()
    nd.finalize()


def test_ranks_agree_on_one_orientation(env):
    """A one-row block fits both orders, so it follows the other ranks' C order (cuBLASMp needs one
    orientation per matrix: 3 uneven chunks of a C-ordered 5-row matrix); Fortran on one rank and C
    on another cannot be described and raise on every rank naming both."""
    group = ThreadGroup(3)
    env(group)
    dist = BlockNonCyclic(ProcessGrid(shape=(3, 1)))
    rng = np.random.default_rng(4)
    A, B = rng.standard_normal((5, 4)), rng.standard_normal((4, 3))
    pa, _ = parts(A, dist, 3, "C")  # rows 2, 2, 1: the last block is one row
    rep = BlockNonCyclic(ProcessGrid(shape=(1, 3)))
    pb = [FakeDevice(np.ascontiguousarray(B[:, r : r + 1])) for r in range(3)]
    _, index = parts(np.zeros((5, 3)), dist, 3, "F")
    results = ok(group.run(lambda r: matmul(pa[r], pb[r], distributions=[dist, rep, dist],
                                            options={"inplace": False})))  # fmt: skip
    np.testing.assert_allclose(gather(results, index, (5, 3)), A @ B, rtol=1e-12)
    mixed = [FakeDevice(np.asfortranarray(pa[0].tensor)), pa[1], pa[2]]
    results = group.run(lambda r: Matmul(mixed[r], pb[r], distributions=[dist, rep, dist],
                                         options={"inplace": False}))  # fmt: skip
    assert all(
        isinstance(e, ValueError) and "rank(s) [0" in str(e) and "C order" in str(e) for e in results
    ), results
