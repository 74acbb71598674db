"""nvmath.distributed.fft.FFTOptions: nvmath-python 1.0's fields, order and defaults; checked where set;
and the package's exports."""

from __future__ import annotations

import dataclasses
import logging

import pytest

import nvmath.distributed.fft as dfft
from nvmath.fft import FFTDirection


def test_fields_order_and_defaults():
    """Fields in nvmath-python's order with its defaults; positional construction works."""
    fields = [(f.name, f.default) for f in dataclasses.fields(dfft.FFTOptions)]
    assert fields == [("fft_type", None), ("redistribute", True), ("last_axis_parity", "even"),
                      ("logger", None), ("blocking", "auto")]  # fmt: skip
    o = dfft.FFTOptions("c2r", False, "odd")
    assert (o.fft_type, o.redistribute, o.last_axis_parity) == ("C2R", False, "odd")
    assert dfft.FFTDirection is FFTDirection


@pytest.mark.parametrize(
    ("field", "value", "error"),
    [
        ("fft_type", "R2R", ValueError),
        ("fft_type", 3, TypeError),
        ("redistribute", 1, TypeError),
        ("last_axis_parity", "three", ValueError),
        ("logger", "log", TypeError),
        ("blocking", False, ValueError),
    ],
)
def test_bad_values_raise_where_set(field, value, error):
    """A bad value raises at construction and at assignment, naming the field."""
    with pytest.raises(error, match=field):
        dfft.FFTOptions(**{field: value})
    options = dfft.FFTOptions()
    with pytest.raises(error, match=field):
        setattr(options, field, value)


def test_good_values_are_kept():
    """A logger, blocking=True and each parity are accepted."""
    logger = logging.getLogger("x")
    o = dfft.FFTOptions(logger=logger, blocking=True, last_axis_parity="odd")
    assert (o.logger, o.blocking) == (logger, True)


@pytest.mark.parametrize("name", ["fft", "ifft", "rfft", "irfft", "FFT", "allocate_operand"])
def test_transforms_are_exported(name):
    """The transforms exist and are exported (their behaviour: test_planner.py, test_allocate.py)."""
    assert name in dfft.__all__ and callable(getattr(dfft, name))
