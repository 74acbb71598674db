"""The FP8 MLP block ``fc2(gelu(fc1(x)))`` with its bias, GELU and quantization fused into the GEMMs.

Each layer keeps its own scaling state (``fc1.fp8_state``: input ``x``, weight ``w1``, gradient
``dz1``; ``fc2.fp8_state``: input ``h``, weight ``w2``, gradient ``g``), exactly as two FP8 Linear
layers (:mod:`._fp8_linear`); what changes is where the non-GEMM work runs
(:mod:`._fp8_epilogs` for the GEMM orientation and configs):

Forward
  * fc1, **delayed scaling**: one GEMM ``qh = fp8(s_h * gelu(qx @ qw1.T / (sx * sw1) + b1))`` with the
    ``GELU_AUX_BIAS`` epilogue, D in e4m3 with fc2's input scale ``s_h`` (known before the tensor:
    delayed) and ``result_amax`` (``max |h|``, pushed into fc2's amax history): fc2's FP8 input comes
    out of fc1's GEMM, with no bias, GELU, amax or quantize pass. The aux (the pre-activation ``z``
    for the backward) comes out in float16, cuBLASLt's default over an FP8 D (it refuses a bfloat16
    aux type there, see :mod:`._fp8_epilogs`), and is kept so: the backward's dgelu pass reads it
    (|z| beyond float16's 65504 is inf there, so its gradient is NaN and the skip-step policy skips
    that step). The custom operator (``torch.compile``) returns it in :func:`saved_aux_dtype` whatever
    ran (the dtype its fake kernel declares).
  * fc1, **current scaling**: the scale of ``h`` needs ``max |h|`` first, so fc1's GEMM fuses bias and
    GELU (``GELU_AUX_BIAS``, D in the layer's dtype) and ``h`` is then quantized (amax pass + one
    quantize pass).
  * fc2: one GEMM with the ``BIAS`` epilogue.

Backward (``g`` = dL/dy, quantized once, e5m2 under HYBRID)
  * every tensor that is a GEMM operand along the feature axis in one GEMM and along the token axis
    in another (``x``, ``h``, ``g``, ``dz1``, the weights) is needed in both orders for cuBLASLt's FP8
    "TN" rule on Hopper: :mod:`._fp8_cast`'s cast-transpose kernel writes both FP8 orders in the pass
    that quantizes (with the amax, and ``g``'s column sums: fc2's bias gradient); fc1's FP8 output
    ``h`` (delayed scaling) is transposed by its FP8 transpose kernel. The forward saves ``qx.T`` and
    ``qh.T`` (what the wgrad GEMMs take).
  * fc2's dgrad is a plain FP8 GEMM (``dh``, the layer's dtype); one dgelu-cast-transpose-dbias pass
    (:func:`._fp8_cast.cast_transpose` with the aux) reads ``dh`` and fc1's saved pre-activation and
    writes ``dz1 = dh * gelu'(z)``'s FP8 copy in both orders, its amax and fc1's bias gradient (column
    sums in float32). cuBLASLt's DGELU epilogue ran as a separate slow pass after the GEMM on the
    H200 (cuBLASLt 13.1), and ``dz1`` then still needed a quantize, a transpose and a sum; it remains
    the path where the cast kernels are not in use (``NVMATH_FP8_FUSED_CAST=0``, or they failed to
    build: :func:`._fp8_cast.in_use`), with the former quantize, transposes and sums.
  * wgrad GEMMs write the weight gradient in the weight's dtype directly (the float32 accumulator
    rounded once, as the former float32 result and ``.to()``).

Any fused GEMM cuBLASLt refuses at planning falls back, before any state is updated, to the unfused
form of that stage (plain FP8 GEMM and torch's bias / GELU / ``gelu_backward`` / quantize); which ones
did is in :meth:`~._fp8_epilogs.FP8EpilogGemms.report`. CPU tensors run the same arithmetic in torch
(:func:`._fp8_epilogs.emulate`). Only GELU blocks in bfloat16 / float16 take this path (float32 and
ReLU blocks run as two FP8 Linear layers).
"""

from __future__ import annotations

from typing import Any

import torch
from torch.autograd.function import once_differentiable

from nvmath.torch import _fp8_cast
from nvmath.torch._fp8_cast import quantize_pair
from nvmath.torch._fp8_epilogs import FP8EpilogGemms, GemmConfig, fp8_epilog_gemms
from nvmath.torch._fp8_linear import (
    FP8GemmCache,
    FP8LinearState,
    check_fp8_sizes,
    check_input,
    fp8_gemm_cache,
)

