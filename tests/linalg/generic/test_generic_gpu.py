"""The generic matmul on a real GPU (cuBLAS): numerics against float64 references for every dtype,
layout, structured kind, batching form and operand package; streams, lifecycle and the plan cache."""

from __future__ import annotations

import numpy as np
import pytest

import nvmath.linalg as la
from nvmath.linalg import (
    DiagonalMatrixQualifier,
    DiagType,
    FillMode,
    GeneralMatrixQualifier,
    HermitianMatrixQualifier,
    SymmetricMatrixQualifier,
    TriangularMatrixQualifier,
)
from nvmath.linalg.generic import _cublas

pytestmark = pytest.mark.gpu

TOL = {
    "float16": 5e-3,
    "bfloat16": 3e-2,
    "float32": 2e-5,
    "float64": 1e-12,
    "complex64": 2e-5,
    "complex128": 1e-12,
}
DTYPES = list(TOL)
FULL = ["float32", "float64", "complex64", "complex128"]


@pytest.fixture(scope="module")
def torch():
    """torch with CUDA (skip otherwise)."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA device")
    return torch


def rand(torch, shape, dtype, layout="row", seed=0):
    """Random never-zero values on the GPU in a layout: row, col (column-major) or pad (padded rows)."""
    g = np.random.default_rng(seed)
    mem = tuple(shape) if layout != "col" else tuple(shape[:-2]) + (shape[-1], shape[-2])
    if layout == "pad":
        mem = mem[:-1] + (mem[-1] + 3,)
    x = g.uniform(0.5, 1.5, mem) * g.choice([-1, 1], mem)
    if dtype.startswith("complex"):
        x = x + 1j * g.uniform(-0.5, 0.5, mem)
    t = torch.from_numpy(x).to("cuda").to(getattr(torch, dtype))
    if layout == "pad":
        t = t[..., : shape[-1]]
    return t if layout != "col" else t.transpose(-1, -2)


def host(t):
    """float64 / complex128 numpy copy of a torch tensor (conjugation resolved)."""
    import torch

    t = t.resolve_conj()
    if t.dtype in (torch.float16, torch.bfloat16):
        t = t.float()
    x = t.cpu().numpy()
    return x.astype(np.complex128 if np.iscomplexobj(x) else np.float64)


def check(out, ref, dtype):
    out = host(out) if not isinstance(out, np.ndarray) else out.astype(ref.dtype)
    assert out.shape == ref.shape
    assert np.isfinite(out).all()
    err = np.linalg.norm(out - ref) / max(np.linalg.norm(ref), 1e-30)
    assert err < TOL[dtype], f"relative error {err:.2e} >= {TOL[dtype]:.0e}"


def quals(*records):
    return np.array(list(records), dtype=la.matrix_qualifiers_dtype)


G = GeneralMatrixQualifier.create


# ---------------------------------------------------------------------------------------------- GEMM
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "layouts", [("row", "row"), ("col", "row"), ("row", "col"), ("col", "col"), ("pad", "pad")]
)
def test_gemm_dtypes_and_layouts(torch, dtype, layouts):
    """alpha * a @ b + beta * c matches float64 for every dtype and memory layout of a and b."""
    a = rand(torch, (65, 33), dtype, layouts[0], 1)
    b = rand(torch, (33, 47), dtype, layouts[1], 2)
    c = rand(torch, (65, 47), dtype, "row", 3)
    check(la.matmul(a, b), host(a) @ host(b), dtype)
    out = la.matmul(a, b, c, alpha=0.75, beta=-1.25)
    check(out, 0.75 * host(a) @ host(b) - 1.25 * host(c), dtype)
    assert out.device == a.device and out.dtype == a.dtype


@pytest.mark.parametrize("dtype", FULL)
def test_gemm_batched_and_broadcast(torch, dtype):
    """N-D operands batch like numpy.matmul, broadcast batch dims included ((4, 1) with (3,))."""
    for sa, sb in [
        ((6, 20, 12), (6, 12, 9)),
        ((6, 20, 12), (12, 9)),
        ((20, 12), (5, 12, 9)),
        ((4, 1, 8, 5), (3, 5, 7)),
        ((2, 3, 4, 5), (1, 3, 5, 6)),
    ]:
        a, b = rand(torch, sa, dtype, "row", 4), rand(torch, sb, dtype, "col", 5)
        check(la.matmul(a, b), np.matmul(host(a), host(b)), dtype)


def test_gemm_vectors(torch):
    """1-D operands are promoted and squeezed as numpy.matmul does."""
    a, b, v = (
        rand(torch, (7, 5), "float64"),
        rand(torch, (5, 4), "float64"),
        rand(torch, (5, 1), "float64")[:, 0],
    )
    check(la.matmul(a, v), host(a) @ host(v), "float64")
    check(la.matmul(v, b), host(v) @ host(b), "float64")
    check(la.matmul(v, v), np.array(host(v) @ host(v)), "float64")


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
@pytest.mark.parametrize("la_", ["row", "col"])
@pytest.mark.parametrize("lb", ["row", "col"])
def test_gemm_conjugate(torch, dtype, la_, lb):
    """Conjugate qualifiers and torch's lazy conj bit work in every layout (XOR of the two)."""
    a, b = rand(torch, (9, 6), dtype, la_, 6), rand(torch, (6, 5), dtype, lb, 7)
    q = quals(G(conjugate=True), G(conjugate=True))
    check(la.matmul(a, b, qualifiers=q), host(a).conj() @ host(b).conj(), dtype)
    check(la.matmul(a.conj(), b), host(a).conj() @ host(b), dtype)
    q = quals(G(conjugate=True), G())
    check(la.matmul(a.conj(), b, qualifiers=q), host(a) @ host(b), dtype)


