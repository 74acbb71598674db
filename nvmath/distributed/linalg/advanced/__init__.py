"""Distributed matrix multiplication on cuBLASMp (in progress).

Available: :class:`MatmulOptions`, :class:`MatmulAlgoType`, and the pure mapping of distributions
onto cuBLASMp's block-cyclic matrix descriptors (``nvmath.distributed.linalg.advanced._traits``).
:func:`matmul` and :class:`Matmul` are not implemented yet: they raise
:class:`NotImplementedError` and are not in ``__all__``.
"""

from __future__ import annotations

from typing import Any, NoReturn

from ._options import MatmulAlgoType, MatmulOptions

__all__ = ["MatmulAlgoType", "MatmulOptions"]

_NOT_YET = (
    "nvmath.distributed.linalg.advanced.{} is not implemented yet (the cuBLASMp planner has not landed; "
    "see docs/distributed.rst)"
)


def matmul(a: Any, b: Any, /, *args: Any, **kwargs: Any) -> NoReturn:
    """Not implemented yet (raises :class:`NotImplementedError`)."""
    raise NotImplementedError(_NOT_YET.format("matmul"))


class Matmul:
    """Not implemented yet: constructing one raises :class:`NotImplementedError`."""

    def __init__(self, a: Any, b: Any, /, *args: Any, **kwargs: Any):
        raise NotImplementedError(_NOT_YET.format("Matmul"))
