"""Tests of nvmath.linalg.advanced._traits / _layout: layouts, batching and results vs numpy.matmul."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nvmath.linalg.advanced import _traits as T
from nvmath.linalg.advanced._layout import Op, OperandSpec, Order
from nvmath.linalg.advanced._options import matrix_qualifiers_dtype
from nvmath.linalg.advanced._typemaps import resolve_types

SETTINGS = settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
F64 = resolve_types("float64", "float64")
C128 = resolve_types("complex128", "complex128")
C128_C = resolve_types("complex128", "complex128", "complex128")
F64_C = resolve_types("float64", "float64", "float64")


def strided(rng, shape, strides, complex_=False):
    """A random array with the given shape and element strides, and the flat buffer it views."""
    size = 1 + sum((e - 1) * s for e, s in zip(shape, strides))
    flat = rng.uniform(-1, 1, size) + 0.25
    if complex_:
        flat = flat + 1j * rng.uniform(-1, 1, size)
    item = flat.itemsize
    arr = np.lib.stride_tricks.as_strided(flat, shape, tuple(s * item for s in strides), writeable=False)
    return arr, flat


def qualifiers(ca=False, cb=False, cc=False):
    """A qualifiers array with the given conjugation flags."""
    q = np.zeros(3, dtype=matrix_qualifiers_dtype)
    q["is_conjugate"] = [ca, cb, cc]
    return q


def spec(arr, conj=False, dtype=None):
    """The OperandSpec of a numpy array."""
    item = arr.itemsize
    name = dtype or ("complex128" if np.iscomplexobj(arr) else "float64")
    return OperandSpec(tuple(arr.shape), tuple(s // item for s in arr.strides), name, conj)


# ---------------------------------------------------------------------------------- strategies
@st.composite
def operand_layout(draw, rows, cols, batch, perm, *, allow_1d=False, allow_col_bcast=False, mode=None):
    """Draw an expressible layout ``(mode, shape, strides)`` of one operand over ``batch``.

    Batch axes are laid out in memory in ``perm`` order (outer to inner), shared by all operands.
    """
    mode = mode or draw(st.sampled_from(["full", "none", "ones", "expand", "trim"]))
    if allow_1d and mode == "none" and draw(st.booleans()):
        return ("1d", (rows * cols,), (draw(st.integers(1, 2)),))
    ncols = 1 if allow_col_bcast and draw(st.booleans()) else cols
    order = "F" if ncols == 1 and allow_col_bcast else draw(st.sampled_from("CF"))
    pad = draw(st.integers(0, 2))
    mat_strides = (ncols + pad, 1) if order == "C" else (1, rows + pad)
    span = (rows - 1) * mat_strides[0] + (ncols - 1) * mat_strides[1] + 1
    block = span + draw(st.integers(0, 3))
    bshape, axes = list(batch), list(perm)
    if mode == "none":
        bshape, axes = [], []
    elif mode == "trim":
        ntrim = 0
        while ntrim < len(bshape) and bshape[ntrim] == 1:
            ntrim += 1
        bshape, axes = bshape[ntrim:], [ax - ntrim for ax in perm if ax >= ntrim]
    bstrides = [0] * len(bshape)
    acc = block
    for ax in reversed(axes):
        bstrides[ax] = acc if mode != "expand" else 0
        acc *= bshape[ax]
    if mode == "ones":
        bshape = [1] * len(batch)
        bstrides = [draw(st.integers(0, 50)) for _ in bshape]
    return (mode, tuple(bshape) + (rows, ncols), tuple(bstrides) + mat_strides)


@st.composite
def problems(draw, with_c=None, complex_=None):
    """Draw a whole problem: extents, a shared batch shape and memory order, a, b, optional c, conj flags."""
    m, n, k = (draw(st.integers(1, 5)) for _ in range(3))
    batch = tuple(draw(st.lists(st.integers(1, 3), max_size=3)))
    perm = draw(st.permutations(range(len(batch))))
    a = draw(operand_layout(m, k, batch, perm, allow_1d=True))
    b = draw(operand_layout(k, n, batch, perm, allow_1d=True))
    if a[0] == "1d":
        a, m = ("1d", (k,), a[2]), 1
    if b[0] == "1d":
        b, n = ("1d", (k,), b[2]), 1
    has_c = draw(st.booleans()) if with_c is None else with_c
    c = draw(operand_layout(m, n, batch, perm, allow_col_bcast=True)) if has_c else None
    cplx = draw(st.booleans()) if complex_ is None else complex_
    flags = [draw(st.booleans()) for _ in range(4)] if cplx else [False] * 4
    return {
        "m": m,
        "n": n,
        "k": k,
        "batch": batch,
        "perm": perm,
        "a": a,
        "b": b,
        "c": c,
        "complex": cplx,
        "flags": flags,
    }


def build(rng, p):
    """Materialize the drawn operands as strided numpy views (and their flat buffers)."""
    arrs, flats = {}, {}
    for name in ("a", "b", "c"):
        if p[name] is not None:
            _, shape, strides = p[name]
            arrs[name], flats[name] = strided(rng, shape, strides, p["complex"])
    return arrs, flats


def expected_result(arrs, conj_a, conj_b, beta):
    """numpy's answer: conj(a)? @ conj(b)? (+ beta * c), with 1-D promotion axes dropped."""
    a, b = arrs["a"], arrs["b"]
    a = np.conj(a) if conj_a else a
    b = np.conj(b) if conj_b else b
    if "c" not in arrs:
        return np.matmul(a, b)
    a2 = a[None, :] if a.ndim == 1 else a
    b2 = b[:, None] if b.ndim == 1 else b
    out = np.matmul(a2, b2) + beta * arrs["c"]
    if a.ndim == 1:
        out = out[..., 0, :]
    if b.ndim == 1:
        out = out[..., 0]
    return out


