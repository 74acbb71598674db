"""Explicit batches on the fake GPU: one grouped launch for float32 / float64 / float16 sequences of
mixed shapes (N-D elements included), a loop for complex and structured ones; per-problem scalars."""

from __future__ import annotations

import numpy as np
import pytest
from cublas_fakes import fake
from generic_testing import TOL, quals, rand, rel_error

import nvmath.linalg as la

SHAPES = [(5, 7, 3), (16, 7, 1), (2, 7, 9), (1, 7, 1)]


@pytest.mark.parametrize(
    ("dtype", "routine"),
    [
        ("float32", "sgemm_grouped_batched"),
        ("float64", "dgemm_grouped_batched"),
        ("float16", "gemm_grouped_batched_ex"),
        ("complex64", "gemm_ex"),
    ],
)
def test_sequence(fake_gpu, dtype, routine):
    """Mixed shapes / layouts with per-problem alpha, beta, c: one grouped launch (complex: a loop)."""
    rng = np.random.default_rng(0)
    a = [rand(rng, (m, k), dtype, "row" if i % 2 else "col") for i, (m, k, n) in enumerate(SHAPES)]
    b = [rand(rng, (k, n), dtype, "col" if i % 2 else "row") for i, (m, k, n) in enumerate(SHAPES)]
    c = [rand(rng, (m, n), dtype) for m, k, n in SHAPES]
    alphas, betas = [1.0, 2.0, -1.0, 0.5], [0.0, 1.0, 2.0, -3.0]
    out = la.matmul(
        [fake(x) for x in a], [fake(x) for x in b], [fake(x) for x in c], alpha=alphas, beta=betas
    )
    for o, x, y, z, al, be in zip(out, a, b, c, alphas, betas):
        ref = al * x.astype(np.complex128) @ y + be * z
        assert rel_error(o.array, ref) < TOL[dtype]
    launches = [n for n in fake_gpu.calls if "gemm" in n]
    assert launches == [routine] * (1 if "grouped" in routine else len(SHAPES))


def test_broadcast_and_nd(fake_gpu):
    """A length-1 sequence broadcasts; an N-D element brings its whole batch into its group."""
    rng = np.random.default_rng(1)
    w = rand(rng, (8, 6), "float32")
    xs = [rand(rng, (3, 4, 8), "float32"), rand(rng, (5, 8), "float32", "col")]
    out = la.matmul([fake(x) for x in xs], [fake(w)])
    for o, x in zip(out, xs):
        assert rel_error(o.array, np.matmul(x.astype(np.float64), w)) < 2e-5
    assert [n for n in fake_gpu.calls if "gemm" in n] == ["sgemm_grouped_batched"]


def test_structured_sequence_loops(fake_gpu):
    """Per-problem qualifiers: a structured problem runs its own routine, in a loop."""
    rng = np.random.default_rng(2)
    s = rand(rng, (6, 6), "float64")
    x = [rand(rng, (6, 2), "float64"), rand(rng, (6, 3), "float64")]
    G = la.GeneralMatrixQualifier.create
    q = [quals(la.SymmetricMatrixQualifier.create(), G()), quals(G(), G())]
    out = la.matmul([fake(s), fake(s)], [fake(v) for v in x], qualifiers=q)
    full = np.tril(s) + np.tril(s, -1).T
    assert rel_error(out[0].array, full @ x[0]) < 1e-12
    assert rel_error(out[1].array, s @ x[1]) < 1e-12
    assert "dsymm" in fake_gpu.calls


def test_pointer_upload_once(fake_gpu, monkeypatch):
    """A sequence uploads its pointer arrays at every launch: the scratch they live in is shared by the
    plan cache's planners of the device, so a cached upload could be stale."""
    from nvmath.linalg.generic import _grouped

    uploads = []
    real = _grouped.upload
    monkeypatch.setattr(_grouped, "upload", lambda *a: (uploads.append(1), real(*a)))
    rng = np.random.default_rng(3)
    a = [fake(rand(rng, (3, 4), "float32")), fake(rand(rng, (2, 4), "float32"))]
    b = [fake(rand(rng, (4, 5), "float32"))]
    mm = la.Matmul(a, b)
    mm.plan()
    mm.execute()
    mm.execute()
    assert len(uploads) == 2  # the results are new tensors each time: their addresses differ
    mm.free()


def test_sequence_length_mismatch():
    """Sequences of different lengths (other than 1) are refused, naming the lengths."""
    x = np.ones((2, 2))
    with pytest.raises(ValueError, match="one length"):
        la.matmul([x, x], [x, x, x])


def test_group_integers_refused_at_plan(fake_gpu):
    """The per-group C int arrays are range-checked when the grouped program is built (ctypes would
    store a wrapped value); a sequence with such a problem is a ValueError at plan, before any call."""
    from nvmath.linalg.generic._grouped import make_grouped
    from nvmath.linalg.generic._traits import OperandInfo, problem_traits

    big = 2**31
    ok = problem_traits(OperandInfo((2, 2), (2, 1), "float32"), OperandInfo((2, 3), (3, 1), "float32"))
    wide = problem_traits(OperandInfo((2, 2), (big, 1), "float32"), OperandInfo((2, 3), (3, 1), "float32"))
    with pytest.raises(ValueError, match="second BLAS operand of problem 1 of the sequence is 2147483648"):
        make_grouped([ok, wide])
    buf = np.zeros(4, np.float32)
    a_wide = np.lib.stride_tricks.as_strided(buf, (2, 2), (4 * big, 4))
    mm = la.Matmul([fake(np.ones((2, 2), np.float32)), fake(a_wide)], [fake(np.ones((2, 3), np.float32))])
    with pytest.raises(ValueError, match="2147483648.*2147483647"):
        mm.plan()
    assert fake_gpu.calls == []
