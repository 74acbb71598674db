"""Options of the dense solvers: :class:`DirectSolverOptions` and :class:`SolverOptions`.

``DirectSolverOptions`` has the fields of nvmath-python 1.0 (``allocator``, ``blocking``, ``logger``,
``handle``, ``inplace_a``, ``inplace_b``) plus three of ours, last, with defaults that keep the 1.0
results: ``algorithm`` (the batched-kernel choice, see :mod:`nvmath.linalg._solvers._dispatch`),
``check`` (when to read the library's ``info`` and raise :class:`nvmath.LinAlgError`: ``"auto"``,
by default, wherever that costs no extra synchronization) and
``streams`` (how many CUDA streams a loop of per-matrix calls fans out to). The other
planners (Cholesky, LU, QR, eigh, SVD, least squares, inverse) share :class:`SolverOptions`.

Both are frozen, slotted, keyword-only dataclasses validated in ``__post_init__``; a ``dict`` of
fields is accepted wherever an options object is. Unlike nvmath-python, ``logger=None`` means the
named logger ``nvmath.linalg.solvers`` (never the root logger).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Literal

from nvmath._internal.memory import check_allocator
from nvmath._internal.options import check_blocking, check_bool, check_in, check_int, check_logger
from nvmath.linalg._solvers._dispatch import MAX_STREAMS

__all__ = [
    "ALGORITHMS",
    "LOGGER_NAME",
    "DirectSolverOptions",
    "SolverOptions",
]

LOGGER_NAME = "nvmath.linalg.solvers"
"""The logger used when ``options.logger`` is ``None``."""

ALGORITHMS: tuple[str, ...] = ("auto", "batched", "looped", "gesvda")
"""Accepted ``algorithm`` values; ``"gesvda"`` applies to the SVD only (approximate, tall matrices)."""


def _check_handle(handle: Any) -> None:
    if handle is not None and (isinstance(handle, bool) or not isinstance(handle, int)):
        raise TypeError(
            f"handle must be a cusolverDn handle (int) or None; got {type(handle).__name__}: {handle!r}"
        )
    if isinstance(handle, int) and handle < 0:
        raise ValueError(f"handle must be a non-negative int; got {handle}")


def _check_common(options: Any) -> None:
    check_allocator(options.allocator, "allocator")
    check_blocking(options.blocking)
    check_logger(options.logger)
    _check_handle(options.handle)
    if not isinstance(options.algorithm, str):
        raise TypeError(
            f"algorithm must be a str; got {type(options.algorithm).__name__}: {options.algorithm!r}"
        )
    check_in("algorithm", options.algorithm, ALGORITHMS)
    if not (options.check is True or options.check is False or options.check == "auto"):
        raise TypeError(
            f"check must be True, False or 'auto'; got {type(options.check).__name__}: {options.check!r}"
        )
    if options.streams is not None:
        if isinstance(options.streams, bool) or not isinstance(options.streams, int):
            raise TypeError(
                f"streams must be None (automatic) or an int from 1 to {MAX_STREAMS}; "
                f"got {type(options.streams).__name__}: {options.streams!r}"
            )
        check_int("streams", options.streams, minimum=1, maximum=MAX_STREAMS)


@dataclass(frozen=True, slots=True, kw_only=True)
class DirectSolverOptions:
    """Options of :class:`~nvmath.linalg.DirectSolver` (nvmath-python 1.0 fields first).

    Attributes:
        allocator: a memory manager following ``nvmath.memory.BaseCUDAMemoryManager`` (or its async
            variant) for the library workspaces; ``None`` uses the operands' package allocator.
        blocking: ``True`` always waits for the GPU work; ``"auto"`` returns without waiting when the
            operands are on the GPU (host operands always block).
        logger: a ``logging.Logger``; ``None`` means the ``nvmath.linalg.solvers`` logger.
        handle: a ``cusolverDnHandle_t`` (int) to use instead of nvmath's per-thread handle.
        inplace_a: overwrite ``a`` with the LU factors (``factorize()``).
        inplace_b: overwrite ``b`` with the solution (``solve()`` returns ``b``).
        algorithm: ``"auto"`` (size-based), ``"batched"`` (cuBLAS ``getrfBatched``/``getrsBatched``)
            or ``"looped"`` (cuSOLVER ``Xgetrf``/``Xgetrs`` per matrix). GPU only.
        check: when to read ``info`` after ``factorize()`` and raise :class:`nvmath.LinAlgError`
            naming the singular matrices: ``"auto"`` (default) where it adds no synchronization --
            CPU execution, host operands or ``blocking=True``; ``True`` always (on the GPU with
            ``blocking="auto"`` this synchronizes the stream); ``False`` never (call ``check()``). A
            matrix ``a`` holding NaN or Inf is such a failure; when nothing raises its results are NaN
            (the non-finite policy of docs/solvers.rst).
        streams: how many CUDA streams a loop of per-matrix library calls (the looped kernels) fans out
            to: ``None`` picks by size (:data:`~nvmath.linalg._solvers._dispatch.STREAM_LANES`), ``1``
            keeps every call on the caller's stream, at most 32. The extra streams are nvmath's own,
            forked from and joined back into the caller's stream, so the results are ordered on it as
            with one stream. One stream is used anyway under CUDA graph capture, on green-context
            streams and with ``handle``. Applies to the LU, solve, inverse, QR and Cholesky loops
            (eigh's ``Xsyevd`` and the SVD's ``gesvdj`` loops stay on one stream). GPU only.
    """

    allocator: Any = None
    blocking: Literal[True, "auto"] = "auto"
    logger: logging.Logger | None = None
    handle: int | None = None
    inplace_a: bool = False
    inplace_b: bool = False
    algorithm: str = "auto"
    check: bool | Literal["auto"] = "auto"
    streams: int | None = None

    def __post_init__(self) -> None:
        _check_common(self)
        check_bool("inplace_a", self.inplace_a)
        check_bool("inplace_b", self.inplace_b)


@dataclass(frozen=True, slots=True, kw_only=True)
class SolverOptions:
    """Options of the dense-solver planners (Cholesky, LU, QR, eigh, SVD, least squares, inverse).

    Attributes:
        allocator: memory manager for the library workspaces (see :class:`DirectSolverOptions`).
        blocking: ``True`` or ``"auto"`` (see :class:`DirectSolverOptions`).
        logger: a ``logging.Logger``; ``None`` means the ``nvmath.linalg.solvers`` logger.
        handle: a ``cusolverDnHandle_t`` (int) to use instead of nvmath's per-thread handle.
        algorithm: ``"auto"``, ``"batched"``, ``"looped"`` (see :mod:`~nvmath.linalg._solvers._dispatch`)
            or, for the SVD only, ``"gesvda"`` (approximate, tall matrices). GPU only.
        check: when to read ``info`` after each execution and raise :class:`nvmath.LinAlgError` for
            the matrices that failed: ``"auto"`` (default) where it adds no synchronization (CPU
            execution, host operands, ``blocking=True``), ``True`` always (a stream synchronization
            on the GPU), ``False`` never (call the planner's ``check()`` when convenient). A matrix
            ``a`` holding NaN or Inf is such a failure; when nothing raises its results are NaN.
        streams: how many CUDA streams a loop of per-matrix calls fans out to (see
            :class:`DirectSolverOptions`; ``None``: by size, ``1``: the caller's stream only).
    """

    allocator: Any = None
    blocking: Literal[True, "auto"] = "auto"
    logger: logging.Logger | None = None
    handle: int | None = None
    algorithm: str = "auto"
    check: bool | Literal["auto"] = "auto"
    streams: int | None = None

    def __post_init__(self) -> None:
        _check_common(self)
