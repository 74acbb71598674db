"""Options of :mod:`nvmath.distributed.fft`: :class:`FFTOptions` (and :class:`FFTDirection`, shared
with :mod:`nvmath.fft`).

Fields, order and defaults follow nvmath-python 1.0's distributed ``FFTOptions``; like the
single-GPU options it is a mutable dataclass whose fields are checked where they are set. The
``redistribute`` field was called ``reshape`` in nvmath-python 0.9.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Literal

from nvmath._internal.options import MutableOptions, check_blocking, check_bool, check_in, check_logger
from nvmath.fft._options import FFT_TYPES, FFTDirection

__all__ = ["LOGGER_NAME", "FFTDirection", "FFTOptions"]

LOGGER_NAME = "nvmath.distributed.fft"
"""The logger used when ``FFTOptions.logger`` is ``None``."""


@dataclasses.dataclass(unsafe_hash=True)
class FFTOptions(MutableOptions):
    """Options of the distributed FFT.

    Attributes:
        fft_type: ``"C2C"``, ``"R2C"`` or ``"C2R"`` (any case); ``None`` picks R2C for real operands
            and C2C for complex ones.
        redistribute: ``True`` returns the result in the operand's distribution (cuFFTMp exchanges
            the data back); ``False`` returns it in the complementary slab (an X-slab input gives a
            Y-slab output and the reverse), saving one all-to-all.
        last_axis_parity: for C2R, whether the last output axis has ``2 * (m - 1)`` (``"even"``) or
            ``2 * m - 1`` (``"odd"``) elements.
        logger: a ``logging.Logger``; ``None`` selects the ``nvmath.distributed.fft`` logger.
        blocking: ``True`` or ``"auto"`` (return after enqueueing when the operand is on the GPU).
    """

    fft_type: Literal["C2C", "C2R", "R2C"] | None = None
    redistribute: bool = True
    last_axis_parity: Literal["even", "odd"] = "even"
    logger: Any = None
    blocking: Literal[True, "auto"] = "auto"

    def _check_field(self, name: str, value: Any) -> Any:
        if name == "fft_type" and value is not None:
            if not isinstance(value, str):
                raise TypeError(
                    f"fft_type must be one of {', '.join(map(repr, FFT_TYPES))} or None; "
                    f"got {type(value).__name__}: {value!r}"
                )
            value = value.upper()
            check_in(name, value, FFT_TYPES)
        elif name == "redistribute":
            check_bool(name, value)
        elif name == "last_axis_parity":
            check_in(name, value, ("even", "odd"))
        elif name == "logger":
            check_logger(value)
        elif name == "blocking":
            check_blocking(value)
        return value
