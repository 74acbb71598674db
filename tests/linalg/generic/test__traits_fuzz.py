"""Property test of the traits and programs on the fake GPU: random shapes (empty ones included),
broadcast batches, memory layouts, conjugations and kinds give numpy's float64 answer."""

from __future__ import annotations

import numpy as np
import pytest
from cublas_fakes import fake
from generic_testing import quals, rel_error
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import nvmath.linalg as la

G = la.GeneralMatrixQualifier.create
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))


def _layout(rng: np.random.Generator, shape: tuple[int, ...], layout: str, dtype: str) -> np.ndarray:
    """An array of ``shape`` in a layout: row, col, pad (padded rows), step (every other column)."""
    mem = list(shape)
    if layout == "col" and len(shape) >= 2:
        mem[-1], mem[-2] = mem[-2], mem[-1]
    if layout == "pad":
        mem[-1] += 2
    if layout == "step":
        mem[-1] *= 2
    x = rng.uniform(0.5, 1.5, mem) + (1j * rng.uniform(-0.5, 0.5, mem) if dtype.startswith("complex") else 0)
    x = x.astype(dtype)
    if layout == "col" and len(shape) >= 2:
        return np.swapaxes(x, -1, -2)
    if layout == "pad":
        return x[..., : shape[-1]]
    if layout == "step":
        return x[..., ::2]
    return x


layouts = st.sampled_from(["row", "col", "pad", "step"])
dims = st.integers(0, 4)
batches = st.sampled_from([(), (2,), (1,), (3, 1), (1, 2), (2, 3)])


@SETTINGS
@given(
    m=dims, n=dims, k=dims, ba=batches, bb=batches, la_=layouts, lb=layouts,
    ca=st.booleans(), cb=st.booleans(), with_c=st.booleans(), seed=st.integers(0, 2**16),
    dtype=st.sampled_from(["float64", "complex128"]),
)  # fmt: skip
def test_gemm_matches_numpy(fake_gpu, m, n, k, ba, bb, la_, lb, ca, cb, with_c, seed, dtype):
    """Random GEMMs through the cuBLAS programs equal numpy.matmul (with conjugations, alpha, beta, c)."""
    _gemm(fake, m, n, k, ba, bb, la_, lb, ca, cb, with_c, seed, dtype)


@SETTINGS
@given(
    m=dims, n=dims, k=dims, ba=batches, bb=batches, la_=layouts, lb=layouts,
    ca=st.booleans(), cb=st.booleans(), with_c=st.booleans(), seed=st.integers(0, 2**16),
    dtype=st.sampled_from(["float32", "complex128"]),
)  # fmt: skip
def test_gemm_cpu_matches_numpy(m, n, k, ba, bb, la_, lb, ca, cb, with_c, seed, dtype):
    """The same GEMMs with numpy operands on the CPU (repeated calls: the cached fast entry too)."""
    for _ in range(2):
        _gemm(lambda x: x, m, n, k, ba, bb, la_, lb, ca, cb, with_c, seed, dtype)


def _gemm(wrap, m, n, k, ba, bb, la_, lb, ca, cb, with_c, seed, dtype):
    try:
        batch = np.broadcast_shapes(ba, bb)
    except ValueError:
        return
    rng = np.random.default_rng(seed)
    a, b = _layout(rng, (*ba, m, k), la_, dtype), _layout(rng, (*bb, k, n), lb, dtype)
    real = not dtype.startswith("complex")
    ca, cb = ca and not real, cb and not real
    ref = np.matmul(np.conj(a) if ca else a, np.conj(b) if cb else b).astype(np.complex128)
    kwargs = {"qualifiers": quals(G(conjugate=ca), G(conjugate=cb))}
    args = [wrap(a), wrap(b)]
    if with_c:
        c = _layout(rng, (*batch, m, n), "row", dtype)
        args.append(wrap(c))
        kwargs.update(alpha=1.5, beta=-0.5, qualifiers=quals(G(conjugate=ca), G(conjugate=cb), G()))
        ref = 1.5 * ref - 0.5 * c
    out = la.matmul(*args, **kwargs)
    out = getattr(out, "array", out)
    assert out.shape == ref.shape
    if ref.size:
        assert rel_error(out, ref) < (1e-5 if dtype == "float32" else 1e-12) or np.abs(ref).max() == 0


