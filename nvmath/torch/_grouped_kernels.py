"""The compute of :class:`~nvmath.torch.GroupedLinear`: forward and backward on plain tensors (no autograd).

Two ways to run each product (forward, dgrad, wgrad), the results written into slices of one
preallocated output (nothing concatenated):

* **per-group cuBLASLt GEMMs** (GPU tensors, :mod:`._grouped_runs`): one planned
  :class:`~nvmath.linalg.advanced.Matmul` per group problem, run on the tensors' addresses into the
  group's slice: forward ``y_g.T = w_g @ x_g.T + b_g`` with the bias in the GEMM (``BIAS`` epilog);
  dgrad ``dx_g = dy_g @ w_g``; wgrad ``dw_g.T = x_g.T @ dy_g`` with the bias gradient from the same GEMM
  (``BGRADB``). On Hopper these run cuBLASLt's sm90 kernels, where cuBLAS's grouped GEMM runs an sm80
  one (see :mod:`._grouped_runs` for the measurements and why cuBLASLt 13.1 offers no grouped GEMM).
  A problem is planned at its second sighting, so counts that change every step plan nothing; a
  product seen before replays its recorded launches on its operands' addresses plus offsets (no
  views, no per-group keys: the host cost per group is one cuBLASLt launch);
* **one grouped launch per product** (counts seen for the first time, more than
  :data:`~._grouped_runs.MAX_PER_GROUP_LAUNCHES` groups with tokens, less work per group than
  :data:`~._grouped_runs.MIN_FLOPS_PER_GROUP`, output slices less than 256-byte aligned, the per-group
  path switched off (``default_runs.enabled = False``), CPU tensors): on the GPU one call of
  :func:`nvmath.linalg.matmul` on the sequence of the groups' problems
  (``cublasGemmGroupedBatchedEx`` for bfloat16 / float16, ``cublas[SD]gemmGroupedBatched`` for float32
  / float64), in place (``MatmulOptions(inplace=True)``); on the CPU a loop of torch matmuls (what
  ``torch.compile`` traces there). ``y`` starts as each row's bias (``beta = 1``); ``db`` is one column
  sum per group (float32 sums for bfloat16 / float16: the ``index_add`` it replaces took 221 us per
  step on the H200 benchmark).

Groups with no token are left out of the products (their ``dw`` and ``db`` are zero).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from nvmath.linalg.advanced import MatmulEpilog as E
from nvmath.torch import _functional, _grouped_runs

__all__ = ["grouped_backward", "grouped_forward", "per_group"]

_INPLACE = {"inplace": True}


def _bounds(counts: list[int]) -> list[tuple[int, int, int]]:
    """``(group, start, stop)`` of the groups with tokens."""
    out, start = [], 0
    for g, c in enumerate(counts):
        if c:
            out.append((g, start, start + c))
        start += c
    return out


def _grouped_mm(a: list, b: list, c: list, beta: float) -> None:
    """``c[i] = a[i] @ b[i] + beta * c[i]`` for every i: one ``nvmath.linalg.matmul`` sequence call on
    the GPU (one grouped launch), a loop of torch matmuls elsewhere (what ``torch.compile`` traces)."""
    if not a:
        return
    if a[0].is_cuda:
        from nvmath.linalg import matmul

        matmul(a, b, c, beta=beta, options=_INPLACE)
        return
    for x, y, z in zip(a, b, c):
        if beta:
            z.add_(x @ y)
        else:
            torch.matmul(x, y, out=z)


def per_group(t: Any) -> bool:
    """Whether ``t``'s device runs cuBLASLt (the per-group products of :mod:`._grouped_runs`)."""
    return t.device.type in _functional.FUSED_DEVICE_TYPES


def _run_slices(kind: tuple, bases: tuple, problems: Callable[[], list]) -> list | None:
    """Run per-group products into their slices (:meth:`._grouped_runs.SliceRuns.run_product`): their
    aux outputs, or ``None`` when they run as one grouped launch instead (nothing was run)."""
    return _grouped_runs.default_runs.run_product(kind, bases, problems)


