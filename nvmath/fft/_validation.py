"""Argument checks of the stateless FFT functions that need no operand wrapping and no driver.

Kept apart from :mod:`nvmath.fft._stateless` (which only sequences key -> cache -> planner) so the
checks read in one place and cost nothing on the cached fast path beyond what they must.
"""

from __future__ import annotations

from typing import Any

from nvmath.fft._options import FFTDirection, normalize_direction

__all__ = ["CHECK_DTYPES", "check_inverse", "check_kind"]

CHECK_DTYPES = ("complex", "real", None)
"""Accepted ``check_dtype`` values of :func:`~nvmath.fft.fft` / :func:`~nvmath.fft.ifft`."""

_COMPLEX = frozenset({"complex32", "complex64", "complex128"})


def check_kind(dtype: str, check_dtype: str | None, function: str) -> None:
    """Check the operand's dtype name against ``check_dtype`` (and ``check_dtype`` itself).

    Raises:
        ValueError: the operand is not of the required kind, or ``check_dtype`` is not one of
            :data:`CHECK_DTYPES` (an unknown value never turns the check off silently).
    """
    if check_dtype == "complex":
        if dtype not in _COMPLEX:
            raise ValueError(
                f"{function}() needs a complex operand; got {dtype} (use rfft() for real operands)"
            )
    elif check_dtype == "real":
        if dtype in _COMPLEX:
            raise ValueError(
                f"{function}() needs a real operand; got {dtype} (use fft() for complex operands)"
            )
    elif check_dtype is not None:
        raise ValueError(f"{function}(): check_dtype={check_dtype!r} is not one of {list(CHECK_DTYPES)}")


def check_inverse(direction: Any) -> FFTDirection:
    """The ``direction`` of :func:`~nvmath.fft.ifft`: INVERSE (any of its spellings) and nothing else.

    ``ifft`` keeps nvmath-python's ``direction`` keyword (there ``ifft`` is ``fft`` with
    ``direction=INVERSE`` bound), but a forward direction would silently run a forward transform
    under the name ``ifft``: it is refused.

    Raises:
        ValueError: a forward (or unknown) direction.
    """
    if direction is FFTDirection.INVERSE:
        return direction
    d = normalize_direction(direction)
    if d is not FFTDirection.INVERSE:
        raise ValueError(
            f"ifft() computes the inverse transform; got direction={direction!r} -- call fft() for a forward "
            "transform (or fft(x, direction=...) to choose)"
        )
    return d
