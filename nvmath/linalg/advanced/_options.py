"""Options, preferences, enums and qualifiers of the cuBLASLt matmul (``nvmath.linalg.advanced``).

The field names, their order and their defaults follow nvmath-python 1.0, so code written for it
runs unchanged. Two deliberate differences:

* The classes are plain mutable dataclasses, as nvmath-python's (fields can be given positionally
  and assigned after construction). Each field is checked where it is set (construction or
  assignment), the rules across fields when a planner takes the object; the planner keeps a frozen
  snapshot (:class:`nvmath._internal.options.MutableOptions`), so changing the object later never
  reaches a plan or a cache key. A ``dict`` of fields is accepted wherever an options object is.
* ``MatmulOptions.memory_limit`` keeps its ``"80%"`` default, but with that default the planner caps
  the cuBLASLt workspace at :data:`DEFAULT_WORKSPACE_CAP` (32 MiB, the vendor recommendation for
  Hopper and Blackwell). Any other value is used as given: ask for more to let the heuristic pick
  algorithms that need a larger workspace. See :func:`workspace_limit_bytes`. ``autotune()`` with the
  default also times the algorithms cuBLASLt offers with up to :data:`AUTOTUNE_WORKSPACE_CAP`
  (1 GiB; split-K kernels of skinny products need more than 32 MiB) and those it offers with at most
  :data:`AUTOTUNE_NARROW_WORKSPACE_CAP` (1 MiB: the heuristic then prefers kernels without split-K,
  which win on some skinny products), and keeps one only when it wins.

Enum values are those of ``cublasLt.h`` / ``cublas_api.h`` (CUDA 13); the tests check them.
"""

from __future__ import annotations

import dataclasses
import enum
import logging
import math
import numbers
from typing import Any, Literal

import numpy as np

from nvmath._internal.dtypes import CudaDataType
from nvmath._internal.options import (
    check_blocking,
    check_bool,
    check_int,
    check_logger,
    check_memory_limit,
    parse_memory_limit,
)
from nvmath._internal.options import MutableOptions

__all__ = [
    "AUTOTUNE_NARROW_WORKSPACE_CAP",
    "AUTOTUNE_WORKSPACE_CAP",
    "DEFAULT_MEMORY_LIMIT",
    "DEFAULT_WORKSPACE_CAP",
    "LOGGER_NAME",
    "MatmulComputeType",
    "MatmulEpilog",
    "MatmulEpilogPreferences",
    "MatmulInnerShape",
    "MatmulNumericalImplFlags",
    "MatmulOptions",
    "MatmulPlanPreferences",
    "MatmulQuantizationScales",
    "MatmulReductionScheme",
    "matrix_qualifiers_dtype",
    "to_compute_type",
    "to_data_type",
    "workspace_limit_bytes",
]

DEFAULT_WORKSPACE_CAP: int = 32 * 1024 * 1024
"""Workspace cap (bytes) used when ``memory_limit`` keeps its default: 32 MiB."""

AUTOTUNE_WORKSPACE_CAP: int = 1024 * 1024 * 1024
"""Workspace cap (bytes) of the extra candidates ``Matmul.autotune()`` times when ``memory_limit``
keeps its default: 1 GiB (bounded by the default's 80% of the device)."""

AUTOTUNE_NARROW_WORKSPACE_CAP: int = 1024 * 1024
"""Workspace cap (bytes) of the other extra candidates ``Matmul.autotune()`` times: 1 MiB (torch's
cuBLASLt default). Measured on an H200 (bf16, M=64, K=14336, N=4096, bias): this cap's top algorithm
(no split-K) ran in 31.8 us; every one offered under 32 MiB was split-K, 35.5 us at best."""

DEFAULT_MEMORY_LIMIT: str = "80%"
"""The default of ``MatmulOptions.memory_limit`` (nvmath-python's); it means "cap at 32 MiB"."""

LOGGER_NAME: str = "nvmath.linalg.advanced"
"""The logger used when ``MatmulOptions.logger`` is ``None`` (never the root logger)."""


