"""The cuBLAS programs on the fake GPU (numpy emulation of the cuBLAS calls, see ``cublas_fakes.py``):
every routine family, layout, conjugation and batching form gives the float64 reference, and the
routine the module table promises is the one called."""

from __future__ import annotations

import numpy as np
import pytest
from cublas_fakes import FakeHostTensor, fake
from generic_testing import (
    CASES,
    COMPLEX_CASES,
    COMPLEX_TRMM_CASES,
    FULL,
    TOL,
    TRMM_CASES,
    quals,
    rand,
    rel_error,
)

import nvmath.linalg as la
from nvmath.linalg.generic import _cublas

ALL = [(n, d) for n in (CASES | TRMM_CASES) for d in FULL]
ALL += [(n, d) for n in (COMPLEX_CASES | COMPLEX_TRMM_CASES) for d in ("complex64", "complex128")]
EVERY = CASES | COMPLEX_CASES | TRMM_CASES | COMPLEX_TRMM_CASES


@pytest.mark.parametrize(("name", "dtype"), ALL)
def test_device_operands(fake_gpu, name, dtype):
    """Device operands run on cuBLAS and match the float64 reference (results are device tensors)."""
    case = EVERY[name](np.random.default_rng(abs(hash(name)) % 2**32), dtype)
    out = la.matmul(*[fake(x) for x in case.args], **case.kwargs)
    assert out.array.shape == case.ref.shape
    assert rel_error(out.array, case.ref) < TOL[dtype]


@pytest.mark.parametrize(
    "name", ["gemm-cr", "gemm-pad", "symm-b-lower-col", "trmm-b-lower-col-c", "dgmm-b-2-col", "batch-4x1-3"]
)
def test_host_operands_with_cuda_execution(fake_gpu, name):
    """Host operands with execution='cuda' are staged to the device and the result comes back to the host."""
    case = EVERY[name](np.random.default_rng(3), "float64")
    out = la.matmul(*[FakeHostTensor(x) for x in case.args], **case.kwargs, execution="cuda")
    assert isinstance(out, FakeHostTensor)
    assert rel_error(out.array, case.ref) < 1e-12


@pytest.mark.parametrize(
    ("name", "routine"),
    [
        ("gemm-rr", "gemm_ex"),
        ("batch", "gemm_strided_batched_ex"),
        ("symm-a-lower-row", "dsymm"),
        ("trmm-a-lower-row", "dtrmm"),
        ("dgmm-a-1", "ddgmm"),
    ],
)
def test_routine_table(fake_gpu, name, routine):
    """Each kind runs the routine the module table names."""
    case = EVERY[name](np.random.default_rng(0), "float64")
    la.matmul(*[fake(x) for x in case.args], **case.kwargs)
    assert routine in fake_gpu.calls


def test_hemm_routine(fake_gpu):
    """A Hermitian qualifier runs hemm (for complex dtypes)."""
    case = COMPLEX_CASES["hemm-a-lower-row"](np.random.default_rng(0), "complex64")
    la.matmul(*[fake(x) for x in case.args], **case.kwargs)
    assert "chemm" in fake_gpu.calls


def test_broadcast_batch_collapses(fake_gpu):
    """(4, 1) with (3,) batch dims: one strided-batched launch per outer index, not one per matrix."""
    case = CASES["batch-4x1-3"](np.random.default_rng(0), "float32")
    la.matmul(*[fake(x) for x in case.args], **case.kwargs)
    assert fake_gpu.calls.count("gemm_strided_batched_ex") == 4


@pytest.mark.parametrize(
    "name",
    [
        "symm-a-upper-col",
        "symm-b-lower-col",
        "hemm-a-upper-col",
        "hemm-b-lower-row-conj",
        "trmm-a-lower-row",
        "trmm-a-upper-col-unit",
        "trmm-b-lower-col-c",
        "trmm-b-upper-row-unit-c",
        "trmm-conj-row",
        "trmm-conj-col",
    ],
)
def test_gemm_route(fake_gpu, monkeypatch, name):
    """From MIRROR_MIN / TRMM_GEMM_MIN rows on, the structured operand is expanded and GEMM runs."""
    monkeypatch.setattr(_cublas, "MIRROR_MIN", 4)
    monkeypatch.setattr(_cublas, "TRMM_GEMM_MIN", 4)
    case = EVERY[name](np.random.default_rng(0), "complex128")
    out = la.matmul(*[fake(x) for x in case.args], **case.kwargs)
    assert "gemm_ex" in fake_gpu.calls and not any(
        c.endswith("mm") and "gemm" not in c for c in fake_gpu.calls
    )
    assert rel_error(out.array, case.ref) < 1e-12