__all__ = [
    "NO_FUSION",
    "FP8MLPFn",
    "dgelu_config",
    "fc1_config",
    "fc2_config",
    "fp8_mlp",
    "fused_applies",
    "mlp_backward",
    "mlp_forward",
    "saved_aux_dtype",
]

FUSED_DTYPES = (torch.bfloat16, torch.float16)


def fused_applies(activation: str | None, dtype: torch.dtype, s1: Any, s2: Any) -> bool:
    """Whether an MLP block runs :func:`fp8_mlp` (GELU, bf16/fp16, both layers FP8 with one recipe)."""
    return activation == "gelu" and dtype in FUSED_DTYPES and s1.recipe == s2.recipe


def fc1_config(dtype: torch.dtype, has_bias: bool, h_dtype: torch.dtype | None) -> GemmConfig:
    """fc1's GEMM: bias + GELU with the aux; D in FP8 ``h_dtype`` (delayed scaling) or ``dtype``."""
    epilog = "GELU_AUX_BIAS" if has_bias else "GELU_AUX"
    if h_dtype is not None:  # an FP8 D: C, the bias and the aux are float16 (what cuBLASLt runs)
        bias = torch.float16 if has_bias else None
        return GemmConfig(epilog, h_dtype, bias=bias, result_amax=True)
    return GemmConfig(epilog, dtype, bias=dtype if has_bias else None)


def fc2_config(dtype: torch.dtype) -> GemmConfig:
    """fc2's forward GEMM with its bias."""
    return GemmConfig("BIAS", dtype, bias=dtype)


def dgelu_config(dtype: torch.dtype) -> GemmConfig:
    """fc2's dgrad with fc1's GELU derivative (the aux in ``dtype``)."""
    return GemmConfig("DGELU", dtype)


def saved_aux_dtype(dtype: torch.dtype, s2: Any) -> torch.dtype:
    """The aux dtype of a block whose every fused GEMM runs: float16 under delayed scaling (fc1's
    FP8-output GEMM writes cuBLASLt's float16 aux), else the layer's ``dtype`` (what the custom
    operator returns whatever ran, see :func:`mlp_forward`'s ``aux_dtype``)."""
    return torch.float16 if s2.recipe.delayed else dtype


class _NoFusion:
    """Fused GEMMs that are never available: :func:`fp8_mlp` then runs every stage unfused."""

    def supported(self, *args: Any, **kwargs: Any) -> bool:
        return False


NO_FUSION: Any = _NoFusion()
"""Pass as ``fused=`` to :func:`fp8_mlp` to run the block unfused (benchmarks, tests)."""


