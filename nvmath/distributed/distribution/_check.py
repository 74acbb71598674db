"""Validation of the integers and shapes that distributions are built from.

Every error names the argument, the value given and what is allowed.
"""

from __future__ import annotations

import numbers
from collections.abc import Iterable, Mapping
from collections.abc import Set as AbstractSet
from typing import Any

from ._errors import NotAnIntegerError

__all__ = ["as_extent", "as_int", "as_int_tuple", "as_shape"]


def as_int(value: Any, name: str) -> int:
    """Return ``value`` as a Python ``int``; bools, floats and other non-integers are refused."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise NotAnIntegerError(f"{name} must be an integer, got {value!r} ({type(value).__name__})")
    return int(value)


def as_extent(value: Any, name: str, minimum: int) -> int:
    """Return ``value`` as an ``int`` no smaller than ``minimum``."""
    result = as_int(value, name)
    if result < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {result}")
    return result


def as_int_tuple(values: Any, name: str, minimum: int, ndim: int | None = None) -> tuple[int, ...]:
    """Return a non-empty sequence of integers (each >= ``minimum``) as a tuple.

    Args:
        values: the sequence (a list, tuple or 1-D array; not a string).
        name: the argument's name, for the error messages.
        minimum: the smallest value allowed for each element.
        ndim: the required length, or None for any length >= 1.
    """
    items = _ordered_items(values, name)
    if not items:
        raise ValueError(f"{name} must have at least one element, got {values!r}")
    if ndim is not None and len(items) != ndim:
        raise ValueError(f"{name} must have {ndim} elements, got {len(items)}: {values!r}")
    return tuple(as_extent(item, f"{name}[{i}]", minimum) for i, item in enumerate(items))


def as_shape(values: Any, name: str = "global_shape", ndim: int | None = None) -> tuple[int, ...]:
    """A global (array) shape: a non-empty sequence of positive integers."""
    return as_int_tuple(values, name, 1, ndim)


def _ordered_items(values: Any, name: str) -> tuple[Any, ...]:
    """The elements of an ordered collection (sequence or 1-D array); NotAnIntegerError for anything else."""
    unordered = (str, bytes, AbstractSet, Mapping)
    if isinstance(values, unordered) or not isinstance(values, Iterable):
        raise NotAnIntegerError(
            f"{name} must be a sequence of integers, got {values!r} ({type(values).__name__})"
        )
    try:
        return tuple(values)
    except TypeError:  # a 0-d array is Iterable but cannot be iterated
        raise NotAnIntegerError(f"{name} must be a sequence of integers, got {values!r}") from None
