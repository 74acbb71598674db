"""The compute of nvmath.torch: forward and backward passes as cuBLASLt calls on torch tensors.

No autograd here: these functions take and return plain tensors and are shared by the eager
autograd functions (:mod:`._functions`) and the custom ops (:mod:`._ops`). Every product runs on
a planner of a :class:`~._planners.PlannerCache`.

Orientation. A Linear layer ``y = act(x @ w.T + b)`` (``x``: (M, K) tokens, ``w``: (N, K)) with a bias
or an aux output runs as the product ``y.T = act(w @ x.T + b[:, None])`` of shape (N, M): its bias runs along the rows (the
cuBLASLt bias), and D, column-major in cuBLASLt's orientation, is ``y`` row-major. The aux output is
that of ``y.T``: ``gelu_aux`` of shape (round_up(N, 8), M), column-major (``aux[:N].T`` is the
pre-activation; a Linear layer keeps just that view), ``relu_aux`` a bitmask of shape
(round_up(ceil(N/8), 16), M). The MLP keeps the whole aux (the backward epilog reads it) with its
padding zeroed, so that the output is deterministic.

Backward (``g`` = dL/dy):

* a Linear layer: ``dz = g * act'(z)`` (one elementwise kernel, torch's own ``gelu_backward`` /
  ``threshold_backward``; ReLU's from the saved output, GELU's from the saved pre-activation),
  ``dw.T, db = x.T @ dz`` with **BGRADB** (the bias gradient comes out of the weight-gradient GEMM),
  ``dx = dz @ w``.
* an MLP block (``fc2(act(fc1(x)))``): with GELU, the input gradient of fc2, ``dh.T = w2.T @ g.T``,
  carries **DGELU** with fc1's saved aux, so it yields fc1's pre-activation gradient in the GEMM
  itself; the bias gradients come from BGRADB on the weight-gradient GEMMs. With ReLU, that GEMM is
  plain and ``threshold_backward`` on the saved hidden activation follows.

Why not DGELU_BGRAD / DRELU / DRELU_BGRAD: measured on an H200 with cuBLASLt 13.1 (bf16, 8192 tokens,
4096 <-> 16384), those run a separate cuBLASLt epilogue kernel after the GEMM (+0.72 to +0.94 ms on a
1.42 ms GEMM), while DGELU is fused into the GEMM kernel (+0.12 ms), torch's elementwise backward
costs 0.20 ms and BGRADB 0.10 ms.
"""

from __future__ import annotations

from typing import Any

import torch

from nvmath.linalg.advanced import MatmulEpilog as E
from nvmath.torch._linear_hit import WEIGHT_BIAS_GRAD, WEIGHT_GRAD
from nvmath.torch._planners import PRODUCT, PlannerCache
from nvmath.torch._rules import check_linear

__all__ = ["ACTIVATIONS", "linear_backward", "linear_forward", "linear_infer", "linear_train", "mlp_backward"]

ACTIVATIONS = (None, "relu", "gelu")
"""The activations a Linear layer fuses (GELU is the tanh approximation)."""

_FORWARD = {
    # (activation, bias, keep aux for backward) -> epilog
    (None, False, False): None, (None, False, True): None,
    (None, True, False): E.BIAS, (None, True, True): E.BIAS,
    ("relu", False, False): E.RELU, ("relu", False, True): E.RELU,
    ("relu", True, False): E.RELU_BIAS, ("relu", True, True): E.RELU_BIAS,
    ("gelu", False, False): E.GELU, ("gelu", False, True): E.GELU_AUX,
    ("gelu", True, False): E.GELU_BIAS, ("gelu", True, True): E.GELU_AUX_BIAS,
}  # fmt: skip
"""ReLU's backward needs only the output (relu'(z) = [y > 0]); GELU's needs the pre-activation."""

INFER = {act: (_FORWARD[(act, True, False)], _FORWARD[(act, False, False)]) for act in ACTIVATIONS}
"""activation -> (epilog with a bias, epilog without) of inference (``INFER[act][bias is None]``)."""

_MLP_FORWARD = {
    ("relu", False): E.RELU, ("relu", True): E.RELU_BIAS,  # the backward reads the hidden activation
    ("gelu", False): E.GELU_AUX, ("gelu", True): E.GELU_AUX_BIAS,
}  # fmt: skip