def _gelu_fallback(z: torch.Tensor, b: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
    """``(h, aux)`` of the unfused fc1: the bias added and GELU applied by torch (aux: ``z.mT``)."""
    if b is not None:
        z = z + b.to(z.dtype)
    z = z.contiguous()
    return torch.nn.functional.gelu(z, approximate="tanh"), z.mT


def _fc1(
    x2: torch.Tensor, w1: torch.Tensor, b1: torch.Tensor | None, s1: Any, s2: Any, gemm: Any, fused: Any
) -> tuple[torch.Tensor, ...]:  # fmt: skip
    """``(qx.T, 1 / sx, qh, qh.T, 1 / sh, aux)``: fc1 (fused as the recipe allows) and fc2's quantized
    input in both orders (``qx.T``, ``qh.T``: the wgrad GEMMs' operands)."""
    dtype = x2.dtype
    qw1, _, inv_w1 = s1.weight_fp8(w1, forward=True)
    qx, qxt, sx, _ = quantize_pair(s1, x2, "input")
    inv_x = sx.reciprocal()
    cfg = fc1_config(dtype, b1 is not None, s2.dtype("input"))
    if s2.recipe.delayed and fused.supported(cfg, qw1, qx):
        s_h = s2.delayed_scale("input")
        dt, ex = fused(cfg, qw1, qx, inv_w1, inv_x, d_scale=s_h, bias=b1)
        qh, sh = dt.mT.contiguous(), s2.record_amax("input", ex["result_amax"], s_h)
        # (the float16 aux is kept: the dgelu pass reads it as it is)
        return qxt, inv_x, qh, _fp8_cast.transpose(qh), sh.reciprocal(), ex["gelu_aux"]
    cfg = fc1_config(dtype, b1 is not None, None)
    if fused.supported(cfg, qw1, qx):
        ht, ex = fused(cfg, qw1, qx, inv_w1, inv_x, bias=b1)
        h, aux = ht.mT.contiguous(), ex["gelu_aux"]
    else:
        h, aux = _gelu_fallback(gemm(qx, qw1, inv_x, inv_w1, dtype), b1)
    qh, qht, sh, _ = quantize_pair(s2, h, "input")
    return qxt, inv_x, qh, qht, sh.reciprocal(), aux


def mlp_forward(
    x: torch.Tensor, w1: torch.Tensor, b1: torch.Tensor | None, w2: torch.Tensor, b2: torch.Tensor | None,
    s1: Any, s2: Any, gemm: Any, fused: Any, aux_dtype: torch.dtype | None = None,
) -> tuple[torch.Tensor, ...]:  # fmt: skip
    """``(y, qx.T, 1 / sx, qh.T, 1 / sh, aux)``: the block's output and what its backward needs (the
    FP8 input and hidden transposed, (features, tokens) row-major: the wgrad GEMMs' operands; ``aux``:
    fc1's pre-activation, (hidden, tokens) column-major, float16 from fc1's FP8-output GEMM, else in
    the layer's dtype; ``aux_dtype`` converts it, for callers that need one dtype whatever ran);
    updates both states' input/weight roles."""
    dtype = x.dtype
    with s1.batched(), s2.batched():  # (each layer's input and weight state updates as one)
        qxt, inv_x, qh, qht, inv_h, aux = _fc1(x.reshape(-1, x.shape[-1]), w1, b1, s1, s2, gemm, fused)
        qw2, _, inv_w2 = s2.weight_fp8(w2, forward=True)
    if b2 is not None and fused.supported(fc2_config(dtype), qw2, qh):
        y = fused(fc2_config(dtype), qw2, qh, inv_w2, inv_h, bias=b2)[0].mT
    else:
        y = gemm(qh, qw2, inv_h, inv_w2, dtype)
        y = y + b2.to(dtype) if b2 is not None else y
    if aux_dtype is not None:
        aux = aux.to(aux_dtype)
    aux = aux.mT.contiguous().mT  # (column-major on every path: what DGELU takes and the fake kernel says)
    return y.contiguous().reshape(*x.shape[:-1], w2.shape[0]), qxt, inv_x, qht, inv_h, aux


_SWAPPED: set[tuple] = set()


def _row_major(gemm: Any, qa: Any, qb: Any, inv_a: Any, inv_b: Any, dtype: torch.dtype) -> torch.Tensor:
    """``(qa @ qb.T) * inv_a * inv_b`` row-major (what the dgelu pass tiles together with the aux).
    The planner picks D's order per problem; where the direct GEMM gave a column-major D once, the
    swapped GEMM's transpose (row-major then) is used from then on for that problem."""
    key = (qa.shape, qb.shape, qa.dtype, qb.dtype, dtype, qa.device)
    if key in _SWAPPED:
        d = gemm(qb, qa, inv_b, inv_a, dtype).mT
    else:
        d = gemm(qa, qb, inv_a, inv_b, dtype)
        if not d.is_contiguous() and d.mT.is_contiguous():
            _SWAPPED.add(key)
    return d.contiguous()


def _dz1(g2: torch.Tensor, qg: Any, inv_g: Any, w2: Any, aux: Any, s2: Any, gemm: Any, fused: Any) -> Any:
    """``(source, aux or None)`` of fc1's pre-activation gradient for :func:`._fp8_cast.quantize_pair`:
    fc2's dgrad ``dh`` (a plain FP8 GEMM) and the aux, whose dgelu-cast-transpose-dbias pass makes
    ``dz1 = dh * gelu'(z)``; where the cast kernels are not in use on this GPU (switched off or failed
    to build), ``dz1`` itself from fc2's dgrad with cuBLASLt's DGELU fused (or torch's gelu_backward
    after it): the former path."""
    _, qw2t, inv_w2 = s2.weight_fp8(w2)
    if not g2.is_cuda or _fp8_cast.in_use():
        return _row_major(gemm, qg, qw2t, inv_g, inv_w2, g2.dtype), aux.mT
    aux = aux.to(g2.dtype)
    cfg = dgelu_config(g2.dtype)
    if fused.supported(cfg, qw2t, qg, aux_dtype=aux.dtype):
        return fused(cfg, qw2t, qg, inv_w2, inv_g, gelu_aux=aux)[0].mT.contiguous(), None
    dh = gemm(qg, qw2t, inv_g, inv_w2, g2.dtype)
    return torch.ops.aten.gelu_backward(dh, aux.mT, approximate="tanh").contiguous(), None


def mlp_backward(
    g: torch.Tensor, qxt: torch.Tensor, inv_x: torch.Tensor, qht: torch.Tensor, inv_h: torch.Tensor,
    aux: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor, b_dtypes: tuple, needs: tuple, s1: Any, s2: Any,
    gemm: Any, fused: Any, x_shape: tuple,
) -> tuple[torch.Tensor | None, ...]:  # fmt: skip
    """``(dx, dw1, db1, dw2, db2)`` of :func:`mlp_forward` (``None`` where ``needs`` says not needed);
    updates both states' grad_output roles. The weights' FP8 copies come from the states."""
    g2 = g.reshape(-1, g.shape[-1]).contiguous()
    want_db1, want_db2 = needs[2] and b_dtypes[0] is not None, needs[4] and b_dtypes[1] is not None
    qg, qgt, sg, sum_g = quantize_pair(s2, g2, "grad_output", colsum=want_db2)
    inv_g = sg.reciprocal()
    dw2 = db2 = db1 = dw1 = dx = sum_d = None
    if needs[3]:
        dw2 = gemm(qgt, qht, inv_g, inv_h, _fp8_cast.wgrad_dtype(w2.dtype)).to(w2.dtype)
    if want_db2:
        db2 = sum_g.to(b_dtypes[1])
    if not (needs[0] or needs[1] or want_db1):
        return dx, dw1, db1, dw2, db2
    src, z = _dz1(g2, qg, inv_g, w2, aux, s2, gemm, fused)
    if needs[0] or needs[1]:
        qd, qdt, sd, sum_d = quantize_pair(s1, src, "grad_output", aux=z, colsum=want_db1)
        inv_d = sd.reciprocal()
        _, qw1t, inv_w1 = s1.weight_fp8(w1)
        if needs[1]:
            dw1 = gemm(qdt, qxt, inv_d, inv_x, _fp8_cast.wgrad_dtype(w1.dtype)).to(w1.dtype)
        if needs[0]:
            dx = gemm(qd, qw1t, inv_d, inv_w1, g2.dtype).reshape(x_shape)
    elif want_db1:  # (the bias gradient alone: no quantization, the state untouched)
        sum_d = _fp8_cast.cast_transpose(src, None, s1.dtype("grad_output"), aux=z, colsum=True).colsum
    if want_db1:
        db1 = sum_d.to(b_dtypes[0])
    return dx, dw1, db1, dw2, db2


class FP8MLPFn(torch.autograd.Function):
    """``fc2(gelu(fc1(x)))`` with fused FP8 GEMMs (see the module docstring)."""

    @staticmethod
    def forward(ctx: Any, x: Any, w1: Any, b1: Any, w2: Any, b2: Any, s1: Any, s2: Any, gemms: tuple) -> Any:
        y, *saved = mlp_forward(x, w1, b1, w2, b2, s1, s2, *gemms)
        ctx.save_for_backward(*saved, w1, w2)
        ctx.s1, ctx.s2, ctx.gemms, ctx.x_shape = s1, s2, gemms, x.shape
        ctx.b_dtypes = (None if b1 is None else b1.dtype, None if b2 is None else b2.dtype)
        return y

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, g: Any) -> Any:
        *saved, w1, w2 = ctx.saved_tensors
        grads = mlp_backward(
            g, *saved, w1, w2, ctx.b_dtypes, ctx.needs_input_grad[:5], ctx.s1, ctx.s2, *ctx.gemms, ctx.x_shape
        )
        return (*grads, None, None, None)


