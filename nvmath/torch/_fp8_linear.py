"""FP8 Linear layers: the three GEMMs of a training step in FP8 with per-tensor scales.

A Linear layer ``y = act(x @ w.T + b)`` under an FP8 recipe (:mod:`._fp8`):

* forward: ``y = (qx @ qw.T) / (sx * sw)`` with ``qx = fp8(x * sx)`` (e4m3), ``qw = fp8(w * sw)``
  (e4m3), then ``+ b`` and the activation in the input's dtype;
* backward (``dz = g * act'(z)`` in the gradient's dtype, ``qg = fp8(dz * sg)``, e5m2 under HYBRID):
  ``dx = (qg @ qw) / (sg * sw)``, ``dw = (qg.T @ qx) / (sg * sx)``, ``db = dz.sum(0)`` (unquantized).

Every GEMM is ``a @ b.T`` with both FP8 operands contiguous along K (cuBLASLt's "TN" layout, the one
it runs FP8 in), so the weight's FP8 copy is kept in both orientations (``qw`` and ``qw.T``
contiguous) and the backward transposes ``qx`` and ``qg`` once each; on the GPU the transposed
copies come from :mod:`._fp8_cast`'s kernels (``qg`` and ``qw`` in both orders from the pass that
quantizes them, with the GELU derivative and the bias gradient in ``qg``'s pass; ``qx.T`` from the
FP8 transpose), not from torch's strided copy. The weight's FP8 copies are made once per weight
version (``tensor._version`` moves on every in-place update, i.e. once per optimizer step), not per
call: gradient-accumulation micro-batches reuse them.

On the GPU each GEMM runs on a planned :class:`nvmath.linalg.advanced.Matmul` with tensor-wide
quantization scales (``1 / s``: the dequantization scales, float32 device tensors) and a result in
the input's dtype; a planner is made once per problem (shapes, dtypes) and later calls swap the
operands and the scales in with ``reset_operands`` (no re-planning). On CPU tensors the same
quantized arithmetic runs through torch: the FP8 values (exact in float32) are multiplied in float32
and the product times ``1 / (sa * sb)`` is rounded to the input's dtype -- what cuBLASLt computes, up
to the order of the float32 sums.

Sizes: cuBLASLt's FP8 GEMMs need every leading dimension a multiple of 16 bytes, i.e. ``in_features``,
``out_features`` and the token count (the wgrad GEMM's K) multiples of 16. Other sizes raise a
``ValueError`` before any work (pad the token count; both CPU and GPU refuse alike so that CPU tests
mean what the GPU does).
"""

from __future__ import annotations

import itertools
import logging
import os
import threading
import weakref
from collections import OrderedDict
from typing import Any

import torch
from torch.autograd.function import once_differentiable

from nvmath.torch._capture import capturing, evict, pin_if_capturing, refuse_planning
from nvmath.torch._fp8 import Recipe, ScalingState, check_recipe, current_recipe, weight_key
from nvmath.torch._fp8_cast import quantize_pair, transpose, wgrad_dtype

__all__ = [
    "FP8_MULTIPLE",
    "FP8GemmCache",
    "FP8LinearState",
    "check_fp8_sizes",
    "fp8_gemm_cache",
    "fp8_linear",
]

logger = logging.getLogger(__name__)

UNCHECKED_RESET = os.environ.get("NVMATH_FP8_UNCHECKED_RESET", "1") != "0"
"""Swap a cached planner's operands with ``reset_operands_unchecked`` (no layout and alignment checks:
the cache key holds the shapes, strides, dtypes, device and alignments the plan was made for, so the
checks cannot fail). ``NVMATH_FP8_UNCHECKED_RESET=0`` at import: the checked ``reset_operands``."""

FP8_MULTIPLE = 16
"""in_features, out_features and the token count of an FP8 Linear layer must be multiples of this."""