CONJ_INFEASIBLE = "conjugation not expressible"


def assert_conj_infeasible(mm, forces_col, transpose_problem):
    """A conjugated operand is rejected only if no allowed orientation makes it OP_C-expressible.

    OP_C needs the operand transposed-column-major in cuBLASLt's orientation: row-major in the
    user's orientation for the direct product, column-major for the transposed product.
    """
    if forces_col:
        allowed = [transpose_problem]
    elif mm.c_view is not None and mm.c_view.hint(allow_zero_ld=True) is not None:
        allowed = [mm.c_view.hint(allow_zero_ld=True) == Order.ROW]
    else:
        allowed = [False, True]
    for tr in allowed:
        fits = [(view if tr else view.t).col_ld() is not None for view, conj in
                ((mm.a_view, mm.conj_a), (mm.b_view, mm.conj_b)) if conj]  # fmt: skip
        assert not all(fits), (tr, mm)


def check_problem(emulator, rng, p, *, forces_col=False, transpose_problem=False, inplace=False):
    """Run the traits on a drawn problem and compare the emulated cuBLASLt result with numpy.

    Returns the MatmulProblem, or the ValueError the traits raised.
    """
    arrs, flats = build(rng, p)
    qa, qb, la, lb = p["flags"]
    specs = {n: spec(a, conj=lazy) for (n, a), lazy in zip(arrs.items(), (la, lb, False))}
    beta = 0.5 if "c" in arrs else None
    types = (C128_C if "c" in arrs else C128) if p["complex"] else (F64_C if "c" in arrs else F64)
    try:
        mm = T.get_mm_traits(
            specs["a"], specs["b"], specs.get("c"), qualifiers=qualifiers(qa, qb), inplace=inplace
        )
        problem = T.get_problem(mm, types, forces_col=forces_col, transpose_problem=transpose_problem)
    except ValueError as exc:
        if "is conjugated" in str(exc):
            assert_conj_infeasible(mm, forces_col, transpose_problem)
            return CONJ_INFEASIBLE
        return exc
    d_flat = emulator.run_problem(problem, flats, flats.get("c"), alpha=1.0, beta=beta or 0.0)
    if inplace:
        got = np.lib.stride_tricks.as_strided(d_flat, arrs["c"].shape, arrs["c"].strides)
        assert problem.result_shape == arrs["c"].shape
    else:
        got = emulator.result_view(problem, d_flat)
    want = expected_result(arrs, qa != la, qb != lb, beta)
    if inplace:  # the result is c itself, promoted axes included
        want = want.reshape(arrs["c"].shape)
    assert got.shape == want.shape, (got.shape, want.shape)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    return problem


# -------------------------------------------------------------------------------- properties
@SETTINGS
@given(p=problems())
def test_expressible_layouts_match_numpy(emulator, p):
    """Every layout a single strided batch can express is accepted and the emulated result equals numpy.matmul."""
    out = check_problem(emulator, np.random.default_rng(0), p)
    assert not isinstance(out, ValueError), (out, p)
    if out == CONJ_INFEASIBLE:
        assert p["complex"]