def fp8_mlp(
    x: torch.Tensor, w1: torch.Tensor, b1: torch.Tensor | None, w2: torch.Tensor, b2: torch.Tensor | None,
    s1: FP8LinearState, s2: FP8LinearState, gemm: FP8GemmCache | None = None, fused: FP8EpilogGemms | None = None,
) -> torch.Tensor:  # fmt: skip
    """``fc2(gelu(fc1(x)))`` in FP8 with fused epilogues (see the module docstring).

    Raises:
        RuntimeError, ValueError, TypeError: as :func:`._fp8_linear.fp8_linear`, for either layer.
    """
    check_mlp_input(x, w1, w2)
    gemms = (gemm or fp8_gemm_cache, fused or fp8_epilog_gemms)
    return FP8MLPFn.apply(x, w1, b1, w2, b2, s1, s2, gemms)


def check_mlp_input(x: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor) -> None:
    """Raise unless ``x`` can go through the FP8 block of weights ``w1``, ``w2`` (see :func:`fp8_mlp`)."""
    check_input(x, w1)
    if w2.shape[1] != w1.shape[0]:
        raise RuntimeError(
            f"fc2's weight {tuple(w2.shape)} does not take fc1's output ({w1.shape[0]} features)"
        )
    check_fp8_sizes(x.numel() // x.shape[-1] if x.shape[-1] else 0, w2.shape[1], w2.shape[0])
