"""torch DTensor placements <-> distributions, on a one-dimensional device mesh.

``Shard(d)`` splits dimension ``d`` as ``torch.chunk`` does (chunks of ``ceil(n / P)``, the last
ranks short or empty): that is exactly a :class:`BlockNonCyclic` with every rank along ``d``, and a
:class:`Slab` along ``d`` only when the two splits coincide (``n % P`` is 0 or ``P - 1``, or
``n < P``). ``Replicate()`` maps to ``None`` (every rank holds the whole array). ``Partial()`` is a
pending reduction, not a layout, and is refused. Placements are read by duck typing
(``is_shard()``, ``dim``, ``is_replicate()``, ``is_partial()``), so torch is imported only by
:func:`placements_for`, which builds torch placement objects.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import Any, Literal

from . import _runtime
from ._block import BlockCyclic, BlockNonCyclic
from ._check import as_shape
from ._distribution import Distribution, Slab
from ._errors import ConvertDistributionError
from ._grid import ProcessGrid
from ._index import noncyclic_block_size, slab_interval
from ._ownership import same_ownership

__all__ = [
    "distribution_from_placements",
    "is_dtensor",
    "placement_spec",
    "placement_specs_for",
    "placements_for",
    "shard_matches_slab",
]

Spec = tuple[str, int | None]


def is_dtensor(x: Any) -> bool:
    """Whether ``x`` is a torch DTensor (without importing torch)."""
    return (
        type(x).__module__.startswith("torch.distributed")
        and hasattr(x, "to_local")
        and hasattr(x, "placements")
    )


def placement_spec(placement: Any) -> Spec:
    """``("shard", dim)`` or ``("replicate", None)`` for a DTensor placement (or such a tuple)."""
    if isinstance(placement, tuple) and len(placement) == 2 and placement[0] in ("shard", "replicate"):
        return placement
    if callable(getattr(placement, "is_partial", None)) and placement.is_partial():
        raise ValueError(
            f"{placement!r} is a pending reduction, not a layout: reduce (redistribute to Replicate or Shard) first"
        )
    if callable(getattr(placement, "is_shard", None)) and placement.is_shard():
        return ("shard", int(placement.dim))
    if callable(getattr(placement, "is_replicate", None)) and placement.is_replicate():
        return ("replicate", None)
    raise TypeError(f"expected a DTensor placement (Shard, Replicate), got {placement!r}")


def shard_matches_slab(extent: int, nranks: int) -> bool:
    """True when ``torch.chunk``'s split of ``extent`` over ``nranks`` equals the Slab split."""
    block = noncyclic_block_size(extent, nranks)
    return all(
        slab_interval(extent, nranks, r) == (min(r * block, extent), min((r + 1) * block, extent))
        for r in range(nranks)
    )


def _shard_dim(specs: Sequence[Spec], ndim: int) -> int | None:
    """The tensor dimension a 1-D mesh shards, or None when every placement replicates."""
    shards = [dim for kind, dim in specs if kind == "shard"]
    if not shards:
        return None
    if len(specs) != 1:
        raise ValueError(f"only a 1-D device mesh maps to a distribution, got placements {list(specs)}")
    dim = shards[0]
    if not -ndim <= dim < ndim:  # type: ignore[operator]
        raise ValueError(f"Shard({dim}) is out of range for a {ndim}-D tensor")
    return dim % ndim  # type: ignore[operator]


def distribution_from_placements(
    placements: Sequence[Any], global_shape: Sequence[int], *, kind: Literal["slab", "block"] = "slab"
) -> Distribution | None:
    """The distribution (bound to ``global_shape``) of a DTensor with these placements on a 1-D mesh.

    Args:
        placements: the DTensor's placements (one per mesh dimension).
        global_shape: the DTensor's global shape.
        kind: ``"slab"`` for a :class:`Slab` (what the FFT takes) or ``"block"`` for a
            :class:`BlockNonCyclic` on a P x 1 / 1 x P grid (what the matmul takes).

    Returns:
        The distribution, or None for a replicated tensor.

    Raises:
        ConvertDistributionError: ``kind="slab"`` and torch's uneven split differs from the Slab's.
        ValueError: a ``Partial`` placement, a multi-dimensional mesh, a bad ``kind`` or shard dimension.
    """
    if kind not in ("slab", "block"):
        raise ValueError(f"kind must be 'slab' or 'block', got {kind!r}")
    shape = as_shape(global_shape)
    dim = _shard_dim([placement_spec(p) for p in placements], len(shape))
    if dim is None:
        return None
    _, nranks = _runtime.current_process()
    if kind == "block":
        grid_shape = tuple(nranks if d == dim else 1 for d in range(len(shape)))
        return BlockNonCyclic(ProcessGrid(shape=grid_shape, layout=ProcessGrid.Layout.ROW_MAJOR)).bind(shape)
    if not shard_matches_slab(shape[dim], nranks):
        raise ConvertDistributionError(
            f"Shard({dim}) splits extent {shape[dim]} over {nranks} ranks in chunks of {noncyclic_block_size(shape[dim], nranks)} "
            "(the last ranks short); a Slab gives the extra indices to the first ranks: use kind='block'"
        )
    return Slab(dim, len(shape)).bind(shape)


def placement_specs_for(
    distribution: Distribution | None, global_shape: Sequence[int], nranks: int
) -> tuple[Spec, ...]:
    """The 1-D-mesh placement specs of ``distribution`` (None = replicated); exact or refused."""
    shape = as_shape(global_shape)
    if distribution is None:
        return (("replicate", None),)
    if isinstance(distribution, Slab):
        slab_dim = distribution.partition_dim
        if slab_dim < len(shape) and shard_matches_slab(shape[slab_dim], nranks):
            return (("shard", slab_dim),)
    elif isinstance(distribution, BlockCyclic):
        grid_dim = distribution.process_grid.partition_dim
        if grid_dim is not None and _is_chunked(distribution, shape, nranks, grid_dim):
            return (("shard", grid_dim),)
    raise ConvertDistributionError(
        f"{distribution!r} with global shape {shape} is not a Shard or Replicate layout on {nranks} ranks"
    )


def _is_chunked(distribution: BlockCyclic, shape: tuple[int, ...], nranks: int, dim: int) -> bool:
    grid_shape = tuple(nranks if d == dim else 1 for d in range(len(shape)))
    chunked = BlockNonCyclic(ProcessGrid(shape=grid_shape, layout=ProcessGrid.Layout.ROW_MAJOR))
    return len(shape) == distribution.ndim and same_ownership(distribution, chunked, shape, nranks)


def placements_for(distribution: Distribution | None, global_shape: Sequence[int]) -> tuple[Any, ...]:
    """torch placements (``Shard`` / ``Replicate``) for ``distribution`` on a 1-D mesh of every process."""
    _, nranks = _runtime.current_process()
    specs = placement_specs_for(distribution, global_shape, nranks)
    tensor = importlib.import_module("torch.distributed.tensor")
    return tuple(tensor.Shard(dim) if kind == "shard" else tensor.Replicate() for kind, dim in specs)