def test_half_precision(fake_gpu):
    """float16 runs GemmEx (float32 accumulation)."""
    rng = np.random.default_rng(0)
    a, b = rand(rng, (16, 8), "float16"), rand(rng, (8, 4), "float16", "col")
    out = la.matmul(fake(a), fake(b))
    assert out.array.dtype == np.float16
    assert rel_error(out.array, a.astype(np.float64) @ b.astype(np.float64)) < 5e-3


def test_structured_half_refused(fake_gpu):
    """Structured qualifiers need float32/64 or complex: float16 gets a typed error naming the dtypes."""
    s = np.ones((4, 4), np.float16)
    q = quals(la.SymmetricMatrixQualifier.create(), la.GeneralMatrixQualifier.create())
    with pytest.raises(ValueError, match="float16"):
        la.matmul(fake(s), fake(s), qualifiers=q)


def test_inplace_device(fake_gpu):
    """inplace writes into a device c and returns it."""
    rng = np.random.default_rng(0)
    a, b, c = rand(rng, (5, 4), "float32"), rand(rng, (4, 3), "float32"), rand(rng, (5, 3), "float32", "col")
    ref = a.astype(np.float64) @ b - c
    fc = fake(c)
    out = la.matmul(fake(a), fake(b), fc, beta=-1.0, options={"inplace": True})
    assert out is fc
    assert rel_error(c, ref) < 2e-5


def test_strided_host_vector_with_cuda_execution(fake_gpu):
    """A strided host vector (diagonal) and a padded host matrix are made dense before they are staged."""
    rng = np.random.default_rng(4)
    v = rand(rng, (1, 12), "float64")[0][::3]  # 4 elements, stride 3
    x = rand(rng, (4, 5), "float64", "pad")
    q = quals(la.DiagonalMatrixQualifier.create(), la.GeneralMatrixQualifier.create())
    out = la.matmul(FakeHostTensor(v), FakeHostTensor(x), qualifiers=q, execution="cuda")
    assert rel_error(out.array, np.diag(v) @ x) < 1e-12


# ---------------------------------------------------------------- integer ranges (checked at plan time)
BIG = 2**31  # one past cuBLAS's int32 limit


def _huge(shape, element_strides, dtype="float32"):
    """A fake device operand with these element strides over a tiny buffer (never read: the plan must
    refuse it first)."""
    buf = np.zeros(4, dtype)
    isz = buf.itemsize
    return fake(np.lib.stride_tricks.as_strided(buf, shape, tuple(s * isz for s in element_strides)))


def _small(shape, dtype="float32"):
    return fake(np.ones(shape, dtype))


S, G = la.SymmetricMatrixQualifier.create, la.GeneralMatrixQualifier.create
RANGE_CASES = {
    "gemm-lda": (
        (_huge, (2, 2), (BIG, 1)), (_small, (2, 3)), None, r"leading dimension of operand 'a' is 2147483648",
    ),
    "gemm-ldb-col": ((_small, (2, 2)), (_huge, (2, 3), (1, BIG + 5)), None, r"operand 'b' is 2147483653"),
    "gemm-k": ((_huge, (2, BIG), (1, 2)), (_huge, (BIG, 2), (2, 1)), None, r"dimension K is 2147483648"),
    "gemm-batch-count": (
        (_huge, (BIG, 1, 1), (1, 1, 1)), (_huge, (BIG, 1, 1), (1, 1, 1)), None,
        r"batch count of one strided launch is 2147483648",
    ),
    "symm-lda": ((_huge, (2, 2), (BIG, 1)), (_small, (2, 3)), (S(), G()), r"operand 'a' is 2147483648"),
    "dgmm-incx": (
        (_huge, (2,), (BIG,)), (_small, (2, 3)), (la.DiagonalMatrixQualifier.create(), G()),
        r"increment of the diagonal of operand 'a' is 2147483648",
    ),
}  # fmt: skip


def _range_case(name):
    (fa, *a), (fb, *b), q, match = RANGE_CASES[name]
    kwargs = {} if q is None else {"qualifiers": quals(*q)}
    return fa(*a), fb(*b), kwargs, match