@SETTINGS
@given(p=problems(), seed=st.integers(0, 3))
def test_independent_batch_orders_are_correct_or_rejected(emulator, p, seed):
    """Operands with different batch memory orders are either handled correctly or rejected by name."""
    rng = np.random.default_rng(seed)
    perm = list(rng.permutation(len(p["batch"])))
    if p["b"][0] in ("full",) and len(perm) > 1:
        shape, strides = p["b"][1], list(p["b"][2])
        nb = len(p["batch"])
        block = min(s for s in strides[:nb] if s) if any(strides[:nb]) else 1
        acc = block
        for ax in reversed(perm):
            strides[ax] = acc
            acc *= shape[ax]
        p = dict(p, b=(p["b"][0], shape, tuple(strides)))
    out = check_problem(emulator, rng, p)
    if isinstance(out, ValueError):
        assert "single strided batch" in str(out), out


@SETTINGS
@given(p=problems(), forces_col=st.booleans(), transposed=st.booleans())
def test_epilog_orientation_matches_numpy(emulator, p, forces_col, transposed):
    """Forcing a column-major D (and the transposed product) still reproduces numpy.matmul, or c's order conflicts."""
    rng = np.random.default_rng(1)
    out = check_problem(emulator, rng, p, forces_col=True, transpose_problem=transposed)
    if isinstance(out, ValueError):
        assert "this epilog needs c" in str(out), out
    elif out != CONJ_INFEASIBLE:
        assert out.transposed == transposed
        assert out.d.order == Order.COL


@SETTINGS
@given(
    m=st.integers(1, 4), n=st.integers(1, 4), k=st.integers(1, 4), nb=st.integers(0, 2),
    perm=st.permutations(range(4)), pads=st.lists(st.integers(0, 2), min_size=4, max_size=4),
    steps=st.lists(st.integers(1, 2), min_size=4, max_size=4), bperm=st.permutations(range(4)),
    cplx=st.booleans(), conj=st.booleans(),
)  # fmt: skip
def test_arbitrary_strided_views_are_correct_or_rejected(
    emulator, m, n, k, nb, perm, pads, steps, bperm, cplx, conj
):
    """Arbitrary permuted/padded/stepped views either raise ValueError or give numpy's result."""
    rng = np.random.default_rng(2)
    batch = (2, 3)[:nb]
    a, fa = emulator.make_operand(rng, batch + (m, k), _sub(perm, nb + 2), pads, steps, complex_=cplx)
    b, fb = emulator.make_operand(rng, batch + (k, n), _sub(bperm, nb + 2), pads[::-1], steps[::-1], complex_=cplx)
    sa, sb = spec(a), spec(b, conj=conj)
    try:
        mm = T.get_mm_traits(sa, sb)
        problem = T.get_problem(mm, C128 if cplx else F64)
    except ValueError as exc:
        assert str(exc).startswith("operand"), exc
        return
    d = emulator.run_problem(problem, {"a": fa, "b": fb})
    want = np.matmul(a, np.conj(b) if (conj and cplx) else b)
    np.testing.assert_allclose(emulator.result_view(problem, d), want, rtol=1e-12, atol=1e-12)


def _sub(perm, nd):
    """Restrict a permutation of range(4) to range(nd), keeping the relative order."""
    return [p for p in perm if p < nd]


@SETTINGS
@given(p=problems(with_c=True), data=st.data())
def test_inplace_writes_into_c(emulator, p, data):
    """In place, D's layout is c's; the emulated write through it equals a@b + beta*c viewed as c."""
    rng = np.random.default_rng(3)
    batch = p["batch"]
    p = dict(p, c=data.draw(operand_layout(p["m"], p["n"], batch, p["perm"], mode="full")))
    out = check_problem(emulator, rng, p, inplace=True)
    assert not isinstance(out, ValueError), out
    if out == CONJ_INFEASIBLE:
        return
    assert out.inplace and out.d.ld == out.c.ld and out.d.batch_offset == out.c.batch_offset