def check_fp8_sizes(tokens: int, in_features: int, out_features: int) -> None:
    """Raise ``ValueError`` unless every size is a multiple of :data:`FP8_MULTIPLE`."""
    sizes = {"token count (input.numel() // in_features)": tokens, "in_features": in_features,
             "out_features": out_features}  # fmt: skip
    bad = {k: v for k, v in sizes.items() if v % FP8_MULTIPLE}
    if bad:
        what = ", ".join(f"{k} = {v}" for k, v in bad.items())
        raise ValueError(
            f"FP8 Linear layers need sizes that are multiples of {FP8_MULTIPLE} (cuBLASLt's FP8 GEMMs need "
            f"16-byte leading dimensions); got {what}. Pad the tokens (e.g. torch.nn.functional.pad) or "
            "run this layer without FP8."
        )


def _result_type(dtype: torch.dtype) -> Any:
    from nvmath._internal.dtypes import CudaDataType

    table = {torch.bfloat16: CudaDataType.CUDA_R_16BF, torch.float16: CudaDataType.CUDA_R_16F,
             torch.float32: CudaDataType.CUDA_R_32F}  # fmt: skip
    if dtype not in table:
        raise TypeError(f"FP8 Linear layers compute in bfloat16, float16 or float32; the input is {dtype}")
    return table[dtype]


class FP8GemmCache:
    """``(qa @ qb.T) * inv_a * inv_b`` for FP8 ``qa`` (M, K), ``qb`` (N, K), both K-contiguous.

    GPU tensors run on one planned ``Matmul`` per problem (least recently used freed beyond
    ``maxsize``, except those a CUDA graph captured: :func:`evict`), swapped with ``reset_operands``;
    CPU tensors run the same arithmetic in torch.
    """

    def __init__(self, maxsize: int = 64):
        self.maxsize = maxsize
        self._planners: OrderedDict[tuple, Any] = OrderedDict()
        self._pinned: set[tuple] = set()
        self._lock = threading.Lock()
        self.plans = 0
        """How many planners were made (a repeated problem makes none)."""

    def __call__(
        self, qa: torch.Tensor, qb: torch.Tensor, inv_a: torch.Tensor, inv_b: torch.Tensor, dtype: torch.dtype
    ) -> torch.Tensor:
        if not qa.is_cuda:
            prod = qa.float() @ qb.float().T
            return (prod * (inv_a * inv_b)).to(dtype)
        return self.run_planned(qa, qb, inv_a, inv_b, dtype)

    def run_planned(
        self, qa: torch.Tensor, qb: torch.Tensor, inv_a: torch.Tensor, inv_b: torch.Tensor, dtype: torch.dtype
    ) -> torch.Tensor:
        """The product on this problem's planned ``Matmul`` (planned on first use, else ``reset_operands``)."""
        pa, pb = qa.data_ptr() | 256, qb.data_ptr() | 256  # a plan assumes its operands' pointer alignment
        key = (qa.shape, qb.shape, qa.stride(), qb.stride(), qa.dtype, qb.dtype, dtype, qa.device, pa & -pa,
               pb & -pb)  # fmt: skip
        scales = {"a": inv_a.reshape(1), "b": inv_b.reshape(1)}
        with self._lock:
            mm = self._planners.get(key)
            if mm is None:
                mm = self._plan(key, qa, qb, scales, dtype)
            else:
                self._planners.move_to_end(key)
                # (the key is the planned layout: the checks of reset_operands cannot fail)
                reset = mm.reset_operands_unchecked if UNCHECKED_RESET else mm.reset_operands
                reset(a=qa, b=qb.T, quantization_scales=scales)
            pin_if_capturing(self._pinned, key, qa)
            try:
                return mm.execute()
            finally:
                mm.release_operands()  # (the next call gives every operand: nothing is kept alive)

    def _plan(self, key: tuple, qa: Any, qb: Any, scales: dict, dtype: torch.dtype) -> Any:
        from nvmath.linalg.advanced import Matmul

        refuse_planning("an FP8 Linear layer would plan a new GEMM (first use of these shapes)", qa)
        mm = Matmul(qa, qb.T, quantization_scales=scales, options={"result_type": _result_type(dtype)})
        try:
            mm.plan()
        except BaseException:
            mm.free()
            raise
        self.plans += 1
        self._planners[key] = mm
        evict(self._planners, self._pinned, self.maxsize)
        return mm

    def clear(self) -> None:
        """Free every planner (also those captured CUDA graphs replay: drop such graphs first)."""
        with self._lock:
            for mm in self._planners.values():
                mm.free()
            self._planners.clear()
            self._pinned.clear()


