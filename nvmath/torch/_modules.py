"""``nvmath.torch.Linear`` and ``nvmath.torch.MLP``: drop-in modules with fused bias and activation.

Parameters have ``torch.nn.Linear``'s names, shapes and initialisation (``weight``: (out, in),
``bias``: (out,)), so state dicts load both ways.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from nvmath.torch import _fp8_hooks
from nvmath.torch._fp8 import autocast_blocks
from nvmath.torch._functional import check_activation, linear, mlp
from nvmath.torch._planners import PlannerCache

__all__ = ["MLP", "Linear"]


class Linear(torch.nn.Module):
    """``activation(x @ weight.T + bias)`` on cuBLASLt: a drop-in for ``torch.nn.Linear`` (+ activation).

    Training (grad enabled) runs the ``*_AUX_BIAS`` epilog where the backward needs it (GELU keeps its
    pre-activation); inference runs ``RELU_BIAS`` / ``GELU_BIAS`` / ``BIAS``. The backward fuses the
    bias gradient into the weight-gradient GEMM (``BGRADB``). One planned ``Matmul`` per problem is kept
    in ``cache`` (bounded; layers of equal shapes share it).

    On CPU parameters the layer computes with torch's own operations (``torch.nn.functional.linear``
    and the activation, nothing fused; autograd and ``torch.compile`` as for ``torch.nn.Linear``);
    after ``.to("cuda")`` the same parameters take the fused cuBLASLt path.

    Args:
        in_features, out_features: sizes, as ``torch.nn.Linear``.
        bias: learn an additive bias.
        activation: ``None``, ``"relu"`` or ``"gelu"`` (the tanh approximation: compare with
            ``torch.nn.functional.gelu(x, approximate="tanh")``).
        device, dtype: of the parameters.
        cache: a :class:`PlannerCache` (default: :data:`nvmath.torch.default_cache`).
        fp8: an :mod:`nvmath.torch.fp8` recipe: run the layer's GEMMs in FP8 (forward and backward)
            with a scaling state in ``fp8_state`` (in ``state_dict``). ``None``: FP8 only inside an
            :func:`nvmath.torch.fp8_autocast` block, under its recipe. See ``docs/fp8_training.rst``.
    """

    def __init__(
        self, in_features: int, out_features: int, bias: bool = True, activation: str | None = None,
        device: Any = None, dtype: Any = None, *, cache: PlannerCache | None = None, fp8: Any = None,
    ):  # fmt: skip
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        self.activation = check_activation(activation)
        self.cache = cache
        kw = {"device": device, "dtype": dtype}
        self.weight = torch.nn.Parameter(torch.empty((out_features, in_features), **kw))
        if bias:
            self.bias = torch.nn.Parameter(torch.empty(out_features, **kw))
        else:
            self.register_parameter("bias", None)
        _fp8_hooks.setup(self, fp8, device)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """``torch.nn.Linear``'s initialisation (Kaiming-uniform weight, uniform bias)."""
        torch.nn.init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            bound = 1 / math.sqrt(self.in_features) if self.in_features > 0 else 0
            torch.nn.init.uniform_(self.bias, -bound, bound)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``activation(x @ weight.T + bias)`` for ``x`` of shape ``(*, in_features)``.

        Returns a tensor of shape ``(*, out_features)`` on ``x``'s device and of its dtype. CUDA
        tensors: one cuBLASLt GEMM with the bias and activation in its epilog (differentiable; the
        backward fuses the bias gradient). Other devices: torch's operations, unfused.

        Raises:
            RuntimeError: ``x``'s dtype, device or last dimension does not match the parameters.
        """
        # the registered parameters, read without Module.__getattr__ (a Python call per attribute, most of
        # a decode call's module overhead); a parametrization or weight_norm moves them: then the attributes
        params = self._parameters
        try:
            weight, bias = params["weight"], params["bias"]
        except KeyError:
            weight, bias = self.weight, self.bias
        if self.fp8 is not None or (autocast_blocks and _fp8_hooks.autocast_on()):  # FP8: its own module
            return _fp8_hooks.linear_forward(self, x, weight, bias)
        return linear(x, weight, bias, self.activation, cache=self.cache)

    def extra_repr(self) -> str:
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}, "
            f"activation={self.activation!r}"
        )


class MLP(torch.nn.Module):
    """``fc2(activation(fc1(x)))`` as one fused operation (forward and backward).

    ``fc1`` and ``fc2`` are :class:`Linear` submodules (state-dict keys ``fc1.weight``, ``fc1.bias``,
    ``fc2.weight``, ``fc2.bias``). With GELU the backward runs fc2's input-gradient GEMM with ``DGELU``,
    producing fc1's pre-activation gradient in the GEMM kernel; the bias gradients come from ``BGRADB``.

    Args:
        in_features, hidden_features, out_features: sizes.
        bias: learn biases in both layers.
        activation: ``"relu"`` or ``"gelu"`` (tanh approximation).
        device, dtype, cache, fp8: as :class:`Linear` (``fp8``: both layers run FP8, each with its own
            scaling state; with GELU in bfloat16 / float16 bias, GELU and fc2's input quantization are
            fused into the GEMMs, see ``docs/fp8_training.rst``).
    """

    def __init__(
        self, in_features: int, hidden_features: int, out_features: int, bias: bool = True,
        activation: str = "gelu", device: Any = None, dtype: Any = None, *, cache: PlannerCache | None = None,
        fp8: Any = None,
    ):  # fmt: skip
        super().__init__()
        self.activation = check_activation(activation, allow_none=False)
        self.cache = cache
        self.fc1 = Linear(in_features, hidden_features, bias, activation, device, dtype, cache=cache, fp8=fp8)
        self.fc2 = Linear(hidden_features, out_features, bias, None, device, dtype, cache=cache, fp8=fp8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``fc2(activation(fc1(x)))`` for ``x`` of shape ``(*, in_features)``: fused on CUDA tensors
        (see the class), torch's operations on other devices."""
        f1, f2 = self.fc1, self.fc2
        if f1.fp8 is not None or (autocast_blocks and _fp8_hooks.autocast_on()):  # FP8: the fused block
            return _fp8_hooks.mlp_forward(self, x)
        return mlp(x, f1.weight, f1.bias, f2.weight, f2.bias, self.activation, cache=self.cache)
