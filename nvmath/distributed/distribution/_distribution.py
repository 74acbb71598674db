"""The ``Distribution`` base class and the two distributions described by one axis or one box.

A distribution may be *bound* to a global shape (:meth:`Distribution.bind` returns a bound copy;
nothing is ever mutated, so the shared ``Slab.X`` / ``Slab.Y`` / ``Slab.Z`` stay unbound).
"""

from __future__ import annotations

import copy as _copy
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from typing import Any, ClassVar

from . import _runtime
from ._check import as_extent, as_int, as_int_tuple, as_shape
from ._errors import BindDistributionError
from ._index import slab_interval

__all__ = ["Box", "Distribution", "Slab", "register_converter"]

Converter = Callable[..., "Distribution"]
"""``converter(source, cls, *, ndim, copy) -> Distribution``: what :meth:`Distribution.to` runs."""


def _no_converter(source: Distribution, cls: Any, *, ndim: int | None, copy: bool) -> Distribution:
    raise RuntimeError("no distribution converter registered (import nvmath.distributed.distribution)")


_converter: Converter = _no_converter


def register_converter(converter: Converter) -> None:
    """Install the function :meth:`Distribution.to` runs (``._convert`` registers ``convert`` when the
    package is imported), so that the base class does not import the module that imports it."""
    global _converter
    _converter = converter


class Distribution(ABC):
    """How a global array is split into one local array per process."""

    _global_shape: tuple[int, ...] | None = None

    @property
    @abstractmethod
    def ndim(self) -> int | None:
        """Number of dimensions this distribution applies to; None if it applies to any."""

    @property
    def global_shape(self) -> tuple[int, ...] | None:
        """The global shape this distribution is bound to, or None when unbound."""
        return self._global_shape

    @abstractmethod
    def shape(self, rank: int, global_shape: Sequence[int] | None = None) -> tuple[int, ...]:
        """The local shape of the array on process ``rank``.

        Args:
            rank: the process rank.
            global_shape: the global shape; required unless the distribution is bound.
        """

    def to(self, cls: type[Distribution], /, *, ndim: int | None = None, copy: bool = False) -> Distribution:
        """Convert into an equivalent distribution of type ``cls``.

        Args:
            cls: the target distribution class.
            ndim: the dimensionality of the result, at least this one's; extra dimensions are
                appended with size 1. Required when this distribution has no dimensionality yet.
            copy: return a copy (not ``self``) when ``cls`` is this distribution's own type.

        Raises:
            ConvertDistributionError: the conversion is not exact (or not known to be exact).
        """
        return _converter(self, cls, ndim=ndim, copy=copy)

    def copy(self) -> Distribution:
        """A copy of this distribution (bound if this one is)."""
        return _copy.copy(self)

    @abstractmethod
    def bind(self, global_shape: Sequence[int], *, shape: Sequence[int] | None = None) -> Distribution:
        """A copy bound to ``global_shape``, optionally checking this process's local ``shape``.

        Raises:
            BindDistributionError: already bound to another global shape, or ``shape`` is not this
                process's local shape under the distribution.
            ValueError: ``global_shape`` does not suit the distribution (dimensionality, bounds).
        """

    def _with_binding(self, global_shape: tuple[int, ...]) -> Distribution:
        bound = _copy.copy(self)
        bound._set_global_shape(global_shape)
        return bound

    def _set_global_shape(self, global_shape: tuple[int, ...]) -> None:
        self._global_shape = global_shape

    def _resolve_global_shape(self, global_shape: Sequence[int] | None) -> tuple[int, ...]:
        """The global shape to compute with: the given one (which must agree with a binding) or the bound one."""
        if global_shape is None:
            if self._global_shape is None:
                raise RuntimeError(f"{self!r} is not bound to a global shape: pass global_shape")
            return self._global_shape
        resolved = as_shape(global_shape)
        if self._global_shape is not None and resolved != self._global_shape:
            raise ValueError(
                f"global_shape {resolved} differs from the shape {self._global_shape} this distribution is bound to"
            )
        return resolved

    def _check_rebind(self, global_shape: tuple[int, ...]) -> None:
        if self._global_shape is not None and self._global_shape != global_shape:
            raise BindDistributionError(
                f"{self!r} is already bound to {self._global_shape}, not {global_shape}"
            )

    def _binding_repr(self) -> str:
        return "" if self._global_shape is None else f" bound to {self._global_shape}"


