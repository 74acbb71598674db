"""Options and enums of :mod:`nvmath.fft`: :class:`FFTOptions`, :class:`FFTDirection`.

Field names, order and defaults follow nvmath-python 1.0, so ``FFTOptions(fft_type="C2R",
last_axis_parity="odd")`` written for it runs unchanged. Differences, all compatible with code
written for nvmath-python:

* :class:`FFTOptions` is a plain mutable dataclass as nvmath-python's (positional fields, assignment
  after construction). Fields are checked where they are set, the rules across fields when a planner
  takes the object, and the planner keeps a frozen snapshot
  (:class:`nvmath._internal.options.MutableOptions`). A ``dict`` of its fields is accepted wherever
  an options object is. :func:`nvmath.fft.irfft` never mutates the caller's options object.
* One extra field, ``layout_fallback``: ``"error"`` (the default, as nvmath-python) raises
  :class:`~nvmath._errors.UnsupportedLayoutError` for operand layouts cuFFT cannot describe;
  ``"copy"`` copies such operands into an internal buffer of a supported layout before each
  execution instead.
"""

from __future__ import annotations

import dataclasses
import enum
from typing import Any, Literal

from nvmath._internal.memory import check_allocator
from nvmath._internal.options import MutableOptions, check_blocking, check_bool, check_in, check_logger

__all__ = [
    "FFT_TYPES",
    "LAYOUT_FALLBACKS",
    "LOGGER_NAME",
    "FFTDirection",
    "FFTOptions",
    "normalize_direction",
]

LOGGER_NAME = "nvmath.fft"
"""The logger used when ``FFTOptions.logger`` is ``None`` (never the root logger)."""

FFT_TYPES: tuple[str, ...] = ("C2C", "C2R", "R2C")
"""The accepted values of ``FFTOptions.fft_type`` (any case)."""

LAYOUT_FALLBACKS: tuple[str, ...] = ("error", "copy")
"""The accepted values of ``FFTOptions.layout_fallback``."""


class FFTDirection(enum.IntEnum):
    """The direction of a transform (the sign of the exponent): cuFFT's ``CUFFT_FORWARD``/``INVERSE``."""

    FORWARD = -1
    INVERSE = 1


_DIRECTIONS: dict[Any, FFTDirection] = {
    FFTDirection.FORWARD: FFTDirection.FORWARD,
    FFTDirection.INVERSE: FFTDirection.INVERSE,
    "forward": FFTDirection.FORWARD,
    "inverse": FFTDirection.INVERSE,
}
_DIRECTION_HELP = "FFTDirection.FORWARD / FFTDirection.INVERSE, the ints -1 / 1, or 'forward' / 'inverse'"


def normalize_direction(value: Any) -> FFTDirection:
    """Return the :class:`FFTDirection` named by ``value``.

    Args:
        value: an :class:`FFTDirection`, the int ``-1`` or ``1``, or ``"forward"`` / ``"inverse"``
            in any case.

    Raises:
        TypeError: ``value`` is of another kind (a bool, a float, ...).
        ValueError: ``value`` is an int or string that names no direction.
    """
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise TypeError(f"direction must be {_DIRECTION_HELP}; got {type(value).__name__}: {value!r}")
    key = value.lower() if isinstance(value, str) else int(value)
    direction = _DIRECTIONS.get(key)
    if direction is None:
        raise ValueError(f"direction must be {_DIRECTION_HELP}; got {value!r}")
    return direction


@dataclasses.dataclass(unsafe_hash=True)
class FFTOptions(MutableOptions):
    """Options of :class:`nvmath.fft.FFT` and of the stateless FFT functions.

    Attributes:
        fft_type: ``"C2C"``, ``"R2C"`` or ``"C2R"`` (any case); ``None`` picks R2C for real operands
            and C2C for complex ones.
        inplace: write the result into the operand (C2C only). The result is the operand object.
        last_axis_parity: for C2R, whether the last output axis has ``2 * (m - 1)`` (``"even"``) or
            ``2 * m - 1`` (``"odd"``) elements, ``m`` being the operand's last transformed extent.
        result_layout: ``"optimized"`` (transformed axes innermost, fastest) or ``"natural"`` (the
            operand's axis order). Ignored in place.
        logger: a ``logging.Logger``; ``None`` selects the ``nvmath.fft`` logger.
        blocking: ``True`` (return when the result is ready) or ``"auto"`` (return after enqueueing
            the work when both the operand and the execution are on the GPU).
        allocator: a memory manager for the cuFFT workspace (see :mod:`nvmath.memory`); ``None`` uses
            the operand package's allocator. Ignored by CPU execution.
        layout_fallback: ``"error"`` raises :class:`~nvmath._errors.UnsupportedLayoutError` for
            layouts cuFFT cannot describe; ``"copy"`` copies the operand into a supported layout
            before each execution. Not an nvmath-python option.
        overwrite_operand: C2R on the GPU only: let cuFFT use the operand as its scratch (it
            overwrites a C2R's input) instead of copying it first, which saves a full pass over the
            operand. The operand's values are undefined afterwards, and ``FFT.execute()`` refuses to run
            again until :meth:`~nvmath.fft.FFT.reset_operand`. Other transforms, C2Rs that need several
            launches and operands with other data between their elements keep the copy. Not an
            nvmath-python option (``scipy.fft``'s ``overwrite_x``).
    """

    fft_type: Literal["C2C", "C2R", "R2C"] | None = None
    inplace: bool = False
    last_axis_parity: Literal["even", "odd"] = "even"
    result_layout: Literal["optimized", "natural"] = "optimized"
    logger: Any = None
    blocking: Literal[True, "auto"] = "auto"
    allocator: Any = None
    layout_fallback: Literal["error", "copy"] = "error"
    overwrite_operand: bool = False

    def _check_field(self, name: str, value: Any) -> Any:
        return _check_fft_option(name, value)

    def _check_together(self) -> None:
        if self.inplace and self.fft_type in ("R2C", "C2R"):
            raise ValueError(
                f"inplace=True is only supported for C2C transforms; got fft_type={self.fft_type!r}"
            )


def _check_fft_option(name: str, value: Any) -> Any:
    """Check and normalize one field of :class:`FFTOptions`."""
    if name == "fft_type":
        if value is None:
            return None
        if not isinstance(value, str):
            raise TypeError(
                f"fft_type must be one of {', '.join(map(repr, FFT_TYPES))} or None; "
                f"got {type(value).__name__}: {value!r}"
            )
        check_in("fft_type", value.upper(), FFT_TYPES)
        return value.upper()
    if name in ("inplace", "overwrite_operand"):
        check_bool(name, value)
    elif name == "last_axis_parity":
        check_in(name, value, ("even", "odd"))
    elif name == "result_layout":
        check_in(name, value, ("optimized", "natural"))
    elif name == "logger":
        check_logger(value)
    elif name == "blocking":
        check_blocking(value)
    elif name == "allocator":
        check_allocator(value, "allocator")
    elif name == "layout_fallback":
        check_in(name, value, LAYOUT_FALLBACKS)
    return value