def test_gemm_cupy(cupy):
    """cupy operands give a cupy result on the same device."""
    g = np.random.default_rng(0)
    a, b = cupy.asarray(g.standard_normal((30, 20))), cupy.asarray(g.standard_normal((20, 10)))
    out = la.matmul(a, b)
    assert isinstance(out, cupy.ndarray)
    np.testing.assert_allclose(cupy.asnumpy(out), cupy.asnumpy(a) @ cupy.asnumpy(b), rtol=1e-12)


@pytest.mark.parametrize("dtype", FULL)
def test_numpy_with_cuda_execution(dtype):
    """Host numpy operands run on the GPU with execution='cuda' and come back as numpy."""
    g = np.random.default_rng(1)
    a = g.standard_normal((40, 30)).astype(dtype)
    b = np.asfortranarray(g.standard_normal((30, 20)).astype(dtype))
    c = g.standard_normal((40, 20)).astype(dtype)
    out = la.matmul(a, b, c, alpha=2.0, beta=0.5, execution="cuda")
    assert isinstance(out, np.ndarray)
    ref = 2 * a.astype(np.complex128) @ b + 0.5 * c
    assert np.linalg.norm(out - ref) / np.linalg.norm(ref) < TOL[dtype]
    out = la.matmul(a, b, execution=la.ExecutionCUDA(device_id=0))
    assert np.linalg.norm(out - a.astype(np.complex128) @ b) / np.linalg.norm(a @ b) < TOL[dtype]


def test_torch_cpu_with_cuda_execution(torch):
    """torch CPU operands run on the GPU with execution='cuda' and come back as torch CPU tensors."""
    a, b = torch.randn(12, 8, dtype=torch.float64), torch.randn(8, 6, dtype=torch.float64)
    out = la.matmul(a, b, execution="cuda")
    assert out.device.type == "cpu"
    torch.testing.assert_close(out, a @ b)


# ---------------------------------------------------------------------------------------------- structured
def _poisoned(torch, n, dtype, lower, layout, seed):
    s = rand(torch, (n, n), dtype, layout, seed)
    full = host(s)
    full = np.tril(full) + np.tril(full, -1).T if lower else np.triu(full) + np.triu(full, 1).T
    mask = (
        torch.triu(torch.ones(n, n, dtype=torch.bool, device="cuda"), 1)
        if lower
        else torch.tril(torch.ones(n, n, dtype=torch.bool, device="cuda"), -1)
    )
    s = s.masked_fill(mask, float("nan"))  # the other triangle must never be read
    return s, full