def check_rank(rank: Any, nranks: int) -> int:
    """``rank`` as an int in ``[0, nranks)``."""
    value = as_int(rank, "rank")
    if not 0 <= value < nranks:
        raise ValueError(f"rank must be in [0, {nranks}) for {nranks} processes, got {value}")
    return value


def slab_shape(global_shape: tuple[int, ...], partition_dim: int, nranks: int, rank: int) -> tuple[int, ...]:
    """Local shape of ``rank`` under a slab split of ``global_shape`` along ``partition_dim``."""
    start, stop = slab_interval(global_shape[partition_dim], nranks, rank)
    return global_shape[:partition_dim] + (stop - start,) + global_shape[partition_dim + 1 :]


class Slab(Distribution):
    """Split along one dimension (the *partition dimension*) into contiguous slabs, one per process.

    With ``P`` processes and extent ``s`` along the partition dimension, the first ``s % P``
    processes hold ``s // P + 1`` indices and the others ``s // P``; process 0 holds the first
    slab, process 1 the next, and so on. ``Slab.X``, ``Slab.Y`` and ``Slab.Z`` split along
    dimension 0, 1 and 2 and fit any dimensionality.

    Args:
        partition_dim: the dimension split across processes (an integer >= 0).
        ndim: the dimensionality of the arrays it applies to, or None for any.
    """

    X: ClassVar[Slab]
    Y: ClassVar[Slab]
    Z: ClassVar[Slab]

    def __init__(self, partition_dim: int, ndim: int | None = None) -> None:
        self._partition_dim = as_extent(partition_dim, "partition_dim", 0)
        self._ndim = None if ndim is None else as_extent(ndim, "ndim", 1)
        if self._ndim is not None and self._partition_dim >= self._ndim:
            raise ValueError(f"partition_dim ({self._partition_dim}) must be < ndim ({self._ndim})")

    @property
    def partition_dim(self) -> int:
        """The dimension split across processes."""
        return self._partition_dim

    @property
    def ndim(self) -> int | None:
        return self._ndim

    @property
    def name(self) -> str:
        """``"Slab.X"``, ``"Slab.Y"``, ``"Slab.Z"`` or ``"Slab"``."""
        return {0: "Slab.X", 1: "Slab.Y", 2: "Slab.Z"}.get(self._partition_dim, "Slab")

    def _set_global_shape(self, global_shape: tuple[int, ...]) -> None:
        super()._set_global_shape(global_shape)
        self._ndim = len(global_shape)

    def _check_fits(self, global_shape: tuple[int, ...]) -> None:
        if self._ndim is not None and len(global_shape) != self._ndim:
            raise ValueError(
                f"global_shape {global_shape} has {len(global_shape)} dimensions; {self!r} has {self._ndim}"
            )
        if self._partition_dim >= len(global_shape):
            raise ValueError(
                f"{self!r} splits dimension {self._partition_dim}, which global_shape {global_shape} lacks"
            )

    def shape(self, rank: int, global_shape: Sequence[int] | None = None) -> tuple[int, ...]:
        """The local shape of process ``rank`` (the number of processes comes from the runtime)."""
        _, nranks = _runtime.current_process()
        rank = check_rank(rank, nranks)
        resolved = self._resolve_global_shape(global_shape)
        self._check_fits(resolved)
        return slab_shape(resolved, self._partition_dim, nranks, rank)

    def bind(self, global_shape: Sequence[int], *, shape: Sequence[int] | None = None) -> Slab:
        resolved = as_shape(global_shape)
        self._check_rebind(resolved)
        self._check_fits(resolved)
        rank, nranks = _runtime.current_process()
        local = slab_shape(resolved, self._partition_dim, nranks, rank)
        if shape is not None and as_int_tuple(shape, "shape", 0) != local:
            raise BindDistributionError(
                f"local shape {tuple(shape)} on rank {rank} does not fit {self!r} with global shape {resolved}: "
                f"expected {local}"
            )
        return self._with_binding(resolved)  # type: ignore[return-value]

    def __eq__(self, other: object) -> bool:
        """Slabs are equal when they split the same dimension and their dimensionalities agree
        (an unset dimensionality agrees with any)."""
        if not isinstance(other, Slab):
            return NotImplemented
        if self._partition_dim != other.partition_dim:
            return False
        return self._ndim is None or other.ndim is None or self._ndim == other.ndim

    def __hash__(self) -> int:
        return hash(self._partition_dim)

    def __repr__(self) -> str:
        return f"Slab(partition_dim={self._partition_dim}, ndim={self._ndim}){self._binding_repr()}"


