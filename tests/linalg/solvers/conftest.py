"""Fixtures of the dense-solver tests (helpers live in ``solver_testing.py``)."""

from __future__ import annotations

import importlib
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))

from solver_testing import GPU_SPACES, SPACES, Space


@pytest.fixture(params=SPACES)
def space(request) -> Space:
    """Each execution space (GPU ones are marked ``gpu``)."""
    space = request.param
    if space.package != "numpy":
        space.module()
    if space.package == "torch" and space.device == "cuda" and not space.module().cuda.is_available():
        pytest.skip("torch has no CUDA device here")
    return space


@pytest.fixture(params=GPU_SPACES)
def gpu_space(request) -> Space:
    """Each GPU execution space (marked ``gpu``)."""
    space = request.param
    if space.package != "numpy":
        space.module()
    return space


@pytest.fixture
def solvers():
    """The dense-solver package (``nvmath.linalg._solvers``)."""
    return importlib.import_module("nvmath.linalg._solvers")