@pytest.mark.parametrize("dtype", FULL)
@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("side", ["a", "b"])
@pytest.mark.parametrize("layout", ["row", "col"])
@pytest.mark.parametrize("mirror", [False, True])
def test_symm(torch, monkeypatch, dtype, lower, side, layout, mirror):
    """A symmetric qualifier reads one triangle (symm, or mirror + GEMM by the size rule)."""
    monkeypatch.setattr(_cublas, "MIRROR_MIN", 1 if mirror else 1 << 30)
    s, full = _poisoned(torch, 24, dtype, lower, layout, 8)
    x = rand(torch, (24, 10) if side == "a" else (10, 24), dtype, "row", 9)
    c = rand(torch, (24, 10) if side == "a" else (10, 24), dtype, "row", 10)
    q = SymmetricMatrixQualifier.create(uplo=FillMode.LOWER if lower else FillMode.UPPER)
    qs = quals(q, G(), G()) if side == "a" else quals(G(), q, G())
    args = (s, x) if side == "a" else (x, s)
    ref = full @ host(x) if side == "a" else host(x) @ full
    check(la.matmul(*args, c, alpha=1.5, beta=0.5, qualifiers=qs), 1.5 * ref + 0.5 * host(c), dtype)


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("layout", ["row", "col"])
@pytest.mark.parametrize("conj", [False, True])
@pytest.mark.parametrize("mirror", [False, True])
def test_hemm(torch, monkeypatch, dtype, lower, layout, conj, mirror):
    """A Hermitian qualifier reads one triangle, conjugated or not, in either layout."""
    monkeypatch.setattr(_cublas, "MIRROR_MIN", 1 if mirror else 1 << 30)
    n = 16
    s = rand(torch, (n, n), dtype, layout, 11)
    h = host(s)
    tri = np.tril(h) if lower else np.triu(h)
    full = tri + (np.tril(h, -1) if lower else np.triu(h, 1)).conj().T
    full[np.diag_indices(n)] = np.diag(full).real
    x = rand(torch, (7, n), dtype, "row", 12)
    q = HermitianMatrixQualifier.create(conjugate=conj, uplo=FillMode.LOWER if lower else FillMode.UPPER)
    out = la.matmul(x, s, qualifiers=quals(G(), q))
    check(out, host(x) @ (full.conj() if conj else full), dtype)


@pytest.mark.parametrize("dtype", FULL)
@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("unit", [False, True])
@pytest.mark.parametrize("side", ["a", "b"])
@pytest.mark.parametrize("layout", ["row", "col"])
@pytest.mark.parametrize("gemm_route", [False, True])
def test_trmm(torch, monkeypatch, dtype, lower, unit, side, layout, gemm_route):
    """A triangular qualifier (trmm, or the zero-filled triangle + GEMM by the size rule) reads one
    triangle, with a unit diagonal or not, with c or not."""
    monkeypatch.setattr(_cublas, "TRMM_GEMM_MIN", 1 if gemm_route else 1 << 30)
    t = rand(torch, (12, 12), dtype, layout, 13)
    ref_t = np.tril(host(t)) if lower else np.triu(host(t))
    if unit:
        np.fill_diagonal(ref_t, 1)
    x = rand(torch, (12, 5) if side == "a" else (5, 12), dtype, "row", 14)
    q = TriangularMatrixQualifier.create(
        uplo=FillMode.LOWER if lower else FillMode.UPPER, diag=DiagType.UNIT if unit else DiagType.NON_UNIT
    )
    qs = quals(q, G(), G()) if side == "a" else quals(G(), q, G())
    args = (t, x) if side == "a" else (x, t)
    ref = ref_t @ host(x) if side == "a" else host(x) @ ref_t
    check(la.matmul(*args, alpha=2.0, qualifiers=qs[:2]), 2 * ref, dtype)
    c = rand(torch, ref.shape, dtype, "row", 15)
    check(la.matmul(*args, c, alpha=2.0, beta=-1.0, qualifiers=qs), 2 * ref - host(c), dtype)


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
@pytest.mark.parametrize("gemm_route", [False, True])
def test_trmm_conjugate(torch, monkeypatch, dtype, gemm_route):
    """A conjugated triangular operand, in both layouts."""
    monkeypatch.setattr(_cublas, "TRMM_GEMM_MIN", 1 if gemm_route else 1 << 30)
    for layout in ("row", "col"):
        t = rand(torch, (10, 10), dtype, layout, 16)
        x = rand(torch, (10, 3), dtype, "row", 17)
        q = TriangularMatrixQualifier.create(conjugate=True, uplo=FillMode.UPPER)
        check(la.matmul(t, x, qualifiers=quals(q, G())), np.triu(host(t)).conj() @ host(x), dtype)


