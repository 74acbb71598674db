"""The exceptions of :mod:`nvmath.distributed.distribution`, in one place."""

from __future__ import annotations

__all__ = ["BindDistributionError", "ConvertDistributionError", "NotAnIntegerError"]


class BindDistributionError(ValueError):
    """A distribution cannot be bound to the given global shape (or local shape on this rank)."""


class ConvertDistributionError(ValueError):
    """A distribution cannot be converted exactly into the requested distribution type."""


class NotAnIntegerError(TypeError, ValueError):
    """A size, coordinate or rank is not an integer (or a shape is not a sequence of them).

    A ``TypeError`` by nature; also a ``ValueError`` because nvmath-python 1.0 raises ``ValueError``
    for these, so code catching either keeps working.
    """
