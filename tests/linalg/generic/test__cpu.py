"""CPU execution of the generic matmul (numpy / scipy BLAS): numerics against float64 for every dtype,
structured kind and batching form, with numpy and torch-CPU operands; what the CPU refuses."""

from __future__ import annotations

import numpy as np
import pytest
from generic_testing import CASES, COMPLEX_CASES, FULL, TOL, TRMM_CASES, quals, rand, rel_error

import nvmath.linalg as la
from nvmath.linalg.generic import _cpu

ALL = [(name, dtype) for name in CASES for dtype in FULL]
ALL += [(name, dtype) for name in COMPLEX_CASES for dtype in ("complex64", "complex128")]


@pytest.mark.parametrize(("name", "dtype"), ALL)
def test_numpy_operands(name, dtype):
    """numpy operands run on the CPU by default and match the float64 reference; the inputs are unchanged."""
    rng = np.random.default_rng(abs(hash(name)) % 2**32)
    case = (CASES | COMPLEX_CASES)[name](rng, dtype)
    before = [x.copy() for x in case.args]
    out = la.matmul(*case.args, **case.kwargs)
    assert isinstance(out, np.ndarray) and out.dtype == np.dtype(dtype)
    assert out.shape == case.ref.shape
    assert rel_error(out, case.ref) < TOL[dtype]
    for x, y in zip(before, case.args):
        np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize(
    "name", ["gemm-cr", "batch-4x1-3", "symm-a-upper-col", "dgmm-b-2-col", "conj-rc-both"]
)
def test_torch_cpu_operands(torch, name):
    """torch CPU tensors give torch CPU results (also with torch's lazy conjugation bit)."""
    rng = np.random.default_rng(7)
    case = (CASES | COMPLEX_CASES)[name](rng, "complex128")
    args = [torch.from_numpy(x) for x in case.args]
    out = la.matmul(*args, **case.kwargs)
    assert isinstance(out, torch.Tensor) and out.device.type == "cpu"
    assert rel_error(out.numpy(), case.ref) < 1e-12


def test_torch_conj_bit(torch):
    """torch's lazy conjugation bit is honoured (and cancels a conjugate qualifier)."""
    a = torch.randn(5, 4, dtype=torch.complex128)
    b = torch.randn(4, 3, dtype=torch.complex128)
    torch.testing.assert_close(la.matmul(a.conj(), b), a.conj().resolve_conj() @ b)
    q = quals(la.GeneralMatrixQualifier.create(conjugate=True), la.GeneralMatrixQualifier.create())
    torch.testing.assert_close(la.matmul(a.conj(), b, qualifiers=q), a @ b)


@pytest.mark.parametrize("name", list(TRMM_CASES))
def test_trmm_not_on_cpu(name):
    """A triangular qualifier is refused on the CPU (as nvmath-python), naming the GPU alternative."""
    case = TRMM_CASES[name](np.random.default_rng(0), "float64")
    with pytest.raises(NotImplementedError, match="execution='cuda'"):
        la.matmul(*case.args, **case.kwargs)


def _rounded_reference(a, b, c=None, alpha=1.0, beta=0.0):
    """float64 ``alpha * a @ b + beta * c`` of the (already rounded) half-precision inputs."""
    f = lambda x: np.asarray(x, dtype=np.float64)  # noqa: E731
    out = alpha * (f(a) @ f(b))
    return out if c is None else out + beta * f(c)


def test_float16_numpy_on_cpu_accumulates_in_float32():
    """float16 numpy operands compute on the CPU: float16 result, float32 accumulation (error at float16's
    rounding of the result, far below a float16 accumulation over K=512)."""
    rng = np.random.default_rng(7)
    a, b = rng.random((3, 8, 512)).astype(np.float16), rng.random((512, 5)).astype(np.float16)
    out = la.matmul(a, b)
    ref = _rounded_reference(a, b)
    assert out.dtype == np.float16 and out.shape == ref.shape
    assert np.max(np.abs(out - ref) / np.abs(ref)) < 2**-10  # one float16 rounding of the result


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_half_torch_cpu_tensors_compute(torch, dtype):
    """bfloat16 / float16 torch CPU tensors compute (alpha, beta, c, batching), in their dtype, within one
    rounding of the float64 reference of the same inputs, like torch's own CPU matmul."""
    dt = getattr(torch, dtype)
    torch.manual_seed(0)
    a, b, c = torch.randn(2, 16, 64, dtype=dt), torch.randn(64, 8, dtype=dt), torch.randn(2, 16, 8, dtype=dt)
    out = la.matmul(a, b, c, alpha=2.0, beta=0.5)
    assert isinstance(out, torch.Tensor) and out.dtype == dt and out.shape == (2, 16, 8)
    ref = torch.from_numpy(_rounded_reference(a.double().numpy(), b.double().numpy(), c.double().numpy(), 2.0, 0.5))
    eps = torch.finfo(dt).eps
    assert torch.allclose(out.double(), ref, rtol=2 * eps, atol=2 * eps * ref.abs().max().item())


