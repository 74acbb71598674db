"""MatmulOptions of the generic matmul: nvmath-python's fields, frozen and keyword-only, validated."""

from __future__ import annotations

import dataclasses
import logging

import pytest

from nvmath.linalg import MatmulOptions
from nvmath.linalg.generic._options import get_logger


def test_fields_and_defaults():
    """Fields (allocator, blocking, logger, inplace) with nvmath-python's defaults; frozen, keyword-only."""
    o = MatmulOptions()
    assert [f.name for f in dataclasses.fields(o)] == ["allocator", "blocking", "logger", "inplace"]
    assert (o.allocator, o.blocking, o.inplace) == (None, "auto", False)
    with pytest.raises(dataclasses.FrozenInstanceError):
        o.inplace = True  # type: ignore[misc]
    with pytest.raises(TypeError):
        MatmulOptions(None)  # type: ignore[misc]


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"blocking": False}, ValueError),
        ({"inplace": 1}, TypeError),
        ({"logger": "x"}, TypeError),
        ({"allocator": object()}, TypeError),
    ],
)
def test_bad_values(kwargs, error):
    """Bad field values raise the documented error type naming the field."""
    with pytest.raises(error, match=next(iter(kwargs))):
        MatmulOptions(**kwargs)


def test_logger_default_is_named():
    """logger=None means the nvmath.linalg.generic logger, never the root logger."""
    assert get_logger(MatmulOptions()).name == "nvmath.linalg.generic"
    mine = logging.getLogger("mine")
    assert get_logger(MatmulOptions(logger=mine)) is mine
