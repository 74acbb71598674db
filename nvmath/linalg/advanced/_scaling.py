"""FP8 scaling modes of the cuBLASLt matmul: tensor-wide, outer-vector and 128-element block scales.

cuBLASLt scales each FP8 operand in a mode (``cublasLtMatmulMatrixScale_t``) set with the
``A_SCALE_MODE`` / ``B_SCALE_MODE`` descriptor attributes. nvmath infers the mode of the ``a`` and
``b`` quantization scales from their shapes, in the user's orientation (``a`` is M x K, ``b`` is
K x N, ``KB = ceil(K / 128)``):

===============  ===================================  ===================================
mode             scale of ``a``                       scale of ``b``
===============  ===================================  ===================================
SCALAR_32F       a number, ``()`` or ``(1,)``         a number, ``()`` or ``(1,)``
OUTER_VEC_32F    ``(M,)`` or ``(M, 1)``: per row      ``(N,)`` or ``(1, N)``: per column
VEC128_32F       ``(M, KB)``: per row and K-block     ``(KB, N)``: per K-block and column
BLK128x128_32F   ``(ceil(M/128), KB)``: 128x128       ``(KB, ceil(N/128))``: 128x128
===============  ===================================  ===================================

cuBLASLt pairs the modes of A and B as (SCALAR, SCALAR), (OUTER_VEC, OUTER_VEC), (VEC128, BLK128x128),
(VEC128, VEC128) or (BLK128x128, VEC128); the first pair of this list that both shapes fit wins. A
shape that fits several modes (``(M, 1)`` with ``K <= 128``, any scale of a one-row ``a``, ...)
describes the same scaling in each of them, so this precedence never changes the result.

cuBLASLt reads the non-scalar scales with implicit leading dimensions (there is no layout
attribute for them). In the user's orientation, in elements (the layouts torch's ``_scaled_mm``
hands to cuBLASLt on Hopper):

* outer vectors: contiguous;
* VEC128 of ``a``: strides ``(1, M)`` (contiguous along M); of ``b``: ``(N, 1)`` (along N);
* BLK128x128 of ``a``: strides ``(L4, 1)``; of ``b``: ``(1, L4)``: contiguous along K with
  ``L4 = KB`` rounded up to a multiple of 4 (16 bytes).

These layouts do not depend on the orientation the planner picks (the transposed product makes
``b`` cuBLASLt's A): both FP8 operands are contiguous along K in either, so each scale simply
follows its operand. A scale in another layout (or not 16-byte aligned, or in host memory) is
copied into the expected one when it is given (constructor or ``reset_operands``), never in
``execute()``.

Restrictions of the non-scalar modes (checked before any GPU work): FP8 ``a`` and ``b``; a
bfloat16, float16 or float32 result (so no ``d`` scale and no ``result_amax``); no batch; not with
``block_scaling=True`` (MXFP8); compute capability 9.0+ and cuBLASLt 12.9+.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any

from nvmath.bindings.cublasLt import MatmulMatrixScale as ScaleMode

__all__ = [
    "ALLOWED_PAIRS",
    "SCALE_BLOCK",
    "SCALE_MODES_MIN_CC",
    "SCALE_MODES_MIN_CUBLASLT_VERSION",
    "TENSOR_WIDE",
    "ScaleLayout",
    "ScaleMode",
    "ScalingTraits",
    "accepted_shapes",
    "candidate_modes",
    "check_scaling",
    "check_scaling_support",
    "infer_scaling",
    "scale_layout",
]

SCALE_BLOCK: int = 128
"""The block size of VEC128_32F and BLK128x128_32F scales."""
SCALE_MODES_MIN_CC: tuple[int, int] = (9, 0)
"""Outer-vector and block scales need compute capability 9.0 (Hopper) or newer."""
SCALE_MODES_MIN_CUBLASLT_VERSION: int = 120900
"""Outer-vector and block scales need cuBLASLt 12.9 (``major * 10000 + minor * 100 + patch``)."""

SCALAR, OUTER, VEC128, BLK128 = (
    ScaleMode.SCALAR_32F,
    ScaleMode.OUTER_VEC_32F,
    ScaleMode.VEC128_32F,
    ScaleMode.BLK128x128_32F,
)

ALLOWED_PAIRS: tuple[tuple[ScaleMode, ScaleMode], ...] = (
    (SCALAR, SCALAR),
    (OUTER, OUTER),
    (VEC128, BLK128),
    (VEC128, VEC128),
    (BLK128, VEC128),
)
"""The (a, b) mode pairs cuBLASLt supports, in the order the inference tries them."""

_WHAT = {
    SCALAR: "tensor-wide",
    OUTER: "outer-vector",
    VEC128: "1-D 128-element block",
    BLK128: "128x128 block",
}


def _cdiv(x: int, y: int) -> int:
    return -(-x // y)


@dataclasses.dataclass(frozen=True)
class ScaleLayout:
    """How cuBLASLt reads one outer-vector or block scale, in the user's orientation of its operand.

    Attributes:
        mode: the scale mode.
        shape: the scale's shape as given.
        strides: the element strides cuBLASLt assumes (any stride fits an axis of extent 1).
    """

    mode: ScaleMode
    shape: tuple[int, ...]
    strides: tuple[int, ...]

    def fits(self, strides: Sequence[int]) -> bool:
        """Return whether a tensor of :attr:`shape` with ``strides`` is laid out as cuBLASLt reads it."""
        return all(s == r for s, r, e in zip(strides, self.strides, self.shape) if e > 1)


@dataclasses.dataclass(frozen=True)
class ScalingTraits:
    """The scale modes of ``a`` and ``b`` (user operands) and the layouts of non-scalar scales.

    Attributes:
        a, b: the modes.
        a_layout, b_layout: the :class:`ScaleLayout` of a non-scalar scale, else ``None``.
    """

    a: ScaleMode = SCALAR
    b: ScaleMode = SCALAR
    a_layout: ScaleLayout | None = None
    b_layout: ScaleLayout | None = None

    @property
    def tensor_wide(self) -> bool:
        """Whether both scales are tensor-wide (no scale-mode attribute is set)."""
        return self.a == SCALAR and self.b == SCALAR

    def mode(self, name: str) -> ScaleMode:
        """The mode of the scale of user operand ``name`` (``"a"`` or ``"b"``)."""
        return self.a if name == "a" else self.b

    def layout(self, name: str) -> ScaleLayout | None:
        """The layout of the scale ``name`` (``None`` for tensor-wide scales and for ``c`` / ``d``)."""
        return {"a": self.a_layout, "b": self.b_layout}.get(name)

    def describe(self) -> str:
        """``"a: VEC128_32F, b: BLK128x128_32F"``."""
        return f"a: {self.a.name}, b: {self.b.name}"

    def descriptor_attributes(self, a_operand: str, b_operand: str) -> list[tuple[str, int]]:
        """The ``*_SCALE_MODE`` attributes for cuBLASLt's A and B (fed by user operands ``a_operand`` /
        ``b_operand``); none for tensor-wide scales."""
        if self.tensor_wide:
            return []
        return [("A_SCALE_MODE", int(self.mode(a_operand))), ("B_SCALE_MODE", int(self.mode(b_operand)))]


TENSOR_WIDE = ScalingTraits()
"""Tensor-wide scales for ``a`` and ``b`` (or no scales)."""


def accepted_shapes(name: str, m: int, n: int, k: int) -> dict[ScaleMode, tuple[tuple[int, ...], ...]]:
    """The shapes of a non-scalar scale of user operand ``name`` (``"a"`` or ``"b"``), per mode."""
    kb = _cdiv(k, SCALE_BLOCK)
    if name == "a":
        return {OUTER: ((m,), (m, 1)), VEC128: ((m, kb),), BLK128: ((_cdiv(m, SCALE_BLOCK), kb),)}
    return {OUTER: ((n,), (1, n)), VEC128: ((kb, n),), BLK128: ((kb, _cdiv(n, SCALE_BLOCK)),)}


def candidate_modes(name: str, shape: Sequence[int], m: int, n: int, k: int) -> tuple[ScaleMode, ...]:
    """The modes a scale of ``shape`` fits (``()`` for a number).

    A one-element scale of at most one dimension fits SCALAR_32F, and every mode whose scale has
    one element for this problem (e.g. the outer vector of a one-row ``a``).
    """
    shape = tuple(int(e) for e in shape)
    single = len(shape) <= 1 and math.prod(shape) == 1
    found = [SCALAR] if single else []
    for mode, shapes in accepted_shapes(name, m, n, k).items():
        if shape in shapes or (single and math.prod(shapes[0]) == 1):
            found.append(mode)
    return tuple(found)


def scale_layout(name: str, mode: ScaleMode, shape: Sequence[int], m: int, n: int, k: int) -> ScaleLayout:
    """The :class:`ScaleLayout` cuBLASLt expects for a scale of ``shape`` in a non-scalar ``mode``."""
    shape = tuple(int(e) for e in shape)
    l4 = _cdiv(_cdiv(k, SCALE_BLOCK), 4) * 4
    if math.prod(shape) == 1:
        strides: tuple[int, ...] = (1,) * len(shape)
    elif mode == OUTER:
        strides = (1,) if len(shape) == 1 else ((1, 1) if name == "a" else (n, 1))
    elif mode == VEC128:
        strides = (1, m) if name == "a" else (n, 1)
    else:
        strides = (l4, 1) if name == "a" else (1, l4)
    return ScaleLayout(mode, shape, strides)


def _shape_list(name: str, m: int, n: int, k: int) -> str:
    shapes = accepted_shapes(name, m, n, k)
    rows = "M" if name == "a" else "N"
    kb = "ceil(K/128)"
    logical = {
        OUTER: f"({rows},) or " + ("(M, 1)" if name == "a" else "(1, N)"),
        VEC128: f"(M, {kb})" if name == "a" else f"({kb}, N)",
        BLK128: f"(ceil(M/128), {kb})" if name == "a" else f"({kb}, ceil(N/128))",
    }
    parts = ["a number or shape () / (1,) (tensor-wide)"]
    for mode, got in shapes.items():
        parts.append(f"{logical[mode]} = {' or '.join(map(str, got))} ({_WHAT[mode]}, {mode.name})")
    return "; ".join(parts)


def _no_pair_message(ca: tuple[ScaleMode, ...], cb: tuple[ScaleMode, ...]) -> str:
    na, nb = ("/".join(x.name for x in modes) for modes in (ca, cb))
    return (
        f"quantization scales of a ({na}) and b ({nb}) cannot be combined; cuBLASLt pairs "
        "tensor-wide with tensor-wide, outer-vector with outer-vector, and 1-D 128-element blocks (VEC128_32F) "
        "with VEC128_32F or 128x128 blocks (BLK128x128_32F) either way round (not two 128x128 block scales); "
        "expand a tensor-wide scale to the other mode's shape (e.g. torch.full((M,), s)) to mix them"
    )


def infer_scaling(shapes: Mapping[str, Sequence[int] | None], m: int, n: int, k: int) -> ScalingTraits:
    """Infer the scale modes of ``a`` and ``b`` from their shapes (``None`` or ``()`` for a number).

    Args:
        shapes: ``{"a": shape, "b": shape, ...}``: a missing name is tensor-wide; ``c`` and ``d``
            are tensor-wide only.
        m, n, k: the problem's extents (after 1-D promotion).

    Raises:
        ValueError: a shape fits no mode (the message lists the shapes for this problem), the two
            modes are not a pair cuBLASLt supports, or a ``c`` / ``d`` scale is not tensor-wide.
    """
    for name in ("c", "d"):
        shape = tuple(shapes.get(name) or ())
        if shape not in ((), (1,)):
            raise ValueError(
                f"quantization scale {name!r} must be a number or a float32 tensor of shape () or (1,) "
                f"(tensor-wide); got shape {shape}"
            )
    found = {}
    for name in ("a", "b"):
        shape = tuple(shapes.get(name) or ())
        found[name] = candidate_modes(name, shape, m, n, k)
        if not found[name]:
            raise ValueError(
                f"quantization scale {name!r} of shape {shape} fits no scaling mode for M={m}, N={n}, K={k}; "
                f"allowed: {_shape_list(name, m, n, k)}"
            )
    for pa, pb in ALLOWED_PAIRS:
        if pa in found["a"] and pb in found["b"]:
            break
    else:
        raise ValueError(_no_pair_message(found["a"], found["b"]))
    if pa == pb == SCALAR:
        return TENSOR_WIDE
    la = scale_layout("a", pa, tuple(shapes.get("a") or ()), m, n, k)
    lb = scale_layout("b", pb, tuple(shapes.get("b") or ()), m, n, k)
    return ScalingTraits(pa, pb, la, lb)


def check_scaling(scaling: ScalingTraits, types: Any, *, batch_count: int, block_scaling: bool) -> None:
    """Check the restrictions of outer-vector and block scales (nothing to check for tensor-wide ones).

    Args:
        scaling: the inferred modes.
        types: the resolved :class:`~._typemaps.TypeTraits`.
        batch_count: the number of matrices in the batch.
        block_scaling: ``MatmulOptions.block_scaling`` (MXFP8).

    Raises:
        ValueError: non-FP8 operands, an FP8 result, a batch, or ``block_scaling=True``.
    """
    if scaling.tensor_wide:
        return
    what = f"outer-vector / block quantization scales ({scaling.describe()})"
    if block_scaling:
        raise ValueError(
            f"{what} cannot be combined with block_scaling=True (MXFP8 on compute capability 10.0); "
            "pass block_scaling=False"
        )
    if not types.narrow_inputs:
        raise ValueError(f"{what} need FP8 operands; got a={types.a_dtype}, b={types.b_dtype}")
    if types.narrow_result:
        raise ValueError(
            f"{what} need a bfloat16, float16 or float32 result (no d scale, no result_amax); the result "
            f"dtype is {types.d_dtype}: pass c of such a dtype or options.result_type (e.g. CUDA_R_16BF)"
        )
    if batch_count > 1:
        raise ValueError(
            f"{what} apply to one matrix (cuBLASLt has no batch stride for them); this problem has a batch of "
            f"{batch_count}: fold the batch into M (reshape a to (-1, K)) or use tensor-wide scales"
        )


def check_scaling_support(
    scaling: ScalingTraits, compute_capability: Sequence[int], cublaslt_version: int
) -> None:
    """Raise ``ValueError`` when the device or the loaded cuBLASLt lacks the inferred scale modes."""
    if scaling.tensor_wide:
        return
    cc = tuple(compute_capability)
    what = f"FP8 outer-vector / block scaling ({scaling.describe()})"
    if cc < SCALE_MODES_MIN_CC:
        raise ValueError(
            f"{what} needs compute capability >= 9.0 (Hopper); this device has {cc[0]}.{cc[1]}: "
            "use tensor-wide scales"
        )
    if cublaslt_version < SCALE_MODES_MIN_CUBLASLT_VERSION:
        raise ValueError(
            f"{what} needs cuBLASLt >= {SCALE_MODES_MIN_CUBLASLT_VERSION} (12.9); loaded: {cublaslt_version}"
        )
