"""Shared references for the block-scale helper tests.

* ``reference_layout``: the tiled layout written out the way the cuBLAS documentation describes
  it, walking the stored bytes in order (tile by tile, a tile as 32 rows of 16 bytes), so it is
  independent of the helpers' offset formula and reshape/permute implementation.
* ``torch_to_blocked``: PyTorch's own ``to_blocked`` (``torch/testing/_internal/
  common_quantized.py``, which cites the cuBLAS layout), loaded from its source without importing
  that module (it needs test-only packages); ``None`` when this torch has no such function.
"""

from __future__ import annotations

import ast
import math
from pathlib import Path

import pytest


def _reference_layout(shape, axis, block):
    """Return ``{stored position: (batch, outer index, block index)}`` for every real scale."""
    ndim = len(shape)
    axis %= ndim
    outer = shape[-1] if axis == ndim - 2 else shape[-2]
    blocks = shape[axis] // block
    row_tiles, col_tiles = math.ceil(outer / 128), math.ceil(blocks / 4)
    layout, pos = {}, 0
    for b in range(math.prod(shape[:-2])):
        for tr in range(row_tiles):
            for tc in range(col_tiles):
                for r in range(32):  # a tile is 32 rows of 16 bytes
                    for j in range(16):  # byte j of row r: outer row r + 32 * (j // 4), column j % 4
                        o, k = tr * 128 + 32 * (j // 4) + r, tc * 4 + j % 4
                        if o < outer and k < blocks:
                            layout[pos] = (b, o, k)
                        pos += 1
    return layout, pos


@pytest.fixture
def reference_layout():
    return _reference_layout


def _load_torch_to_blocked():
    try:
        import torch
    except ImportError:
        return None
    src = Path(torch.__file__).parent / "testing" / "_internal" / "common_quantized.py"
    try:
        tree = ast.parse(src.read_text())
        fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "to_blocked")
    except (OSError, SyntaxError, StopIteration):
        return None
    namespace = {"torch": torch, "ceil_div": lambda a, b: -(-a // b)}
    exec(compile(ast.Module([fn], []), str(src), "exec"), namespace)  # noqa: S102 - torch's own source
    return namespace["to_blocked"]


@pytest.fixture(scope="session")
def torch_to_blocked():
    fn = _load_torch_to_blocked()
    if fn is None:
        pytest.skip("this torch has no torch.testing._internal.common_quantized.to_blocked")
    return fn
