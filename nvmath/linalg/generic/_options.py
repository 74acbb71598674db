"""Options of the generic matmul: :class:`MatmulOptions` (fields as nvmath-python 1.0's generic one).

A frozen, slotted, keyword-only dataclass validated in ``__post_init__``; a ``dict`` of its fields is
accepted wherever an options object is. Unlike nvmath-python, ``logger=None`` (the default) means the
named logger ``nvmath.linalg.generic``, never the root logger.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Literal

from nvmath._internal.memory import check_allocator
from nvmath._internal.options import check_blocking, check_bool, check_logger

__all__ = ["LOGGER_NAME", "MatmulOptions", "get_logger"]

LOGGER_NAME = "nvmath.linalg.generic"
"""The logger used when ``options.logger`` is ``None``."""


@dataclass(frozen=True, slots=True, kw_only=True)
class MatmulOptions:
    """Options of :class:`nvmath.linalg.Matmul` / :func:`nvmath.linalg.matmul`.

    Attributes:
        allocator: a memory manager following ``nvmath.memory.BaseCUDAMemoryManager`` (or its async
            variant) for the cuBLAS workspace and staging buffers; ``None`` uses the operands' package.
        blocking: ``True`` always waits for the GPU work; ``"auto"`` returns without waiting when the
            operands are on the GPU and run there (host operands always block).
        logger: a ``logging.Logger``; ``None`` means the ``nvmath.linalg.generic`` logger.
        inplace: write the result into ``c`` (``c`` required; it is returned).
    """

    allocator: Any = None
    blocking: Literal[True, "auto"] = "auto"
    logger: logging.Logger | None = None
    inplace: bool = False

    def __post_init__(self) -> None:
        check_allocator(self.allocator, "allocator")
        check_blocking(self.blocking)
        check_logger(self.logger)
        check_bool("inplace", self.inplace)


def get_logger(options: MatmulOptions) -> Any:
    """The logger of ``options`` (the ``nvmath.linalg.generic`` logger when ``None``)."""
    return logging.getLogger(LOGGER_NAME) if options.logger is None else options.logger
