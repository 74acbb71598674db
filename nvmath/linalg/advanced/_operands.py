"""Operands as the matmul planner holds them: device copies of host data, scales, cheap reset checks.

A :class:`Slot` pairs the user's tensor (its adapter) with the tensor cuBLASLt reads: the same
object for GPU operands, a device mirror for host operands (numpy, torch CPU, ...), which
``reset`` refills by copying. :class:`ScaleSlot` holds an FP8 quantization scale: a Python number
(uploaded once to a float32 device scalar), a float32 tensor of one element, or an outer-vector /
block scale (see :mod:`._scaling`), used in place when it is a GPU tensor laid out as cuBLASLt reads
it and 16-byte aligned, else copied into that layout (when given, never in ``execute()``).
:func:`host_scalars` makes the host ``alpha`` / ``beta`` pair cuBLASLt reads.
"""

from __future__ import annotations

import ctypes
import math
import numbers
from collections.abc import Mapping
from typing import Any

import numpy as np

from nvmath._internal.streams import StreamHandle
from nvmath._internal.tensors import TensorAdapter, wrap
from nvmath._internal.tensors.copy import copy_into
from nvmath.linalg.advanced._device import pointer_alignment
from nvmath.linalg.advanced._layout import OperandSpec
from nvmath.linalg.advanced._scaling import ScaleLayout

__all__ = ["ScaleSlot", "Slot", "check_same_place", "host_scalars", "spec_of", "wrap_scale", "wrap_scales"]

SCALE_ALIGNMENT = 16
"""Outer-vector and block scales are used in place only at this alignment (bytes); else copied."""


def spec_of(adapter: TensorAdapter) -> OperandSpec:
    """The :class:`OperandSpec` (shape, strides, dtype, lazy-conjugation bit) of a wrapped tensor."""
    return OperandSpec(
        tuple(adapter.shape), tuple(adapter.strides), adapter.dtype, bool(adapter.is_conjugate)
    )


_BUFFERS = {n: ctypes.c_char * (2 * n) for n in (2, 4, 8, 16)}
"""The ctypes buffer types of two host scalars, by scalar size (fp16 ... complex128)."""


def host_scalars(alpha: Any, beta: Any, dtype: np.dtype) -> tuple[np.ndarray, tuple[int, int]]:
    """``[alpha, beta]`` in host memory cuBLASLt reads (an array over a ctypes buffer, which is cheaper
    to make and to take the address of than a numpy allocation), and the two addresses."""
    dtype = np.dtype(dtype)
    raw = _BUFFERS[dtype.itemsize]()
    buf = np.frombuffer(raw, dtype=dtype, count=2)  # (keeps raw alive)
    buf[0], buf[1] = alpha, beta
    base = ctypes.addressof(raw)
    return buf, (base, base + dtype.itemsize)


def check_same_place(name: str, adapter: TensorAdapter, package: str, device_id: Any) -> None:
    """Raise unless ``adapter`` comes from ``package`` and lives on ``device_id`` (the operands')."""
    if adapter.package != package:
        raise TypeError(f"{name} is a {adapter.package} tensor but the operands are {package} tensors")
    if adapter.device_id != device_id:
        raise ValueError(f"{name} is on device {adapter.device_id!r} but the operands are on {device_id!r}")