# ----------------------------------------------------------------------------- explicit cases
@pytest.mark.parametrize(
    ("a_shape", "b_shape", "result"),
    [
        ((3,), (3,), ()),
        ((3,), (3, 4), (4,)),
        ((2, 3), (3,), (2,)),
        ((5, 2, 3), (3,), (5, 2)),
        ((3,), (5, 3, 4), (5, 4)),
        ((1, 2, 3), (4, 3, 5), (4, 2, 5)),
        ((2, 1, 2, 3), (1, 4, 3, 5), None),
    ],
)
def test_promotion_and_result_shape(emulator, a_shape, b_shape, result):
    """1-D operands are promoted and their axes dropped, batch dims broadcast, as numpy.matmul."""
    rng = np.random.default_rng(4)
    a = rng.standard_normal(a_shape)
    b = rng.standard_normal(b_shape)
    try:
        mm = T.get_mm_traits(spec(a), spec(b))
    except ValueError as exc:
        assert result is None and "'a'" in str(exc)
        return
    problem = T.get_problem(mm, F64)
    assert problem.result_shape == result == np.matmul(a, b).shape
    d = emulator.run_problem(problem, {"a": a.reshape(-1), "b": b.reshape(-1)})
    np.testing.assert_allclose(emulator.result_view(problem, d), np.matmul(a, b), rtol=1e-12)


def test_row_major_operands_give_row_major_result_via_transposed_product():
    """Row-major a and b: the transposed product D^T = B^T A^T with NN ops and a C-ordered result."""
    mm = T.get_mm_traits(OperandSpec((4, 3), (3, 1), "float32"), OperandSpec((3, 5), (5, 1), "float32"))
    p = T.get_problem(mm, resolve_types("float32", "float32"))
    assert p.transposed and (p.m, p.n, p.k) == (5, 4, 3) and (p.transa, p.transb) == (Op.N, Op.N)
    assert (p.a_operand, p.b_operand) == ("b", "a") and p.result_strides == (5, 1)
    assert p.result_order == Order.ROW and (p.a.ld, p.b.ld, p.d.ld) == (5, 3, 5)


def test_column_major_a_gives_column_major_result():
    """A Fortran-ordered a gives a column-major result computed directly (no transposition)."""
    mm = T.get_mm_traits(OperandSpec((4, 3), (1, 4), "float32"), OperandSpec((3, 5), (5, 1), "float32"))
    p = T.get_problem(mm, resolve_types("float32", "float32"))
    assert not p.transposed and (p.transa, p.transb) == (Op.N, Op.T) and p.result_strides == (1, 4)


def test_c_order_has_priority_over_a_order():
    """c's order decides the result order before a's."""
    a, b = OperandSpec((4, 3), (3, 1), "float32"), OperandSpec((3, 5), (5, 1), "float32")
    c = OperandSpec((4, 5), (1, 4), "float32")
    p = T.get_problem(T.get_mm_traits(a, b, c), resolve_types("float32", "float32", "float32"))
    assert not p.transposed and p.result_strides == (1, 4)


def test_epilog_forced_order_has_priority_over_a_order():
    """An epilog forcing column-major D overrides a's row-major order."""
    mm = T.get_mm_traits(OperandSpec((4, 3), (3, 1), "float32"), OperandSpec((3, 5), (5, 1), "float32"))
    p = T.get_problem(mm, resolve_types("float32", "float32"), forces_col=True)
    assert not p.transposed and p.result_strides == (1, 4) and p.transa == Op.T


def test_vectors_default_to_row_major_result():
    """With no order information (outer product of vectors) the result is row-major, like numpy."""
    mm = T.get_mm_traits(OperandSpec((4, 1), (1, 1), "float32"), OperandSpec((1, 5), (5, 1), "float32"))
    p = T.get_problem(mm, resolve_types("float32", "float32"))
    assert p.result_strides == (5, 1) and p.k == 1


def test_permuted_batch_axes_keep_input_order(emulator):
    """Operands whose batch axes are permuted in memory give a result with the same batch axis order."""
    rng = np.random.default_rng(5)
    a = rng.standard_normal((3, 2, 4, 5)).transpose(1, 0, 2, 3)
    b = rng.standard_normal((3, 2, 5, 6)).transpose(1, 0, 2, 3)
    mm = T.get_mm_traits(spec(a), spec(b))
    p = T.get_problem(mm, F64)
    assert mm.batch.order == (1, 0) and p.result_strides[0] < p.result_strides[1]
    d = emulator.run_problem(p, {"a": np.ascontiguousarray(a.transpose(1, 0, 2, 3)).reshape(-1),
                           "b": np.ascontiguousarray(b.transpose(1, 0, 2, 3)).reshape(-1)})  # fmt: skip
    np.testing.assert_allclose(emulator.result_view(p, d), np.matmul(a, b), rtol=1e-12)


