"""FFTOptions and FFTDirection: defaults, validation and the accepted spellings."""

from __future__ import annotations

import dataclasses
import logging

import pytest

from nvmath._internal.options import check_or_create_options
from nvmath.fft import FFTDirection, FFTOptions
from nvmath.fft._options import normalize_direction


def test_defaults_match_nvmath_python():
    """The fields and defaults are nvmath-python 1.0's, plus layout_fallback='error' and
    overwrite_operand=False last."""
    names = [f.name for f in dataclasses.fields(FFTOptions)]
    assert names == [
        "fft_type", "inplace", "last_axis_parity", "result_layout", "logger", "blocking", "allocator",
        "layout_fallback", "overwrite_operand",
    ]  # fmt: skip
    o = FFTOptions()
    assert (o.fft_type, o.inplace, o.last_axis_parity, o.result_layout, o.blocking) == (
        None, False, "even", "optimized", "auto",
    )  # fmt: skip
    assert o.layout_fallback == "error" and o.overwrite_operand is False


def test_options_are_mutable_and_positional():
    """FFTOptions is a plain mutable dataclass as nvmath-python's: positional fields, checked assignment."""
    o = FFTOptions("c2c", True)
    assert (o.fft_type, o.inplace) == ("C2C", True)
    o.inplace = False
    assert o.inplace is False
    with pytest.raises(ValueError):
        o.result_layout = "sideways"  # type: ignore[assignment]
    assert o.result_layout == "optimized"


def test_fft_type_is_case_insensitive():
    """fft_type accepts any case and is stored upper-case."""
    assert FFTOptions(fft_type="c2r").fft_type == "C2R"


def test_dict_options_are_accepted():
    """A dict of fields becomes an FFTOptions; unknown keys raise TypeError naming them."""
    o = check_or_create_options(FFTOptions, {"fft_type": "R2C", "result_layout": "natural"}, "FFT options")
    assert o == FFTOptions(fft_type="R2C", result_layout="natural")
    with pytest.raises(TypeError, match="device_id"):
        check_or_create_options(FFTOptions, {"device_id": 1}, "FFT options")


@pytest.mark.parametrize(
    "kwargs, error, text",
    [
        ({"fft_type": "D2Z"}, ValueError, "'D2Z'"),
        ({"fft_type": 3}, TypeError, "3"),
        ({"inplace": 1}, TypeError, "inplace"),
        ({"last_axis_parity": "even-ish"}, ValueError, "even-ish"),
        ({"result_layout": "C"}, ValueError, "'C'"),
        ({"blocking": False}, ValueError, "False"),
        ({"logger": "root"}, TypeError, "root"),
        ({"allocator": object()}, TypeError, "memalloc"),
        ({"layout_fallback": "transpose"}, ValueError, "transpose"),
        ({"inplace": True, "fft_type": "R2C"}, ValueError, "R2C"),
        ({"overwrite_operand": "yes"}, TypeError, "overwrite_operand"),
    ],
)
def test_bad_options_raise(kwargs, error, text):
    """Every bad option value raises the right error type naming the value."""
    with pytest.raises(error, match=text):
        FFTOptions(**kwargs)


def test_logger_and_blocking_true_accepted():
    """A Logger and blocking=True are valid."""
    o = FFTOptions(logger=logging.getLogger("x"), blocking=True)
    assert o.blocking is True


def test_direction_values():
    """FFTDirection is FORWARD=-1, INVERSE=1 (cuFFT's signs)."""
    assert (FFTDirection.FORWARD, FFTDirection.INVERSE) == (-1, 1)


@pytest.mark.parametrize(
    "value, expected",
    [
        (FFTDirection.FORWARD, FFTDirection.FORWARD),
        (-1, FFTDirection.FORWARD),
        (1, FFTDirection.INVERSE),
        ("forward", FFTDirection.FORWARD),
        ("Inverse", FFTDirection.INVERSE),
        ("INVERSE", FFTDirection.INVERSE),
    ],
)
def test_direction_spellings(value, expected):
    """Directions are accepted as the enum, -1/1, or 'forward'/'inverse' in any case."""
    assert normalize_direction(value) is expected


@pytest.mark.parametrize(
    "value, error", [(0, ValueError), ("backward", ValueError), (True, TypeError), (1.0, TypeError)]
)
def test_bad_directions(value, error):
    """Anything else raises (TypeError for the wrong kind, ValueError for a wrong value) naming it."""
    with pytest.raises(error, match=repr(value).strip("'")):
        normalize_direction(value)