class Slot:
    """One tensor of the problem (an operand or an epilog input).

    Attributes:
        name: the operand's name, for messages.
        user: the user's tensor (adapter), or ``None`` once released.
        device: the tensor cuBLASLt reads (``user`` for GPU tensors, a device mirror for host ones).
        ptr: ``device.data_ptr``.
        spec: the device tensor's :class:`OperandSpec` (what the plan was built for).
        user_spec: the user tensor's spec (what a replacement must match).
        alignment: the pointer alignment the plan assumes (a replacement must keep it).
    """

    __slots__ = ("alignment", "device", "exec_device", "host", "name", "ptr", "spec", "user", "user_spec")

    def __init__(
        self, name: str, user: TensorAdapter, exec_device: int, stream: StreamHandle | None,
        user_spec: OperandSpec | None = None,
    ):  # fmt: skip
        self.name = name
        self.exec_device = exec_device
        self.user: TensorAdapter | None = user
        self.host = user.device != "cuda"
        self.user_spec = spec_of(user) if user_spec is None else user_spec  # (the caller's spec_of(user))
        self.device: TensorAdapter | None = user.to(exec_device, stream) if self.host else user
        self.ptr = self.device.data_ptr
        self.spec = spec_of(self.device) if self.host else self.user_spec
        self.alignment = pointer_alignment(self.ptr)

    def check(self, new: TensorAdapter) -> None:
        """Raise ``ValueError`` unless ``new`` can replace the planned tensor without re-planning."""
        u = self.user_spec
        if (
            new.dtype != u.dtype
            or tuple(new.shape) != u.shape
            or tuple(new.strides) != u.strides
            or bool(new.is_conjugate) != u.is_conjugate
        ):
            spec = spec_of(new)
            raise ValueError(
                f"the new operand {self.name!r} must match the planned one: expected shape "
                f"{self.user_spec.shape}, strides {self.user_spec.strides}, dtype {self.user_spec.dtype}, "
                f"conjugated={self.user_spec.is_conjugate}; got shape {spec.shape}, strides {spec.strides}, "
                f"dtype {spec.dtype}, conjugated={spec.is_conjugate} (create a new Matmul for another problem)"
            )
        if not self.host and new.data_ptr % self.alignment:
            raise ValueError(
                f"the new operand {self.name!r} is aligned to {pointer_alignment(new.data_ptr)} bytes but the plan "
                f"assumes {self.alignment}; pass an aligned tensor or create a new Matmul"
            )

    def replace(self, new: TensorAdapter, stream: StreamHandle | None) -> None:
        """Use ``new``: swap the pointer (GPU) or copy its data into the mirror (host, on ``stream``)."""
        if not self.host:
            self.device = new
        elif self.device is None:  # released: a new mirror (same layout rules as the first one)
            self.device = new.to(self.exec_device, stream)
        else:
            copy_into(self.device, new, stream)
        self.ptr = self.device.data_ptr
        self.user = new

    def release(self) -> None:
        """Drop the references to the user's tensor and to the mirror of a host tensor."""
        self.user = None
        self.device = None