def test_batched_c_broadcasts_unbatched_a_and_b(emulator):
    """A batched c with unbatched a and b (numpy broadcasting) walks a and b with batch stride 0."""
    rng = np.random.default_rng(6)
    a, b, c = rng.standard_normal((4, 3)), rng.standard_normal((3, 5)), rng.standard_normal((2, 4, 5))
    mm = T.get_mm_traits(spec(a), spec(b), spec(c))
    assert mm.batch.count == 2 and mm.batch.stride("a") == mm.batch.stride("b") == 0
    p = T.get_problem(mm, F64_C)
    d = emulator.run_problem(p, {"a": a.reshape(-1), "b": b.reshape(-1)}, c.reshape(-1), beta=2.0)
    np.testing.assert_allclose(emulator.result_view(p, d), a @ b + 2.0 * c, rtol=1e-12)


def test_padded_and_sliced_views_use_leading_dimension_without_copy():
    """A padded view (ld > extent) keeps its leading dimension; a batch slice keeps its padded stride."""
    mm = T.get_mm_traits(
        OperandSpec((3, 4, 3), (80, 10, 1), "float32"), OperandSpec((3, 5), (1, 7), "float32")
    )
    p = T.get_problem(mm, resolve_types("float32", "float32"))
    assert mm.batch.stride("a") == 80
    lay = p.b if p.b_operand == "a" else p.a
    assert lay.ld == 10 and lay.batch_offset == 80


def test_c_column_broadcast_uses_zero_ld():
    """c of shape (M, 1) broadcasts over columns with leading dimension 0 and forces column order."""
    a, b = OperandSpec((4, 3), (3, 1), "float32"), OperandSpec((3, 5), (5, 1), "float32")
    mm = T.get_mm_traits(a, b, OperandSpec((4, 1), (1, 1), "float32"))
    p = T.get_problem(mm, resolve_types("float32", "float32", "float32"))
    assert mm.c_broadcast and not p.transposed and p.c.ld == 0 and p.d.ld == 4


def test_fp8_tn_layout_accepted():
    """FP8 with K-contiguous a and b (TN) and dims multiple of 16 is accepted in either orientation."""
    ty = resolve_types("float8_e4m3fn", "float8_e4m3fn")
    a, b = OperandSpec((32, 64), (64, 1), "float8_e4m3fn"), OperandSpec((64, 48), (1, 64), "float8_e4m3fn")
    for forces in (False, True):
        p = T.get_problem(T.get_mm_traits(a, b), ty, forces_col=forces)
        assert (p.transa, p.transb) == (Op.T, Op.N)


def test_fp8_mixed_pair_transposed_swaps_dtypes():
    """In the transposed product cuBLASLt's A is the user's b, with b's dtype."""
    ty = resolve_types("float8_e4m3fn", "float8_e5m2")
    a, b = OperandSpec((32, 64), (64, 1), "float8_e4m3fn"), OperandSpec((64, 48), (1, 64), "float8_e5m2")
    p = T.get_problem(T.get_mm_traits(a, b), ty, forces_col=True, transpose_problem=True)
    assert p.a.dtype == "float8_e5m2" and p.b.dtype == "float8_e4m3fn" and p.a_operand == "b"


def test_conjugated_column_major_operand_flips_orientation():
    """A conjugated column-major a is expressed as OP_C of the transposed product (no ORDER_ROW)."""
    a, b = OperandSpec((4, 3), (1, 4), "complex64"), OperandSpec((3, 5), (1, 3), "complex64")
    p = T.get_problem(
        T.get_mm_traits(a, b, qualifiers=qualifiers(True)), resolve_types("complex64", "complex64")
    )
    assert p.transposed and p.transb == Op.C and p.b_operand == "a" and p.b.ld == 4
    assert {p.a.order, p.b.order, p.d.order} == {Order.COL}


def test_conjugated_operand_conflicting_with_c_order_raises():
    """A conjugated a that cannot use OP_C in the order c imposes raises ValueError naming a."""
    a, b = OperandSpec((4, 3), (1, 4), "complex64"), OperandSpec((3, 5), (1, 3), "complex64")
    c = OperandSpec((4, 5), (1, 4), "complex64")
    mm = T.get_mm_traits(a, b, c, qualifiers=qualifiers(True))
    with pytest.raises(ValueError, match=r"operand 'a' is conjugated.*resolve_conj"):
        T.get_problem(mm, resolve_types("complex64", "complex64", "complex64"))


def test_both_conjugated_in_opposite_orders_raise():
    """Conjugated a (column-major) and b (row-major) fit no orientation: ValueError."""
    a, b = OperandSpec((4, 3), (1, 4), "complex64"), OperandSpec((3, 5), (5, 1), "complex64")
    mm = T.get_mm_traits(a, b, qualifiers=qualifiers(True, True))
    with pytest.raises(ValueError, match="is conjugated"):
        T.get_problem(mm, resolve_types("complex64", "complex64"))


