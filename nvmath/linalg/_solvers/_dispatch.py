"""Which GPU kernel family runs a dense-solver plan: one batched call, or a loop of per-matrix calls.

``algorithm="auto"`` picks by size from :data:`LIMITS`; ``"batched"`` / ``"looped"`` force a family
(``ValueError`` when the batched kernel cannot take the size); ``"gesvda"`` selects cuSOLVER's
approximate ``gesvdaStridedBatched`` for the SVD of tall matrices. The choice is logged at DEBUG
with its reason, and is visible as ``planner.algorithm`` after ``plan()``.

=============  ===========================================  ==================================
operation      batched kernel (auto: batch > 1 and ...)      looped (per matrix) kernel
=============  ===========================================  ==================================
cholesky       cusolverDn ``potrfBatched`` (any n)            ``Xpotrf``
cho_solve      cusolverDn ``potrsBatched`` (nrhs == 1)        ``Xpotrs``
lu / solve     cuBLAS ``getrfBatched``/``getrsBatched``       ``getrf``/``getrs``; DirectSolver:
               (n <= 256)                                     ``Xgetrf``/``Xgetrs``
inv            cuBLAS ``getrfBatched``/``getriBatched``       ``getrf`` + ``getrs`` on identity
               (n <= 256)
qr             cuBLAS ``geqrfBatched`` (m >= n, n <= 64);     ``Xgeqrf``; Q by ``orgqr``
               Q by nvmath's kernel (m <= 64), else orgqr
eigh           ``syevjBatched`` (n <= 32), else               ``Xsyevd``
               ``XsyevBatched`` (n <= 512)
svd            ``gesvdjBatched`` (m, n <= 32)                 ``gesvdj``
lstsq          cuBLAS ``gelsBatched`` (always; m >= n)        --
=============  ===========================================  ==================================

A loop of per-matrix calls (the looped kernels above, the ``Xpotrs`` solves of several right-hand
sides, and QR's ``orgqr``) is fanned out over several CUDA streams
(:mod:`~nvmath.linalg._solvers._fanout`): :func:`choose_lanes` picks how many from
:data:`STREAM_LANES` (``options.streams=None``) or takes ``options.streams``, and logs the choice
at DEBUG next to the kernel choice.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from nvmath._internal.logging import debug

__all__ = ["LIMITS", "MAX_STREAMS", "STREAM_LANES", "Choice", "choose", "choose_lanes"]

LIMITS: dict[str, int] = {
    "lu": 256,
    "inv": 256,
    "qr": 64,
    "eigh_jacobi": 32,
    "eigh_batched": 512,
    "svd_jacobi": 32,
    "orgqr_kernel": 64,
}
"""Largest matrix order for which ``"auto"`` picks the batched kernel (tuned by the benchmarks);
``orgqr_kernel``: most rows for which ``Q`` of a batched QR is formed by nvmath's kernel, not by one
``orgqr`` call per matrix (``0`` always uses ``orgqr``)."""

STREAM_LANES: dict[str, int] = {"large_order": 128, "large": 8, "small": 4}
"""Streams of a loop of per-matrix calls when ``options.streams`` is ``None``: ``large`` for matrices of
order >= ``large_order``, else ``small`` (never more than the batch). Assign new values to retune."""

MAX_STREAMS = 32
"""The largest accepted ``options.streams``."""

_HARD = {"eigh_jacobi": 32, "svd_jacobi": 32}  # what the batched Jacobi kernels accept at all


@dataclass(frozen=True)
class Choice:
    """A kernel choice.

    Attributes:
        algorithm: ``"batched"``, ``"looped"`` or ``"gesvda"``.
        kernel: the library routine(s), for logs and reports.
        reason: why it was chosen.
    """

    algorithm: str
    kernel: str
    reason: str


def _cannot(op: str, why: str) -> ValueError:
    return ValueError(f"algorithm='batched' is not available for this {op}: {why}; use 'auto' or 'looped'")


def _batched_ok(op: str, rows: int, cols: int, nrhs: int) -> tuple[str, str] | str:
    """``(kernel, limit description)`` if a batched kernel can take the size, else why not."""
    n = max(rows, cols)
    if op == "cholesky":
        return "potrfBatched", "any n"
    if op == "cho_solve":
        return ("potrsBatched", "nrhs == 1") if nrhs == 1 else f"potrsBatched needs nrhs == 1 (got {nrhs})"
    if op in ("lu", "direct"):
        return "cublas getrfBatched/getrsBatched", f"n <= {LIMITS['lu']}"
    if op == "inv":
        return "cublas getrfBatched/getriBatched", f"n <= {LIMITS['inv']}"
    if op == "qr":
        if rows < cols:
            return f"cublas geqrfBatched needs rows >= cols (got {rows}x{cols})"
        return "cublas geqrfBatched", f"n <= {LIMITS['qr']}"
    if op == "eigh":
        if n <= _HARD["eigh_jacobi"]:
            return "syevjBatched", f"n <= {_HARD['eigh_jacobi']}"
        return "XsyevBatched", f"n <= {LIMITS['eigh_batched']}"
    if op == "svd":
        if n > _HARD["svd_jacobi"]:
            return f"gesvdjBatched needs rows, cols <= {_HARD['svd_jacobi']} (got {rows}x{cols})"
        return "gesvdjBatched", f"rows, cols <= {_HARD['svd_jacobi']}"
    raise ValueError(f"unknown operation {op!r}")


_LOOPED = {
    "cholesky": "Xpotrf",
    "cho_solve": "Xpotrs",
    "lu": "getrf/getrs",
    "direct": "Xgetrf/Xgetrs",
    "inv": "getrf + getrs(identity)",
    "qr": "Xgeqrf",
    "eigh": "Xsyevd",
    "svd": "gesvdj",
}


def _auto_batched(op: str, rows: int, cols: int, kernel: str) -> bool:
    n = max(rows, cols)
    if op in ("cholesky", "cho_solve"):
        return True
    if op in ("lu", "direct"):
        return n <= LIMITS["lu"]
    if op == "inv":
        return n <= LIMITS["inv"]
    if op == "qr":
        return n <= LIMITS["qr"]
    if op == "eigh":
        return n <= (LIMITS["eigh_jacobi"] if kernel == "syevjBatched" else LIMITS["eigh_batched"])
    return n <= LIMITS["svd_jacobi"]


def choose(
    op: str, *, rows: int, cols: int, batch: int, algorithm: str = "auto", nrhs: int = 1, logger: Any = None
) -> Choice:
    """Choose the kernel family of a plan.

    Args:
        op: ``"cholesky"``, ``"cho_solve"``, ``"lu"``, ``"direct"``, ``"inv"``, ``"qr"``, ``"eigh"``
            or ``"svd"``.
        rows, cols: the matrix size.
        batch: the number of matrices.
        algorithm: ``options.algorithm``.
        nrhs: right-hand sides (``cho_solve``).
        logger: where to log the choice (DEBUG).

    Raises:
        ValueError: a forced choice that the sizes do not allow.
    """
    if algorithm == "gesvda":
        if op != "svd":
            raise ValueError(f"algorithm='gesvda' applies to the SVD only, not to {op}")
        if rows < cols:
            raise ValueError(f"algorithm='gesvda' needs rows >= cols (tall matrices); got {rows}x{cols}")
        choice = Choice("gesvda", "gesvdaStridedBatched", "requested (approximate, tall matrices)")
    elif algorithm == "looped":
        choice = Choice("looped", _LOOPED[op], "requested")
    else:
        ok = _batched_ok(op, rows, cols, nrhs)
        if algorithm == "batched":
            if isinstance(ok, str):
                raise _cannot(op, ok)
            choice = Choice("batched", ok[0], "requested")
        elif isinstance(ok, str):
            choice = Choice("looped", _LOOPED[op], ok)
        elif batch > 1 and _auto_batched(op, rows, cols, ok[0]):
            choice = Choice("batched", ok[0], f"batch {batch} > 1 and {ok[1]}")
        else:
            why = "one matrix" if batch == 1 else f"{rows}x{cols} is above the batched limit ({ok[1]})"
            choice = Choice("looped", _LOOPED[op], why)
    if logger is not None:
        debug(
            logger,
            "%s %dx%d, batch %d: %s (%s; %s)",
            op,
            rows,
            cols,
            batch,
            choice.kernel,
            choice.algorithm,
            choice.reason,
        )
    return choice


def choose_lanes(
    op: str,
    *,
    rows: int,
    cols: int,
    batch: int,
    streams: int | None = None,
    user_handle: bool = False,
    logger: Any = None,
) -> int:
    """How many streams (lanes) a plan's loops of per-matrix calls fan out to.

    Args:
        op: the operation (for the log).
        rows, cols: the matrix size.
        batch: the number of matrices (jobs of a loop).
        streams: ``options.streams`` (``None``: by size, from :data:`STREAM_LANES`).
        user_handle: whether ``options.handle`` was given (its stream only: one lane).
        logger: where to log the choice (DEBUG).
    """
    n = max(rows, cols)
    if user_handle:
        lanes, why = 1, "options.handle given"
    elif batch < 2:
        lanes, why = 1, "one matrix"
    elif streams is not None:
        lanes, why = min(streams, batch), f"options.streams={streams}"
    else:
        big = n >= STREAM_LANES["large_order"]
        lanes = min(batch, STREAM_LANES["large" if big else "small"])
        why = f"n {'>=' if big else '<'} {STREAM_LANES['large_order']}"
    if logger is not None:
        size = f"{op} {rows}x{cols}, batch {batch}"
        debug(logger, "%s: per-matrix loops on %d stream(s) (%s)", size, lanes, why)
    return lanes
