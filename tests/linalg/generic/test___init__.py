"""The public surface: nvmath.linalg.generic.__all__ and the same names re-exported from nvmath.linalg."""

from __future__ import annotations

import subprocess
import sys

import nvmath.linalg as la
from nvmath.linalg import generic

NVMATH_PYTHON_NAMES = (
    "matmul",
    "Matmul",
    "MatmulOptions",
    "ExecutionCPU",
    "ExecutionCUDA",
    "matrix_qualifiers_dtype",
    "GeneralMatrixQualifier",
    "SymmetricMatrixQualifier",
    "HermitianMatrixQualifier",
    "TriangularMatrixQualifier",
    "DiagonalMatrixQualifier",
    "FillMode",
    "DiagType",
    "SideMode",
    "InvalidMatmulState",
)


def test_all_lists_existing_names():
    """__all__ has no duplicates and every name exists."""
    assert len(generic.__all__) == len(set(generic.__all__))
    for name in generic.__all__:
        assert getattr(generic, name) is not None


def test_nvmath_python_names_from_linalg():
    """nvmath-python's generic names import from nvmath.linalg and are the generic package's objects."""
    for name in NVMATH_PYTHON_NAMES:
        assert getattr(la, name) is getattr(generic, name), name
        assert name in la.__all__, name


def test_import_is_light():
    """Importing nvmath.linalg.generic imports neither torch, cupy nor scipy and makes no driver call."""
    code = (
        "import sys, nvmath.linalg.generic;"
        "print(','.join(m for m in ('torch', 'cupy', 'scipy', 'cuda.bindings.driver') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