def test_lazy_conj_xor_qualifier_cancels():
    """The lazy-conj bit and a conjugating qualifier cancel each other."""
    assert T.conjugation_flags(qualifiers(True), OperandSpec((2, 2), (2, 1), "complex64", True),
                               OperandSpec((2, 2), (2, 1), "complex64")) == (False, False)  # fmt: skip


def test_conjugation_of_real_operand_is_ignored():
    """Conjugating a real operand is a no-op."""
    real = OperandSpec((2, 2), (2, 1), "float32")
    assert T.conjugation_flags(qualifiers(True, True), real, real) == (False, False)


def test_beta_without_c_warns():
    """beta without c is ignored with a UserWarning and 0 is returned."""
    with pytest.warns(UserWarning, match="beta=2 is ignored"):
        assert T.check_alpha_beta(None, 2, has_c=False) == (1, 0)


def test_alpha_beta_accept_numpy_scalars():
    """numpy scalars and size-1 arrays are accepted as alpha/beta."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert T.check_alpha_beta(np.float32(2), np.array([3.0]), has_c=True) == (2.0, 3.0)


# ----------------------------------------------------------------------------- bad inputs
S = OperandSpec
A = S((4, 3), (3, 1), "float32")
B = S((3, 5), (5, 1), "float32")
BAD_MM = [
    ("K mismatch", {"a": A, "b": S((4, 5), (5, 1), "float32")}, ValueError, "K=3"),
    ("zero extent", {"a": S((0, 3), (3, 1), "float32"), "b": B}, ValueError, "(0, 3)"),
    ("negative stride", {"a": S((4, 3), (-3, 1), "float32"), "b": B}, ValueError, "(-3, 1)"),
    ("no unit stride", {"a": S((4, 3), (6, 2), "float32"), "b": B}, ValueError, "(6, 2)"),
    ("overlapping ld", {"a": S((4, 3), (2, 1), "float32"), "b": B}, ValueError, "(2, 1)"),
    ("broadcast inside a", {"a": S((4, 3), (0, 1), "float32"), "b": B}, ValueError, "(0, 1)"),
    ("0-d a", {"a": S((), (), "float32"), "b": B}, ValueError, "shape ()"),
    ("strides length", {"a": S((4, 3), (1,), "float32"), "b": B}, ValueError, "(1,)"),
    ("not a spec", {"a": "a", "b": B}, TypeError, "'a'"),
    ("c 1-D", {"a": A, "b": B, "c": S((5,), (1,), "float32")}, ValueError, "(5,)"),
    ("c wrong rows", {"a": A, "b": B, "c": S((3, 5), (5, 1), "float32")}, ValueError, "(3, 5)"),
    ("c row broadcast", {"a": A, "b": B, "c": S((1, 5), (5, 1), "float32")}, ValueError, "(1, 5)"),
    ("c (M,1) strided", {"a": A, "b": B, "c": S((4, 1), (7, 1), "float32")}, ValueError, "(7, 0)"),
    ("batch mismatch", {"a": S((2, 4, 3), (12, 3, 1), "float32"), "b": S((3, 3, 5), (15, 5, 1), "float32")},
     ValueError, "'a' has 2 and 'b' has 3"),
    ("mixed broadcast batch", {"a": S((2, 3, 4, 3), (36, 12, 3, 1), "float32"), "b": S((3, 3, 5), (15, 5, 1), "float32")},
     ValueError, "operand 'b'"),
    ("padded batch axes", {"a": S((2, 3, 4, 3), (60, 12, 3, 1), "float32"), "b": B}, ValueError, "(60, 12)"),
    ("c batch mismatch", {"a": S((2, 4, 3), (12, 3, 1), "float32"), "b": B, "c": S((3, 4, 5), (20, 5, 1), "float32")},
     ValueError, "'a' has 2 and 'c' has 3"),
    ("inplace without c", {"a": A, "b": B, "inplace": True}, ValueError, "inplace=True needs c"),
    ("inplace broadcast c", {"a": A, "b": B, "c": S((4, 1), (1, 1), "float32"), "inplace": True}, ValueError, "(4, 1)"),
    ("inplace batch", {"a": S((2, 4, 3), (12, 3, 1), "float32"), "b": B, "c": S((4, 5), (5, 1), "float32"), "inplace": True},
     ValueError, "(2,)"),
    ("inplace overlap", {"a": S((2, 4, 3), (12, 3, 1), "float32"), "b": B, "c": S((2, 4, 5), (10, 5, 1), "float32"),
                              "inplace": True}, ValueError, "batch stride 10"),
    ("conj c", {"a": S((4, 3), (3, 1), "complex64"), "b": S((3, 5), (5, 1), "complex64"),
                    "c": S((4, 5), (5, 1), "complex64", True)}, ValueError, "conjugating c"),
    ("qualifiers type", {"a": A, "b": B, "qualifiers": [True, False, False]}, TypeError, "[True, False, False]"),
    ("qualifiers length", {"a": A, "b": B, "c": S((4, 5), (5, 1), "float32"),
                               "qualifiers": np.zeros(2, dtype=matrix_qualifiers_dtype)}, ValueError, "(2,)"),
]  # fmt: skip


@pytest.mark.parametrize(("case", "kwargs", "exc", "match"), BAD_MM, ids=[c[0] for c in BAD_MM])
def test_bad_mm_inputs_raise(case, kwargs, exc, match):
    """Each malformed operand set raises the documented exception type naming the offending value."""
    kw = dict(kwargs)
    a, b, c = kw.pop("a"), kw.pop("b"), kw.pop("c", None)
    with pytest.raises(exc) as info:
        T.get_mm_traits(a, b, c, **kw)
    if match is not None:
        assert match in str(info.value), str(info.value)


def test_epilog_needing_column_major_c_rejects_row_major_c():
    """An epilog that forces column-major D rejects a row-major c, naming c's strides."""
    mm = T.get_mm_traits(A, B, S((4, 5), (5, 1), "float32"))
    with pytest.raises(ValueError, match=r"column-major.*\(5, 1\)"):
        T.get_problem(mm, resolve_types("float32", "float32", "float32"), forces_col=True)


