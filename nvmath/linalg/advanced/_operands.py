"""Operands as the matmul planner holds them: device copies of host data, scales, cheap reset checks.

A :class:`Slot` pairs the user's tensor (its adapter) with the tensor cuBLASLt reads: the same
object for GPU operands, a device mirror for host operands (numpy, torch CPU, ...), which
``reset`` refills by copying. :class:`ScaleSlot` holds an FP8 quantization scale: a Python number
(uploaded once to a float32 device scalar) or a float32 tensor of one element.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping
from typing import Any

import numpy as np

from nvmath._internal.streams import StreamHandle
from nvmath._internal.tensors import TensorAdapter, wrap
from nvmath.linalg.advanced._handles import pointer_alignment
from nvmath.linalg.advanced._layout import OperandSpec

__all__ = ["ScaleSlot", "Slot", "check_same_place", "spec_of", "wrap_scale"]


def spec_of(adapter: TensorAdapter) -> OperandSpec:
    """The :class:`OperandSpec` (shape, strides, dtype, lazy-conjugation bit) of a wrapped tensor."""
    return OperandSpec(
        tuple(adapter.shape), tuple(adapter.strides), adapter.dtype, bool(adapter.is_conjugate)
    )


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

    def __init__(self, name: str, user: TensorAdapter, exec_device: int, stream: StreamHandle | None):
        self.name = name
        self.exec_device = exec_device
        self.user: TensorAdapter | None = user
        self.host = user.device != "cuda"
        self.user_spec = spec_of(user)
        self.device: TensorAdapter | None = user.to(exec_device, stream) if self.host else user
        self.ptr = self.device.data_ptr
        self.spec = spec_of(self.device)
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
            self.device.copy_(new, stream)
        self.ptr = self.device.data_ptr
        self.user = new

    def release(self) -> None:
        """Drop the references to the user's tensor and to the mirror of a host tensor."""
        self.user = None
        self.device = None


def _is_number(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


class ScaleSlot:
    """An FP8 scale: a float32 device scalar read by cuBLASLt through a descriptor pointer.

    Args:
        name: for messages (``"quantization scale 'a'"``, ...).
        value: a Python number or a float32 tensor of one element (already wrapped, or not).
        package, device_id: the operands' package and device (a tensor must share them; a host
            tensor's device is the execution device).
        exec_device: the GPU the matmul runs on.
        stream: orders the upload of numbers and host tensors.
    """

    __slots__ = ("device", "name", "number", "ptr", "user")

    def __init__(
        self, name: str, value: Any, package: str, device_id: Any, exec_device: int, stream: StreamHandle
    ):
        self.name = name
        self.number = float(value) if _is_number(value) else None
        if self.number is not None:
            host = wrap(np.array([self.number], dtype=np.float32))
            self.user = None
            self.device = host.to(exec_device, stream)
        else:
            user = wrap_scale(name, value, package, device_id)
            self.user = user
            self.device = user.to(exec_device, stream) if user.device != "cuda" else user
        self.ptr = self.device.data_ptr

    def replace(self, value: Any, package: str, device_id: Any, stream: StreamHandle) -> None:
        """Use a new value (a number is uploaded into the existing device scalar when there is one)."""
        if _is_number(value) and self.number is not None and self.user is None:
            self.number = float(value)
            self.device.copy_(wrap(np.array([self.number], dtype=np.float32)), stream)
            return
        fresh = ScaleSlot(self.name, value, package, device_id, _device_of(self.device), stream)
        self.number, self.user, self.device, self.ptr = fresh.number, fresh.user, fresh.device, fresh.ptr


def _device_of(adapter: TensorAdapter) -> int:
    return int(adapter.device_id)  # type: ignore[arg-type]


def wrap_scale(name: str, value: Any, package: str, device_id: Any) -> TensorAdapter:
    """Wrap a tensor-valued scale and check it: float32, one element, the operands' package and device."""
    adapter = wrap(value, name)
    check_same_place(name, adapter, package, device_id)
    if adapter.dtype != "float32" or adapter.size != 1 or len(adapter.shape) > 1:
        raise ValueError(
            f"{name} must be a number or a float32 tensor of shape () or (1,); "
            f"got dtype {adapter.dtype}, shape {tuple(adapter.shape)}"
        )
    return adapter


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