@pytest.mark.parametrize("dtype", FULL)
@pytest.mark.parametrize("side", ["a", "b"])
@pytest.mark.parametrize("incx", [1, 2, -1])
@pytest.mark.parametrize("layout", ["row", "col"])
def test_dgmm(torch, dtype, side, incx, layout):
    """A diagonal qualifier on a 1-D vector (dgmm), any stride and layout, with alpha and c."""
    n = 9
    v = rand(torch, (1, (n - 1) * abs(incx) + 1), dtype, "row", 18)[0]
    d = host(v)[:: abs(incx)][::-1] if incx < 0 else host(v)[::incx]
    x = rand(torch, (n, 6) if side == "a" else (6, n), dtype, layout, 19)
    q = DiagonalMatrixQualifier.create(incx=incx)
    qs = quals(q, G()) if side == "a" else quals(G(), q)
    args = (v, x) if side == "a" else (x, v)
    ref = np.diag(d) @ host(x) if side == "a" else host(x) @ np.diag(d)
    check(la.matmul(*args, qualifiers=qs), ref, dtype)
    check(la.matmul(*args, alpha=-0.5, qualifiers=qs), -0.5 * ref, dtype)
    c = rand(torch, ref.shape, dtype, "row", 20)
    q3 = np.concatenate([qs, quals(G())])
    check(la.matmul(*args, c, alpha=2.0, beta=3.0, qualifiers=q3), 2 * ref + 3 * host(c), dtype)


def test_structured_batched(torch):
    """A batch of symmetric matrices times a batch (one launch per matrix)."""
    s = rand(torch, (3, 8, 8), "float64", "row", 21)
    x = rand(torch, (3, 8, 4), "float64", "row", 22)
    full = np.tril(host(s)) + np.transpose(np.tril(host(s), -1), (0, 2, 1))
    q = quals(SymmetricMatrixQualifier.create(), G())
    check(la.matmul(s, x, qualifiers=q), full @ host(x), "float64")


# ---------------------------------------------------------------------------------------------- sequences
@pytest.mark.parametrize("dtype", DTYPES)
def test_sequence_grouped(torch, dtype):
    """Sequences of different shapes (one grouped launch where cuBLAS has one), per-problem alpha / beta."""
    shapes = [(5, 7, 3), (16, 7, 1), (2, 7, 9), (1, 7, 1)]
    a = [rand(torch, (m, k), dtype, "row" if i % 2 else "col", i) for i, (m, k, n) in enumerate(shapes)]
    b = [rand(torch, (k, n), dtype, "col" if i % 2 else "row", 10 + i) for i, (m, k, n) in enumerate(shapes)]
    c = [rand(torch, (m, n), dtype, "row", 20 + i) for i, (m, k, n) in enumerate(shapes)]
    alphas, betas = [1.0, 2.0, -1.0, 0.5], [0.0, 1.0, 2.0, -3.0]
    out = la.matmul(a, b, c, alpha=alphas, beta=betas)
    assert isinstance(out, list) and len(out) == 4
    for o, x, y, z, al, be in zip(out, a, b, c, alphas, betas):
        check(o, al * host(x) @ host(y) + be * host(z), dtype)
    out = la.matmul(a, b, alpha=3.0)  # a scalar alpha applies to every problem
    for o, x, y in zip(out, a, b):
        check(o, 3 * host(x) @ host(y), dtype)