def test_transposed_epilog_rejects_broadcast_c():
    """A bias along N (transposed product) cannot use a c broadcast over columns."""
    mm = T.get_mm_traits(A, B, S((4, 1), (1, 1), "float32"))
    with pytest.raises(ValueError, match=r"row-major.*\(4, 1\)"):
        T.get_problem(
            mm, resolve_types("float32", "float32", "float32"), forces_col=True, transpose_problem=True
        )


def test_transpose_problem_requires_forces_col():
    """transpose_problem without forces_col is a programming error reported as ValueError."""
    with pytest.raises(ValueError, match="forces_col"):
        T.get_problem(T.get_mm_traits(A, B), resolve_types("float32", "float32"), transpose_problem=True)


def test_fp8_non_tn_layout_rejected():
    """FP8 with a row-major b (not K-contiguous) is rejected before any GPU work, naming the ops."""
    ty = resolve_types("float8_e4m3fn", "float8_e4m3fn")
    a, b = S((32, 64), (64, 1), "float8_e4m3fn"), S((64, 48), (48, 1), "float8_e4m3fn")
    with pytest.raises(ValueError, match="operand\\(s\\) 'b' are not"):
        T.get_problem(T.get_mm_traits(a, b), ty)


def test_fp8_k_not_multiple_of_16_rejected():
    """FP8 with K=24 is rejected before any GPU work, naming K."""
    ty = resolve_types("float8_e4m3fn", "float8_e4m3fn")
    a, b = S((32, 24), (24, 1), "float8_e4m3fn"), S((24, 48), (1, 24), "float8_e4m3fn")
    with pytest.raises(ValueError, match="'K': 24"):
        T.get_problem(T.get_mm_traits(a, b), ty)


def test_fp8_row_count_rule_picks_orientation():
    """FP8 M=20 (not 16-byte rows for an FP8 D) works through the transposed product when the order is free."""
    ty = resolve_types("float8_e4m3fn", "float8_e4m3fn")
    a, b = S((20, 64), (64, 1), "float8_e4m3fn"), S((64, 48), (1, 64), "float8_e4m3fn")
    mm = T.get_mm_traits(a, b)
    assert T.get_problem(mm, ty).m == 48
    with pytest.raises(ValueError, match=r"M \(D rows, float8_e4m3fn\)': 20"):
        T.get_problem(mm, ty, forces_col=True)
    b20 = S((64, 20), (1, 64), "float8_e4m3fn")
    with pytest.raises(ValueError, match="16 bytes"):
        T.get_problem(T.get_mm_traits(a, b20), ty)
    wide = resolve_types("float8_e4m3fn", "float8_e4m3fn", "float32")
    assert T.get_problem(T.get_mm_traits(a, b20), wide).m == 20


