"""Tests of nvmath._internal.options: option creation, validators and memory_limit parsing."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import pytest

from nvmath._internal import options as opt


@dataclass(frozen=True, kw_only=True)
class DemoOptions:
    """A small options class built like the real ones."""

    layout: str = "optimized"
    blocking: object = "auto"
    workers: int = 1
    logger: object = None
    tags: tuple = field(default=())

    def __post_init__(self):
        opt.check_in("layout", self.layout, ("optimized", "natural"))
        opt.check_blocking(self.blocking)
        opt.check_positive_int("workers", self.workers)
        opt.check_logger(self.logger)


def test_none_gives_defaults():
    """None creates the default options object."""
    assert opt.check_or_create_options(DemoOptions, None, "demo options") == DemoOptions()


def test_instance_is_returned_unchanged():
    """An instance of the class is returned as is (same object)."""
    o = DemoOptions(layout="natural")
    assert opt.check_or_create_options(DemoOptions, o, "demo options") is o


def test_dict_is_converted():
    """A dict is passed to the class as keyword arguments."""
    o = opt.check_or_create_options(DemoOptions, {"layout": "natural", "workers": 3}, "demo options")
    assert (o.layout, o.workers) == ("natural", 3)


def test_dict_with_unknown_key_names_the_fields():
    """Unknown dict keys raise TypeError naming the option object and its fields."""
    with pytest.raises(TypeError, match=r"demo options: unknown field\(s\) 'layuot'.*layout, blocking"):
        opt.check_or_create_options(DemoOptions, {"layuot": "x"}, "demo options")


def test_wrong_kind_names_accepted_kinds():
    """Another kind of value raises TypeError naming the object and the accepted kinds."""
    with pytest.raises(
        TypeError, match=r"demo options must be a DemoOptions object, a dict of its fields or None; got list"
    ):
        opt.check_or_create_options(DemoOptions, [1], "demo options")


def test_post_init_validation_runs_for_dicts():
    """Validation in __post_init__ applies to dict input too and names the allowed set."""
    with pytest.raises(ValueError, match=r"layout must be one of 'optimized', 'natural'; got 'weird'"):
        opt.check_or_create_options(DemoOptions, {"layout": "weird"}, "demo options")


def test_options_are_frozen():
    """Options objects cannot be mutated after creation."""
    o = DemoOptions()
    with pytest.raises(AttributeError):
        o.layout = "natural"  # type: ignore[misc]


def test_check_in_does_not_confuse_bool_and_int():
    """check_in treats True and 1 as different values."""
    opt.check_in("x", True, (True, "auto"))
    with pytest.raises(ValueError):
        opt.check_in("x", 1, (True, "auto"))


@pytest.mark.parametrize("value", [0, -3])
def test_check_positive_int_range(value):
    """check_positive_int rejects values below 1 with ValueError."""
    with pytest.raises(ValueError, match=">= 1"):
        opt.check_positive_int("workers", value)


@pytest.mark.parametrize("value", [1.0, "2", True, None])
def test_check_int_kind(value):
    """check_int rejects non-int values (bools included) with TypeError."""
    with pytest.raises(TypeError, match="must be an int"):
        opt.check_int("n", value)


def test_check_int_bounds_and_optional():
    """check_int honours min/max; check_optional_positive_int accepts None."""
    opt.check_int("n", 5, minimum=0, maximum=5)
    with pytest.raises(ValueError, match="<= 5"):
        opt.check_int("n", 6, maximum=5)
    opt.check_optional_positive_int("n", None)
    opt.check_nonnegative_int("n", 0)


def test_check_type_and_bool():
    """check_type and check_bool raise TypeError naming the expected kinds."""
    opt.check_type("x", 1, (int, str))
    with pytest.raises(TypeError, match="x must be int or str; got float"):
        opt.check_type("x", 1.5, (int, str))
    with pytest.raises(TypeError, match="True or False"):
        opt.check_bool("flag", 1)


@pytest.mark.parametrize(("value", "look_alike"), [(True, 1), ("auto", "Auto")])
def test_blocking_accepts(value, look_alike):
    """blocking accepts exactly True and 'auto' (the check returns None), while their closest
    look-alikes (1, 'Auto') are refused with the offending value in the message."""
    assert opt.check_blocking(value) is None
    assert opt.check_blocking(value, "options.blocking") is None
    with pytest.raises(ValueError, match=f"blocking must be True or 'auto'; got {look_alike!r}"):
        opt.check_blocking(look_alike)


@pytest.mark.parametrize("value", [False, "yes", 1, None])
def test_blocking_rejects(value):
    """blocking rejects anything but True and 'auto'."""
    with pytest.raises(ValueError, match="blocking must be True or 'auto'"):
        opt.check_blocking(value)


def test_logger_validation():
    """logger accepts None, a Logger or a LoggerAdapter and rejects other values."""
    opt.check_logger(None)
    opt.check_logger(logging.getLogger("x"))
    opt.check_logger(logging.LoggerAdapter(logging.getLogger("x"), {}))
    with pytest.raises(TypeError, match="logging.Logger"):
        DemoOptions(logger="log")


GiB = 1 << 30


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (1234, 1234),
        (0.5, 8 * GiB),
        (1.0, 16 * GiB),
        ("80%", int(0.8 * 16 * GiB)),
        ("100 %", 16 * GiB),
        ("512 MiB", 512 << 20),
        ("512mib", 512 << 20),
        ("2gb", 2_000_000_000),
        ("2 GB", 2_000_000_000),
        ("1.5 GiB", int(1.5 * GiB)),
        ("100 b", 100),
        ("3kb", 3000),
        ("4 KiB", 4096),
        ("1 TiB", 1 << 40),
    ],
)
def test_parse_memory_limit(value, expected):
    """memory_limit values convert to bytes given the device's total memory."""
    assert opt.parse_memory_limit(value, 16 * GiB) == expected


@pytest.mark.parametrize(
    ("value", "match"),
    [
        (0, "bytes must be > 0"),
        (-5, "bytes must be > 0"),
        (0.0, r"fraction in \(0, 1\]"),
        (1.5, r"fraction in \(0, 1\]"),
        (float("nan"), r"fraction in \(0, 1\]"),
        ("0%", r"percentage must be in \(0, 100\]"),
        ("150%", r"percentage must be in \(0, 100\]"),
        ("12 parsecs", "not understood"),
        ("512", "not understood"),
        ("5 ib", "needs a prefix"),
        ("0.1 b", "at least one byte"),
    ],
)
def test_parse_memory_limit_errors(value, match):
    """Invalid memory_limit values raise ValueError saying what is allowed."""
    with pytest.raises(ValueError, match=match):
        opt.parse_memory_limit(value, GiB)


@pytest.mark.parametrize("value", [True, None, [1], b"1gb"])
def test_memory_limit_wrong_kind(value):
    """memory_limit of the wrong kind raises TypeError listing the accepted forms."""
    with pytest.raises(TypeError, match="memory_limit must be an int number of bytes"):
        opt.check_memory_limit(value)


def test_memory_limit_needs_positive_total_for_fractions():
    """A fraction needs a positive total; a byte count does not use it."""
    with pytest.raises(ValueError, match="total_bytes"):
        opt.parse_memory_limit("50%", 0)
    assert opt.parse_memory_limit(10, 0) == 10