def test_sequence_grouped_programs_share_scratch(torch):
    """Two grouped sequences of different shapes called in turn on the same (address-stable) operands:
    each launch runs with its own pointer arrays although the plan cache's planners share one scratch
    (a cached upload let the second call of the first sequence run the other's arrays)."""
    first = [(64, 32, 16), (8, 32, 48), (33, 32, 5)]
    second = [(5, 40, 7), (128, 40, 64)]
    seqs = []
    for base, shapes in ((40, first), (60, second)):
        a = [rand(torch, (m, k), "float32", "row", base + i) for i, (m, k, n) in enumerate(shapes)]
        b = [rand(torch, (k, n), "float32", "row", base + 10 + i) for i, (m, k, n) in enumerate(shapes)]
        seqs.append((a, b, [host(x) @ host(y) for x, y in zip(a, b)]))
    for _ in range(3):
        for a, b, want in seqs:
            out = la.matmul(a, b)
            for o, w in zip(out, want):
                check(o, w, "float32")
            del out


def test_sequence_broadcast_and_batched(torch):
    """A length-1 sequence broadcasts; N-D elements contribute their whole batch to their group."""
    w = rand(torch, (8, 6), "float32", "row", 30)
    xs = [rand(torch, (3, 4, 8), "float32", "row", 31), rand(torch, (5, 8), "float32", "col", 32)]
    out = la.matmul(xs, [w])
    for o, x in zip(out, xs):
        check(o, np.matmul(host(x), host(w)), "float32")


def test_sequence_structured_loop(torch):
    """Per-problem qualifiers (structured ones run per problem)."""
    s = rand(torch, (6, 6), "float64", "row", 33)
    x = [rand(torch, (6, 2), "float64", "row", 34), rand(torch, (6, 3), "float64", "row", 35)]
    q = [quals(SymmetricMatrixQualifier.create(), G()), quals(G(), G())]
    out = la.matmul([s, s], x, qualifiers=q)
    full = np.tril(host(s)) + np.tril(host(s), -1).T
    check(out[0], full @ host(x[0]), "float64")
    check(out[1], host(s) @ host(x[1]), "float64")


def test_sequence_mixed_large_k(torch):
    """The benchmark's shape family: 64 problems of mixed shapes with K = 512."""
    g = np.random.default_rng(3)
    ms, ns = g.integers(16, 257, 64), g.integers(16, 257, 64)
    a = [torch.randn(int(m), 512, device="cuda") for m in ms]
    b = [torch.randn(512, int(n), device="cuda") for n in ns]
    out = la.matmul(a, b)
    for o, x, y in zip(out, a, b):
        torch.testing.assert_close(o, x @ y, rtol=1e-4, atol=1e-3)


# ------------------------------------------------------------------------------ streams, state
def test_user_stream(torch):
    """Work runs on the given stream; the result is ready after that stream synchronises."""
    a, b = rand(torch, (256, 128), "float32"), rand(torch, (128, 64), "float32")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    out = la.matmul(a, b, stream=s)
    s.synchronize()
    check(out, host(a) @ host(b), "float32")
    mm = la.Matmul(a, b, options={"blocking": True})
    mm.plan()
    check(mm.execute(stream=s.cuda_stream), host(a) @ host(b), "float32")
    mm.free()


def test_stateful_reset(torch):
    """plan once, execute, reset operands and scalars, execute again; release and free refuse execute."""
    a, b, c = (
        rand(torch, (20, 10), "float64"),
        rand(torch, (10, 5), "float64"),
        rand(torch, (20, 5), "float64"),
    )
    with la.Matmul(a, b, c, alpha=1.0, beta=1.0) as mm:
        mm.plan()
        mm.plan()  # a second plan does nothing
        check(mm.execute(), host(a) @ host(b) + host(c), "float64")
        a2 = rand(torch, (20, 10), "float64", seed=40)
        mm.reset_operands(a=a2, alpha=2.0)
        check(mm.execute(), 2 * host(a2) @ host(b) + host(c), "float64")
        mm.release_operands()
        with pytest.raises(ValueError, match="release_operands"):
            mm.execute()
        with pytest.raises(ValueError, match="missing"):
            mm.reset_operands(a=a)
        mm.reset_operands(a=a, b=b, c=c, beta=0.0)
        check(mm.execute(), 2 * host(a) @ host(b), "float64")
    with pytest.raises(la.InvalidMatmulState, match="free"):
        mm.execute()


