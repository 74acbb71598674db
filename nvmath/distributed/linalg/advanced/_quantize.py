"""Types of the distributed matmul: the result type, FP8 quantization scales and ``result_amax``
(pure: no GPU, no communication).

cuBLASMp scales FP8 operands as cuBLASLt does, through descriptor pointers to float32 scalars on the
device (``{A,B,D}_SCALE_POINTER``, mode ``SCALAR_FP32``):
``D = scale_d * (alpha * scale_a * scale_b * op(A) @ op(B) + beta * C)``, and ``AMAX_D_POINTER``
receives ``max |D|`` before ``scale_d``. As in nvmath-python, the scales of ``a`` and ``b`` are
required with FP8 operands and the scale of ``d`` with an FP8 result; ``result_amax`` needs an FP8
result. The amax returned is of *this rank's* block of D (reduce it with a MAX over the ranks for
the global one).

Scope (refused with a clear error): tensor-wide scales only (numbers or float32 device tensors of one
element); ``c`` with an FP8 result (C and D share one descriptor, so C would have to be FP8 too);
``block_scaling`` (MXFP8 needs compute capability 10.0); a ``result_type`` other than the
operands' for non-FP8 operands.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from nvmath._internal import dtypes

__all__ = ["FP8", "FP8_RESULTS", "TypePlan", "scales_given", "type_plan"]

FP8 = ("float8_e4m3fn", "float8_e5m2")
FP8_RESULTS = ("float16", "bfloat16", "float32", *FP8)


@dataclasses.dataclass(frozen=True)
class TypePlan:
    """The types of one problem: operands, result (= ``c``'s), the scales used, whether amax is made."""

    operand: str
    result: str
    scales: tuple[str, ...]
    amax: bool

    @property
    def fp8(self) -> bool:
        return self.operand in FP8


def scales_given(quantization_scales: Any) -> dict[str, Any]:
    """``{name: value}`` of the scales given as a ``MatmulQuantizationScales``, a dict or None.

    Raises:
        TypeError: another kind of value, or a dict with names other than a, b, c, d.
    """
    if quantization_scales is None:
        return {}
    if isinstance(quantization_scales, Mapping):
        values = dict(quantization_scales)
    elif all(hasattr(quantization_scales, n) for n in "abcd"):
        values = {n: getattr(quantization_scales, n) for n in "abcd"}
    else:
        raise TypeError(
            "quantization_scales must be a MatmulQuantizationScales, a dict with keys a, b, c, d, or None; "
            f"got {type(quantization_scales).__name__}"
        )
    bad = set(values) - set("abcd")
    if bad:
        raise TypeError(f"quantization_scales: unknown names {sorted(bad)}; allowed: a, b, c, d")
    return {n: v for n, v in values.items() if v is not None}


def _result_dtype(operand: str, c_dtype: str | None, result_type: int | None) -> str:
    if result_type is not None:
        return dtypes.from_cuda_data_type(int(result_type))
    return c_dtype or operand


def type_plan(operand: str, c_dtype: str | None, result_type: int | None, scales: set[str] | frozenset[str],
              result_amax: bool, block_scaling: bool) -> TypePlan:  # fmt: skip
    """Check the types and scales of a problem and return its :class:`TypePlan`.

    Args:
        operand: the dtype of ``a`` and ``b``.
        c_dtype: ``c``'s dtype, or None.
        result_type: ``MatmulOptions.result_type`` (a ``cudaDataType``) or None.
        scales: the names of the quantization scales given.
        result_amax, block_scaling: the options.

    Raises:
        NotImplementedError: ``block_scaling``; a non-FP8 ``result_type`` other than the operands'.
        ValueError: a result type FP8 operands cannot produce, ``c`` with an FP8 result, ``c`` of
            another dtype than the result, missing or unexpected scales, amax without an FP8 result.
    """
    if block_scaling:
        raise NotImplementedError(
            "MatmulOptions.block_scaling (MXFP8) is not implemented in the distributed matmul (it needs "
            "compute capability 10.0)"
        )
    result = _result_dtype(operand, c_dtype, result_type)
    if operand not in FP8:
        if result != operand:
            raise NotImplementedError(
                f"a result type ({result}) other than the operands' ({operand}) is implemented for FP8 "
                "operands only"
            )
        if scales or result_amax:
            raise ValueError(
                f"quantization_scales and result_amax need FP8 operands (float8_e4m3fn / float8_e5m2); "
                f"the operands are {operand}"
            )
        return TypePlan(operand, result, (), False)
    if result not in FP8_RESULTS:
        raise ValueError(f"FP8 operands give a result of {', '.join(FP8_RESULTS)}; got result type {result}")
    if c_dtype is not None and (result in FP8 or c_dtype != result):
        raise ValueError(
            f"c is {c_dtype}: with FP8 operands c must have the result's dtype ({result}), and an FP8 "
            "result takes no c"
        )
    required = {"a", "b"} | ({"d"} if result in FP8 else set())
    if set(scales) != required:
        raise ValueError(
            f"quantization_scales: {operand} operands with a {result} result need the scales "
            f"{sorted(required)}; got {sorted(scales)}"
        )
    if result_amax and result not in FP8:
        raise ValueError(f"result_amax needs an FP8 result; the result is {result}")
    return TypePlan(operand, result, tuple(sorted(required)), bool(result_amax))