@SETTINGS
@given(
    n=st.integers(1, 5), other=st.integers(0, 4), side=st.sampled_from("ab"), lower=st.booleans(),
    kind=st.sampled_from(["sy", "he", "tr", "dg"]), ls=layouts, lx=layouts, conj=st.booleans(),
    unit=st.booleans(), incx=st.sampled_from([1, 2, -1, -3]), seed=st.integers(0, 2**16),
)  # fmt: skip
def test_structured_matches_numpy(fake_gpu, n, other, side, lower, kind, ls, lx, conj, unit, incx, seed):
    """Random structured products (symm / hemm / trmm / dgmm, either side, any layout) equal numpy."""
    _structured(fake, n, other, side, lower, kind, ls, lx, conj, unit, incx, seed)


@SETTINGS
@given(
    n=st.integers(1, 5), other=st.integers(0, 4), side=st.sampled_from("ab"), lower=st.booleans(),
    kind=st.sampled_from(["sy", "he", "dg"]), ls=layouts, lx=layouts, conj=st.booleans(),
    incx=st.sampled_from([1, 2, -1, -3]), seed=st.integers(0, 2**16),
)  # fmt: skip
def test_structured_cpu_matches_numpy(n, other, side, lower, kind, ls, lx, conj, incx, seed):
    """The same products with numpy operands on the CPU (scipy symm / hemm, a broadcast dgmm)."""
    _structured(lambda x: x, n, other, side, lower, kind, ls, lx, conj, False, incx, seed)


def _structured(wrap, n, other, side, lower, kind, ls, lx, conj, unit, incx, seed):
    rng = np.random.default_rng(seed)
    dtype = "complex128"
    if kind == "dg":
        s = _layout(rng, (1, (n - 1) * abs(incx) + 1), "row", dtype)[0]
        d = s[:: abs(incx)][::-1] if incx < 0 else s[::incx]
        full = np.diag(d)
        q = la.DiagonalMatrixQualifier.create(conjugate=conj, incx=incx)
    else:
        s = _layout(rng, (n, n), ls if ls != "step" else "row", dtype)
        tri = np.tril(s) if lower else np.triu(s)
        strict = np.tril(s, -1) if lower else np.triu(s, 1)
        uplo = la.FillMode.LOWER if lower else la.FillMode.UPPER
        if kind == "sy":
            full, q = tri + strict.T, la.SymmetricMatrixQualifier.create(conjugate=conj, uplo=uplo)
        elif kind == "he":
            full = tri + strict.conj().T
            full[np.diag_indices(n)] = full.diagonal().real
            q = la.HermitianMatrixQualifier.create(conjugate=conj, uplo=uplo)
        else:
            full = strict + np.eye(n) if unit else tri
            diag = la.DiagType.UNIT if unit else la.DiagType.NON_UNIT
            q = la.TriangularMatrixQualifier.create(conjugate=conj, uplo=uplo, diag=diag)
    full = np.conj(full) if conj else full
    x = _layout(rng, (n, other) if side == "a" else (other, n), lx, dtype)
    ref = full @ x if side == "a" else x @ full
    args = (wrap(s), wrap(x)) if side == "a" else (wrap(x), wrap(s))
    qs = quals(q, G()) if side == "a" else quals(G(), q)
    out = la.matmul(*args, qualifiers=qs)
    out = getattr(out, "array", out)
    assert out.shape == ref.shape
    if ref.size:
        assert rel_error(out, ref) < 1e-12


@pytest.mark.parametrize("seed", range(3))
def test_sequences_match_numpy(fake_gpu, seed):
    """Random sequences (some empty problems) through the grouped program equal numpy."""
    rng = np.random.default_rng(seed)
    shapes = [tuple(int(v) for v in rng.integers(0, 5, 3)) for _ in range(6)]
    a = [_layout(rng, (m, k), str(rng.choice(["row", "col", "pad"])), "float64") for m, k, n in shapes]
    b = [_layout(rng, (k, n), str(rng.choice(["row", "col", "pad"])), "float64") for m, k, n in shapes]
    alphas = [float(x) for x in rng.uniform(-2, 2, len(shapes))]
    out = la.matmul([fake(x) for x in a], [fake(y) for y in b], alpha=alphas)
    for o, x, y, al in zip(out, a, b, alphas):
        assert o.array.shape == (x.shape[0], y.shape[1])
        np.testing.assert_allclose(o.array, al * x @ y, atol=1e-12)
