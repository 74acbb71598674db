"""The few array operations the block-scale helpers need, for torch, numpy and cupy tensors.

The helpers only reshape, permute, pad, compare, convert and repeat; this module maps those
operations onto each package's own API, so that every helper returns a tensor of its input's
package on its input's device. Nothing here imports torch or cupy: the module is taken from
``sys.modules`` once a tensor of that package exists.

A tensor's dtype is named by :func:`dtype_name`: the package's dtype printed without its
``torch.`` prefix (``"uint8"``, ``"float8_e4m3fn"``, ``"float4_e2m1fn_x2"``, ...).
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = [
    "PACKAGES",
    "as_dtype",
    "astype",
    "broadcast_to",
    "device_ctx",
    "device_of",
    "dtype_name",
    "elementwise_where",
    "exact_pow2",
    "full_1d",
    "is_tensor",
    "min_max",
    "package_of",
    "permute",
    "repeat",
    "strides",
    "swap_last",
    "to_device",
    "zeros",
]

PACKAGES = ("torch", "numpy", "cupy")
"""The packages whose tensors the helpers accept."""


def is_tensor(obj: Any) -> bool:
    """True for a torch tensor, a numpy array or a cupy array (not for a numpy scalar)."""
    return (
        type(obj).__module__.split(".", 1)[0] in PACKAGES
        and hasattr(obj, "shape")
        and not isinstance(obj, np.generic)
    )


def package_of(obj: Any, name: str) -> str:
    """Return ``"torch"``, ``"numpy"`` or ``"cupy"`` for the tensor ``obj``.

    Raises:
        TypeError: ``obj`` is not a tensor of one of those packages (the message names ``name``).
    """
    if not is_tensor(obj):
        raise TypeError(
            f"{name} must be a torch tensor, a numpy array or a cupy array; got {type(obj).__name__}"
        )
    return type(obj).__module__.split(".", 1)[0]


def dtype_name(x: Any) -> str:
    """The name of ``x``'s dtype without a package prefix (``"uint8"``, ``"float8_e4m3fn"``)."""
    return str(x.dtype).removeprefix("torch.")


def as_dtype(pkg: str, name: str) -> Any:
    """The dtype object of package ``pkg`` named ``name`` (``ValueError`` if the package has none)."""
    mod = sys.modules[pkg]
    if pkg == "torch":
        dt = getattr(mod, name, None)
        if dt is None or not isinstance(dt, mod.dtype):
            raise ValueError(f"torch {mod.__version__} has no dtype {name!r}")
        return dt
    try:
        return mod.dtype(name)
    except TypeError:
        raise ValueError(f"{pkg} has no dtype {name!r} (bfloat16 / fp8 need ml_dtypes)") from None


