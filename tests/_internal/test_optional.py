"""Every CPU path that needs scipy names the ``cpu`` extra when scipy is missing.

scipy is hidden by mapping ``scipy`` and its loaded submodules to ``None`` in ``sys.modules`` (an
import then raises ``ImportError``), and the FFT module's memoised ``scipy.fft`` is dropped.
"""

from __future__ import annotations

import sys

import numpy as np
import pytest

import nvmath
from nvmath._internal import optional

EXTRA = r"'cpu' extra"


@pytest.fixture
def no_scipy(monkeypatch):
    """scipy cannot be imported inside the test."""
    for name in [n for n in sys.modules if n == "scipy" or n.startswith("scipy.")] + ["scipy"]:
        monkeypatch.setitem(sys.modules, name, None)
    from nvmath.fft import _cpu as fft_cpu

    monkeypatch.setattr(fft_cpu, "_SCIPY", None)


def test_import_scipy_returns_the_submodule():
    """With scipy installed, the helper returns the asked submodule."""
    pytest.importorskip("scipy", reason="scipy is not installed (pip install -e '.[cpu]')")
    assert optional.import_scipy("linalg.blas", "x").__name__ == "scipy.linalg.blas"


def test_import_scipy_names_the_extra_and_the_purpose(no_scipy):
    """Without scipy: the chosen error type, naming the purpose, pip install scipy and the cpu extra."""
    with pytest.raises(RuntimeError, match=rf"testing things needs scipy.*pip install scipy.*{EXTRA}"):
        optional.import_scipy("fft", "testing things", RuntimeError)


def test_cpu_fft_without_scipy(no_scipy):
    """A CPU FFT says it needs scipy and names the cpu extra (RuntimeError, as before)."""
    with pytest.raises(RuntimeError, match=EXTRA):
        nvmath.fft.fft(np.ones(8, np.complex64))


def test_cpu_solver_without_scipy(no_scipy):
    """A CPU dense solver says it needs scipy and names the cpu extra."""
    a = np.eye(4) * 2
    with pytest.raises(nvmath.errors.NotSupportedError, match=EXTRA):
        nvmath.linalg.solve(a, np.ones((4, 1)))


def test_cpu_symmetric_matmul_without_scipy(no_scipy):
    """The symmetric qualifier on the CPU (scipy's symm) says it needs scipy and names the cpu extra."""
    la = nvmath.linalg
    q = np.array(
        [la.SymmetricMatrixQualifier.create(), la.GeneralMatrixQualifier.create()], dtype=la.matrix_qualifiers_dtype
    )
    with pytest.raises(ImportError, match=rf"symm product.*{EXTRA}"):
        la.matmul(np.eye(3), np.ones((3, 2)), qualifiers=q)


def test_cpu_general_matmul_needs_no_scipy(no_scipy):
    """A general CPU matmul (numpy's BLAS) still runs without scipy."""
    a = np.arange(6.0).reshape(2, 3)
    np.testing.assert_allclose(nvmath.linalg.matmul(a, a.T), a @ a.T)