def test_half_bfloat16_numpy_and_stateful_reset():
    """ml_dtypes bfloat16 numpy operands compute through the planner, and new operands swap in."""
    ml_dtypes = pytest.importorskip("ml_dtypes", reason="ml_dtypes is not installed (pip install -e '.[dtypes]')")
    rng = np.random.default_rng(3)
    a, b = (rng.random((6, 32)).astype(ml_dtypes.bfloat16), rng.random((32, 4)).astype(ml_dtypes.bfloat16))
    with la.Matmul(a, b) as mm:
        mm.plan()
        out = mm.execute()
        assert out.dtype == a.dtype
        a2 = (2 * rng.random((6, 32))).astype(ml_dtypes.bfloat16)
        mm.reset_operands(a=a2)
        out2 = mm.execute()
    for x, y in ((out, _rounded_reference(a, b)), (out2, _rounded_reference(a2, b))):
        assert np.max(np.abs(np.asarray(x, np.float64) - y) / np.abs(y)) < 2**-7


def test_half_inplace_writes_c(torch):
    """inplace with float16 torch CPU tensors rounds the float32 result into c and returns c."""
    a, b, c = torch.randn(5, 7).half(), torch.randn(7, 3).half(), torch.randn(5, 3).half()
    expected = torch.from_numpy(_rounded_reference(a.numpy(), b.numpy(), c.numpy(), 1.0, 1.0)).half()
    out = la.matmul(a, b, c, beta=1.0, options={"inplace": True})
    assert out is c
    assert torch.allclose(c.double(), expected.double(), rtol=2e-3, atol=2e-3)


def test_half_mixed_with_float32_is_refused(torch):
    """A bfloat16 operand with a float32 one is refused before computing, naming both dtypes."""
    with pytest.raises(ValueError, match="bfloat16"):
        la.matmul(torch.ones(3, 3, dtype=torch.bfloat16), torch.ones(3, 3))


def test_inplace_cpu():
    """inplace writes the result into c (row- and column-major c) and returns c."""
    rng = np.random.default_rng(1)
    for layout in ("row", "col"):
        a, b, c = (
            rand(rng, (5, 4), "float64"),
            rand(rng, (4, 3), "float64"),
            rand(rng, (5, 3), "float64", layout),
        )
        ref = 2 * a @ b + 0.5 * c
        out = la.matmul(a, b, c, alpha=2.0, beta=0.5, options={"inplace": True})
        assert out is c
        np.testing.assert_allclose(c, ref, rtol=1e-12)


def test_sequences_cpu():
    """Explicit batches on the CPU: different shapes, per-problem scalars, a broadcast operand."""
    rng = np.random.default_rng(2)
    a = [rand(rng, (m, 6), "float32") for m in (2, 5, 3)]
    b = rand(rng, (6, 4), "float32")
    out = la.matmul(a, [b], alpha=[1.0, 2.0, 3.0])
    assert isinstance(out, list) and len(out) == 3
    for i, (o, x) in enumerate(zip(out, a)):
        np.testing.assert_allclose(o, (i + 1) * x @ b, rtol=1e-5)


def test_num_threads(monkeypatch):
    """ExecutionCPU(num_threads=n) limits the BLAS threads inside the call (threadpoolctl when present)."""
    seen = []
    real = _cpu.blas_threads

    def spy(n):
        seen.append(n)
        return real(n)

    monkeypatch.setattr(_cpu, "blas_threads", spy)
    a = np.ones((4, 4))
    np.testing.assert_array_equal(la.matmul(a, a, execution=la.ExecutionCPU(num_threads=1)), a @ a)
    np.testing.assert_array_equal(la.matmul(a, a, execution={"name": "cpu", "num_threads": 2}), a @ a)
    assert seen == [1, 2]


