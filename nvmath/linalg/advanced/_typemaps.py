"""Data types of the cuBLASLt matmul: supported combinations, defaults and the D dtype rules.

The tables transcribe the ``cublasLtMatmul`` data-type tables of the cuBLAS documentation (CUDA 13)
for the dtypes nvmath supports (no integer GEMMs):

* regular GEMMs: A and B share one dtype; C and D share one dtype, which may be wider than A/B
  (bf16/fp16 inputs with float32 C/D) -- the "mixed precision" combinations;
* FP8 GEMMs (compute capability >= 8.9, cuBLASLt >= 12.8): A/B in e4m3 x e4m3, e4m3 x e5m2 or
  e5m2 x e4m3 (never e5m2 x e5m2), C in bf16/fp16/fp32 and D either C's dtype or FP8.

Everything here is pure: dtypes are canonical names (``"bfloat16"``, ``"float8_e4m3fn"``, ...) and
cuBLAS enums are ints / IntEnums; unsupported combinations raise ``ValueError`` listing what is
supported, before any GPU work.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

from nvmath._errors import warn_at_caller
from nvmath._internal import dtypes as _dt
from nvmath._internal.dtypes import CudaDataType as DT
from nvmath.linalg.advanced._options import MatmulComputeType as CT

__all__ = [
    "BLOCK_SCALING_MIN_CC",
    "COMPUTE_MIN_VERSION",
    "FP8_MIN_CC",
    "FP8_MIN_CUBLASLT_VERSION",
    "SUPPORTED_AB_PAIRS",
    "TypeTraits",
    "bias_dtypes",
    "check_device_support",
    "check_quantization_scales",
    "check_supported",
    "default_compute_and_scale",
    "default_compute_for_scale",
    "default_scale_for_compute",
    "is_narrow",
    "is_supported",
    "resolve_types",
    "scale_numpy_dtype",
    "supported_cd_dtypes",
]

F16, BF16, F32, F64 = "float16", "bfloat16", "float32", "float64"
C64, C128 = "complex64", "complex128"
E4M3, E5M2 = "float8_e4m3fn", "float8_e5m2"

_C32 = (CT.COMPUTE_32F, CT.COMPUTE_32F_PEDANTIC)
_C32_FAST = (
    CT.COMPUTE_32F_FAST_16F,
    CT.COMPUTE_32F_FAST_16BF,
    CT.COMPUTE_32F_FAST_TF32,
    CT.COMPUTE_32F_EMULATED_16BFX9,
)
_C16 = (CT.COMPUTE_16F, CT.COMPUTE_16F_PEDANTIC)
_C64 = (CT.COMPUTE_64F, CT.COMPUTE_64F_PEDANTIC, CT.COMPUTE_64F_EMULATED_FIXEDPOINT)

SUPPORTED_AB_PAIRS: dict[tuple[str, str], tuple[CT, DT]] = {
    (E4M3, E4M3): (CT.COMPUTE_32F, DT.CUDA_R_32F),
    (E4M3, E5M2): (CT.COMPUTE_32F, DT.CUDA_R_32F),
    (E5M2, E4M3): (CT.COMPUTE_32F, DT.CUDA_R_32F),
    (BF16, BF16): (CT.COMPUTE_32F, DT.CUDA_R_32F),
    (F16, F16): (CT.COMPUTE_32F, DT.CUDA_R_32F),
    (F32, F32): (CT.COMPUTE_32F, DT.CUDA_R_32F),
    (F64, F64): (CT.COMPUTE_64F, DT.CUDA_R_64F),
    (C64, C64): (CT.COMPUTE_32F, DT.CUDA_C_32F),
    (C128, C128): (CT.COMPUTE_64F, DT.CUDA_C_64F),
}
"""(A dtype, B dtype) -> (default compute type, default scale type)."""

_FP8_CD_SAME = ((BF16, BF16), (BF16, E4M3), (F16, E4M3), (F16, F16), (F32, F32))
_FP8_CD_MIXED = ((BF16, BF16), (BF16, E4M3), (BF16, E5M2), (F16, E4M3), (F16, E5M2), (F16, F16), (F32, F32))

# (compute types, scale type, A/B dtype or FP8 pair, ((C dtype, D dtype), ...))
_ROWS: tuple[tuple[tuple[CT, ...], DT, Any, tuple[tuple[str, str], ...]], ...] = (
    (_C16, DT.CUDA_R_16F, F16, ((F16, F16),)),
    (_C32, DT.CUDA_R_32F, BF16, ((BF16, BF16), (F32, F32))),
    (_C32, DT.CUDA_R_32F, F16, ((F16, F16), (F32, F32))),
    (_C32 + _C32_FAST, DT.CUDA_R_32F, F32, ((F32, F32),)),
    (_C32 + _C32_FAST, DT.CUDA_C_32F, C64, ((C64, C64),)),
    (_C64, DT.CUDA_R_64F, F64, ((F64, F64),)),
    (_C64, DT.CUDA_C_64F, C128, ((C128, C128),)),
    ((CT.COMPUTE_32F,), DT.CUDA_R_32F, (E4M3, E4M3), _FP8_CD_SAME),
    ((CT.COMPUTE_32F,), DT.CUDA_R_32F, (E4M3, E5M2), _FP8_CD_MIXED),
    ((CT.COMPUTE_32F,), DT.CUDA_R_32F, (E5M2, E4M3), _FP8_CD_MIXED),
)

FP8_MIN_CC: tuple[int, int] = (8, 9)
"""FP8 GEMMs need compute capability 8.9 or newer."""
BLOCK_SCALING_MIN_CC: tuple[int, int] = (10, 0)
"""MXFP8 block scaling needs compute capability 10.0 or newer."""
FP8_MIN_CUBLASLT_VERSION: int = 120800
"""FP8 support as nvmath documents it: cuBLASLt 12.8 (``major * 10000 + minor * 100 + patch``)."""
COMPUTE_MIN_VERSION: dict[CT, int] = {
    CT.COMPUTE_32F_EMULATED_16BFX9: 120900,
    CT.COMPUTE_64F_EMULATED_FIXEDPOINT: 130100,
}
"""Compute types newer than cuBLASLt 12.0 -> the first cuBLASLt version that has them."""

_SCALE_NUMPY = {
    DT.CUDA_R_16F: F16,
    DT.CUDA_R_16BF: BF16,
    DT.CUDA_R_32F: F32,
    DT.CUDA_R_64F: F64,
    DT.CUDA_C_32F: C64,
    DT.CUDA_C_64F: C128,
}


def is_narrow(dtype: str) -> bool:
    """Return whether ``dtype`` is an 8-bit (or narrower) floating type that needs scales."""
    return dtype in (E4M3, E5M2)


def _name(dt: Any) -> str:
    return DT(int(dt)).name if int(dt) in DT._value2member_map_ else str(dt)


def _pair_list() -> str:
    return ", ".join(f"({a}, {b})" for a, b in SUPPORTED_AB_PAIRS)


def default_compute_and_scale(a_dtype: str, b_dtype: str) -> tuple[CT, DT]:
    """Return the default (compute type, scale type) for A/B dtypes.

    Raises:
        ValueError: the (A, B) pair is not supported; the message lists the supported pairs.
    """
    try:
        return SUPPORTED_AB_PAIRS[(a_dtype, b_dtype)]
    except KeyError:
        hint = " (e5m2 x e5m2 is not supported by cuBLASLt)" if a_dtype == b_dtype == E5M2 else ""
        raise ValueError(
            f"unsupported operand dtypes (a={a_dtype}, b={b_dtype}){hint}; "
            f"the supported (a, b) pairs are: {_pair_list()}"
        ) from None


def default_scale_for_compute(compute_type: int, a_dtype: str) -> DT:
    """Return the default scale type for a compute type (complex A gives a complex scale)."""
    ct = CT(int(compute_type))
    cplx = a_dtype in (C64, C128)
    if ct in _C16:
        return DT.CUDA_R_16F
    if ct in _C32 + _C32_FAST:
        return DT.CUDA_C_32F if cplx else DT.CUDA_R_32F
    if ct in _C64:
        return DT.CUDA_C_64F if cplx else DT.CUDA_R_64F
    raise ValueError(f"compute_type {ct.name} is not supported (integer GEMMs are not); use a floating type")


def default_compute_for_scale(scale_type: int) -> CT:
    """Return the default compute type for a scale type."""
    st = DT(int(scale_type))
    table = {
        DT.CUDA_R_16F: CT.COMPUTE_16F,
        DT.CUDA_R_16BF: CT.COMPUTE_32F,
        DT.CUDA_R_32F: CT.COMPUTE_32F,
        DT.CUDA_C_32F: CT.COMPUTE_32F,
        DT.CUDA_R_64F: CT.COMPUTE_64F,
        DT.CUDA_C_64F: CT.COMPUTE_64F,
    }
    try:
        return table[st]
    except KeyError:
        allowed = ", ".join(s.name for s in table)
        raise ValueError(f"scale_type {st.name} is not supported; allowed: {allowed}") from None


def _ab_key(a_dtype: str, b_dtype: str) -> Any:
    return a_dtype if a_dtype == b_dtype and not is_narrow(a_dtype) else (a_dtype, b_dtype)


def supported_cd_dtypes(
    compute_type: int, scale_type: int, a_dtype: str, b_dtype: str
) -> tuple[tuple[str, str], ...]:
    """Return the (C dtype, D dtype) pairs cuBLASLt supports for this compute/scale/A/B combination."""
    key = _ab_key(a_dtype, b_dtype)
    for computes, scale, ab, cds in _ROWS:
        if ab == key and int(scale_type) == scale and int(compute_type) in computes:
            return cds
    return ()


def is_supported(compute_type: int, scale_type: int, a_dtype: str, b_dtype: str) -> bool:
    """Return whether cuBLASLt supports this (compute type, scale type, A dtype, B dtype)."""
    return bool(supported_cd_dtypes(compute_type, scale_type, a_dtype, b_dtype))


def _supported_combos(a_dtype: str, b_dtype: str) -> str:
    key = _ab_key(a_dtype, b_dtype)
    parts = []
    for computes, scale, ab, _ in _ROWS:
        if ab == key:
            parts.append(f"{'/'.join(c.name for c in computes)} with scale {scale.name}")
    return "; ".join(parts)


def check_supported(compute_type: int, scale_type: int, a_dtype: str, b_dtype: str) -> None:
    """Raise ``ValueError`` (listing the supported combinations) unless :func:`is_supported`."""
    default_compute_and_scale(a_dtype, b_dtype)
    if not is_supported(compute_type, scale_type, a_dtype, b_dtype):
        raise ValueError(
            f"compute type {CT(int(compute_type)).name} with scale type {_name(scale_type)} is not supported "
            f"for a={a_dtype}, b={b_dtype}; supported: {_supported_combos(a_dtype, b_dtype)}"
        )


def scale_numpy_dtype(scale_type: int) -> str:
    """Return the dtype name alpha and beta are stored in for a scale type."""
    return _SCALE_NUMPY[DT(int(scale_type))]


@dataclasses.dataclass(frozen=True)
class TypeTraits:
    """The resolved data types of one matmul problem.

    Attributes:
        a_dtype, b_dtype: operand dtypes.
        c_dtype: C's dtype as cuBLASLt sees it (D's when no ``c``; float16 when D is FP8 and no ``c``).
        d_dtype: the result dtype.
        compute_type, scale_type: the cuBLAS compute type and the alpha/beta type.
        scale_dtype: dtype name alpha/beta are stored in.
        narrow_inputs: A/B are FP8 (needs scales, the "TN" layout, 16-byte alignment).
        narrow_result: D is FP8 (needs a D scale; allows ``result_amax``).
    """

    a_dtype: str
    b_dtype: str
    c_dtype: str
    d_dtype: str
    compute_type: CT
    scale_type: DT
    scale_dtype: str
    narrow_inputs: bool
    narrow_result: bool

    @property
    def cuda_types(self) -> dict[str, int]:
        """``cudaDataType`` values of A, B, C and D (for ``cublasLtMatrixLayoutCreate``)."""
        return {n: _dt.cuda_data_type(getattr(self, f"{n}_dtype")) for n in "abcd"}


def _resolve_compute_scale(a_dtype: str, b_dtype: str, compute: Any, scale: Any) -> tuple[CT, DT]:
    dflt_compute, dflt_scale = default_compute_and_scale(a_dtype, b_dtype)
    if compute is None and scale is None:
        return dflt_compute, dflt_scale
    if compute is None:
        compute = default_compute_for_scale(scale)
    elif scale is None:
        scale = default_scale_for_compute(compute, a_dtype)
    check_supported(compute, scale, a_dtype, b_dtype)
    return CT(int(compute)), DT(int(scale))


def _resolve_cd(
    a_dtype: str, c_dtype: str | None, result_type: Any, inplace: bool, cds: tuple[tuple[str, str], ...]
) -> tuple[str, str]:
    if inplace and result_type is not None and c_dtype is not None:
        if _dt.from_cuda_data_type(result_type) != c_dtype:
            warn_at_caller(
                f"result_type={_name(result_type)} is ignored with inplace=True (the result is c, {c_dtype})"
            )
        result_type = None
    if result_type is not None:
        d = _dt.from_cuda_data_type(result_type)
    else:
        d = c_dtype if c_dtype is not None else a_dtype
    if c_dtype is None:
        c = F16 if is_narrow(d) else d
        if not is_narrow(d) and (c, d) not in cds:
            c = next((cc for cc, dd in cds if dd == d), d)
    else:
        c = c_dtype
    return c, d


def resolve_types(
    a_dtype: str,
    b_dtype: str,
    c_dtype: str | None = None,
    *,
    compute_type: int | None = None,
    scale_type: int | None = None,
    result_type: int | None = None,
    inplace: bool = False,
) -> TypeTraits:
    """Resolve the compute, scale, C and D types of a matmul and check cuBLASLt supports them.

    D is ``result_type`` if given, else ``c``'s dtype, else ``a``'s dtype. Without ``c``, C is D's
    dtype (float16 when D is FP8). With ``inplace`` D is ``c``'s dtype (``result_type`` is ignored,
    with a warning).

    Raises:
        ValueError: an unsupported (A, B) pair, compute/scale combination or (C, D) combination;
            the message lists the supported ones.
    """
    compute, scale = _resolve_compute_scale(a_dtype, b_dtype, compute_type, scale_type)
    cds = supported_cd_dtypes(compute, scale, a_dtype, b_dtype)
    if result_type is not None:
        result_type = DT(int(result_type))
    c, d = _resolve_cd(a_dtype, c_dtype, result_type, inplace, cds)
    if (c, d) not in cds:
        allowed = ", ".join(f"(c={cc}, d={dd})" for cc, dd in cds)
        what = "result_type" if result_type is not None else ("c" if c_dtype is not None else "a")
        raise ValueError(
            f"unsupported C/D dtypes (c={c}, d={d}, from {what}) for a={a_dtype}, b={b_dtype} with "
            f"{compute.name} and scale {scale.name}; supported: {allowed}"
        )
    return TypeTraits(
        a_dtype=a_dtype,
        b_dtype=b_dtype,
        c_dtype=c,
        d_dtype=d,
        compute_type=compute,
        scale_type=scale,
        scale_dtype=scale_numpy_dtype(scale),
        narrow_inputs=is_narrow(a_dtype) or is_narrow(b_dtype),
        narrow_result=is_narrow(d),
    )


def bias_dtypes(types: TypeTraits) -> tuple[str, ...]:
    """Return the bias dtypes allowed for these types; the first one is the default.

    Regular GEMMs: D's dtype only (cuBLASLt 13.1 rejects another ``BIAS_DATA_TYPE`` with
    INVALID_VALUE). FP8 GEMMs: bf16 when C is bf16 or float32, fp16 when C is fp16 (cuBLASLt's FP8
    table; a float32 bias with a float32 D is accepted by the heuristic but computes garbage).
    """
    if types.narrow_inputs:
        return (F16,) if types.c_dtype == F16 else (BF16,)
    return (types.d_dtype,)


def check_device_support(
    types: TypeTraits,
    compute_capability: tuple[int, int],
    cublaslt_version: int,
    *,
    block_scaling: bool = False,
) -> None:
    """Raise ``ValueError`` when the device or the loaded cuBLASLt cannot run these types.

    Args:
        types: the resolved types.
        compute_capability: ``(major, minor)`` of the device.
        cublaslt_version: ``cublasLtGetVersion()`` (``major * 10000 + minor * 100 + patch``).
        block_scaling: ``MatmulOptions.block_scaling``.
    """
    cc = tuple(compute_capability)
    if types.narrow_inputs:
        if cc < FP8_MIN_CC:
            raise ValueError(f"FP8 matmul needs compute capability >= 8.9; this device has {cc[0]}.{cc[1]}")
        if cublaslt_version < FP8_MIN_CUBLASLT_VERSION:
            raise ValueError(
                f"FP8 matmul needs cuBLASLt >= {FP8_MIN_CUBLASLT_VERSION}; loaded: {cublaslt_version}"
            )
    if block_scaling:
        if not types.narrow_inputs:
            raise ValueError(
                f"block_scaling=True needs FP8 operands; got a={types.a_dtype}, b={types.b_dtype}"
            )
        if cc < BLOCK_SCALING_MIN_CC:
            raise ValueError(
                f"block_scaling needs compute capability >= 10.0; this device has {cc[0]}.{cc[1]}"
            )
    need = COMPUTE_MIN_VERSION.get(types.compute_type)
    if need is not None and cublaslt_version < need:
        raise ValueError(f"{types.compute_type.name} needs cuBLASLt >= {need}; loaded: {cublaslt_version}")


def check_quantization_scales(
    given: Iterable[str], types: TypeTraits, *, block_scaling: bool = False
) -> None:
    """Check which quantization scales are given against what the dtypes need.

    ``a`` and ``b`` are required with FP8 inputs; ``d`` with an FP8 result (not with block scaling,
    which returns ``"d_out_scale"`` instead); ``c`` only when C is FP8 (never, in cuBLASLt's tables).
    Scales given where none is used raise too.

    Raises:
        ValueError: a missing or an unexpected scale, naming both sets.
    """
    given = frozenset(given)
    required: set[str] = set()
    if types.narrow_inputs:
        required |= {"a", "b"}
    if types.narrow_result and not block_scaling:
        required.add("d")
    if is_narrow(types.c_dtype):
        required.add("c")
    missing, extra = required - given, given - required
    if missing or extra:
        raise ValueError(
            f"quantization_scales: for a={types.a_dtype}, b={types.b_dtype}, c={types.c_dtype}, "
            f"d={types.d_dtype} the scales {sorted(required) or 'none'} are required; "
            f"missing {sorted(missing)}, not allowed {sorted(extra)}"
        )