class MatmulEpilog(enum.IntEnum):
    """cuBLASLt epilogues (``cublasLtEpilogue_t``)."""

    DEFAULT = 1
    RELU = 2
    RELU_AUX = 130
    BIAS = 4
    RELU_BIAS = 6
    RELU_AUX_BIAS = 134
    DRELU = 136
    DRELU_BGRAD = 152
    GELU = 32
    GELU_AUX = 160
    GELU_BIAS = 36
    GELU_AUX_BIAS = 164
    DGELU = 192
    DGELU_BGRAD = 208
    BGRADA = 256
    BGRADB = 512


class MatmulComputeType(enum.IntEnum):
    """cuBLAS compute types (``cublasComputeType_t``)."""

    COMPUTE_16F = 64
    COMPUTE_16F_PEDANTIC = 65
    COMPUTE_32F = 68
    COMPUTE_32F_PEDANTIC = 69
    COMPUTE_32F_FAST_16F = 74
    COMPUTE_32F_FAST_16BF = 75
    COMPUTE_32F_FAST_TF32 = 77
    COMPUTE_32F_EMULATED_16BFX9 = 78
    COMPUTE_64F = 70
    COMPUTE_64F_PEDANTIC = 71
    COMPUTE_64F_EMULATED_FIXEDPOINT = 79
    COMPUTE_32I = 72
    COMPUTE_32I_PEDANTIC = 73


class MatmulNumericalImplFlags(enum.IntEnum):
    """Numerical implementation flags (``cublasLtNumericalImplFlags_t``); combine with ``|``."""

    OP_TYPE_FMA = 0x01
    OP_TYPE_TENSOR_HMMA = 0x02
    OP_TYPE_TENSOR_IMMA = 0x04
    OP_TYPE_TENSOR_DMMA = 0x08
    OP_TYPE_TENSOR_MASK = 0xFE
    OP_TYPE_MASK = 0xFF
    ACCUMULATOR_16F = 0x01 << 8
    ACCUMULATOR_32F = 0x02 << 8
    ACCUMULATOR_64F = 0x04 << 8
    ACCUMULATOR_32I = 0x08 << 8
    ACCUMULATOR_TYPE_MASK = 0xFF << 8
    INPUT_TYPE_16F = 0x01 << 16
    INPUT_TYPE_16BF = 0x02 << 16
    INPUT_TYPE_TF32 = 0x04 << 16
    INPUT_TYPE_32F = 0x08 << 16
    INPUT_TYPE_64F = 0x10 << 16
    INPUT_TYPE_8I = 0x20 << 16
    INPUT_TYPE_8F_E4M3 = 0x40 << 16
    INPUT_TYPE_8F_E5M2 = 0x80 << 16
    INPUT_TYPE_MASK = 0xFF << 16
    # the names of cublasLt.h (CUBLASLT_NUMERICAL_IMPL_FLAGS_INPUT_*), kept as aliases
    INPUT_16F = 0x01 << 16
    INPUT_16BF = 0x02 << 16
    INPUT_TF32 = 0x04 << 16
    INPUT_32F = 0x08 << 16
    INPUT_64F = 0x10 << 16
    INPUT_8I = 0x20 << 16
    INPUT_8F_E4M3 = 0x40 << 16
    INPUT_8F_E5M2 = 0x80 << 16
    OP_INPUT_TYPE_MASK = 0xFF << 16
    GAUSSIAN = 0x01 << 32
    ALL = (1 << 64) - 1


class MatmulReductionScheme(enum.IntEnum):
    """Split-K reduction schemes (``cublasLtReductionScheme_t``)."""

    NONE = 0
    INPLACE = 1
    COMPUTE_TYPE = 2
    OUTPUT_TYPE = 4
    MASK = 7


class MatmulInnerShape(enum.IntEnum):
    """Inner MMA shapes (``cublasLtMatmulInnerShape_t``)."""

    UNDEFINED = 0
    MMA884 = 1
    MMA1684 = 2
    MMA1688 = 3
    MMA16816 = 4


matrix_qualifiers_dtype = np.dtype([("structure", object), ("is_conjugate", "<i4")])
"""Per-operand qualifiers (a, b, c); only ``is_conjugate`` is used by the cuBLASLt matmul."""