@pytest.mark.parametrize("name", list(RANGE_CASES))
def test_int32_limits_refused_at_plan(fake_gpu, name):
    """An integer beyond its cuBLAS parameter's int32 range (leading dimension, M/N/K, batch count,
    diagonal increment) is a ValueError naming the value and the limit when the Matmul is planned,
    before any cuBLAS call (the launches use the unchecked bindings, which would wrap it)."""
    a, b, kwargs, match = _range_case(name)
    mm = la.Matmul(a, b, **kwargs)
    with pytest.raises(ValueError, match=match) as info:
        mm.plan()
    assert "2147483647" in str(info.value)
    assert fake_gpu.calls == []
    with pytest.raises(ValueError, match=match):
        la.matmul(a, b, **kwargs)
    assert fake_gpu.calls == []


def test_c_int_limits():
    """c_int passes in-range values as plain ints (an IntEnum or numpy integer becomes an int) and names
    the value and the limit otherwise, for 32- and 64-bit parameters, on both sides."""
    assert _cublas.c_int("x", 2**31 - 1) == 2**31 - 1
    assert _cublas.c_int("x", -(2**31)) == -(2**31)
    assert type(_cublas.c_int("x", np.int64(7))) is int
    assert type(_cublas.c_int("x", _cublas.Operation.T)) is int
    assert _cublas.c_int("x", 2**63 - 1, 64) == 2**63 - 1
    with pytest.raises(ValueError, match=r"the thing is -2147483649, beyond the 32-bit limit -2147483648"):
        _cublas.c_int("the thing", -(2**31) - 1)
    with pytest.raises(ValueError, match=r"9223372036854775808, beyond the 64-bit limit 9223372036854775807"):
        _cublas.c_int("a stride", 2**63, 64)


def test_execute_calls_only_unchecked(fake_gpu):
    """Every launch goes through the unchecked bindings' C entry points (the fakes check each argument
    as the checked binding would); the checked functions are never reached."""
    from nvmath.bindings import cublas

    rng = np.random.default_rng(5)
    a, b = rand(rng, (3, 6, 4), "float64"), rand(rng, (4, 5), "float64", "col")
    with la.Matmul(fake(a), fake(b)) as mm:
        mm.plan()
        for _ in range(2):
            out = mm.execute()
            assert rel_error(out.array, np.matmul(a, b)) < 1e-12
    assert fake_gpu.calls == ["gemm_strided_batched_ex"] * 2
    with pytest.raises(AssertionError, match="checked binding cublas.gemm_strided_batched_ex"):
        cublas.gemm_strided_batched_ex()


def test_fake_rejects_what_the_checked_binding_refused():
    """The fakes' argument check refuses what the checked binding refused (an IntEnum passes ctypes but
    is not a plain int, an int32 out of range, a float), so a program that skipped its plan-time
    conversion fails on the fake GPU."""
    import fake_gpu

    from nvmath.bindings import cublas

    args = list((0x1234, 0, 0, 4, 4, 4, 8, 8, 0, 4, 8, 0, 4, 8, 8, 0, 4, 68, -1))
    fake_gpu.check_c_args(cublas, "cublasGemmEx", tuple(args))
    for position, value in ((1, _cublas.Operation.T), (3, 2**31), (9, 4.0), (0, -1)):
        bad = list(args)
        bad[position] = value
        with pytest.raises(AssertionError, match="the checked binding refuses"):
            fake_gpu.check_c_args(cublas, "cublasGemmEx", tuple(bad))


@pytest.mark.parametrize(
    ("m", "n", "dtype", "want"),
    [
        (64, 64, "float32", 128 * 1024),  # 8 result-sized slices, not the 32 MiB cap
        (8, 8, "float64", _cublas.MIN_WORKSPACE_BYTES),
        (2048, 2048, "float32", _cublas.WORKSPACE_BYTES),
    ],
)
def test_workspace_sized_to_the_problem(fake_gpu, monkeypatch, rng, m, n, dtype, want):
    """The cuBLAS workspace bound for a product grows with its result, between 64 KiB and 32 MiB
    (nvmath-python does not take 32 MiB for a 64x64 product)."""
    import cublas_fakes

    sizes = []
    cublas_fakes.route(monkeypatch, "set_workspace", lambda h, p, nbytes: sizes.append(nbytes))
    a, b = rand(rng, (m, 16), dtype), rand(rng, (16, n), dtype)
    got = la.matmul(fake(a), fake(b))
    assert rel_error(got.array, a.astype(np.float64) @ b) < TOL[dtype]
    assert sizes == [want]


