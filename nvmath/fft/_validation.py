"""Argument checks of the stateless FFT functions that need no operand wrapping and no driver.

Kept apart from :mod:`nvmath.fft._stateless` (which only sequences key -> cache -> planner) so the
checks read in one place and cost nothing on the cached fast path beyond what they must.
"""

from __future__ import annotations

from typing import Any

from nvmath.fft._options import FFTDirection, normalize_direction

__all__ = ["CHECK_DTYPES", "check_dtype_option", "check_inverse"]

CHECK_DTYPES = ("complex", "real", None)
"""Accepted ``check_dtype`` values of :func:`~nvmath.fft.fft` / :func:`~nvmath.fft.ifft`."""


def check_dtype_option(check_dtype: str | None, function: str) -> None:
    """Refuse a ``check_dtype`` that is not one of :data:`CHECK_DTYPES`.

    Raises:
        ValueError: an unknown value (it used to turn the dtype check off silently).
    """
    if check_dtype not in CHECK_DTYPES:
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
