"""Tests of nvmath.linalg.advanced.helpers._values: scale decoding and output_dtype='smallest'."""

from __future__ import annotations

import math

import numpy as np
import pytest

from nvmath.linalg.advanced.helpers import _values as V
from nvmath.linalg.advanced.helpers._geometry import BlockScalingFormat as F

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("name", sorted(V.FLOAT_BITS))
def test_float_bits_agree_with_torch_finfo(name):
    """The (smallest subnormal, largest exponent, precision) table matches torch.finfo."""
    info = torch.finfo(getattr(torch, name))
    low, high, bits = V.FLOAT_BITS[name]
    assert math.log2(info.tiny * info.eps) == low
    assert math.frexp(info.max)[1] - 1 == high
    assert -math.log2(info.eps) + 1 == bits


@pytest.mark.parametrize(
    ("pkg", "span", "want"),
    [
        ("torch", (-24, 15, 11), "float16"),
        ("torch", (-25, 15, 4), "bfloat16"),
        ("torch", (-24, 16, 8), "bfloat16"),
        ("torch", (-24, 16, 9), "float32"),
        ("torch", (-136, 8, 4), "float32"),
        ("torch", (-9, 135, 4), "float64"),
        ("numpy", (-25, 15, 4), "float32"),
    ],
)
def test_smallest_exact_dtype_is_the_narrowest_that_fits(pkg, span, want):
    """Range and precision both decide; bfloat16 is a torch-only candidate."""
    assert V.smallest_exact_dtype(pkg, *span) == want


def test_check_output_dtype_accepts_objects_and_names():
    """'smallest' is None; torch / numpy dtypes and names map to names; raw needs allowing."""
    assert V.check_output_dtype("smallest", "torch") is None
    assert V.check_output_dtype(torch.bfloat16, "torch") == "bfloat16"
    assert V.check_output_dtype(np.float32, "numpy") == "float32"
    assert V.check_output_dtype("float64", "numpy") == "float64"
    assert V.check_output_dtype(torch.uint8, "torch", raw="uint8") == "uint8"
    for bad in (torch.uint8, torch.int32, "biggest", object()):
        with pytest.raises(ValueError, match="output_dtype must be 'smallest' or one of float16"):
            V.check_output_dtype(bad, "torch")


def test_mxfp8_scales_decode_exactly_with_nan():
    """UE8M0 byte x decodes to 2**(x - 127) exactly; 255 to NaN; 'smallest' follows the range."""
    raw = torch.arange(256, dtype=torch.uint8)
    values = V.decode(raw, F.MXFP8, "smallest", "torch")
    assert values.dtype == torch.bfloat16  # 2**-127 .. 2**127 all fit bfloat16
    want = [math.ldexp(1.0, int(x) - 127) for x in range(255)]
    assert values[:255].double().tolist() == want and math.isnan(values[255])
    assert V.decode(raw[103:143], F.MXFP8, "smallest", "torch").dtype == torch.float16
    assert V.decode(raw.numpy(), F.MXFP8, "smallest", "numpy").dtype == np.float32
    assert V.decode(raw, F.MXFP8, torch.float64, "torch")[:255].tolist() == want


def test_nvfp4_scales_decode_to_float16():
    """UE4M3 scales always fit float16 exactly."""
    codes = torch.arange(127, dtype=torch.uint8).view(torch.float8_e4m3fn)
    values = V.decode(codes, F.NVFP4, "smallest", "torch")
    assert values.dtype == torch.float16 and torch.equal(values.double(), codes.double())


def test_raw_output_returns_the_entries_themselves():
    """output_dtype equal to the scale dtype returns the entries undecoded."""
    raw = torch.tensor([0, 127, 255], dtype=torch.uint8)
    assert V.decode(raw, F.MXFP8, torch.uint8, "torch") is raw