def test_inplace(torch):
    """MatmulOptions(inplace=True) writes into c and returns it."""
    a, b = rand(torch, (8, 6), "float32"), rand(torch, (6, 4), "float32")
    c = rand(torch, (8, 4), "float32", "col")
    ref = host(a) @ host(b) + 2 * host(c)
    out = la.matmul(a, b, c, beta=2.0, options=la.MatmulOptions(inplace=True))
    assert out is c
    check(c, ref, "float32")


def test_plan_cache_hits(torch):
    """A repeated stateless call reuses the cached plan."""
    from nvmath.linalg.generic import plan_cache

    a, b = rand(torch, (64, 64), "float32"), rand(torch, (64, 64), "float32")
    la.matmul(a, b)
    hits = plan_cache.stats.hits
    for _ in range(3):
        check(la.matmul(a, b), host(a) @ host(b), "float32")
    assert plan_cache.stats.hits == hits + 3


def test_cupy_structured_and_sequence(cupy):
    """cupy operands: a symmetric operand, a stateful reset and a grouped sequence, on cupy's stream."""
    g = np.random.default_rng(5)
    s = g.standard_normal((40, 40))
    full = np.tril(s) + np.tril(s, -1).T
    x = g.standard_normal((40, 7))
    q = quals(SymmetricMatrixQualifier.create(), G())
    out = la.matmul(cupy.asarray(s), cupy.asarray(x), qualifiers=q)
    np.testing.assert_allclose(cupy.asnumpy(out), full @ x, rtol=1e-12)
    a = [cupy.asarray(g.standard_normal((m, 16)).astype(np.float32)) for m in (3, 9, 4)]
    b = cupy.asarray(g.standard_normal((16, 5)).astype(np.float32))
    with la.Matmul(a, [b]) as mm:
        mm.plan()
        for o, y in zip(mm.execute(), a):
            np.testing.assert_allclose(
                cupy.asnumpy(o), cupy.asnumpy(y) @ cupy.asnumpy(b), rtol=1e-4, atol=1e-4
            )
        a2 = [y * 2 for y in a]
        mm.reset_operands(a=a2)
        for o, y in zip(mm.execute(), a2):
            np.testing.assert_allclose(
                cupy.asnumpy(o), cupy.asnumpy(y) @ cupy.asnumpy(b), rtol=1e-4, atol=1e-4
            )


def test_conjugate_conflict_copies(torch):
    """Two conjugated operands that no order reads without a copy: one is copied, the result is right."""
    a = rand(torch, (6, 5), "complex64", "row", 50)
    b = rand(torch, (5, 4), "complex64", "col", 51)
    q = quals(G(conjugate=True), G(conjugate=True))
    check(la.matmul(a, b, qualifiers=q), host(a).conj() @ host(b).conj(), "complex64")
    mm = la.Matmul(a, b, qualifiers=q)
    mm.plan()
    check(mm.execute(), host(a).conj() @ host(b).conj(), "complex64")
    mm.free()


