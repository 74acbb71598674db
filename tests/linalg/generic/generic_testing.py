"""Shared cases of the generic-matmul tests: operands, qualifiers and a numpy float64 reference.

Each case builder takes a random generator and a dtype and returns a :class:`Case`: positional
operands (numpy arrays in the layouts under test), keyword arguments for ``matmul`` and the
reference computed independently in float64 / complex128 with plain numpy. The non-stored triangle
of structured operands is poisoned with NaN, so a routine that reads it fails the comparison.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

import nvmath.linalg as la

G = la.GeneralMatrixQualifier.create
TOL = {"float16": 5e-3, "float32": 2e-5, "float64": 1e-12, "complex64": 2e-5, "complex128": 1e-12}
FULL = ("float32", "float64", "complex64", "complex128")


class Case(NamedTuple):
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    ref: np.ndarray


def quals(*records: Any) -> np.ndarray:
    return np.array(list(records), dtype=la.matrix_qualifiers_dtype)


def rand(rng: np.random.Generator, shape: tuple[int, ...], dtype: str, layout: str = "row") -> np.ndarray:
    """Never-zero values with ``shape`` in a layout: row, col (column-major), pad (padded rows)."""
    mem = tuple(shape) if layout != "col" else tuple(shape[:-2]) + (shape[-1], shape[-2])
    if layout == "pad":
        mem = mem[:-1] + (mem[-1] + 3,)
    x = rng.uniform(0.5, 1.5, mem) * rng.choice([-1, 1], mem)
    if dtype.startswith("complex"):
        x = x + 1j * rng.uniform(-0.5, 0.5, mem)
    x = x.astype(dtype)
    if layout == "pad":
        x = x[..., : shape[-1]]
    return x if layout != "col" else np.swapaxes(x, -1, -2)


def wide(x: np.ndarray) -> np.ndarray:
    return x.astype(np.complex128 if np.iscomplexobj(x) else np.float64)


def rel_error(out: np.ndarray, ref: np.ndarray) -> float:
    return float(np.linalg.norm(wide(out) - ref) / max(np.linalg.norm(ref), 1e-30))


def symmetric(rng, n, dtype, lower, layout, kind="sy") -> tuple[np.ndarray, np.ndarray]:
    """(stored operand with the other triangle poisoned, the full matrix it stands for)."""
    s = rand(rng, (n, n), dtype, layout)
    h = wide(s)
    tri = np.tril(h) if lower else np.triu(h)
    strict = np.tril(h, -1) if lower else np.triu(h, 1)
    full = tri + (strict.conj().T if kind == "he" else strict.T)
    if kind == "he":
        full[np.diag_indices(n)] = np.diag(full).real
    mask = np.triu(np.ones((n, n), bool), 1) if lower else np.tril(np.ones((n, n), bool), -1)
    s[mask] = np.nan
    return s, full


def _gemm(layouts: tuple[str, str], with_c: bool) -> Callable[..., Case]:
    def build(rng, dtype):
        a, b = rand(rng, (9, 7), dtype, layouts[0]), rand(rng, (7, 5), dtype, layouts[1])
        if not with_c:
            return Case((a, b), {}, wide(a) @ wide(b))
        c = rand(rng, (9, 5), dtype)
        return Case((a, b, c), {"alpha": 0.5, "beta": -2.0}, 0.5 * wide(a) @ wide(b) - 2 * wide(c))

    return build


def _batched(sa, sb, la_="row", lb="row"):
    def build(rng, dtype):
        a, b = rand(rng, sa, dtype, la_), rand(rng, sb, dtype, lb)
        return Case((a, b), {"alpha": 2.0}, 2 * np.matmul(wide(a), wide(b)))

    return build


def _vector(which):
    def build(rng, dtype):
        m = rand(rng, (6, 4) if which == "b" else (4, 6), dtype)
        v = rand(rng, (4, 1), dtype)[:, 0]
        args = (m, v) if which == "b" else (v, m)
        return Case(args, {}, np.matmul(wide(args[0]), wide(args[1])))

    return build


def _conj(la_, lb, ca, cb):
    def build(rng, dtype):
        a, b = rand(rng, (6, 5), dtype, la_), rand(rng, (5, 4), dtype, lb)
        ra, rb = (wide(a).conj() if ca else wide(a)), (wide(b).conj() if cb else wide(b))
        return Case((a, b), {"qualifiers": quals(G(conjugate=ca), G(conjugate=cb))}, ra @ rb)

    return build


def _symm(kind, side, lower, layout, conj=False, with_c=True):
    def build(rng, dtype):
        s, full = symmetric(rng, 8, dtype, lower, layout, kind)
        full = full.conj() if conj else full
        x = rand(rng, (8, 3) if side == "a" else (3, 8), dtype)
        mk = la.HermitianMatrixQualifier.create if kind == "he" else la.SymmetricMatrixQualifier.create
        q = mk(conjugate=conj, uplo=la.FillMode.LOWER if lower else la.FillMode.UPPER)
        ref = full @ wide(x) if side == "a" else wide(x) @ full
        args = (s, x) if side == "a" else (x, s)
        qs = [q, G()] if side == "a" else [G(), q]
        if not with_c:
            return Case(args, {"qualifiers": quals(*qs)}, ref)
        c = rand(rng, ref.shape, dtype)
        return Case(
            args + (c,), {"alpha": 1.5, "beta": 0.5, "qualifiers": quals(*qs, G())}, 1.5 * ref + 0.5 * wide(c)
        )

    return build


def _trmm(side, lower, unit, layout, conj=False, with_c=False):
    def build(rng, dtype):
        t = rand(rng, (7, 7), dtype, layout)
        tri = np.tril(wide(t)) if lower else np.triu(wide(t))
        if unit:
            np.fill_diagonal(tri, 1)
        tri = tri.conj() if conj else tri
        mask = np.triu(np.ones((7, 7), bool), 1) if lower else np.tril(np.ones((7, 7), bool), -1)
        t[mask] = np.nan
        if unit:
            t[np.diag_indices(7)] = np.nan
        x = rand(rng, (7, 4) if side == "a" else (4, 7), dtype)
        q = la.TriangularMatrixQualifier.create(
            conjugate=conj,
            uplo=la.FillMode.LOWER if lower else la.FillMode.UPPER,
            diag=la.DiagType.UNIT if unit else la.DiagType.NON_UNIT,
        )
        ref = tri @ wide(x) if side == "a" else wide(x) @ tri
        args = (t, x) if side == "a" else (x, t)
        qs = [q, G()] if side == "a" else [G(), q]
        if not with_c:
            return Case(args, {"alpha": 2.0, "qualifiers": quals(*qs)}, 2 * ref)
        c = rand(rng, ref.shape, dtype)
        return Case(
            args + (c,), {"alpha": 2.0, "beta": -1.0, "qualifiers": quals(*qs, G())}, 2 * ref - wide(c)
        )

    return build


def _dgmm(side, incx, layout, conj=False, with_c=False, alpha=1.0):
    def build(rng, dtype):
        n = 6
        v = rand(rng, (1, (n - 1) * abs(incx) + 1), dtype)[0]
        d = wide(v)[:: abs(incx)]
        d = d[::-1] if incx < 0 else d
        d = d.conj() if conj else d
        x = rand(rng, (n, 5) if side == "a" else (5, n), dtype, layout)
        q = la.DiagonalMatrixQualifier.create(conjugate=conj, incx=incx)
        ref = alpha * (np.diag(d) @ wide(x) if side == "a" else wide(x) @ np.diag(d))
        args = (v, x) if side == "a" else (x, v)
        qs = [q, G()] if side == "a" else [G(), q]
        if not with_c:
            return Case(args, {"alpha": alpha, "qualifiers": quals(*qs)}, ref)
        c = rand(rng, ref.shape, dtype)
        return Case(
            args + (c,), {"alpha": alpha, "beta": 3.0, "qualifiers": quals(*qs, G())}, ref + 3 * wide(c)
        )

    return build


CASES: dict[str, Callable[..., Case]] = {
    "gemm-rr": _gemm(("row", "row"), False),
    "gemm-cr": _gemm(("col", "row"), True),
    "gemm-rc": _gemm(("row", "col"), True),
    "gemm-cc": _gemm(("col", "col"), False),
    "gemm-pad": _gemm(("pad", "pad"), True),
    "batch": _batched((6, 5, 4), (6, 4, 3)),
    "batch-bcast-b": _batched((6, 5, 4), (4, 3), "col", "row"),
    "batch-bcast-a": _batched((5, 4), (3, 4, 3), "row", "col"),
    "batch-4x1-3": _batched((4, 1, 2, 3), (3, 3, 2)),
    "batch-2-1-3": _batched((2, 3, 4, 5), (1, 3, 5, 6), "col", "col"),
    "vector-b": _vector("b"),
    "vector-a": _vector("a"),
    "symm-a-lower-row": _symm("sy", "a", True, "row"),
    "symm-a-upper-col": _symm("sy", "a", False, "col"),
    "symm-b-upper-row": _symm("sy", "b", False, "row", with_c=False),
    "symm-b-lower-col": _symm("sy", "b", True, "col"),
    "dgmm-a-1": _dgmm("a", 1, "row"),
    "dgmm-b-2-col": _dgmm("b", 2, "col", with_c=True, alpha=2.0),
    "dgmm-a-neg": _dgmm("a", -1, "col", alpha=-0.5),
    "dgmm-b-neg2": _dgmm("b", -2, "row", with_c=True),
}
"""Cases for every dtype."""

COMPLEX_CASES: dict[str, Callable[..., Case]] = {
    "conj-rr-a": _conj("row", "row", True, False),
    "conj-cr-a": _conj("col", "row", True, False),
    "conj-rc-both": _conj("row", "col", True, True),
    "conj-rr-both": _conj("row", "row", True, True),
    "conj-cc-b": _conj("col", "col", False, True),
    "hemm-a-lower-row": _symm("he", "a", True, "row"),
    "hemm-a-upper-col": _symm("he", "a", False, "col"),
    "hemm-b-lower-row-conj": _symm("he", "b", True, "row", conj=True),
    "hemm-b-upper-col-conj": _symm("he", "b", False, "col", conj=True, with_c=False),
    "symm-conj": _symm("sy", "a", True, "row", conj=True),
    "dgmm-conj": _dgmm("a", 1, "row", conj=True),
}
"""Cases for complex dtypes."""

TRMM_CASES: dict[str, Callable[..., Case]] = {
    "trmm-a-lower-row": _trmm("a", True, False, "row"),
    "trmm-a-upper-col-unit": _trmm("a", False, True, "col"),
    "trmm-b-lower-col-c": _trmm("b", True, False, "col", with_c=True),
    "trmm-b-upper-row-unit-c": _trmm("b", False, True, "row", with_c=True),
}
"""trmm cases (GPU only)."""

COMPLEX_TRMM_CASES = {
    "trmm-conj-row": _trmm("a", True, False, "row", conj=True),
    "trmm-conj-col": _trmm("b", False, False, "col", conj=True, with_c=True),
}
