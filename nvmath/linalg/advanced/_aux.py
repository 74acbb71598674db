"""The aux outputs of one plan on the ``execute()`` path: allocation, descriptor pointers, FP8 aux.

:class:`AuxOutputs` allocates a plan's aux outputs (stream-ordered, with the operands' package) on
each execute and points the descriptor at those cuBLASLt writes (:meth:`AuxOutputs.new`); after
``cublasLtMatmul`` :meth:`AuxOutputs.finish` runs the library's own step, if the plan has one (the
quantization of an FP8 GELU aux, :mod:`._aux_quantize`), and returns the outputs the caller gets.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from nvmath._internal.streams import StreamHandle
from nvmath._internal.tensors import TensorAdapter
from nvmath.linalg.advanced import _aux_quantize
from nvmath.linalg.advanced._descriptors import PointerAttribute
from nvmath.linalg.advanced._epilogs import AuxOutputSpec, AuxQuantization
from nvmath.linalg.advanced._operands import ScaleSlot
from nvmath.linalg.advanced._results import ResultMaker

__all__ = ["AuxOutputs", "Made"]

Made = list[tuple[str, tuple[Any, int, bool]]]
"""``(name, (tensor, device address, is_adapter))`` per allocated output (see :meth:`ResultMaker.new`)."""


class _Quantize:
    """The FP8 aux step of a plan: positions of its outputs in :data:`Made`, its scale, its kernels."""

    __slots__ = ("amax", "kernel", "q", "scale", "source", "target", "zero")

    def __init__(self, q: AuxQuantization, names: Sequence[str], scale: ScaleSlot, device_id: int):
        self.q = q
        self.source, self.target = names.index(q.source), names.index(q.target)
        self.amax = names.index(q.amax) if q.amax is not None else -1
        self.scale = scale  # read on each launch: reset_operands replaces its value (and address)
        self.kernel, self.zero = _aux_quantize.kernels(q.source_dtype, q.target_dtype, device_id)

    def run(self, made: Made, stream: StreamHandle) -> Made:
        q = self.q
        amax = made[self.amax][1][1] if self.amax >= 0 else 0
        _aux_quantize.quantize(
            self.kernel, self.zero, made[self.source][1][1], made[self.target][1][1], self.scale.ptr, amax,
            rows=q.rows, ld=q.ld, total=q.total, stream=stream,
        )  # fmt: skip
        return [entry for i, entry in enumerate(made) if i != self.source]  # the wide aux is dropped


class AuxOutputs:
    """The aux outputs of one plan (``Plan.aux``): made like ``template``, in the plan's order.

    Args:
        aux: ``(spec, descriptor pointer or None)`` per output (``Plan.aux``).
        template: an empty device tensor of the operands' package (the outputs' package and device).
        quantization: the plan's FP8 aux step (``EpilogTraits.aux_quantization``), or ``None``.
        scales: the plan's epilog scale inputs (``Plan.epilog_scales``).
        device_id: the execution device (the step's kernels are compiled and loaded here, at plan time).
    """

    __slots__ = ("_makers", "_step")

    def __init__(
        self, aux: Sequence[tuple[AuxOutputSpec, PointerAttribute | None]], template: TensorAdapter,
        quantization: AuxQuantization | None, scales: Mapping[str, ScaleSlot], device_id: int,
    ):  # fmt: skip
        self._makers = [
            (spec.name, ResultMaker(template, spec.shape, spec.strides, spec.dtype), ptr) for spec, ptr in aux
        ]
        self._step = None
        if quantization is not None:
            names = [spec.name for spec, _ in aux]
            self._step = _Quantize(quantization, names, scales[quantization.scale], device_id)

    def new(self, stream: StreamHandle) -> Made:
        """Allocate every output on ``stream`` and point the descriptor at those cuBLASLt writes."""
        made = []
        for name, maker, attr in self._makers:
            out = maker.new(stream)
            if attr is not None:
                attr.set(out[1])
            made.append((name, out))
        return made

    def pointer_output(self) -> tuple[ResultMaker, PointerAttribute] | None:
        """``(maker, attribute)`` of a plan whose aux is one output that cuBLASLt writes through one
        descriptor pointer attribute, with no library step after the call (BGRADB's bias gradient): a
        compiled twin can allocate it and point the attribute itself; else ``None``."""
        if self._step is not None or len(self._makers) != 1:
            return None
        _, maker, attr = self._makers[0]
        return None if attr is None else (maker, attr)

    def finish(self, made: Made, stream: StreamHandle) -> Made:
        """After ``cublasLtMatmul`` on ``stream``: run the library's step; return the caller's outputs."""
        step = self._step
        return made if step is None else step.run(made, stream)