def strides(x: Any) -> tuple[int, ...]:
    """``x``'s strides in elements."""
    if type(x).__module__.startswith("torch"):
        return tuple(x.stride())
    return tuple(s // x.itemsize for s in x.strides)


def device_of(x: Any) -> str:
    """``x``'s device as a string (``"cpu"`` for numpy), comparable across tensors of one package."""
    return str(getattr(x, "device", "cpu"))


def device_ctx(x: Any) -> contextlib.AbstractContextManager:
    """A context making ``x``'s device current for cupy (a no-op for torch and numpy)."""
    if type(x).__module__.startswith("cupy"):
        return x.device
    return contextlib.nullcontext()


def permute(x: Any, axes: Sequence[int]) -> Any:
    """``x`` with its axes reordered (a view)."""
    if type(x).__module__.startswith("torch"):
        return x.permute(*axes)
    return x.transpose(tuple(axes))


def swap_last(x: Any) -> Any:
    """``x`` with its last two axes swapped (a view)."""
    if type(x).__module__.startswith("torch"):
        return x.transpose(-1, -2)
    return x.swapaxes(-1, -2)


def zeros(like: Any, shape: Sequence[int], dtype: Any = None) -> Any:
    """Zeros of ``shape`` in ``like``'s package and device (``like``'s dtype by default)."""
    dtype = like.dtype if dtype is None else dtype
    pkg = package_of(like, "like")
    if pkg == "torch":
        return sys.modules["torch"].zeros(tuple(shape), dtype=dtype, device=like.device)
    with device_ctx(like):
        return sys.modules[pkg].zeros(tuple(shape), dtype=dtype)


def full_1d(like: Any, size: int, fill: int, dtype: str) -> Any:
    """A 1-D tensor of ``size`` copies of ``fill`` of dtype ``dtype``, in ``like``'s package and device."""
    pkg = package_of(like, "like")
    dt = as_dtype(pkg, dtype)
    if pkg == "torch":
        return sys.modules["torch"].full((size,), fill, dtype=dt, device=like.device)
    with device_ctx(like):
        return sys.modules[pkg].full((size,), fill, dtype=dt)


def broadcast_to(x: Any, shape: Sequence[int], name: str) -> Any:
    """``x`` broadcast to ``shape`` (a view).

    Raises:
        ValueError: ``x``'s shape does not broadcast to ``shape`` (the message names ``name``).
    """
    try:
        return sys.modules[package_of(x, name)].broadcast_to(x, tuple(shape))
    except (ValueError, RuntimeError):
        raise ValueError(f"{name} of shape {tuple(x.shape)} does not broadcast to {tuple(shape)}") from None


def astype(x: Any, name: str) -> Any:
    """``x`` converted to the dtype ``name`` of its own package (a copy unless already that dtype)."""
    pkg = package_of(x, "x")
    dt = as_dtype(pkg, name)
    if pkg == "torch":
        return x.to(dt)
    return x.astype(dt, copy=False)


def elementwise_where(cond: Any, a: Any, b: Any) -> Any:
    """``a`` where ``cond`` holds, else ``b`` (``a`` may be a Python scalar)."""
    pkg = package_of(b, "b")
    if pkg == "torch":
        return sys.modules["torch"].where(cond, a, b)
    return sys.modules[pkg].where(cond, a, b)


def exact_pow2(k: Any) -> Any:
    """float64 ``2**k`` for an integer tensor ``k`` with ``-1022 <= k <= 1023``, built bit by bit.

    Assembling the IEEE bits makes the powers exact whatever the platform's ``exp2`` does.
    """
    bits = (astype(k, "int64") + 1023) << 52
    if type(k).__module__.startswith("torch"):
        return bits.view(sys.modules["torch"].float64)
    return bits.view(sys.modules[package_of(k, "k")].float64)


def min_max(x: Any) -> tuple[int, int] | None:
    """``(min, max)`` of an integer tensor as Python ints, or ``None`` when it is empty.

    Reads the values on the host: a device tensor's stream is synchronized.
    """
    size = x.numel() if type(x).__module__.startswith("torch") else x.size
    if size == 0:
        return None
    return int(x.min()), int(x.max())


def repeat(x: Any, count: int, axis: int) -> Any:
    """``x`` with every entry along ``axis`` repeated ``count`` times in place (``abc`` -> ``aabbcc``)."""
    if type(x).__module__.startswith("torch"):
        return x.repeat_interleave(count, dim=axis)
    return sys.modules[package_of(x, "x")].repeat(x, count, axis=axis)


def to_device(x: Any, device: Any) -> Any:
    """``x`` on ``device`` (``None`` leaves it where it is).

    torch accepts any ``torch.device`` spec; numpy only ``"cpu"``; cupy a device id.

    Raises:
        ValueError: a device the package cannot hold ``x`` on.
    """
    if device is None:
        return x
    pkg = package_of(x, "x")
    if pkg == "torch":
        return x.to(device)
    if pkg == "numpy":
        if str(device) != "cpu":
            raise ValueError(f"device must be None or 'cpu' for a numpy array; got {device!r}")
        return x
    try:
        device_id = int(device)
    except (TypeError, ValueError):
        raise ValueError(
            f"device must be None or a device id (int) for a cupy array; got {device!r}"
        ) from None
    cupy = sys.modules["cupy"]
    with cupy.cuda.Device(device_id):
        return cupy.array(x, copy=True)