def _is_number(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


class ScaleSlot:
    """An FP8 scale read by cuBLASLt through a descriptor pointer.

    Args:
        name: for messages (``"quantization scale 'a'"``, ...).
        value: a Python number or a float32 tensor (already wrapped, or not).
        package, device_id: the operands' package and device (a tensor must share them; a host
            tensor's device is the execution device).
        exec_device: the GPU the matmul runs on.
        stream: orders the upload of numbers and host tensors, and layout copies.
        layout: the :class:`~._scaling.ScaleLayout` of an outer-vector or block scale; ``None``
            for a tensor-wide one (a float32 tensor of one element).
    """

    __slots__ = ("device", "exec_device", "layout", "name", "number", "ptr", "user")

    def __init__(
        self, name: str, value: Any, package: str, device_id: Any, exec_device: int, stream: StreamHandle,
        layout: ScaleLayout | None = None,
    ):  # fmt: skip
        self.name = name
        self.layout = layout
        self.exec_device = exec_device
        self.number = float(value) if _is_number(value) else None
        if self.number is not None:
            host = wrap(np.array([self.number], dtype=np.float32))
            self.user = None
            self.device = host.to(exec_device, stream)
        else:
            user = wrap_scale(name, value, package, device_id, layout)
            self.user = user
            self.device = _device_scale(user, layout, exec_device, stream)
        self.ptr = self.device.data_ptr

    @property
    def released(self) -> bool:
        """Whether the slot's tensor was dropped by :meth:`release` (a reset must supply a new one)."""
        return self.number is None and self.user is None

    def release(self) -> None:
        """Drop the user's tensor and any device copy (``release_operands``); numbers are kept."""
        if self.number is None:
            self.user = self.device = None

    @property
    def copied(self) -> bool:
        """Whether cuBLASLt reads a copy of the user's tensor (host memory, another layout, misaligned)."""
        return self.user is not None and self.device is not self.user

    def check(self, value: Any, package: str, device_id: Any) -> Any:
        """Validate a replacement without using it; return it (a tensor wrapped).

        Raises:
            TypeError, ValueError: another package or device, not float32, or a shape that is not the
                planned one (a number replaces only a scale of one element).
        """
        if _is_number(value):
            if self.layout is not None and math.prod(self.layout.shape) != 1:
                raise ValueError(
                    f"{self.name} was planned as a {self.layout.mode.name} scale of shape {self.layout.shape}; "
                    "pass a float32 tensor of that shape (a number replaces only a tensor-wide scale)"
                )
            return value
        return wrap_scale(self.name, value, package, device_id, self.layout)

    def replace(self, value: Any, package: str, device_id: Any, stream: StreamHandle) -> None:
        """Use a new value (a number is uploaded into the existing device scalar when there is one)."""
        if _is_number(value) and self.number is not None and self.user is None:
            self.number = float(value)
            copy_into(self.device, wrap(np.array([self.number], dtype=np.float32)), stream)
            return
        fresh = ScaleSlot(self.name, value, package, device_id, self.exec_device, stream, self.layout)
        self.number, self.user, self.device, self.ptr = fresh.number, fresh.user, fresh.device, fresh.ptr


def _device_scale(
    user: TensorAdapter, layout: ScaleLayout | None, exec_device: int, stream: StreamHandle
) -> TensorAdapter:
    """The tensor cuBLASLt reads: ``user`` itself when it can, else a device copy in ``layout``."""
    if layout is None:
        return user.to(exec_device, stream) if user.device != "cuda" else user
    if user.device == "cuda" and layout.fits(tuple(user.strides)) and user.data_ptr % SCALE_ALIGNMENT == 0:
        return user
    out = user.empty(layout.shape, "float32", strides=layout.strides, device_id=exec_device, stream=stream)
    return copy_into(out, user, stream)


def wrap_scale(
    name: str, value: Any, package: str, device_id: Any, layout: ScaleLayout | None = None
) -> TensorAdapter:
    """Wrap a tensor-valued scale and check it: float32, the operands' package and device, and one
    element (tensor-wide, ``layout is None``) or the shape of ``layout``."""
    adapter = wrap(value, name)
    check_same_place(name, adapter, package, device_id)
    shape = tuple(adapter.shape)
    if layout is None and (adapter.dtype != "float32" or adapter.size != 1 or len(shape) > 1):
        raise ValueError(
            f"{name} must be a number or a float32 tensor of shape () or (1,); "
            f"got dtype {adapter.dtype}, shape {shape}"
        )
    if layout is not None and (adapter.dtype != "float32" or shape != layout.shape):
        raise ValueError(
            f"{name} was planned as a {layout.mode.name} scale: a float32 tensor of shape {layout.shape}; "
            f"got dtype {adapter.dtype}, shape {shape} (create a new Matmul for another scaling mode)"
        )
    return adapter


def wrap_scales(values: Mapping[str, Any], package: str, device_id: Any) -> dict[str, Any]:
    """Wrap tensor-valued quantization scales (numbers stay) and check dtype, package and device.

    Args:
        values: scale name -> number or tensor (the scales that are given).
        package, device_id: the operands' package and device.

    Raises:
        TypeError: a tensor of another package (or no tensor at all).
        ValueError: another device, or a dtype other than float32.
    """
    out: dict[str, Any] = {}
    for n, value in values.items():
        if _is_number(value):
            out[n] = value
            continue
        name = f"quantization scale {n!r}"
        adapter = wrap(value, name)
        check_same_place(name, adapter, package, device_id)
        if adapter.dtype != "float32":
            raise ValueError(f"{name} must be a number or a float32 tensor; got dtype {adapter.dtype}")
        out[n] = adapter
    return out


def wrap_epilog_inputs(
    epilog_inputs: Mapping[str, Any] | None, package: str, device_id: Any, scale_names: tuple[str, ...]
) -> tuple[dict[str, TensorAdapter], dict[str, Any]]:
    """Split ``epilog_inputs`` into wrapped tensors and scale values (names in ``scale_names``).

    Raises:
        TypeError: not a mapping, a value that is no tensor, or another package.
        ValueError: another device.
    """
    if epilog_inputs is None:
        return {}, {}
    if not isinstance(epilog_inputs, Mapping):
        raise TypeError(
            f"epilog_inputs must be a dict of name -> tensor; got {type(epilog_inputs).__name__}: {epilog_inputs!r}"
        )
    tensors: dict[str, TensorAdapter] = {}
    scales: dict[str, Any] = {}
    for key, value in epilog_inputs.items():
        if not isinstance(key, str):
            raise TypeError(f"epilog_inputs keys must be str; got {key!r}")
        if key in scale_names:
            scales[key] = value
            continue
        adapter = wrap(value, f"epilog input {key!r}")
        check_same_place(f"epilog input {key!r}", adapter, package, device_id)
        tensors[key] = adapter
    return tensors, scales