_EMPTY: dict[Any, torch.Tensor] = {}


def empty_aux(ref: torch.Tensor) -> torch.Tensor:
    """The placeholder for "no aux" (custom ops return tensors, never ``None``)."""
    return ref.new_empty((0,))


def _split(out: Any) -> tuple[torch.Tensor, dict]:
    return out if isinstance(out, tuple) else (out, _EMPTY)


def _rows(t: torch.Tensor) -> torch.Tensor:
    """``t`` as a 2-D (tokens, features) view."""
    return t if t.dim() == 2 else t.reshape(-1, t.shape[-1])


def linear_infer(
    cache: PlannerCache, x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None, act: str | None
) -> torch.Tensor:
    """``act(x @ w.T + b)`` without anything for a backward (the inference hot path: no aux tensor)."""
    hits = cache.linear_hits
    if hits is not None:  # (the compiled hit, when the path is active)
        y = hits(x, w, b, act)
        if y is not None:
            return y
    epilog = _FORWARD[(act, b is not None, False)]
    return cache.linear(x, w, b, epilog, compile_hit=hits is not None)[0]  # type: ignore[index]


def linear_train(
    cache: PlannerCache, x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None, act: str | None
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``act(x @ w.T + b)`` and the pre-activation the backward needs with GELU (else ``None``).

    A problem planned before skips every check (its key vouches for them); a new one is checked by
    torch's rules (:func:`~._rules.check_linear`) before it is planned.
    """
    if act != "gelu":  # (the inference epilog: the compiled hit runs it, when the path is active)
        hits = cache.linear_hits
        if hits is not None:
            y = hits(x, w, b, act)
            if y is not None:
                return y, None
    epilog = _FORWARD[(act, b is not None, True)]
    out = cache.linear(x, w, b, epilog, plan=False, compile_hit=act != "gelu")
    if out is None:
        check_linear(x, w, b)
        out = cache.linear(x, w, b, epilog)
    y, extras = out  # type: ignore[misc]
    aux = extras.get("gelu_aux") if extras else None  # (round_up(N, 8), M): rows past N are padding
    return y, (aux[: w.shape[0]] if aux is not None else None)


def linear_forward(
    cache: PlannerCache, x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None, act: str | None, keep: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    """``act(x @ w.T + b)`` and the aux the backward needs (an empty tensor when none)."""
    if keep:
        y, aux = linear_train(cache, x, w, b, act)
        return y, (aux if aux is not None else empty_aux(y))
    y, _ = cache.linear(x, w, b, _FORWARD[(act, b is not None, False)])  # type: ignore[misc]
    return y, empty_aux(y)


def activation_grad(g: torch.Tensor, act: str | None, y: torch.Tensor, aux: torch.Tensor) -> torch.Tensor:
    """dL/dz of ``y = act(z)`` from ``g`` = dL/dy, contiguous, in ``g``'s dtype."""
    if act is None:
        return g.contiguous()
    if act == "relu":
        return torch.ops.aten.threshold_backward(g, y, 0).contiguous()
    return torch.ops.aten.gelu_backward(g, aux.mT, approximate="tanh").contiguous()  # aux.mT: z, (M, N)


def weight_grad(
    cache: PlannerCache, dz: torch.Tensor, x: torch.Tensor, bias: bool
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``dz.T @ x`` (the weight gradient, (N, K)) and, with ``bias``, ``dz.sum(0)`` from BGRADB
    (:meth:`~._planners.PlannerCache.weight_grad`)."""
    return cache.weight_grad(x, dz, bias)


def linear_backward(
    cache: PlannerCache, g: torch.Tensor, x: torch.Tensor, w: torch.Tensor, y: torch.Tensor, aux: torch.Tensor,
    act: str | None, has_bias: bool, needs: tuple[bool, ...],
) -> tuple[torch.Tensor | None, torch.Tensor | None, torch.Tensor | None]:  # fmt: skip
    """``(dx, dw, db)`` of :func:`linear_forward` (``None`` where ``needs``, whose first three items are
    x's, w's and b's, says not needed).

    With the compiled table (``cache.linear_hits``) the weight gradient (with BGRADB's bias gradient)
    and the input gradient are one C call (``LinearHits.backward``, ``dz`` read once) when both
    problems have entries; the Python path makes what it did not (and gives the table the entries).
    """
    flat = x.dim() == 2  # (the common case: no (tokens, features) views to make)
    g2, x2 = (g, x) if flat else (_rows(g), _rows(x))
    if act is None:  # (the plain layer: no call for the identity's gradient)
        dz = g2.contiguous()
    else:
        dz = activation_grad(g2, act, y if flat or act != "relu" else _rows(y), aux)
    want_w, bias = needs[1] or (needs[2] and has_bias), has_bias and needs[2]
    xc = x2.contiguous() if want_w else x2
    hits = cache.linear_hits  # (the compiled hits, when the path is active)
    wout = dx = None
    if hits is not None:
        name = (WEIGHT_BIAS_GRAD if bias else WEIGHT_GRAD) if want_w else None
        out = hits.backward(xc, dz, w, name, PRODUCT if needs[0] else None)
        if out is not None:
            wout, dx = out
    dw = db = None
    if want_w:
        if wout is None:
            wout = cache.weight_grad(xc, dz, bias, compile_hit=hits is not None)
        dw, db = wout if type(wout) is tuple else (wout, None)  # (the C entry without bias: dw alone)
        dw = dw if needs[1] else None
    if needs[0]:
        if dx is None:
            dx = cache.run(dz, w, compile_hit=hits is not None)
        dx = dx.contiguous() if flat else dx.contiguous().view(*x.shape)
    return dx, dw, db


def mlp_forward(
    cache: PlannerCache, x: torch.Tensor, w1: torch.Tensor, b1: torch.Tensor | None, w2: torch.Tensor,
    b2: torch.Tensor | None, act: str, keep: bool,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:  # fmt: skip
    """``fc2(act(fc1(x)))`` and, with ``keep``, the hidden activation and fc1's aux for the backward."""
    if not keep:
        y = linear_infer(cache, linear_infer(cache, x, w1, b1, act), w2, b2, None)
        return y, empty_aux(y), empty_aux(y)
    x2 = _rows(x)
    inputs = {"bias": b1.view(-1, 1)} if b1 is not None else None
    ht, extras = _split(
        cache.run(w1, x2.mT, epilog=_MLP_FORWARD[(act, b1 is not None)], epilog_inputs=inputs)
    )
    h = ht.mT.contiguous()
    y, _ = linear_forward(cache, h, w2, b2, None, False)
    aux = _clear_padding(extras["gelu_aux"], w1.shape[0]) if act == "gelu" else empty_aux(h)
    return y.view(*x.shape[:-1], w2.shape[0]), h, aux


def _clear_padding(aux: torch.Tensor, n: int) -> torch.Tensor:
    """Zero the rows of a GELU aux output past the ``n`` real rows (a deterministic output)."""
    if aux.shape[0] > n:
        aux[n:].zero_()
    return aux


def mlp_backward(
    cache: PlannerCache, g: torch.Tensor, x: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor, h: torch.Tensor,
    aux: torch.Tensor, act: str, has_b1: bool, has_b2: bool, needs: tuple[bool, ...],
) -> tuple[torch.Tensor | None, ...]:  # fmt: skip
    """``(dx, dw1, db1, dw2, db2)`` of :func:`mlp_forward` (``needs`` in that order)."""
    g2, x2 = _rows(g).contiguous(), _rows(x).contiguous()
    dw2 = db2 = None
    if needs[3] or (needs[4] and has_b2):
        dw2, db2 = weight_grad(cache, g2, h, has_b2 and needs[4])
    if act == "gelu":  # dz1.T = dgelu(w2.T @ g.T), in the GEMM
        dz1 = _split(cache.run(w2.mT, g2.mT, epilog=E.DGELU, epilog_inputs={"gelu_aux": aux}))[0].mT.contiguous()
    else:
        dz1 = torch.ops.aten.threshold_backward(cache.run(g2, w2), h, 0)
    dw1 = db1 = None
    if needs[1] or (needs[2] and has_b1):
        dw1, db1 = weight_grad(cache, dz1, x2, has_b1 and needs[2])
    dx = cache.run(dz1, w1).contiguous().view(*x.shape) if needs[0] else None
    return dx, dw1 if needs[1] else None, db1, dw2 if needs[3] else None, db2
