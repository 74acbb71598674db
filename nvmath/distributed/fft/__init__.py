"""Distributed FFTs on cuFFTMp (in progress).

Available: :class:`FFTOptions`, :class:`FFTDirection`, and the pure slab planning rules
(``nvmath.distributed.fft._traits``). The transforms themselves -- :func:`fft`, :func:`ifft`,
:func:`rfft`, :func:`irfft`, :class:`FFT`, :func:`allocate_operand` -- are not implemented yet: they
raise :class:`NotImplementedError` and are not in ``__all__``.
"""

from __future__ import annotations

from typing import Any, NoReturn

from ._options import FFTDirection, FFTOptions

__all__ = ["FFTDirection", "FFTOptions"]

_NOT_YET = (
    "nvmath.distributed.fft.{} is not implemented yet (the cuFFTMp planner has not landed; see "
    "docs/distributed.rst). Use nvmath-python's nvmath.distributed.fft meanwhile."
)


def _not_yet(name: str) -> NoReturn:
    raise NotImplementedError(_NOT_YET.format(name))


def fft(operand: Any, /, *args: Any, **kwargs: Any) -> NoReturn:
    """Not implemented yet (raises :class:`NotImplementedError`)."""
    _not_yet("fft")


def ifft(operand: Any, /, *args: Any, **kwargs: Any) -> NoReturn:
    """Not implemented yet (raises :class:`NotImplementedError`)."""
    _not_yet("ifft")


def rfft(operand: Any, /, *args: Any, **kwargs: Any) -> NoReturn:
    """Not implemented yet (raises :class:`NotImplementedError`)."""
    _not_yet("rfft")


def irfft(operand: Any, /, *args: Any, **kwargs: Any) -> NoReturn:
    """Not implemented yet (raises :class:`NotImplementedError`)."""
    _not_yet("irfft")


def allocate_operand(shape: Any, package: Any, *args: Any, **kwargs: Any) -> NoReturn:
    """Not implemented yet (raises :class:`NotImplementedError`)."""
    _not_yet("allocate_operand")


class FFT:
    """Not implemented yet: constructing one raises :class:`NotImplementedError`."""

    def __init__(self, operand: Any, /, *args: Any, **kwargs: Any):
        _not_yet("FFT")
