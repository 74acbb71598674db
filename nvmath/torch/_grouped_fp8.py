"""FP8 :class:`~nvmath.torch.GroupedLinear`: every group's Linear in FP8, as one autograd Function.

``GroupedLinear(..., fp8=recipe)`` computes what a loop of FP8 ``Linear`` layers (:mod:`._fp8_linear`)
computes, one per group with its own per-tensor scales (each expert's activations, weights and
gradients have their own ranges): e4m3 input and weight, gradients in the recipe's format (e5m2 under
``Format.HYBRID``), the weight's FP8 copies made once per weight version, each GEMM an FP8 GEMM on a
planned ``Matmul`` (bias fused in bfloat16 / float16 layers), bias gradient from the gradient's
quantization pass. What differs is how (:mod:`._grouped_fp8_kernels`):

* one autograd Function over all groups (:class:`GroupedFP8Fn`): the forward quantizes ``x`` with one
  grouped cast-transpose launch over all groups into one FP8 buffer (both orders, the scales and
  amaxes at the group's offsets of stacked tensors) and runs the per-group GEMMs on bare addresses,
  each writing its group's rows of one ``y``; the backward quantizes the output gradient likewise
  (with the column sums: the bias gradient), runs the dgrad and wgrad GEMMs into one ``dx`` and one
  (G, N, K) weight gradient -- no concatenation, no stack, no ``weight[g]`` selects (whose backward
  built a zero-filled full-size gradient per group and summed them);
* the scaling state of all groups is one :class:`~._grouped_fp8_state.GroupedScalingState`
  (``fp8_state``: scales (3, G), amax histories (L, 3, G), in ``state_dict``; checkpoints of the
  former per-group states, ``fp8_states.<g>.*``, load into it), updated by a few vectorised
  operations per step (the forward's input and weight roles in one update, the backward's gradient
  role in another) -- no host synchronisation, no per-group state objects.

Groups without tokens take no part (their gradients are zero, their scaling state is left as it was
except for the weight role: the stacked weight is quantized whole, every group's weight amax
recorded once per weight version). :func:`~nvmath.torch.fp8_autocast` does not switch a
``GroupedLinear`` to FP8 (pass ``fp8=recipe``). Under ``torch.compile`` (``fullgraph=True`` too) the
layer's FP8 call is the custom operators ``nvmath::grouped_fp8_linear`` / ``_backward``
(:mod:`._grouped_fp8_ops`), the counts a list of ints the graph is specialised on.

CUDA graphs: after a warm-up step outside the capture (planners made, kernels compiled, the small
index tensors of the counts made), a forward + backward captures under ``torch.cuda.graph``. Inside a
capture the forward quantizes the weight whatever its version (each replay quantizes the weight's
values of that moment, as an FP8 ``Linear``); the planners, scale-slot indices and active-group masks a
capture used are pinned (never evicted while the process runs; ``grouped_fp8_gemms.clear()`` drops
them: drop such graphs first); anything not made before the capture raises
:class:`~nvmath.torch._capture.CaptureError`. A graph replays the counts it was captured with: capture
one graph per set of counts (the counts are host values; a replay cannot see new ones).

Sizes: cuBLASLt's FP8 GEMMs need ``in_features``, ``out_features`` and every group's token count (the
weight-gradient GEMM's reduction) multiples of 16; others raise ``ValueError`` before any launch,
naming the group (pad each group's tokens). Block scaling (MXFP8) is refused as for ``Linear``.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.autograd.function import once_differentiable

from nvmath.torch import _fp8, _fp8_hooks
from nvmath.torch._grouped_checks import check_operands

__all__ = ["GroupedFP8Fn", "check_group_sizes", "grouped_fp8_forward", "setup"]


def setup(module: torch.nn.Module, recipe: Any, device: Any) -> None:
    """Set ``module.fp8`` and, with a per-tensor recipe, register ``module.fp8_state`` (a
    :class:`~._grouped_fp8_state.GroupedScalingState` of all groups) now, so that a checkpoint loads
    into a fresh layer (also one of the former per-group layout)."""
    module.fp8 = _fp8_hooks.check_layer_recipe(recipe)
    if recipe is not None and not isinstance(recipe, _fp8.MXFP8BlockScaling):
        from nvmath.torch._grouped_fp8_state import GroupedScalingState, load_old_keys

        module.add_module("fp8_state", GroupedScalingState(recipe, module.num_groups, device))
        module.register_load_state_dict_pre_hook(load_old_keys)


def check_group_sizes(counts: list[int], in_features: int, out_features: int) -> None:
    """Raise ``ValueError`` naming the first group whose FP8 GEMMs cuBLASLt cannot take (see the notes;
    sizes that passed are remembered: a bounded set, checked once per counts and features)."""
    key = (tuple(counts), in_features, out_features)
    if key in _SIZES_OK:
        return
    _check_group_sizes(counts, in_features, out_features)
    if len(_SIZES_OK) > 1024:
        _SIZES_OK.clear()
    _SIZES_OK.add(key)


_SIZES_OK: set[tuple] = set()


def _check_group_sizes(counts: list[int], in_features: int, out_features: int) -> None:
    from nvmath.torch._fp8_linear import FP8_MULTIPLE, check_fp8_sizes

    check_fp8_sizes(0, in_features, out_features)
    for g, c in enumerate(counts):
        if c % FP8_MULTIPLE:
            raise ValueError(
                f"FP8 GroupedLinear needs every group's token count a multiple of {FP8_MULTIPLE} (the weight "
                f"gradient's FP8 GEMM reduces over it); group {g} has {c} tokens (counts {counts}). Pad each "
                "group's tokens or run this layer without FP8."
            )


def _state(module: Any, recipe: Any, device: torch.device) -> Any:
    """``module.fp8_state`` for ``recipe`` on ``device`` (the recipe checked for the device once; an
    MXFP8 recipe, which :func:`setup` made no state for, raises here)."""
    from nvmath.torch._grouped_fp8_state import GroupedScalingState

    state = getattr(module, "fp8_state", None)
    if state is None:
        _fp8.check_recipe(recipe, device)
        state = GroupedScalingState(recipe, module.num_groups, device)
        module.add_module("fp8_state", state)
    if state.recipe is not recipe and state.recipe != recipe:
        raise ValueError(
            f"this layer's FP8 scaling state was made for {state.recipe!r}; it now runs under {recipe!r}. "
            "Use one recipe per layer (or delete its fp8_state to start afresh)."
        )
    if state.checked_device != device and not torch.compiler.is_compiling():
        # (compiled: the custom operator checks, at run time -- :mod:`._grouped_fp8_ops`)
        _fp8.check_recipe(recipe, device)
        state.checked_device = device
    return state


class GroupedFP8Fn(torch.autograd.Function):
    """``y_g = x_g @ w[g].T + b[g]`` per group with FP8 GEMMs forward and backward (see the module notes)."""

    @staticmethod
    def forward(ctx: Any, x: Any, w: Any, b: Any, counts: list[int], state: Any, gemms: tuple) -> Any:
        from nvmath.torch._grouped_fp8_kernels import grouped_forward

        y, saved = grouped_forward(x, w, b, counts, state, *gemms)
        qxt, cols, inv_x, qwt, inv_w, block = saved
        ctx.save_for_backward(qxt, inv_x, qwt, inv_w, block)
        ctx.cols, ctx.counts, ctx.state, ctx.gemms = cols, counts, state, (gemms[0], gemms[2])
        ctx.w_meta = (w.dtype, tuple(w.shape))
        ctx.b_dtype = None if b is None else b.dtype
        return y

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, g: Any) -> Any:
        from nvmath.torch._grouped_fp8_kernels import grouped_backward

        qxt, inv_x, qwt, inv_w, block = ctx.saved_tensors
        saved = (qxt, ctx.cols, inv_x, qwt, inv_w, block)
        needs = tuple(ctx.needs_input_grad[:3])
        return (
            *grouped_backward(g, saved, ctx.w_meta, ctx.b_dtype, ctx.counts, needs, ctx.state, *ctx.gemms),
            None, None, None,
        )  # fmt: skip


def grouped_fp8_forward(module: Any, x: torch.Tensor, counts: Any) -> torch.Tensor:
    """``module``'s forward in FP8 under its recipe (``module.fp8``); see the module notes.

    Raises:
        TypeError, RuntimeError, ValueError: bad operands or counts (as ``grouped_linear``), an input
            dtype FP8 layers do not take, sizes that are not multiples of 16; all before any launch.
        RuntimeError, NotImplementedError: a recipe the device cannot run (as ``Linear(fp8=)``).
    """
    from nvmath.torch._fp8_epilogs import fp8_epilog_gemms
    from nvmath.torch._fp8_linear import fp8_gemm_cache
    from nvmath.torch._grouped_fp8_gemms import grouped_fp8_gemms

    weight, bias = module.weight, module.bias
    values = check_operands(x, weight, bias, counts)
    if x.dtype not in (torch.bfloat16, torch.float16, torch.float32):
        raise TypeError(
            f"FP8 GroupedLinear layers compute in bfloat16, float16 or float32; the input is {x.dtype}"
        )
    check_group_sizes(values, weight.shape[2], weight.shape[1])
    state = _state(module, module.fp8, weight.device)
    if not any(values):
        return x.new_empty((0, weight.shape[1]))
    if torch.compiler.is_compiling():  # the custom op torch.compile traces (nvmath.torch._grouped_fp8_ops)
        from nvmath.torch._grouped_fp8_ops import grouped_fp8_compiled

        return grouped_fp8_compiled(x.contiguous(), weight, bias, values, state)
    gemms = (fp8_gemm_cache, fp8_epilog_gemms, grouped_fp8_gemms)
    return GroupedFP8Fn.apply(x.contiguous(), weight, bias, values, state, gemms)