Slab.X = Slab(0)
Slab.Y = Slab(1)
Slab.Z = Slab(2)


class Box(Distribution):
    """This process's part of the global array: the box ``lower <= index < upper``.

    Every process passes its own box; the boxes of all processes together must tile the global
    array. Unpacks as ``lower, upper = box``.

    Args:
        lower: the first global index of the box along each dimension (integers >= 0).
        upper: one past the last index along each dimension (``upper[i] >= lower[i]``).
    """

    def __init__(self, lower: Sequence[int], upper: Sequence[int]) -> None:
        low = as_int_tuple(lower, "lower", 0)
        high = as_int_tuple(upper, "upper", 0)
        if len(low) != len(high):
            raise ValueError(f"lower {low} and upper {high} must have the same number of dimensions")
        if any(a > b for a, b in zip(low, high, strict=True)):
            raise ValueError(f"lower {low} must not exceed upper {high} in any dimension")
        self._lower, self._upper = low, high

    @property
    def lower(self) -> tuple[int, ...]:
        """First global index along each dimension."""
        return self._lower

    @property
    def upper(self) -> tuple[int, ...]:
        """One past the last global index along each dimension."""
        return self._upper

    @property
    def ndim(self) -> int:
        return len(self._lower)

    @property
    def box_shape(self) -> tuple[int, ...]:
        """``upper - lower``: the shape of the local array."""
        return tuple(b - a for a, b in zip(self._lower, self._upper, strict=True))

    def check_inside(self, global_shape: tuple[int, ...]) -> None:
        """Raise ValueError unless the box lies inside an array of ``global_shape``."""
        if len(global_shape) != self.ndim:
            raise ValueError(
                f"global_shape {global_shape} has {len(global_shape)} dimensions; {self!r} has {self.ndim}"
            )
        if any(b > n for b, n in zip(self._upper, global_shape, strict=True)):
            raise ValueError(f"{self!r} reaches outside global_shape {global_shape}")

    def shape(self, rank: int, global_shape: Sequence[int] | None = None) -> tuple[int, ...]:
        """The box shape; ``rank`` must be this process's rank (a box knows no other process's part)."""
        my_rank, nranks = _runtime.current_process()
        rank = check_rank(rank, nranks)
        if rank != my_rank:
            raise RuntimeError(
                f"a Box describes only this process's part (rank {my_rank}); cannot give rank {rank}'s shape"
            )
        if global_shape is not None or self._global_shape is not None:
            self.check_inside(self._resolve_global_shape(global_shape))
        return self.box_shape

    def bind(self, global_shape: Sequence[int], *, shape: Sequence[int] | None = None) -> Box:
        resolved = as_shape(global_shape)
        self._check_rebind(resolved)
        self.check_inside(resolved)
        if shape is not None and as_int_tuple(shape, "shape", 0) != self.box_shape:
            raise BindDistributionError(
                f"local shape {tuple(shape)} is not the shape {self.box_shape} of {self!r}"
            )
        return self._with_binding(resolved)  # type: ignore[return-value]

    def __iter__(self) -> Iterator[tuple[int, ...]]:
        yield self._lower
        yield self._upper

    def __getitem__(self, index: int) -> tuple[int, ...]:
        if index not in (0, 1, -1, -2):
            raise IndexError(f"a Box has two items (lower, upper); index {index!r} is out of range")
        return (self._lower, self._upper)[index]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Box):
            return NotImplemented
        return self._lower == other.lower and self._upper == other.upper

    def __hash__(self) -> int:
        return hash((self._lower, self._upper))

    def __repr__(self) -> str:
        return f"Box(lower={self._lower}, upper={self._upper}){self._binding_repr()}"
