"""Helpers for preparing matmul operands (experimental).

:mod:`nvmath.linalg.advanced.helpers.matmul` holds the block-scale (MXFP8, NVFP4) and FP4 helpers,
as in nvmath-python 1.0. Importing this package imports neither torch nor cupy.
"""

from __future__ import annotations

from nvmath.linalg.advanced.helpers import matmul

__all__ = ["matmul"]
