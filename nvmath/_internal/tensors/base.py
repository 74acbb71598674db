"""The tensor adapter protocol, and the small layout helpers the adapters share.

A :class:`TensorAdapter` describes one user tensor with plain attributes (read on the hot path,
so they are set once in ``__init__``, never computed by properties):

``tensor`` the user object; ``package`` ("numpy", "cupy", "torch", "cuda" for nvmath's own
:class:`~nvmath._internal.tensors.device_array.DeviceArray`, or a producer's top module such as
"jax"); ``data_ptr`` (int, address of element 0); ``shape`` and ``strides`` (tuples, strides in
*elements*; torch gives a ``torch.Size``, a tuple subclass); ``dtype`` (canonical name, see
:mod:`nvmath._internal.dtypes`); ``itemsize``; ``size`` (number of elements); ``device``
("cpu" | "cuda"); ``device_id`` (int, or "cpu"); ``is_conjugate`` (torch's lazy conjugation bit).
"""

from __future__ import annotations

import abc
from typing import Any

__all__ = [
    "TensorAdapter",
    "axis_order",
    "check_strides",
    "dense_strides",
    "is_dense",
    "span",
]


class TensorAdapter(abc.ABC):
    """Uniform read-only view of a user tensor, plus the few operations planners need."""

    __slots__ = ("data_ptr", "dtype", "itemsize", "shape", "size", "strides", "tensor")

    # Declared here for type checkers; subclasses set them per instance (slots) or per class.
    package: str
    device: str
    device_id: int | str
    is_conjugate: bool

    @abc.abstractmethod
    def empty(
        self,
        shape: tuple[int, ...],
        dtype: str,
        *,
        strides: tuple[int, ...] | None = None,
        device_id: int | str | None = None,
        stream: Any = None,
    ) -> TensorAdapter:
        """Return a new uninitialised tensor of the same package.

        Args:
            shape: the shape.
            dtype: a canonical dtype name.
            strides: strides in elements (non-negative); ``None`` means C order.
            device_id: the device (an int, or "cpu"); ``None`` means this tensor's device.
                Packages without device memory give their natural counterpart (numpy gives a
                :class:`DeviceArray` on a GPU, a GPU-only package gives numpy on "cpu").
            stream: the :class:`~nvmath._internal.streams.StreamHandle` the memory is first used
                on (GPU only; ``None`` = the package's current stream).
        """

    @abc.abstractmethod
    def to(self, device_id: int | str, stream: Any = None) -> TensorAdapter:
        """Return a copy in another memory space ("cpu" or a GPU id); ``self`` if already there.

        Copies to the host are blocking (the data is on the host on return); copies to a GPU are
        ordered on ``stream`` (a ``StreamHandle``; ``None`` = the package's current stream) and
        return without waiting.
        """

    def unwrap(self, stream: Any = None) -> Any:
        """Return the user-facing object (a result becomes a tensor of the producer's package)."""
        return self.tensor

    @property
    def ndim(self) -> int:
        """Number of dimensions."""
        return len(self.shape)

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(package={self.package!r}, dtype={self.dtype!r}, shape={tuple(self.shape)}, "
            f"strides={tuple(self.strides)}, device_id={self.device_id!r}, ptr={self.data_ptr:#x})"
        )


def axis_order(shape: tuple[int, ...], strides: tuple[int, ...]) -> tuple[int, ...]:
    """Return the axes from outermost (largest stride) to innermost; ties keep the C order."""
    return tuple(sorted(range(len(shape)), key=lambda i: (-abs(strides[i]), i)))


def dense_strides(shape: tuple[int, ...], order: str | tuple[int, ...] = "C") -> tuple[int, ...]:
    """Return the strides (in elements) of a dense layout.

    Args:
        shape: the shape.
        order: "C", "F", or a permutation of the axes from outermost to innermost (the result of
            :func:`axis_order` for an existing tensor, say).
    """
    ndim = len(shape)
    if order == "C":
        perm: tuple[int, ...] = tuple(range(ndim))
    elif order == "F":
        perm = tuple(reversed(range(ndim)))
    else:
        perm = tuple(order)
        if sorted(perm) != list(range(ndim)):
            raise ValueError(f"order must be 'C', 'F' or a permutation of range({ndim}); got {order!r}")
    strides = [0] * ndim
    step = 1
    for axis in reversed(perm):
        strides[axis] = step
        step *= max(shape[axis], 1)
    return tuple(strides)


def is_dense(shape: tuple[int, ...], strides: tuple[int, ...]) -> bool:
    """Return whether the layout covers a contiguous block exactly (no gaps, overlaps, negatives)."""
    dims = sorted((s, n) for n, s in zip(shape, strides) if n != 1)
    if any(n == 0 for n in shape):
        return True
    step = 1
    for s, n in dims:
        if s != step:
            return False
        step *= n
    return True


def span(shape: tuple[int, ...], strides: tuple[int, ...]) -> tuple[int, int]:
    """Return ``(lo, hi)``: the lowest and highest element offsets the layout touches.

    For an empty tensor ``(0, -1)`` (no element is touched).
    """
    if any(n == 0 for n in shape):
        return 0, -1
    lo = hi = 0
    for n, s in zip(shape, strides):
        if s < 0:
            lo += (n - 1) * s
        else:
            hi += (n - 1) * s
    return lo, hi


def check_strides(shape: tuple[int, ...], strides: tuple[int, ...] | None) -> tuple[int, ...]:
    """Validate ``strides`` for a new tensor (non-negative ints, one per axis); default C order."""
    if strides is None:
        return dense_strides(shape)
    strides = tuple(strides)
    if len(strides) != len(shape) or not all(isinstance(s, int) and s >= 0 for s in strides):
        raise ValueError(
            f"strides must be {len(shape)} non-negative ints (in elements) for shape {tuple(shape)}; got {strides}"
        )
    return strides