def _forward(x: Any, w: Any, b: Any, counts: list[int], bounds: list) -> Any:
    """``y`` of :class:`GroupedLinearFn`: per-group GEMMs with the bias fused, or one grouped launch."""
    y = x.new_empty((x.shape[0], w.shape[1]))  # (a group without tokens has no rows)
    if per_group(x) and bounds:
        kind = ("forward", b is not None, tuple(counts))
        if b is None:
            made = _run_slices(kind, (x, w, y, None), lambda: [
                (x[s:e], w[k].mT, y[s:e], None, None) for k, s, e in bounds
            ])  # fmt: skip
        else:  # y_g.T = w_g @ x_g.T + b_g[:, None]: the bias along D's rows (cuBLASLt's BIAS)
            made = _run_slices(kind, (w, x, y, b), lambda: [
                (w[k], x[s:e].mT, y[s:e].mT, E.BIAS, {"bias": b[k].view(-1, 1)}) for k, s, e in bounds
            ])  # fmt: skip
        if made is not None:
            return y
    if b is not None:
        rows = torch.tensor(counts, device=b.device)
        y = torch.repeat_interleave(b, rows, dim=0, output_size=x.shape[0]).contiguous()
    _grouped_mm([x[s:e] for _, s, e in bounds], [w[g].T for g, _, _ in bounds], [y[s:e] for _, s, e in bounds],
                1.0 if b is not None else 0.0)  # fmt: skip
    return y


def _weight_grad(
    g: Any, x: Any, w: Any, counts: list[int], bounds: list, want_db: bool
) -> tuple[Any, Any]:
    """``(dw, db or None)``: ``dw[k] = g_k.T @ x_k`` (zero for groups without tokens), ``db[k] = g_k.sum(0)``
    (``BGRADB`` of the per-group GEMMs, or one segmented reduction)."""
    dw = w.new_empty(w.shape)
    for k, c in enumerate(counts):
        if not c:
            dw[k].zero_()
    if per_group(x) and bounds:
        epilog = E.BGRADB if want_db else None
        made = _run_slices(("wgrad", want_db, tuple(counts)), (x, g, dw, None), lambda: [
            (x[s:e].mT, g[s:e], dw[k].mT, epilog, None) for k, s, e in bounds
        ])  # fmt: skip
        if made is not None:
            if not want_db:
                return dw, None
            return dw, _by_group([m["bgradb"].reshape(-1) for m in made], bounds, w)
    _grouped_mm([g[s:e].T for _, s, e in bounds], [x[s:e] for _, s, e in bounds],
                [dw[k] for k, _, _ in bounds], 0.0)  # fmt: skip
    if not want_db:
        return dw, None
    acc = torch.promote_types(g.dtype, torch.float32)  # (bf16 / fp16 sums in float32; float64 in float64)
    return dw, _by_group([g[s:e].sum(0, dtype=acc) for _, s, e in bounds], bounds, w)


def _by_group(parts: list, bounds: list, w: Any) -> Any:
    """The ``(num_groups, N)`` stack of ``parts`` (one row per group with tokens, in ``bounds``' order),
    zero rows for the other groups, in ``w``'s dtype."""
    if not parts:
        return w.new_zeros(w.shape[:2])
    if len(parts) < w.shape[0]:
        rows = [parts[0].new_zeros(parts[0].shape)] * w.shape[0]
        for (k, _, _), part in zip(bounds, parts):
            rows[k] = part
        parts = rows
    return torch.stack(parts).to(w.dtype)


def _input_grad(g: Any, x: Any, w: Any, counts: list[int], bounds: list) -> Any:
    """``dx_g = g_g @ w_g`` into slices of one ``dx`` (rows of groups without tokens: none)."""
    dx = x.new_empty(x.shape)
    if per_group(x) and bounds:
        made = _run_slices(("dgrad", tuple(counts)), (g, w, dx, None), lambda: [
            (g[s:e], w[k], dx[s:e], None, None) for k, s, e in bounds
        ])  # fmt: skip
        if made is not None:
            return dx
    _grouped_mm([g[s:e] for _, s, e in bounds], [w[k] for k, _, _ in bounds],
                [dx[s:e] for _, s, e in bounds], 0.0)  # fmt: skip
    return dx


def grouped_forward(x: Any, w: Any, b: Any, counts: list[int]) -> Any:
    """``y`` of :func:`grouped_linear` (checked operands, ``x`` contiguous; no autograd)."""
    return _forward(x, w, b, counts, _bounds(counts))


def grouped_backward(
    g: Any, x: Any, w: Any, counts: list[int], has_bias: bool, needs: tuple[bool, ...]
) -> tuple[Any, Any, Any]:
    """``(dx, dw, db)`` of :func:`grouped_forward` (``None`` where ``needs`` says not needed)."""
    bounds = _bounds(counts)
    g = g.contiguous()
    dx = dw = db = None
    want_db = has_bias and needs[2]
    if needs[1] or want_db:
        dw, db = _weight_grad(g, x, w, counts, bounds, want_db)
        dw = dw if needs[1] else None
    if needs[0]:
        dx = _input_grad(g, x, w, counts, bounds)
    return dx, dw, db
