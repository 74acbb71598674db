"""One problem: the per-package copies that make an operand BLAS-readable (conjugated, re-laid out),
and the copies being made only when the traits ask for them."""

from __future__ import annotations

import numpy as np
import pytest

import nvmath.linalg as la
from nvmath._internal.tensors import wrap
from nvmath.linalg.generic._problem import Problem, materialize
from nvmath.linalg.generic._qualifiers import GENERAL, Qualifier


@pytest.mark.parametrize("layout", ["row", "col"])
@pytest.mark.parametrize("conj", [False, True])
def test_numpy_materialize(layout, conj):
    """The copy holds the (conjugated) values in the asked layout and shares no memory with the input."""
    x = (np.arange(12.0) + 1j).reshape(3, 4)[:, ::2]
    y = materialize(x, "numpy", conj, layout)
    np.testing.assert_array_equal(y, np.conj(x) if conj else x)
    assert (y.flags.c_contiguous if layout == "row" else y.flags.f_contiguous) and not np.shares_memory(x, y)


def test_torch_materialize(torch):
    """torch: the lazy conjugation bit is resolved into the values; the layout is the asked one."""
    x = torch.randn(3, 4, dtype=torch.complex64)
    y = materialize(x.conj(), "torch", True, "col")  # conj(conj(x)) == x
    torch.testing.assert_close(y, x)
    assert not y.is_conj() and y.stride() == (1, 3)


def test_unknown_package_is_refused():
    """A package without a copy routine gets a ValueError saying what to pass instead."""
    with pytest.raises(ValueError, match="row- or column-major"):
        materialize(object(), "jax", True, "row")


def test_copies_only_when_needed():
    """A conjugated column-major operand needs no copy; a conjugated symmetric one does (once per call)."""
    a = np.ones((4, 4), complex, order="F")
    b = np.ones((4, 2), complex)
    p = Problem(
        {"a": wrap(a), "b": wrap(b)}, (Qualifier(conjugate=True), GENERAL, GENERAL), cpu=True, inplace=False
    )
    assert p.prep == ()
    p = Problem(
        {"a": wrap(a), "b": wrap(b)},
        (Qualifier("sy", conjugate=True), GENERAL, GENERAL),
        cpu=True,
        inplace=False,
    )
    assert [name for name, *_ in p.prep] == ["a"]
    assert not p.kernel_quals[0].conjugate  # the copy carries the conjugation
    q = np.array(
        [
            la.SymmetricMatrixQualifier.create(conjugate=True, uplo=la.FillMode.UPPER),
            la.GeneralMatrixQualifier.create(),
        ]
    )
    a = np.arange(16.0).reshape(4, 4) + 1j
    full = np.triu(a) + np.triu(a, 1).T
    np.testing.assert_allclose(la.matmul(a, b, qualifiers=q), np.conj(full) @ b)