@pytest.mark.parametrize("c_shape", [(5, 6), (1, 5, 6), (3, 1, 5, 6), (1, 1, 5, 6)])
def test_c_broadcast_over_batch_dimensions(fake_gpu, monkeypatch, rng, c_shape):
    """A c with the matrix shape and broadcastable batch dimensions is read broadcast (numpy rules),
    as nvmath-python does; the result is beta * c + a @ b for every batch entry."""
    from nvmath.linalg.generic import _problem

    monkeypatch.setitem(_problem.BROADCASTERS, "fake", lambda t, shape: fake(np.broadcast_to(t.array, shape)))
    a, b = rand(rng, (3, 2, 5, 4), "float64"), rand(rng, (3, 2, 4, 6), "float64")
    c = rand(rng, c_shape, "float64")
    with la.Matmul(fake(a), fake(b), fake(c), beta=0.5) as mm:
        mm.plan()
        out = mm.execute()
        assert rel_error(out.array, a @ b + 0.5 * c) < TOL["float64"]
        c[...] = rand(rng, c_shape, "float64")  # c is read at every execution, not copied once
        assert rel_error(mm.execute().array, a @ b + 0.5 * c) < TOL["float64"]


def test_c_not_broadcastable_is_refused(fake_gpu, rng):
    """A c whose batch dimensions do not broadcast, whose matrix shape differs, or that would be the
    in-place result while broadcast raises ValueError before any GPU work."""
    a, b = rand(rng, (3, 5, 4), "float64"), rand(rng, (3, 4, 6), "float64")
    for c_shape in [(2, 5, 6), (5, 1), (3, 5, 1)]:
        with pytest.raises(ValueError, match="c must have the result's shape"):
            la.matmul(fake(a), fake(b), fake(rand(rng, c_shape, "float64")), beta=1.0)
    with pytest.raises(ValueError, match="c must have the result's shape"):
        la.matmul(fake(a), fake(b), fake(rand(rng, (5, 6), "float64")), beta=1.0, options={"inplace": True})


def _nan_c_cases(rng, dtype):
    """(name, a, b, qualifiers, float64 reference of 2 * op(a) @ op(b)) for gemm, trmm and dgmm."""
    G = la.GeneralMatrixQualifier.create
    a, b = rand(rng, (5, 4), dtype, "col"), rand(rng, (4, 3), dtype)
    t = rand(rng, (5, 5), dtype)
    tri = np.tril(t.astype(np.complex128))
    v = rand(rng, (1, 3), dtype)[0]
    return [
        ("gemm", a, b, None, 2.0 * a.astype(np.complex128) @ b),
        ("trmm", t, a, quals(la.TriangularMatrixQualifier.create(uplo=la.FillMode.LOWER), G(), G()),
         2.0 * tri @ a),
        ("dgmm", a[:, :3], v, quals(G(), la.DiagonalMatrixQualifier.create(), G()),
         2.0 * a[:, :3].astype(np.complex128) * v),
    ]  # fmt: skip


@pytest.mark.parametrize("sequence", [False, True], ids=["tensor", "sequence"])
@pytest.mark.parametrize("inplace", [False, True], ids=["new", "inplace"])
@pytest.mark.parametrize("dtype", ["float64", "complex64"])
def test_beta_zero_does_not_read_c(fake_gpu, sequence, inplace, dtype):
    """beta == 0 never lets c's contents reach the result on the GPU (gemm, grouped and looped
    sequences, trmm and dgmm whose ``geam`` would read c): a NaN-poisoned c gives 2 * a @ b."""
    rng = np.random.default_rng(8)
    for name, a, b, q, ref in _nan_c_cases(rng, dtype):
        c = np.full(ref.shape, np.nan, dtype)
        fc = fake(c)
        args = ([fake(a)], [fake(b)], [fc]) if sequence else (fake(a), fake(b), fc)
        kw = {} if q is None else {"qualifiers": [q] if sequence else q}
        out = la.matmul(*args, alpha=2.0, beta=0.0, options={"inplace": inplace}, **kw)
        out = out[0] if sequence else out
        assert (out is fc) == inplace, name
        assert not np.isnan(out.array).any(), name
        assert rel_error(out.array, ref) < TOL[dtype], name
