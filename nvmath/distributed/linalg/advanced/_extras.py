"""The tensors a distributed Matmul hands cuBLASMp through its matmul descriptor: FP8 quantization
scales, the ``result_amax`` output, the epilog's inputs and outputs.

:class:`DescriptorTensors` owns them for one plan. Scales given as numbers are uploaded once into
float32 device scalars (the operands' package); tensors are used in place after checks. Outputs
(aux outputs, amax) are allocated at plan time and overwritten by each ``execute``. The attribute
list (:meth:`DescriptorTensors.attributes`) is what :class:`~._mpobjects.MpMatmulDesc` gets set; a
reset of scales or epilog inputs re-sets only the pointers.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping
from typing import Any

import numpy as np

from nvmath._internal import dtypes
from nvmath._internal.tensors import wrap
from nvmath._internal.tensors.base import TensorAdapter
from nvmath._internal.tensors.copy import copy_into

from ._epilogs import EpilogLayout, check_epilog_inputs
from ._quantize import TypePlan

__all__ = ["DescriptorTensors", "check_scale"]

_POINTER = np.uint64


def _is_number(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def check_scale(name: str, value: Any, package: str, device_id: int) -> Any:
    """A number, or a wrapped float32 tensor of one element on ``device_id`` of ``package``.

    Raises:
        TypeError: neither a number nor a tensor. ValueError: a tensor of another dtype, size,
            package or device.
    """
    if _is_number(value):
        return float(value)
    op = wrap(value, f"quantization scale {name!r}")
    if op.dtype != "float32" or op.size != 1 or len(op.shape) > 1:
        raise ValueError(
            f"quantization scale {name!r} must be a number or a float32 tensor of shape () or (1,); got "
            f"{op.dtype} of shape {tuple(op.shape)}"
        )
    if op.package != package or op.device_id != device_id:
        raise ValueError(
            f"quantization scale {name!r} is a {op.package} tensor on device {op.device_id}; the operands "
            f"are {package} tensors on device {device_id}"
        )
    return op


class DescriptorTensors:
    """Scales, amax and epilog tensors of one plan (see the module docstring).

    Args:
        types: the problem's :class:`~._quantize.TypePlan`.
        like: a tensor of the operands' package and device (new tensors are made like it).
        device: the GPU.
        stream: the ``StreamHandle`` ordering the uploads.
    """

    def __init__(self, types: TypePlan, like: TensorAdapter, device: int, stream: Any):
        self.types, self.like, self.device, self.stream = types, like, device, stream
        self.scales: dict[str, TensorAdapter] = {}
        self._owned: set[str] = set()  # scales held in this plan's device scalars (given as numbers)
        self.outputs: dict[str, TensorAdapter] = {}
        self.inputs: dict[str, TensorAdapter] = {}
        self.layout: EpilogLayout | None = None
        if types.amax:
            self.outputs["result_amax"] = self._zeros((1,), "float32")

    # ------------------------------------------------------------------------------------- scales
    def set_scales(self, checked: Mapping[str, Any]) -> None:
        """Use the scales of :func:`check_scale` (numbers go into this plan's device scalars)."""
        for name, value in checked.items():
            if isinstance(value, TensorAdapter):
                self.scales[name] = value
                self._owned.discard(name)
                continue
            if name in self._owned:
                slot = self.scales[name]
            else:
                slot = self.like.empty((1,), "float32", device_id=self.device, stream=self.stream)
                self._owned.add(name)
            copy_into(slot, wrap(np.array([value], dtype=np.float32)), self.stream)
            self.scales[name] = slot

    # ------------------------------------------------------------------------------------ epilogs
    def set_epilog(self, layout: EpilogLayout, inputs: Mapping[str, TensorAdapter]) -> None:
        """Use ``layout``'s epilog with ``inputs`` (checked) and allocate its outputs."""
        check_epilog_inputs(layout, inputs)
        self.layout, self.inputs = layout, dict(inputs)
        for name, t in layout.outputs.items():
            self.outputs[name] = self.like.empty(
                t.shape, t.dtype, strides=t.strides, device_id=self.device, stream=self.stream
            )

    def reset_inputs(self, inputs: Mapping[str, TensorAdapter]) -> None:
        """New epilog inputs of the planned shapes (``inputs`` may name a subset)."""
        if self.layout is None:
            if inputs:
                raise ValueError(
                    "epilog_inputs given, but the Matmul was planned without an epilog that takes them"
                )
            return
        merged = {**self.inputs, **inputs}
        check_epilog_inputs(self.layout, merged)
        self.inputs = merged

    def _zeros(self, shape: tuple[int, ...], dtype: str) -> TensorAdapter:
        out = self.like.empty(shape, dtype, device_id=self.device, stream=self.stream)
        return copy_into(out, wrap(np.zeros(shape, dtype=dtypes.to_numpy_dtype(dtype))), self.stream)

    # --------------------------------------------------------------------------------- attributes
    def attributes(self) -> list[tuple[str, int, Any]]:
        """``[(MatmulDescriptorAttribute name, value, storage dtype)]`` to set on the descriptor."""
        attrs: list[tuple[str, int, Any]] = [
            (f"{n.upper()}_SCALE_POINTER", t.data_ptr, _POINTER) for n, t in sorted(self.scales.items())
        ]
        if "result_amax" in self.outputs:
            attrs.append(("AMAX_D_POINTER", self.outputs["result_amax"].data_ptr, _POINTER))
        layout = self.layout
        if layout is None or layout.spec.epilog == 0:
            return attrs
        attrs.append(("EPILOGUE", int(layout.spec.epilog), np.int32))
        tensors = {**self.inputs, **self.outputs}
        if layout.bias_name is not None:
            bias = tensors[layout.bias_name]
            attrs.append(("BIAS_POINTER", bias.data_ptr, _POINTER))
            attrs.append(("BIAS_DATA_TYPE", dtypes.cuda_data_type(bias.dtype), np.int32))
        if layout.aux_name is not None:
            attrs.append(("EPILOGUE_AUX_POINTER", tensors[layout.aux_name].data_ptr, _POINTER))
            attrs.append(("EPILOGUE_AUX_LD", int(layout.aux_ld), np.int64))  # type: ignore[arg-type]
        return attrs

    def aux(self) -> dict[str, Any]:
        """The aux outputs returned with the result (user tensors), ``{}`` when there are none."""
        return {name: t.tensor for name, t in self.outputs.items()}