def _enum_member(name: str, value: Any, enum_cls: type[enum.IntEnum], what: str) -> Any:
    """Convert an int (or member) to a member of ``enum_cls``; ``None`` passes through."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an int ({what}) or None; got {type(value).__name__}: {value!r}")
    try:
        return enum_cls(int(value))
    except ValueError:
        allowed = ", ".join(f"{m.name}={m.value}" for m in enum_cls)
        raise ValueError(f"{name}={value!r} is not a {what}; allowed: {allowed}") from None


def to_compute_type(value: Any, name: str = "compute_type") -> MatmulComputeType | None:
    """Convert an int to :class:`MatmulComputeType` (``None`` stays ``None``)."""
    return _enum_member(name, value, MatmulComputeType, "cublasComputeType_t value")


def to_data_type(value: Any, name: str) -> CudaDataType | None:
    """Convert an int to :class:`~nvmath._internal.dtypes.CudaDataType` (``None`` stays ``None``)."""
    return _enum_member(name, value, CudaDataType, "cudaDataType value")


def _check_allocator(value: Any) -> None:
    if value is None:
        return
    if not (hasattr(value, "memalloc") or hasattr(value, "memalloc_async")):
        raise TypeError(
            "allocator must be None or an object with a memalloc() or memalloc_async() method "
            f"(a BaseCUDAMemoryManager); got {type(value).__name__}: {value!r}"
        )


@dataclasses.dataclass(unsafe_hash=True)
class MatmulOptions(MutableOptions):
    """Options of :class:`Matmul` / :func:`matmul` (fields, order and defaults as nvmath-python 1.0).

    Attributes:
        inplace: write the result into ``c`` (``c`` required, not broadcast, non-overlapping).
        compute_type: a :class:`MatmulComputeType` value; ``None`` picks the default for the dtypes.
        scale_type: a ``cudaDataType`` value for alpha/beta; ``None`` derives it.
        result_type: a ``cudaDataType`` value for D; ``None``: ``c``'s dtype, else ``a``'s.
        result_amax: return the max absolute value of D as ``"result_amax"`` (narrow D only).
        block_scaling: MXFP8 block scaling (compute capability >= 10.0).
        sm_count_target: number of SMs to target; 0 means all.
        fast_accumulation: FP8 fast accumulation.
        device_id: the GPU used for CPU operands.
        handle: a cuBLASLt handle; ``None`` uses a cached per-thread, per-device handle.
        logger: a ``logging.Logger``; ``None`` means ``logging.getLogger("nvmath.linalg.advanced")``.
        memory_limit: workspace limit: bytes (int), a fraction in (0, 1] (float), ``"N%"`` or
            ``"x [k|m|g][i]b"``. The default ``"80%"`` is capped at 32 MiB; other values are used as given.
        blocking: ``True`` or ``"auto"`` (non-blocking when operands are on the GPU).
        allocator: an object with ``memalloc``/``memalloc_async``; ``None`` uses the package's.
    """

    inplace: bool = False
    compute_type: int | None = None
    scale_type: int | None = None
    result_type: int | None = None
    result_amax: bool = False
    block_scaling: bool = False
    sm_count_target: int | None = 0
    fast_accumulation: bool | None = False
    device_id: int = 0
    handle: int | None = None
    logger: logging.Logger | None = None
    memory_limit: int | float | str | None = DEFAULT_MEMORY_LIMIT
    blocking: Literal[True, "auto"] = "auto"
    allocator: Any = None

    def _check_field(self, name: str, value: Any) -> Any:
        return _check_matmul_option(name, value)


def _check_matmul_option(name: str, value: Any) -> Any:
    """Check and normalize one field of :class:`MatmulOptions`."""
    if name in ("inplace", "result_amax", "block_scaling"):
        check_bool(name, value)
    elif name == "fast_accumulation":
        value = False if value is None else value
        check_bool(name, value)
    elif name == "compute_type":
        value = to_compute_type(value)
    elif name in ("scale_type", "result_type"):
        value = to_data_type(value, name)
    elif name == "sm_count_target":
        value = 0 if value is None else value
        check_int(name, value, minimum=0)
    elif name == "device_id":
        check_int(name, value, minimum=0)
    elif name == "handle":
        if value is not None:  # an address: execute() hands it to cuBLASLt unchecked
            check_int(name, value, minimum=0, maximum=2**64 - 1)
    elif name == "logger":
        check_logger(value)
    elif name == "memory_limit":
        value = DEFAULT_MEMORY_LIMIT if value is None else value
        check_memory_limit(value)
    elif name == "blocking":
        check_blocking(value)
    elif name == "allocator":
        _check_allocator(value)
    return value


def workspace_limit_bytes(
    memory_limit: float | str, device_memory_bytes: int, *, autotune: bool = False
) -> int:
    """Return the ``MAX_WORKSPACE_BYTES`` the planner offers cuBLASLt.

    The default ``"80%"`` means ``min(80% of the device, DEFAULT_WORKSPACE_CAP)`` (with ``autotune``:
    ``AUTOTUNE_WORKSPACE_CAP``); any other value is converted to bytes and used as given (so
    ``"1 GiB"`` lets the heuristic use up to 1 GiB).

    Args:
        memory_limit: ``MatmulOptions.memory_limit``.
        device_memory_bytes: the total memory of the device.
        autotune: the cap of the extra candidates ``autotune()`` times.

    Raises:
        TypeError, ValueError: ``memory_limit`` is not understood.
    """
    limit = parse_memory_limit(memory_limit, device_memory_bytes)
    if isinstance(memory_limit, str) and memory_limit.strip() == DEFAULT_MEMORY_LIMIT:
        return min(limit, AUTOTUNE_WORKSPACE_CAP if autotune else DEFAULT_WORKSPACE_CAP)
    return limit


@dataclasses.dataclass(unsafe_hash=True)
class MatmulEpilogPreferences(MutableOptions):
    """Epilog preferences.

    Attributes:
        aux_type: ``cudaDataType`` of the GELU aux output (``None``: D's dtype, C's when D is FP8).
            Only GELU aux epilogs use it; an FP8 value needs the epilog input
            ``"aux_quantization_scale"``.
        aux_amax: also return ``"gelu_aux_amax"`` (float32, shape ``(1,)``); needs an FP8 aux type.
    """

    aux_type: int | None = None
    aux_amax: bool = False

    def _check_field(self, name: str, value: Any) -> Any:
        if name == "aux_type":
            return to_data_type(value, "aux_type")
        check_bool(name, value)
        return value


_MAX_U64 = (1 << 64) - 1


@dataclasses.dataclass(unsafe_hash=True)
class MatmulPlanPreferences(MutableOptions):
    """Preferences of ``plan()`` (fields, order and defaults as nvmath-python 1.0).

    ``None`` for a field means its default.

    Attributes:
        reduction_scheme_mask: allowed split-K reduction schemes (:class:`MatmulReductionScheme` bits).
        max_waves_count: upper bound on waves per SM (0: no limit).
        numerical_impl_mask: allowed implementations (:class:`MatmulNumericalImplFlags` bits).
        limit: the number of algorithms the heuristic returns (>= 1).
        epilog: :class:`MatmulEpilogPreferences`, a dict of its fields, or ``None``.
    """

    reduction_scheme_mask: int | None = MatmulReductionScheme.MASK
    max_waves_count: float | None = 0.0
    numerical_impl_mask: int | None = MatmulNumericalImplFlags.ALL
    limit: int | None = 8
    epilog: MatmulEpilogPreferences | dict | None = None

    _nested_fields = ("epilog",)

    def _check_field(self, name: str, value: Any) -> Any:
        if name == "epilog":
            return _epilog_preferences(value)
        if value is None:
            value = _PLAN_DEFAULTS[name]
        if name == "reduction_scheme_mask":
            check_int(name, value, minimum=0, maximum=MatmulReductionScheme.MASK)
        elif name == "max_waves_count":
            _check_waves(value)
            value = float(value)
        elif name == "numerical_impl_mask":
            check_int(name, value, minimum=0, maximum=_MAX_U64)
        elif name == "limit":
            check_int(name, value, minimum=1)
        return value


_PLAN_DEFAULTS: dict[str, Any] = {
    "reduction_scheme_mask": MatmulReductionScheme.MASK,
    "max_waves_count": 0.0,
    "numerical_impl_mask": MatmulNumericalImplFlags.ALL,
    "limit": 8,
}


def _check_waves(value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"max_waves_count must be a float; got {type(value).__name__}: {value!r}")
    if not (math.isfinite(value) and value >= 0):
        raise ValueError(f"max_waves_count must be a finite number >= 0; got {value!r}")


def _epilog_preferences(value: Any) -> MatmulEpilogPreferences:
    if value is None:
        return MatmulEpilogPreferences()
    if isinstance(value, MatmulEpilogPreferences):
        return value
    if isinstance(value, dict):
        names = {f.name for f in dataclasses.fields(MatmulEpilogPreferences)}
        unknown = sorted(str(k) for k in value if k not in names)
        if unknown:
            raise TypeError(f"epilog preferences: unknown field(s) {unknown}; the fields are {sorted(names)}")
        return MatmulEpilogPreferences(**value)
    raise TypeError(
        "epilog must be a MatmulEpilogPreferences object, a dict of its fields or None; "
        f"got {type(value).__name__}: {value!r}"
    )


def _check_scale(name: str, value: Any) -> None:
    """A quantization scale is None, a finite non-zero real number or a tensor-like object."""
    if value is None:
        return
    if isinstance(value, bool):
        raise TypeError(f"quantization scale {name!r} must be a number or a tensor; got bool {value!r}")
    if isinstance(value, numbers.Real):
        if not math.isfinite(value) or value == 0:
            raise ValueError(f"quantization scale {name!r} must be finite and non-zero; got {value!r}")
        return
    if isinstance(value, (str, bytes, numbers.Complex)) or not (
        hasattr(value, "shape") or hasattr(value, "__dlpack__")
    ):
        raise TypeError(
            f"quantization scale {name!r} must be None, an int/float or a tensor; "
            f"got {type(value).__name__}: {value!r}"
        )


@dataclasses.dataclass(unsafe_hash=True)
class MatmulQuantizationScales(MutableOptions):
    """Per-tensor, per-row/column or per-block scales of narrow-precision (FP8) operands.

    Each of ``a``, ``b``, ``c``, ``d`` is ``None``, an int/float, or a float32 tensor of the operands'
    package and memory space. Which ones are required depends on the dtypes (see
    :func:`nvmath.linalg.advanced._typemaps.check_quantization_scales`). ``c`` and ``d`` are
    tensor-wide (a number, shape ``()`` or ``(1,)``). The shapes of ``a`` (M x K) and ``b`` (K x N)
    select cuBLASLt's scaling mode (``KB = ceil(K / 128)``; see :mod:`nvmath.linalg.advanced._scaling`):

    * tensor-wide: a number, ``()`` or ``(1,)``, for both;
    * outer vectors (compute capability 9.0+): ``a`` of ``(M,)`` / ``(M, 1)``, ``b`` of ``(N,)`` / ``(1, N)``;
    * 128-element blocks along K (VEC128) for ``a``: ``(M, KB)``, for ``b``: ``(KB, N)``; 128x128 blocks
      for ``a``: ``(ceil(M/128), KB)``, for ``b``: ``(KB, ceil(N/128))`` (compute capability 9.0+; VEC128
      with VEC128 or with 128x128 either way round, not 128x128 with 128x128).

    Outer-vector and block scales need FP8 ``a`` / ``b``, a bf16/fp16/fp32 result and no batch. A
    tensor not in the layout cuBLASLt reads (VEC128: contiguous along M / N; 128x128: contiguous
    along K with rows padded to a multiple of 4 elements) is copied when given; later in-place
    changes to it are then not seen until ``reset_operands``.
    """

    a: Any = None
    b: Any = None
    c: Any = None
    d: Any = None

    def _check_field(self, name: str, value: Any) -> Any:
        _check_scale(name, value)
        return value

    def given(self) -> frozenset[str]:
        """Return the names of the scales that are set."""
        return frozenset(n for n in ("a", "b", "c", "d") if getattr(self, n) is not None)
