"""The public surface of nvmath.distributed.distribution (nvmath-python 1.0's names)."""

from __future__ import annotations

import subprocess
import sys

from nvmath.distributed import distribution

NVMATH_PYTHON_NAMES = {
    "ProcessGrid",
    "Distribution",
    "Slab",
    "Box",
    "BlockCyclic",
    "BlockNonCyclic",
    "BindDistributionError",
    "ConvertDistributionError",
}


def test_all_lists_nvmath_python_names():
    """__all__ has no duplicates, every name exists, and it carries nvmath-python's distribution classes."""
    assert len(distribution.__all__) == len(set(distribution.__all__))
    assert NVMATH_PYTHON_NAMES <= set(distribution.__all__)
    for name in distribution.__all__:
        assert getattr(distribution, name) is not None


def test_errors_are_value_errors():
    """Both errors are ValueErrors, so generic bad-input handling catches them."""
    assert issubclass(distribution.BindDistributionError, ValueError)
    assert issubclass(distribution.ConvertDistributionError, ValueError)


def test_import_loads_no_torch_and_no_engine():
    """Importing the distributions imports neither torch nor any distributed engine binding."""
    code = (
        "import sys, nvmath.distributed.distribution as d; "
        "bad = [m for m in ('torch', 'mpi4py', 'nvmath.bindings.nccl', 'nvmath.bindings.cufftMp') if m in sys.modules]; "
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