def test_required_ops_checked():
    """An epilog's required op (BGRADA: transa=N) on a row-major a is met by reading it as ORDER_ROW."""
    mm = T.get_mm_traits(A, B)
    ty = resolve_types("float32", "float32")
    p = T.get_problem(mm, ty, forces_col=True, required_ops=(Op.N, None))
    assert (p.transa, p.a.order) == (Op.N, T.Order.ROW)
    p = T.get_problem(mm, ty, forces_col=True, required_ops=(None, Op.T))
    assert p.transb == Op.T


@pytest.mark.parametrize(
    ("alpha", "beta", "has_c", "exc", "match"),
    [
        ("2", None, False, TypeError, "'2'"),
        (True, None, False, TypeError, "True"),
        (1.0, None, True, ValueError, "beta is required"),
        (1.0, [1], True, TypeError, "[1]"),
        (1j, 1.0, True, ValueError, "1j"),
    ],
)
def test_bad_alpha_beta_raise(alpha, beta, has_c, exc, match):
    """Non-numeric alpha/beta, a missing beta with c, or a complex value for a real scale raise."""
    with pytest.raises(exc) as info:
        T.check_alpha_beta(alpha, beta, has_c=has_c, scale_dtype="float32")
    assert match in str(info.value)


# ----------------------------------------------------------------------------- ORDER_ROW formulation
F32 = resolve_types("float32", "float32")


def test_row_order_problem_of_row_major_operands():
    """Row-major a, b (padded a, batched b): ROW layouts, ops N, no swap, the row-major result."""
    a = OperandSpec((2, 4, 3), (40, 10, 1), "float32")  # padded rows (ld 10), batch stride 40
    b = OperandSpec((3, 5), (5, 1), "float32")
    mm = T.get_mm_traits(a, b)
    p = T.row_order_problem(mm, F32)
    assert p is not None and not p.transposed and (p.a_operand, p.b_operand) == ("a", "b")
    assert (p.transa, p.transb, p.m, p.n, p.k) == (Op.N, Op.N, 4, 5, 3)
    assert (p.a.rows, p.a.cols, p.a.ld, p.a.order, p.a.batch_count, p.a.batch_offset) == (
        4,
        3,
        10,
        Order.ROW,
        2,
        40,
    )
    assert (p.b.rows, p.b.cols, p.b.ld, p.b.order, p.b.batch_offset) == (3, 5, 5, Order.ROW, 0)
    assert (p.d.rows, p.d.cols, p.d.ld, p.d.order, p.d.batch_offset) == (4, 5, 5, Order.ROW, 20)
    default = T.get_problem(mm, F32)
    assert (p.result_shape, p.result_strides) == (default.result_shape, default.result_strides) == (
        (2, 4, 5), (20, 5, 1),
    )  # fmt: skip


def test_row_order_problem_with_row_major_c():
    """A full row-major c keeps its own leading dimension in a ROW layout."""
    a, b = OperandSpec((4, 3), (3, 1), "float64"), OperandSpec((3, 5), (5, 1), "float64")
    c = OperandSpec((4, 5), (8, 1), "float64")
    p = T.row_order_problem(T.get_mm_traits(a, b, c), F64_C)
    assert p is not None and p.has_c and (p.c.ld, p.c.order) == (8, Order.ROW)


@pytest.mark.parametrize(
    "case",
    ["col-major a", "col-major b", "conjugated", "broadcast c", "col-major c", "inplace"],
)
def test_row_order_problem_does_not_apply(case):
    """Column-major operands, conjugation, a broadcast or column-major c and in-place give None."""
    a, b = OperandSpec((4, 3), (3, 1), "complex128"), OperandSpec((3, 5), (5, 1), "complex128")
    c, kw, types = None, {}, C128
    if case == "col-major a":
        a = OperandSpec((4, 3), (1, 4), "complex128")
    elif case == "col-major b":
        b = OperandSpec((3, 5), (1, 3), "complex128")
    elif case == "conjugated":
        kw["qualifiers"] = qualifiers(ca=True)
    elif case == "broadcast c":
        c, types = OperandSpec((4, 1), (1, 1), "complex128"), C128_C
    elif case == "col-major c":
        c, types = OperandSpec((4, 5), (1, 4), "complex128"), C128_C
    else:
        c, types, kw["inplace"] = OperandSpec((4, 5), (5, 1), "complex128"), C128_C, True
    assert T.row_order_problem(T.get_mm_traits(a, b, c, **kw), types) is None
