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
    """UE8M0 byte x decodes to 2**(x - 127) exactly in a float dtype that holds the range, 255 to NaN;
    'smallest' gives the exponent bytes themselves (nvmath-python's rule)."""
    raw = torch.arange(256, dtype=torch.uint8)
    assert V.decode(raw, F.MXFP8, "smallest", "torch") is raw
    assert V.decode(raw.numpy(), F.MXFP8, "smallest", "numpy").dtype == np.uint8
    values = V.decode(raw, F.MXFP8, torch.bfloat16, "torch")  # 2**-127 .. 2**127 all fit bfloat16
    want = [math.ldexp(1.0, int(x) - 127) for x in range(255)]
    assert values[:255].double().tolist() == want and math.isnan(values[255])
    assert V.decode(raw[103:143], F.MXFP8, torch.float16, "torch").dtype == torch.float16
    assert V.decode(raw, F.MXFP8, torch.float64, "torch")[:255].tolist() == want


def test_mxfp8_values_too_wide_for_output_dtype_are_value_error():
    """float16 cannot hold 2**127: ValueError (the output must be wide enough, as in nvmath-python)."""
    with pytest.raises(ValueError, match="cannot hold the MXFP8 scales"):
        V.decode(torch.tensor([254], dtype=torch.uint8), F.MXFP8, torch.float16, "torch")


def test_e8m0fnu_scales_smallest_is_uint8_bytes():
    """torch float8_e8m0fnu MXFP8 scales: 'smallest' gives the same bytes as uint8."""
    if not hasattr(torch, "float8_e8m0fnu"):
        pytest.skip("torch has no float8_e8m0fnu")
    raw = torch.tensor([120, 127, 130], dtype=torch.uint8)
    got = V.decode(raw.view(torch.float8_e8m0fnu), F.MXFP8, "smallest", "torch")
    assert got.dtype == torch.uint8 and got.tolist() == [120, 127, 130]


def test_nvfp4_scales_smallest_is_float8_e4m3fn():
    """NVFP4 'smallest' gives float8_e4m3fn (uint8 bit patterns viewed as it); float dtypes the values."""
    codes = torch.arange(127, dtype=torch.uint8)
    e4m3 = codes.view(torch.float8_e4m3fn)
    assert V.decode(e4m3, F.NVFP4, "smallest", "torch") is e4m3
    viewed = V.decode(codes, F.NVFP4, "smallest", "torch")
    assert viewed.dtype == torch.float8_e4m3fn and torch.equal(viewed.view(torch.uint8), codes)
    values = V.decode(codes, F.NVFP4, torch.float16, "torch")
    assert values.dtype == torch.float16 and torch.equal(values.double(), e4m3.double())


def test_nvfp4_uint8_bit_patterns_decode_on_numpy():
    """numpy has no float8_e4m3fn: uint8 bit patterns decode through a table equal to torch's cast,
    and 'smallest' gives float16 (which holds every UE4M3 value)."""
    codes = np.arange(256, dtype=np.uint8)
    want = torch.from_numpy(codes).view(torch.float8_e4m3fn).double().numpy()
    got = V.decode(codes, F.NVFP4, "smallest", "numpy")
    assert got.dtype == np.float16
    np.testing.assert_array_equal(got.astype(np.float64), want)
    with pytest.raises(TypeError, match="float8_e4m3fn"):
        V.decode(codes, F.NVFP4, "float8_e4m3fn", "numpy")


@pytest.mark.parametrize(
    ("fmt", "bad"),
    [(F.NVFP4, torch.uint8), (F.MXFP8, torch.float8_e4m3fn), (F.MXFP8, torch.int32), (F.NVFP4, "big")],
)
def test_expand_output_dtype_not_allowed_is_type_error(fmt, bad):
    """An output_dtype the format's scales cannot be expanded to raises TypeError (as nvmath-python)."""
    raw = torch.zeros(4, dtype=torch.uint8)
    with pytest.raises(TypeError, match="output_dtype must be 'smallest' or one of"):
        V.decode(raw if fmt is F.MXFP8 else raw.view(torch.float8_e4m3fn), fmt, bad, "torch")


def test_raw_output_returns_the_entries_themselves():
    """output_dtype equal to the scale dtype returns the entries undecoded."""
    raw = torch.tensor([0, 127, 255], dtype=torch.uint8)
    assert V.decode(raw, F.MXFP8, torch.uint8, "torch") is raw
