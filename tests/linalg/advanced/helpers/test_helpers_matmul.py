"""Tests of nvmath.linalg.advanced.helpers.matmul: the public surface of nvmath-python 1.0."""

from __future__ import annotations

import importlib
import inspect
import subprocess
import sys

import pytest

import nvmath
from nvmath.linalg.advanced.helpers import matmul as H

# nvmath-python 1.0's helpers, as (name, parameters rendered without annotations)
REFERENCE = {
    "create_mxfp8_scale": "(x, exponent, stream=None)",
    "invert_mxfp8_scale": "(mx_scales)",
    "apply_mxfp8_scale": "(x, scales_1d, output_dtype='smallest')",
    "quantize_to_fp4": "(x, axis)",
    "unpack_fp4": "(fp4_tensor, axis)",
    "get_block_scale_offset": "(index, operand_or_shape, block_scaling_format, *, axis=None)",
    "to_block_scale": "(scale_tensor, operand_or_shape, block_scaling_format, *, axis=None, out=None)",
    "expand_block_scale": (
        "(scales_1d, operand_or_shape, block_scaling_format, *, axis=None, output_dtype='smallest', "
        "device=None)"
    ),
}


def _bare(fn):
    params = [
        p.replace(annotation=inspect.Parameter.empty) for p in inspect.signature(fn).parameters.values()
    ]
    return str(inspect.Signature(params))


def test_all_lists_exactly_the_reference_names():
    """__all__ is nvmath-python 1.0's helper list, and every name exists."""
    assert sorted(H.__all__) == sorted([*REFERENCE, "BlockScalingFormat"])
    assert all(hasattr(H, name) for name in H.__all__)


@pytest.mark.parametrize("name", sorted(REFERENCE))
def test_signatures_match_the_reference(name):
    """Parameter names, kinds and defaults are nvmath-python 1.0's."""
    assert _bare(getattr(H, name)) == REFERENCE[name]


def test_reachable_as_an_attribute_after_import_nvmath():
    """nvmath.linalg.advanced.helpers.matmul is there after a plain `import nvmath`."""
    assert nvmath.linalg.advanced.helpers.matmul is H
    assert importlib.import_module("nvmath.linalg.advanced.helpers").__all__ == ["matmul"]


def test_importing_the_helpers_imports_neither_torch_nor_cupy():
    """The helpers take their tensor packages from the tensors they are given."""
    code = (
        "import sys, nvmath.linalg.advanced.helpers.matmul as h; "
        "h.get_block_scale_offset((0, 0), (128, 128), 'MXFP8'); "
        "print(sorted(m for m in ('torch', 'cupy') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert out.stdout.strip() == "[]"


def test_docstring_examples_hold():
    """The offsets quoted in get_block_scale_offset's docstring are right."""
    assert H.get_block_scale_offset((33, 2), (256, 256), "MXFP8") == 22
    assert H.get_block_scale_offset((33, 5), (256, 256), "MXFP8") == 533
    assert H.get_block_scale_offset((5, 2), (128, 128), "NVFP4") == 82  # nvmath-python's documented value
    assert H.get_block_scale_offset((5, 5), (128, 128), "NVFP4") == 593


def test_shape_lists_and_tuples_agree():
    """A list shape, a tuple shape and a torch.Size address the same scales."""
    torch = pytest.importorskip("torch")
    for shape in ([2, 128, 64], (2, 128, 64), torch.Size([2, 128, 64])):
        assert H.get_block_scale_offset((1, 127, 3), shape, H.BlockScalingFormat.NVFP4) == 1023