# ------------------------------------------------------------------------------ unchecked launches
def test_launches_take_the_unchecked_path(torch, monkeypatch):
    """Every routine family (GEMM, strided batch, symm native and mirrored, trmm + geam, dgmm + geam,
    grouped float32 / float16) reaches cuBLAS through the unchecked bindings without falling back to the
    checked ones (a fallback means ctypes refused an argument the plan should have made a plain int),
    and the results match the references."""
    from nvmath.bindings._unchecked import cublas as unchecked

    fell_back = []
    for name in ("gemm_ex", "gemm_strided_batched_ex", "dsymm", "dtrmm", "ddgmm", "dgeam", "set_stream",
                 "set_workspace", "sgemm_grouped_batched", "gemm_grouped_batched_ex"):  # fmt: skip
        fn = getattr(unchecked, name)
        checked = fn.__kwdefaults__["_checked"]
        monkeypatch.setitem(
            fn.__kwdefaults__, "_checked", lambda *a, _n=name, _c=checked: (fell_back.append(_n), _c(*a))[1]
        )
    a, b = rand(torch, (3, 24, 16), "float64", "col", 50), rand(torch, (16, 8), "float64", "row", 51)
    check(la.matmul(a[0], b), host(a[0]) @ host(b), "float64")
    check(la.matmul(a, b), np.matmul(host(a), host(b)), "float64")
    s, x = rand(torch, (16, 16), "float64", "row", 52), rand(torch, (16, 8), "float64", "row", 53)
    c = rand(torch, (16, 8), "float64", "row", 54)
    full = np.tril(host(s)) + np.tril(host(s), -1).T
    for mirror in (1 << 20, 4):  # native symm, then mirror + GEMM (stateful: no cached plan of the other)
        monkeypatch.setattr(_cublas, "MIRROR_MIN", mirror)
        with la.Matmul(s, x, qualifiers=quals(SymmetricMatrixQualifier.create(), G())) as mm:
            mm.plan()
            check(mm.execute(), full @ host(x), "float64")
    tq = quals(TriangularMatrixQualifier.create(), G(), G())
    check(la.matmul(s, x, c, beta=0.5, qualifiers=tq), np.tril(host(s)) @ host(x) + 0.5 * host(c), "float64")
    v = rand(torch, (1, 16), "float64", "row", 55)[0]
    dq = quals(DiagonalMatrixQualifier.create(), G())
    check(la.matmul(v, x, alpha=2.0, qualifiers=dq), 2 * np.diag(host(v)) @ host(x), "float64")
    for dtype in ("float32", "float16"):
        xs = [rand(torch, (5, 7), dtype, "row", 56), rand(torch, (3, 7), dtype, "col", 57)]
        w = rand(torch, (7, 4), dtype, "row", 58)
        for o, y in zip(la.matmul(xs, [w]), xs):
            check(o, host(y) @ host(w), dtype)
    assert fell_back == []


# ------------------------------------------------------------------------------------- beta == 0
@pytest.mark.parametrize("sequence", [False, True], ids=["tensor", "sequence"])
@pytest.mark.parametrize("inplace", [False, True], ids=["new", "inplace"])
@pytest.mark.parametrize("dtype", ["float16", "float32", "float64", "complex64"])
def test_beta_zero_does_not_read_c(torch, sequence, inplace, dtype):
    """beta == 0 never lets c reach the result (cuBLAS semantics): a NaN-poisoned c gives 2 * op(a) @ op(b)
    for gemm (grouped or looped sequences) and, for float / complex, trmm and dgmm (geam-based)."""
    a, b = rand(torch, (5, 4), dtype, "col", 1), rand(torch, (4, 3), dtype, "row", 2)
    problems = [("gemm", a, b, None, 2 * host(a) @ host(b))]
    if dtype != "float16":
        t, v = rand(torch, (5, 5), dtype, "row", 3), rand(torch, (3,), dtype, "row", 4)
        problems += [
            ("trmm", t, a, quals(TriangularMatrixQualifier.create(uplo=FillMode.LOWER), G(), G()),
             2 * np.tril(host(t)) @ host(a)),
            ("dgmm", a[:, :3], v, quals(G(), DiagonalMatrixQualifier.create(), G()),
             2 * host(a[:, :3]) * host(v)),
        ]  # fmt: skip
    for name, x, y, q, ref in problems:
        c = torch.full(ref.shape, float("nan"), dtype=getattr(torch, dtype), device="cuda")
        args = ([x], [y], [c]) if sequence else (x, y, c)
        kw = {} if q is None else {"qualifiers": [q] if sequence else q}
        out = la.matmul(*args, alpha=2.0, beta=0.0, options={"inplace": inplace}, **kw)
        out = out[0] if sequence else out
        assert (out is c) == inplace, name
        check(out, ref, dtype)
