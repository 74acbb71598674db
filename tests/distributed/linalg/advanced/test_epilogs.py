"""The distributed matmul's epilogs against the numpy-computing fake cuBLASMp (mm_fakes.py) on 1-2
thread-ranks, checked with numpy/torch references computed here: bias, ReLU, GELU (tanh form, as
``torch.nn.functional.gelu(approximate="tanh")``) and their aux outputs; DRELU / DGELU with and
without bias gradients; BGRADA / BGRADB; every epilog tensor is this rank's part along D's local
rows/columns; bad epilog inputs raise on every rank before anything is created."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from dist_fakes import SingleRank, ThreadGroup
from mm_fakes import FakeDevice, gather, ok, parts, run

from nvmath.distributed.distribution import Slab
from nvmath.distributed.distribution._ownership import rank_ownership
from nvmath.distributed.linalg.advanced import Matmul, MatmulEpilog, matmul

E = MatmulEpilog


def rows_cols(dist, shape, nranks, rank):
    return tuple(np.concatenate([np.arange(a, b) for a, b in dim] or [np.arange(0)])
                 for dim in rank_ownership(dist, shape, nranks, rank))  # fmt: skip


def relu_aux_rows(rows):
    """Bytes per column of a ReLU bit-mask: ceil(rows / 8) rounded up to 16."""
    return math.ceil(math.ceil(rows / 8) / 16) * 16


def gelu(x):
    return torch.nn.functional.gelu(torch.from_numpy(x), approximate="tanh").numpy()


def gelu_grad(x):
    t = torch.from_numpy(x).requires_grad_()
    torch.nn.functional.gelu(t, approximate="tanh").sum().backward()
    return t.grad.numpy()


def problem(nranks, dist_d, seed=0):
    rng = np.random.default_rng(seed)
    m, k, n = 6 * nranks, 8, 4 * nranks
    A, B = rng.standard_normal((m, k)), rng.standard_normal((k, n))
    pa, _ = parts(A, Slab.X, nranks, "F")
    pb, _ = parts(B, Slab.Y, nranks, "F")
    return rng, A, B, pa, pb, (m, n)


FORWARD = [E.BIAS, E.RELU, E.GELU, E.RELU_BIAS, E.GELU_BIAS, E.RELU_AUX, E.RELU_AUX_BIAS, E.GELU_AUX,
           E.GELU_AUX_BIAS, E.ALLREDUCE]  # fmt: skip


@pytest.mark.parametrize("nranks", [1, 2])
@pytest.mark.parametrize("dist_d", [Slab.X, Slab.Y], ids=["d_rows", "d_cols"])
@pytest.mark.parametrize("epilog", FORWARD, ids=[e.name for e in FORWARD])
def test_forward_epilogs_match_numpy(env, nranks, dist_d, epilog):
    """D = act(A @ B + bias) with each rank's bias being its rows of D; the ReLU aux is the bit-mask
    of D > 0 (little-endian bits, rows padded to 128 bits) and the GELU aux the pre-activation (rows
    padded to 8), both this rank's block; the result equals numpy's."""
    group = SingleRank() if nranks == 1 else ThreadGroup(nranks)
    env(group)
    rng, A, B, pa, pb, (m, n) = problem(nranks, dist_d)
    bias = rng.standard_normal(m)
    with_bias = epilog in (E.BIAS, E.RELU_BIAS, E.GELU_BIAS, E.RELU_AUX_BIAS, E.GELU_AUX_BIAS)
    index = [rows_cols(dist_d, (m, n), nranks, r) for r in range(nranks)]

    def body(r):
        inputs = {"bias": FakeDevice(bias[index[r][0]].copy())} if with_bias else None
        return matmul(pa[r], pb[r], distributions=[Slab.X, Slab.Y, dist_d], epilog=epilog,
                      epilog_inputs=inputs, options={"inplace": False})  # fmt: skip

    results = ok(run(group, body))
    pre = A @ B + (bias[:, None] if with_bias else 0)
    name = epilog.name
    expected = np.maximum(pre, 0) if "RELU" in name else gelu(pre) if "GELU" in name else pre
    has_aux = "AUX" in name
    d_parts = [res[0] if has_aux else res for res in results]
    np.testing.assert_allclose(gather(d_parts, index, (m, n)), expected, rtol=1e-12, atol=1e-12)
    for r, res in enumerate(results if has_aux else []):
        (rows, cols), (_, aux) = index[r], res
        assert list(aux) == (["relu_aux"] if "RELU" in name else ["gelu_aux"])
        block = pre[np.ix_(rows, cols)]
        if "RELU" in name:
            mask = aux["relu_aux"]
            assert mask.dtype == np.uint8 and mask.shape == (relu_aux_rows(len(rows)), len(cols))
            bits = np.unpackbits(mask, axis=0, bitorder="little")[: len(rows)]
            np.testing.assert_array_equal(bits.astype(bool), block > 0)
        else:
            assert aux["gelu_aux"].shape == (-(-len(rows) // 8) * 8, len(cols))
            np.testing.assert_allclose(aux["gelu_aux"][: len(rows)], block, rtol=1e-12, atol=1e-12)


BACKWARD = [E.DRELU, E.DRELU_BGRAD, E.DGELU, E.DGELU_BGRAD]


@pytest.mark.parametrize("nranks", [1, 2])
@pytest.mark.parametrize("epilog", BACKWARD, ids=[e.name for e in BACKWARD])
def test_backward_epilogs_match_numpy(env, nranks, epilog):
    """DRELU / DGELU multiply A @ B by the activation's derivative at the forward pass's
    pre-activation (given as each rank's aux block); the BGRAD forms also return the row sums of
    that product, each rank its rows."""
    group = SingleRank() if nranks == 1 else ThreadGroup(nranks)
    env(group)
    rng, A, B, pa, pb, (m, n) = problem(nranks, Slab.X, seed=3)
    Z = rng.standard_normal((m, n))
    index = [rows_cols(Slab.X, (m, n), nranks, r) for r in range(nranks)]

    def aux_of(r):
        rows, cols = index[r]
        block = Z[np.ix_(rows, cols)]
        if "RELU" in epilog.name:
            padded = np.zeros((relu_aux_rows(len(rows)) * 8, len(cols)), np.uint8)
            padded[: len(rows)] = block > 0
            return {"relu_aux": FakeDevice(np.asfortranarray(np.packbits(padded, axis=0, bitorder="little")))}
        padded = np.zeros((-(-len(rows) // 8) * 8, len(cols)))
        padded[: len(rows)] = block
        return {"gelu_aux": FakeDevice(np.asfortranarray(padded))}

    results = ok(run(group, lambda r: matmul(pa[r], pb[r], distributions=[Slab.X, Slab.Y, Slab.X], epilog=epilog,
                                             epilog_inputs=aux_of(r), options={"inplace": False})))  # fmt: skip
    grad = (Z > 0) if "RELU" in epilog.name else gelu_grad(Z)
    expected = (A @ B) * grad
    bgrad = epilog.name.endswith("BGRAD")
    d_parts = [res[0] if bgrad else res for res in results]
    np.testing.assert_allclose(gather(d_parts, index, (m, n)), expected, rtol=1e-12, atol=1e-12)
    for r, res in enumerate(results if bgrad else []):
        key = "drelu_bgrad" if "RELU" in epilog.name else "dgelu_bgrad"
        np.testing.assert_allclose(res[1][key], expected.sum(axis=1)[index[r][0]], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("epilog", [E.BGRADA, E.BGRADB], ids=["BGRADA", "BGRADB"])
def test_bias_gradient_epilogs(env, epilog):
    """BGRADA returns the sums of op(A) over K for this rank's rows of D, BGRADB those of op(B) for
    its columns; D is the plain product."""
    group = ThreadGroup(2)
    env(group)
    _, A, B, pa, pb, (m, n) = problem(2, Slab.Y)
    index = [rows_cols(Slab.Y, (m, n), 2, r) for r in range(2)]
    results = ok(group.run(lambda r: matmul(pa[r], pb[r], distributions=[Slab.X, Slab.Y, Slab.Y], epilog=epilog,
                                            options={"inplace": False})))  # fmt: skip
    np.testing.assert_allclose(gather([d for d, _ in results], index, (m, n)), A @ B, rtol=1e-12)
    for r, (_, aux) in enumerate(results):
        if epilog == E.BGRADA:
            np.testing.assert_allclose(aux["bgrada"], A.sum(axis=1)[index[r][0]], rtol=1e-12)
        else:
            np.testing.assert_allclose(aux["bgradb"], B.sum(axis=0)[index[r][1]], rtol=1e-12)


def test_bad_epilog_inputs_raise_on_every_rank(env):
    """A bias of the wrong length on rank 1 only raises on both ranks (rank 1 its own error, rank 0
    naming rank 1); a missing or unexpected input names what the epilog takes; nothing is created."""
    group = ThreadGroup(2)
    lib = env(group)
    _, _, _, pa, pb, (m, _) = problem(2, Slab.X)
    bias = [FakeDevice(np.zeros(m // 2)), FakeDevice(np.zeros(m // 2 + 1))]

    def body(r, inputs):
        mm = Matmul(pa[r], pb[r], distributions=[Slab.X, Slab.Y, Slab.X], options={"inplace": False})
        try:
            mm.plan(epilog=E.BIAS, epilog_inputs=inputs(r))
        finally:
            mm.free()

    results = group.run(lambda r: body(r, lambda r: {"bias": bias[r]}))
    assert isinstance(results[1], ValueError) and "shape (6,)" in str(results[1]), results
    assert isinstance(results[0], ValueError) and "rank(s) [1]" in str(results[0]), results
    results = group.run(lambda r: body(r, lambda r: None))
    assert all(isinstance(e, ValueError) and "['bias']" in str(e) for e in results), results
    results = group.run(lambda r: body(r, lambda r: {"bias": bias[0], "gelu_aux": bias[0]}))
    assert all(isinstance(e, ValueError) and "gelu_aux" in str(e) for e in results), results
    assert not [c for c in lib.calls if c[1] == "create"]


def test_epilog_refusals(env):
    """Complex operands take no epilog but DEFAULT; a bias epilog needs a Fortran-ordered result
    (a C-ordered c would make cuBLASMp compute D^T, whose rows are D's columns)."""
    env(SingleRank())
    z = FakeDevice(np.ones((4, 4), dtype=np.complex128, order="F"))
    with (
        Matmul(z, z, distributions=[Slab.X] * 3, options={"inplace": False}) as mm,
        pytest.raises(ValueError, match="complex"),
    ):
        mm.plan(epilog=E.RELU)
    a, c = FakeDevice(np.ones((4, 4), order="F")), FakeDevice(np.ones((4, 4)))
    with Matmul(a, a, c, distributions=[Slab.X] * 3, beta=0.0) as mm:
        with pytest.raises(ValueError, match="Fortran order"):
            mm.plan(epilog=E.BIAS, epilog_inputs={"bias": FakeDevice(np.zeros(4))})
        mm.plan(epilog=E.RELU)  # element-wise: any orientation
        np.testing.assert_allclose(mm.execute(), 4.0)


def test_reset_bias(env):
    """reset_operands(epilog_inputs=...) points the planned epilog at a new bias (checked: a bias of
    another length raises)."""
    env(SingleRank())
    a = FakeDevice(np.ones((4, 4), order="F"))
    with Matmul(a, a, distributions=[Slab.X] * 3, options={"inplace": False}) as mm:
        mm.plan(epilog=E.BIAS, epilog_inputs={"bias": FakeDevice(np.arange(4.0))})
        np.testing.assert_allclose(mm.execute(), 4.0 + np.arange(4.0)[:, None] + np.zeros((4, 4)))
        mm.reset_operands(epilog_inputs={"bias": FakeDevice(-np.arange(4.0))})
        np.testing.assert_allclose(mm.execute(), 4.0 - np.arange(4.0)[:, None] + np.zeros((4, 4)))
        with pytest.raises(ValueError, match="bias"):
            mm.reset_operands(epilog_inputs={"bias": FakeDevice(np.zeros(5))})
