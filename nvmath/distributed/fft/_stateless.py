"""The stateless distributed FFTs: :func:`fft`, :func:`ifft`, :func:`rfft`, :func:`irfft`.

Each call looks its plan up in :data:`plan_cache` (bounded, least recently used first out) by the
operand's local layout, the distribution and the options; a miss constructs and plans an
:class:`~nvmath.distributed.fft.FFT` (collective: the ranks' agreement check, the cuFFTMp plan).

Because planning and freeing are collective, every rank must make the same sequence of calls (as
every distributed program does) with the same cache size: the ranks then hit, miss and evict in
step. :func:`nvmath.distributed.finalize` clears the cache first (collective, like finalize).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from nvmath._internal import caches
from nvmath._internal.options import check_or_create_options, freeze_options
from nvmath._internal.plan_cache import PlanCache
from nvmath._internal.stateless import CachedPlan, adapter_head, call_cached
from nvmath._internal.tensors import wrap
from nvmath.distributed import _runtime
from nvmath.fft._options import FFTDirection

from . import _dtensor
from ._checks import fft_layout
from ._options import FFTOptions
from ._planner import FFT

__all__ = ["DEFAULT_CACHE_SIZE", "fft", "ifft", "irfft", "plan_cache", "rfft"]

DEFAULT_CACHE_SIZE = 8
"""How many planned distributed transforms :data:`plan_cache` keeps by default."""

plan_cache: PlanCache[CachedPlan[FFT]] = caches.register(
    "nvmath.distributed.fft: plans",
    PlanCache(maxsize=DEFAULT_CACHE_SIZE, name="nvmath.distributed.fft plan cache"),
)
"""The plan cache of the stateless distributed FFTs (collective: resize it alike on every rank)."""

_runtime.before_finalize(plan_cache.clear)

_COMPLEX = ("complex64", "complex128")


def _options(options: Any, fft_type: str) -> FFTOptions:
    options = check_or_create_options(FFTOptions, options, "FFT options")
    if options.fft_type not in (None, fft_type):
        raise ValueError(
            f"options.fft_type={options.fft_type!r} contradicts the function, which computes a {fft_type}"
        )
    return freeze_options(dataclasses.replace(options, fft_type=fft_type))


def _build(operand: Any, distribution: Any, options: FFTOptions, stream: Any) -> CachedPlan[FFT]:
    planner = FFT(operand, distribution=distribution, options=options, stream=stream)
    try:
        planner.plan()
    except BaseException:
        planner.free()
        raise
    planner.release_operand()
    return CachedPlan(planner)


def _run(operand: Any, distribution: Any, options: Any, stream: Any, sync: bool, fft_type: str,
         direction: FFTDirection, kind: str, name: str) -> Any:  # fmt: skip
    if _dtensor.is_dtensor(operand):
        return _run_dtensor(operand, distribution, options, stream, sync, fft_type, direction, kind, name)
    if distribution is None:
        raise TypeError(f"{name}() needs distribution= (Slab.X, Slab.Y or this rank's box pair); only a "
                        "DTensor operand takes it from its placement")  # fmt: skip
    adapter = wrap(operand, "operand")
    if (adapter.dtype in _COMPLEX) != (kind == "complex"):
        raise ValueError(
            f"{name}() needs a {kind} operand; got {adapter.dtype} "
            f"({'use rfft() for real operands' if kind == 'complex' else 'use fft() for complex operands'})"
        )
    options = _options(options, fft_type)
    layout = fft_layout(distribution, adapter.ndim)
    context = _runtime.context()
    key = None
    if options.logger is None:  # the rank too: one process may host several ranks (threads, in tests)
        key = (
            adapter_head(adapter), layout, options.fft_type, options.redistribute,
            options.last_axis_parity, options.blocking, id(context), context.process_group.rank,
        )  # fmt: skip
    return call_cached(plan_cache, key, _build, adapter, direction, stream, sync,
                       build_args=(adapter, distribution, options, stream))  # fmt: skip


def _run_dtensor(operand: Any, distribution: Any, options: Any, stream: Any, sync: bool, fft_type: str,
                 direction: FFTDirection, kind: str, name: str) -> Any:  # fmt: skip
    """A DTensor operand: staged through a symmetric buffer, the result a DTensor (see ``_dtensor.py``)."""
    dtype = str(operand.dtype).removeprefix("torch.")
    if (dtype in _COMPLEX) != (kind == "complex"):
        raise ValueError(f"{name}() needs a {kind} operand; got a {dtype} DTensor")
    options = _options(options, fft_type)
    return _dtensor.run_stateless(operand, distribution, options, stream, lambda staged, slab: _run(
        staged, slab, options, stream, sync, fft_type, direction, kind, name))  # fmt: skip


def fft(operand: Any, /, *, distribution: Any = None, sync_symmetric_memory: bool = True,
        options: Any = None, stream: Any = None) -> Any:  # fmt: skip
    """Forward complex-to-complex distributed FFT, in place (collective).

    Args:
        operand: this rank's part of the global complex array, on the NVSHMEM symmetric heap
            (:func:`~nvmath.distributed.fft.allocate_operand`).
        distribution: ``Slab.X`` or ``Slab.Y``, or this rank's pair ``(input Box, output Box)``
            (for a DTensor operand it comes from the placement and may be left out).
        sync_symmetric_memory: synchronize every rank's symmetric memory on the stream first.
        options: :class:`~nvmath.distributed.fft.FFTOptions` or a dict of its fields.
        stream: the stream to run on (``None``: the package's current stream).

    Returns:
        The result, a view of the operand's buffer: in the operand's slab with
        ``options.redistribute=True`` (default), else in the complementary one; in this rank's
        output box with a box pair. A torch DTensor operand sharded on dimension 0 (``Slab.X``)
        or 1 (``Slab.Y``) is copied through a symmetric buffer and the result is a new DTensor,
        sharded where the result lies (see ``nvmath.distributed.fft._dtensor``).
    """
    return _run(operand, distribution, options, stream, sync_symmetric_memory, "C2C", FFTDirection.FORWARD,
                "complex", "fft")  # fmt: skip


def ifft(operand: Any, /, *, distribution: Any = None, sync_symmetric_memory: bool = True,
         options: Any = None, stream: Any = None) -> Any:  # fmt: skip
    """Inverse complex-to-complex distributed FFT, in place, unnormalized as cuFFT's (collective).
    Arguments as :func:`fft`."""
    return _run(operand, distribution, options, stream, sync_symmetric_memory, "C2C", FFTDirection.INVERSE,
                "complex", "ifft")  # fmt: skip


def rfft(operand: Any, /, *, distribution: Any = None, sync_symmetric_memory: bool = True,
         options: Any = None, stream: Any = None) -> Any:  # fmt: skip
    """Real-to-complex distributed FFT, in place (collective). The real operand's last axis is
    padded to ``2 * (n // 2 + 1)`` (:func:`~nvmath.distributed.fft.allocate_operand` does it) for slabs
    (box operands are dense); a 2-D slab R2C takes a ``Slab.X`` operand. Returns the complex half
    spectrum (a view of the same buffer).
    Arguments as :func:`fft`."""
    return _run(operand, distribution, options, stream, sync_symmetric_memory, "R2C", FFTDirection.FORWARD,
                "real", "rfft")  # fmt: skip


def irfft(operand: Any, /, *, distribution: Any = None, sync_symmetric_memory: bool = True,
          options: Any = None, stream: Any = None) -> Any:  # fmt: skip
    """Complex-to-real distributed FFT, in place, unnormalized (collective); a 2-D C2R takes a
    ``Slab.Y`` operand. ``options.last_axis_parity`` gives the real length (``"even"``:
    ``2 * (m - 1)``, ``"odd"``: ``2 * m - 1``). Returns the real result with padded rows (a view of
    the same buffer). Arguments as :func:`fft`."""
    return _run(operand, distribution, options, stream, sync_symmetric_memory, "C2R", FFTDirection.INVERSE,
                "complex", "irfft")  # fmt: skip
