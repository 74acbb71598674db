"""The read-only attributes nvmath-python 1.0's ``FFT`` objects carry, with the same meanings.

Mixed into :class:`nvmath.fft.FFT`; everything is read from the planner's traits, options and
execution, so nothing here is state of its own.
"""

from __future__ import annotations

import dataclasses
from typing import Any

__all__ = ["FFTAttributes", "TensorLayout"]


@dataclasses.dataclass(frozen=True)
class TensorLayout:
    """A tensor layout: ``shape`` and ``strides`` (in elements)."""

    shape: tuple[int, ...]
    strides: tuple[int, ...]


class FFTAttributes:
    """``options``, ``execution_options``, ``axes``, ``inplace``, ``package``, ``memory_space``,
    ``execution_space``, ``device_id``, ``operand_data_type``, ``result_data_type``,
    ``fft_abstract_type`` and ``internal_operand_layout`` of an :class:`~nvmath.fft.FFT`."""

    _traits: Any
    _options: Any
    _execution: Any
    _package: str
    _device_id: Any
    _cpu: bool

    @property
    def options(self) -> Any:
        """The :class:`~nvmath.fft.FFTOptions` the transform was made with (a frozen snapshot)."""
        return self._options

    @property
    def execution_options(self) -> Any:
        """The resolved ``ExecutionCUDA`` / ``ExecutionCPU``."""
        return self._execution

    @property
    def axes(self) -> tuple[int, ...]:
        """The transformed axes, non-negative, in the caller's order."""
        return self._traits.axes

    @property
    def inplace(self) -> bool:
        """Whether the result overwrites the operand."""
        return self._traits.inplace

    @property
    def package(self) -> str:
        """The operand's package (``"numpy"``, ``"cupy"``, ``"torch"``, ...)."""
        return self._package

    @property
    def memory_space(self) -> str:
        """Where the operand lives: ``"cuda"`` or ``"cpu"``."""
        t = self._traits
        if not t.cross_space:
            return t.execution
        return "cpu" if t.execution == "cuda" else "cuda"

    @property
    def execution_space(self) -> str:
        """Where the transform runs: ``"cuda"`` or ``"cpu"``."""
        return self._traits.execution

    @property
    def device_id(self) -> int | str:
        """The GPU the transform runs on, or ``"cpu"`` for CPU execution."""
        return "cpu" if self._cpu else self._device_id

    @property
    def operand_data_type(self) -> str:
        """The operand's dtype name (``"complex64"``, ...)."""
        return self._traits.operand_dtype

    @property
    def result_data_type(self) -> str:
        """The result's dtype name."""
        return self._traits.result_dtype

    @property
    def fft_abstract_type(self) -> str:
        """``"C2C"``, ``"R2C"`` or ``"C2R"``."""
        return self._traits.fft_type

    @property
    def internal_operand_layout(self) -> TensorLayout:
        """The layout the plan reads: the operand's, or that of the internal copy cuFFT reads instead
        (C2R, host operands, ``layout_fallback="copy"``). Callback offsets index this layout."""
        t = self._traits
        strides = t.staging_strides if t.staging_strides is not None else t.operand_strides
        return TensorLayout(t.operand_shape, strides)

    def get_input_layout(self) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """``(shape, strides)`` of the input the transform reads (:attr:`internal_operand_layout`);
        strides in elements. It differs from the operand's when cuFFT reads a copy of it."""
        layout = self.internal_operand_layout
        return layout.shape, layout.strides

    def get_output_layout(self) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """``(shape, strides)`` of the result, strides in elements."""
        t = self._traits
        if t.inplace:
            return self.get_input_layout()
        return t.result_shape, t.result_strides