def test_zero_sizes():
    """Empty results and K = 0 behave as numpy.matmul (zeros, or beta * c)."""
    a, b = np.ones((0, 3)), np.ones((3, 4))
    assert la.matmul(a, b).shape == (0, 4)
    a, b, c = np.ones((2, 0)), np.ones((0, 3)), np.full((2, 3), 2.0)
    np.testing.assert_array_equal(la.matmul(a, b), np.zeros((2, 3)))
    np.testing.assert_array_equal(la.matmul(a, b, c, beta=1.5), np.full((2, 3), 3.0))


def _nan_c_problems(rng, dtype):
    """(name, a, b, qualifiers, float64 reference of alpha * op(a) @ op(b)) for gemm, symm and dgmm."""
    G = la.GeneralMatrixQualifier.create
    a, b = rand(rng, (5, 4), dtype), rand(rng, (4, 3), dtype)
    s = rand(rng, (5, 5), dtype)
    s = s + s.T
    v = rand(rng, (1, 3), dtype)[0]
    return [
        ("gemm", a, b, None, 2.0 * a.astype(np.complex128) @ b),
        ("symm", s, a, quals(la.SymmetricMatrixQualifier.create(), G(), G()),
         2.0 * s.astype(np.complex128) @ a),
        ("dgmm", a[:, :3], v, quals(G(), la.DiagonalMatrixQualifier.create(), G()),
         2.0 * a[:, :3].astype(np.complex128) * v),
    ]  # fmt: skip


@pytest.mark.parametrize("sequence", [False, True], ids=["tensor", "sequence"])
@pytest.mark.parametrize("inplace", [False, True], ids=["new", "inplace"])
@pytest.mark.parametrize("beta", [0.0, 0, 0j], ids=["float", "int", "complex"])
@pytest.mark.parametrize("dtype", ["float32", "float64", "complex128"])
def test_beta_zero_does_not_read_c(sequence, inplace, beta, dtype):
    """beta == 0 never reads c (BLAS semantics): a NaN-poisoned c gives alpha * a @ b, for tensors and
    explicit sequences, in place or not, for every CPU routine family."""
    if isinstance(beta, complex) and not dtype.startswith("complex"):
        pytest.skip("a complex beta is refused for real dtypes")
    rng = np.random.default_rng(5)
    for name, a, b, q, ref in _nan_c_problems(rng, dtype):
        c = np.full(ref.shape, np.nan, dtype)
        args = ([a], [b], [c]) if sequence else (a, b, c)
        kw = {} if q is None else {"qualifiers": [q] if sequence else q}
        out = la.matmul(*args, alpha=2.0, beta=beta, options={"inplace": inplace}, **kw)
        out = out[0] if sequence else out
        assert (out is c) == inplace, name
        assert not np.isnan(out).any(), name
        assert rel_error(out, ref) < TOL[dtype], name


def test_beta_zero_does_not_read_c_torch_and_planned(torch):
    """The same for torch CPU tensors, and for a planned Matmul executed twice with a mixed sequence
    (one problem beta 0 with a NaN c, one that reads its c)."""
    rng = np.random.default_rng(6)
    a, b = rand(rng, (4, 6), "float64"), rand(rng, (6, 2), "float64")
    c = torch.full((4, 2), float("nan"), dtype=torch.float64)
    out = la.matmul([torch.from_numpy(a)], [torch.from_numpy(b)], [c], beta=0.0, options={"inplace": True})
    assert out[0] is c
    np.testing.assert_allclose(c.numpy(), a @ b, rtol=1e-12)
    c0, c1 = np.full((4, 2), np.nan), rand(rng, (4, 2), "float64")
    with la.Matmul([a, a], [b, b], [c0, c1], beta=[0.0, 1.5]) as mm:
        mm.plan()
        for _ in range(2):
            r0, r1 = mm.execute()
            np.testing.assert_allclose(r0, a @ b, rtol=1e-12)
            np.testing.assert_allclose(r1, a @ b + 1.5 * c1, rtol=1e-12)