fp8_gemm_cache = FP8GemmCache()
"""The planners of FP8 Linear layers (shared by layers of equal shapes)."""

_STATES: weakref.WeakValueDictionary[int, Any] = weakref.WeakValueDictionary()
_NEXT = itertools.count(1)


def register_state(state: Any) -> int:
    """A registry number for ``state`` (the registry holds it weakly); the state keeps it as
    ``op_number`` (a constant ``torch.compile`` reads, made when the state is). The custom ops
    (:mod:`._fp8_ops`) take a state by this number: :func:`registered_state`."""
    number = next(_NEXT)
    _STATES[number] = state
    return number


def registered_state(number: int) -> Any:
    """The state registered as ``number`` (a ``RuntimeError`` once it no longer exists)."""
    state = _STATES.get(number)
    if state is None:
        raise RuntimeError(f"FP8 scaling state #{number} no longer exists (its layer was deleted)")
    return state


class FP8LinearState(ScalingState):
    """A Linear layer's :class:`ScalingState` and its weight's FP8 copies (kept per weight version).

    ``weight_updates`` counts how many times the FP8 copies were made (once per weight version).
    """

    def __init__(self, recipe: Recipe, device: Any = None):
        super().__init__(recipe, device)
        self._weight_key: tuple | None = None
        self._weight_copies: tuple | None = None
        self.weight_updates = 0
        self.op_number = register_state(self)
        """This state's number in the registry of the ``torch.compile`` custom ops (:mod:`._fp8_ops`)."""
        self.checked_device: torch.device | None = None
        """The device the recipe was last checked for (:func:`layer_state` checks on a new one)."""

    def weight_fp8(
        self, w: torch.Tensor, forward: bool = False
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(qw, qw.T contiguous, 1 / sw)`` of ``w``, made again only when ``w`` changed.

        ``forward``: the call of a layer's forward. Inside a CUDA graph capture that call makes the
        copies again (whatever the version), so the graph holds the quantization and every replay
        quantizes the weight's values of that moment (a replay moves no version counter: an optimizer
        step, in the graph or between replays, is otherwise invisible here); the backward's calls in
        the same capture reuse those copies."""
        key = weight_key(w)
        old = self._weight_key
        fresh = forward and capturing(w)
        if fresh or old is None or old[1:] != key[1:] or self._weight_copies is None:
            q, qt, s, _ = quantize_pair(self, w, "weight")  # (both orders in one pass on the GPU)
            self._weight_copies = (q, qt, s.reciprocal())
            self._weight_key = key
            self.weight_updates += 1
        return self._weight_copies

    def __setstate__(self, state: dict) -> None:
        # a copy (copy.deepcopy, pickle) is another state: its own number in the custom ops' registry
        super().__setstate__(state)
        self.op_number = register_state(self)

    def _apply(self, fn: Any, recurse: bool = True) -> Any:
        self._weight_key = self._weight_copies = None  # (moved or cast: the copies are stale)
        return super()._apply(fn, recurse)


def _activation(z: torch.Tensor, act: str | None) -> torch.Tensor:
    if act == "relu":
        return torch.relu(z)
    if act == "gelu":
        return torch.nn.functional.gelu(z, approximate="tanh")
    return z


def epilog_config(act: str | None, has_bias: bool, dtype: torch.dtype) -> Any:
    """The fused epilogue of a Linear layer's forward GEMM (bias and activation), or ``None`` when
    there is nothing to fuse or the layer is float32 (an FP8 GEMM's bias is then bfloat16: not fused)."""
    from nvmath.torch._fp8_epilogs import GemmConfig

    epilog = {(None, True): "BIAS", ("relu", False): "RELU", ("relu", True): "RELU_BIAS",
              ("gelu", False): "GELU_AUX", ("gelu", True): "GELU_AUX_BIAS"}.get((act, has_bias))  # fmt: skip
    if epilog is None or dtype not in (torch.bfloat16, torch.float16):
        return None
    return GemmConfig(epilog, dtype, bias=dtype if has_bias else None)


def _forward_gemm(
    qx: Any, qw: Any, inv_x: Any, inv_w: Any, b: Any, act: str | None, dtype: torch.dtype, gemm: Any
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``(y, saved)``: the forward GEMM with its bias and activation fused where cuBLASLt takes them
    (``saved``: what the activation's backward reads: GELU's pre-activation, or ReLU's output, whose
    sign is the pre-activation's); else the plain GEMM and torch's bias and activation."""
    from nvmath.torch._fp8_epilogs import fp8_epilog_gemms as fused

    cfg = epilog_config(act, b is not None, dtype)
    if cfg is not None and fused.supported(cfg, qw, qx):
        yt, ex = fused(cfg, qw, qx, inv_w, inv_x, bias=b)
        y = yt.mT.contiguous()
        if act == "gelu":
            return y, ex["gelu_aux"].mT.contiguous()
        return y, (y if act == "relu" else None)
    z = gemm(qx, qw, inv_x, inv_w, dtype)
    if b is not None:
        z = z + b.to(z.dtype)
    return _activation(z, act), (z if act is not None else None)


def linear_forward(
    x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None, act: str | None, state: FP8LinearState,
    gemm: FP8GemmCache,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None]:  # fmt: skip
    """``(y, qx, 1 / sx, z)``: the forward and what the backward needs (``z``: with GELU the
    pre-activation, with ReLU the pre-activation or the output (the same sign), else ``None``);
    updates ``state`` (input and weight roles). Bias and activation are fused into the GEMM in
    bfloat16 / float16 layers (:func:`epilog_config`) where cuBLASLt takes them."""
    x2 = x.reshape(-1, x.shape[-1])
    with state.batched():  # (the input's and the weight's state updates as one)
        qx, sx = state.quantize(x2, "input")
        qw, _, inv_w = state.weight_fp8(w, forward=True)
    inv_x = sx.reciprocal()
    y, z = _forward_gemm(qx, qw, inv_x, inv_w, b, act, x.dtype, gemm)
    return y.reshape(*x.shape[:-1], w.shape[0]), qx, inv_x, z


def linear_backward(
    g: torch.Tensor, qx: torch.Tensor, inv_x: torch.Tensor, z: torch.Tensor | None, w: torch.Tensor,
    act: str | None, b_dtype: torch.dtype | None, needs: tuple, state: FP8LinearState, gemm: FP8GemmCache,
    x_shape: tuple,
) -> tuple[torch.Tensor | None, torch.Tensor | None, torch.Tensor | None]:  # fmt: skip
    """``(dx, dw, db)`` of :func:`linear_forward` (``None`` where ``needs`` says not needed); updates
    ``state`` (grad_output role). The weight's FP8 copies come from ``state`` (made in the forward)."""
    _, qwt, inv_w = state.weight_fp8(w)
    g2 = g.reshape(-1, g.shape[-1])
    aux = None
    if act == "relu":
        g2 = torch.ops.aten.threshold_backward(g2, z, 0)
    elif act == "gelu":  # (gelu_backward in the cast-transpose pass: z is the aux)
        g2, aux = g2.contiguous(), z.contiguous()
    want_db = needs[2] and b_dtype is not None
    qg, qgt, sg, sums = quantize_pair(state, g2.contiguous(), "grad_output", aux=aux, colsum=want_db)
    inv_g = sg.reciprocal()
    dx = dw = db = None
    if needs[0]:
        dx = gemm(qg, qwt, inv_g, inv_w, g.dtype).reshape(x_shape)
    if needs[1]:
        dw = gemm(qgt, transpose(qx), inv_g, inv_x, wgrad_dtype(w.dtype)).to(w.dtype)
    if want_db:
        db = sums.to(b_dtype)
    return dx, dw, db


class FP8LinearFn(torch.autograd.Function):
    """``act(x @ w.T + b)`` with FP8 GEMMs forward and backward (see the module docstring)."""

    @staticmethod
    def forward(
        ctx: Any, x: Any, w: Any, b: Any, act: str | None, state: FP8LinearState, gemm: FP8GemmCache
    ) -> Any:  # fmt: skip
        y, qx, inv_x, z = linear_forward(x, w, b, act, state, gemm)
        ctx.save_for_backward(qx, inv_x, z, w)
        ctx.act, ctx.state, ctx.gemm, ctx.x_shape = act, state, gemm, x.shape
        ctx.b_dtype = None if b is None else b.dtype
        return y

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, g: Any) -> Any:
        qx, inv_x, z, w = ctx.saved_tensors
        dx, dw, db = linear_backward(
            g, qx, inv_x, z, w, ctx.act, ctx.b_dtype, ctx.needs_input_grad, ctx.state, ctx.gemm, ctx.x_shape
        )
        return dx, dw, db, None, None, None


def resolve_recipe(fixed: Recipe | None) -> Recipe | None:
    """The recipe a layer runs now: its own, else that of the enclosing ``fp8_autocast`` (or ``None``)."""
    return fixed if fixed is not None else current_recipe()


def check_device(state: FP8LinearState, device: torch.device) -> None:
    """Check ``state``'s recipe for ``device`` (the compute capability) unless already checked for it."""
    if state.checked_device != device:
        check_recipe(state.recipe, device)
        state.checked_device = device


def layer_state(module: torch.nn.Module, recipe: Recipe, device: torch.device) -> FP8LinearState:
    """``module.fp8_state`` for ``recipe``: made (and registered) on first use; a different recipe raises."""
    state = getattr(module, "fp8_state", None)
    if state is None:
        check_recipe(recipe, device)
        state = FP8LinearState(recipe, device)
        state.checked_device = device
        module.add_module("fp8_state", state)
    elif not torch.compiler.is_compiling():  # (compiled: the custom operators check, at run time)
        check_device(state, device)
    if state.recipe != recipe:
        raise ValueError(
            f"this layer's FP8 scaling state was made for {state.recipe!r}; it now runs under {recipe!r}. "
            "Use one recipe per layer (or delete its fp8_state to start afresh)."
        )
    return state


def fp8_linear(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, activation: str | None,
    state: FP8LinearState, gemm: FP8GemmCache | None = None,
) -> torch.Tensor:  # fmt: skip
    """``activation(x @ weight.T + bias)`` in FP8 under ``state``'s recipe (see the module docstring).

    Raises:
        RuntimeError: shapes or devices that differ.
        ValueError: sizes that are not multiples of 16.
        TypeError: an input dtype other than bfloat16, float16, float32.
    """
    check_input(x, weight)
    return FP8LinearFn.apply(x, weight, bias, activation, state, gemm or fp8_gemm_cache)


def check_input(x: torch.Tensor, weight: torch.Tensor) -> None:
    """Raise unless ``x`` can go through an FP8 layer of ``weight`` (see :func:`fp8_linear`)."""
    if not isinstance(x, torch.Tensor) or x.dim() < 1 or x.shape[-1] != weight.shape[1]:
        raise RuntimeError(
            f"input of shape {tuple(getattr(x, 'shape', ()))} cannot be multiplied by weight.T (weight of "
            f"shape {tuple(weight.shape)})"
        )
    if x.device != weight.device:
        raise RuntimeError(f"input and weight are on different devices: {x.device} != {weight.device}")
    if x.dtype not in (torch.bfloat16, torch.float16, torch.float32):
        raise TypeError(f"FP8 Linear layers compute in bfloat16, float16 or float32; the input is {x.dtype}")
    tokens = x.numel() // x.shape[-1] if x.shape[-1] else 0
    check_fp8_sizes(tokens, weight.shape[1], weight.shape[0])
