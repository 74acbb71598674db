"""The compute of the FP8 :class:`~nvmath.torch.GroupedLinear` on plain tensors (no autograd): every
group's quantization and FP8 GEMMs, the scaling state of all groups updated at once.

Quantization (:func:`quantize_groups`): a (T, C) tensor whose rows are grouped (``bounds``) is
quantized with one scale per group into one FP8 (T, C) tensor and, for the weight-gradient GEMMs, one
buffer of the groups' transposed copies (group ``g``'s (C, rows) block at element ``start * C``);
the groups' amaxes land in one (G,) tensor and their column sums (a bias gradient) in one
(G, blocks, C) float32 tensor summed once. On the GPU all groups are one launch of the FP8 layers'
grouped cast-transpose kernel (:mod:`._fp8_cast`, :func:`~._fp8_cast.launch_grid`,
:func:`grouped_launch`): block ``(bx, by, g)`` does what block ``(bx, by)`` of a launch over group
``g``'s rows alone would do (its scale, amax and partial sums at the group's offsets; the row offsets
a small device table made once per counts, :func:`device_table`): no per-group tensors, launches or
scale updates, the values of per-group launches bit for bit; where the rows are whole 8-element
vectors, 16-byte aligned, the vectorized grouped kernel (``nvmath_cast_transpose_grouped_vec``, 64 x
256 tiles: the same values). Current scaling runs an amax-only pass first: one launch of the grouped
amax reduction (``nvmath_amax_grouped``, each group's contiguous rows read as 16-byte vectors; else
the cast-transpose launch without outputs). Elsewhere (CPU
tensors, the kernels not in use) torch's operations compute the same values group by group
(:func:`~._fp8.quantize`, the arithmetic of an FP8 ``Linear`` on those tensors).

The GEMMs are those of an FP8 ``Linear`` per group (the bias fused in bfloat16 / float16 layers) on
the grouped layer's planners (:mod:`._grouped_fp8_gemms`: fixed scale slots, pointer swaps); CPU
tensors, or where those planners switched off, on the FP8 Linear layers' caches
(:data:`~._fp8_linear.fp8_gemm_cache`, :data:`~._fp8_epilogs.fp8_epilog_gemms`) with each group's
dequantization scales as views of the (G,) tensors.
The stacked weight is quantized once per weight version (all groups in one call). The weight
gradient is one (G, N, K) stack of the groups' wgrad GEMMs (zero for groups without tokens), the bias
gradient the (G, N) column sums of the quantization pass: no per-group autograd selects (the zero-
filled full-size gradient per group and their sum that ``weight[g]`` cost in a loop of layers).
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
from typing import Any

import numpy as np
import torch

from nvmath.torch import _fp8_cast
from nvmath.torch._capture import CaptureError, capturing
from nvmath.torch._fp8 import ROLES, amax_of, quantize, weight_key
from nvmath.torch._fp8_linear import epilog_config
from nvmath.torch._grouped_fp8_state import GroupedScalingState
from nvmath.torch._step_scratch import carve

__all__ = [
    "Quantized",
    "active_groups",
    "bounds_of",
    "device_table",
    "grouped_amax_applies",
    "grouped_amax_blocks",
    "grouped_backward",
    "grouped_forward",
    "grouped_launch",
    "quantize_groups",
    "quantize_role",
    "signature",
    "transposed_block",
    "weight_fp8",
]

Bounds = tuple[tuple[int, int, int], ...]


def bounds_of(counts: list[int] | tuple[int, ...]) -> Bounds:
    """``(group, start, stop)`` of the groups with tokens (a tuple made once per counts)."""
    return _bounds(tuple(counts))


@functools.lru_cache(maxsize=256)
def _bounds(counts: tuple[int, ...]) -> Bounds:
    out, start = [], 0
    for g, c in enumerate(counts):
        if c:
            out.append((g, start, start + c))
        start += c
    return tuple(out)


@dataclasses.dataclass
class Quantized:
    """A grouped tensor's FP8 copies: ``q`` (T, C); ``qt`` flat, group rows ``s:e``'s transpose the
    (C, e - s) block at ``s * C``; ``amax`` (G,) float32 (0 for groups without rows); ``colsum``
    (G, C) float32 column sums or ``None``."""

    q: torch.Tensor | None
    qt: torch.Tensor | None
    amax: torch.Tensor
    colsum: torch.Tensor | None

    def transposed(self, s: int, e: int) -> torch.Tensor:
        """Rows ``s:e``'s FP8 transpose, (C, e - s) row-major."""
        return transposed_block(self.qt, self.q.shape[1], s, e)


def transposed_block(qt: torch.Tensor, cols: int, s: int, e: int) -> torch.Tensor:
    """Rows ``s:e``'s block (cols, e - s) of a flat buffer of transposed groups (:class:`Quantized`)."""
    return qt[s * cols : e * cols].view(cols, e - s)


def _ptr(t: torch.Tensor | None) -> int:
    return 0 if t is None else t.data_ptr()


def grouped_launch(bounds: Bounds, groups: int, cols: int) -> tuple[list[int], tuple[int, int, int], int]:
    """``(offsets, grid, partial_rows)`` of the one grouped cast-transpose launch over ``bounds``: the
    (G + 1) row offsets of every group (groups without rows: an empty range), the grid ``(gx, gy, G)``
    (``gy``: the most grid rows any group's own launch (:func:`~._fp8_cast.grid`) has; each group's
    blocks beyond its own return) and the partial-sum rows per group (that ``gy``)."""
    offsets, at = [0] * (groups + 1), 0
    ends = {g: e for g, _, e in bounds}
    for g in range(groups):
        at = ends.get(g, at)
        offsets[g + 1] = at
    gx = _fp8_cast.grid(1, cols)[0]
    gy = max(_fp8_cast.grid(e - s, cols)[1] for _, s, e in bounds)
    return offsets, (gx, gy, groups), gy


_NULL = np.uintp(0)


def launch_args(
    x: torch.Tensor, q: Any, qt: Any, scale: Any, amax: torch.Tensor, partial: Any, table: torch.Tensor,
    cols: int, partial_rows: int,
) -> tuple:  # fmt: skip
    """The argument vector of ``nvmath_cast_transpose_grouped`` in its parameter order: ``x``, ``aux``
    (none: this pass has no DGELU), ``q``, ``qt``, ``scale``, ``amax``, ``partial``, the row-offset
    table, ``cols``, ``partial_rows`` and the target block count (addresses as ``np.uintp``, sizes as
    ``np.int64``: the launch passes them by value in exactly these widths)."""
    u, null = np.uintp, _NULL
    return (
        u(x.data_ptr()), null, null if q is None else u(q.data_ptr()),
        null if qt is None else u(qt.data_ptr()),
        null if scale is None else u(scale.data_ptr()), u(amax.data_ptr()),
        null if partial is None else u(partial.data_ptr()), u(table.data_ptr()),
        np.int64(cols), np.int64(partial_rows), np.int64(_fp8_cast.TARGET_BLOCKS),
    )  # fmt: skip


@functools.lru_cache(maxsize=256)
def _launch_plan(bounds: tuple, groups: int, cols: int) -> tuple:
    """:func:`grouped_launch` of ``bounds`` (a tuple), the groups' row counts and whether all are even
    (the cast-transposes' transposed stores take 2-byte aligned rows), made once per counts."""
    offsets, shape, blocks = grouped_launch(list(bounds), groups, cols)
    counts = [e - s for s, e in itertools.pairwise(offsets)]
    return tuple(offsets), shape, blocks, counts, all(c % 2 == 0 for c in counts)


def partial_shape(bounds: Bounds, groups: int, cols: int) -> tuple[int, int, int]:
    """The shape of the grouped launch's partial column sums over ``bounds``: (G, grid rows, C)."""
    return groups, _launch_plan(tuple(bounds), groups, cols)[2], cols


def _kernel_run(
    x: torch.Tensor, bounds: Bounds, groups: int, dtype: torch.dtype, scale: torch.Tensor | None,
    colsum: bool, amax: torch.Tensor | None = None, partial: torch.Tensor | None = None,
    together: bool = False,
) -> Quantized | None:  # fmt: skip
    """The GPU pass: one grouped cast-transpose launch over all groups (``scale`` None: amax only; the
    amaxes into ``amax`` (G,) zeros where given; the partial sums into ``partial``, zeros of
    :func:`partial_shape`, where given; ``together``: ``q`` and ``qt`` views of one allocation, for
    copies that live as long as each other); ``None`` when the kernels do not run here (nothing was
    written): a group of an odd number of rows takes the torch path, but for the amax reduction."""
    rows, cols = x.shape
    dev = x.device
    if groups > _fp8_cast.MAX_GRID_Y:
        return None
    offsets, shape, blocks, counts, even = _launch_plan(tuple(bounds), groups, cols)  # (a tuple: itself)
    table = device_table("row offsets", offsets, torch.int64, x, counts)
    if amax is None:
        amax = torch.zeros(groups, dtype=torch.float32, device=dev)
    if scale is None and not colsum and grouped_amax_applies(x):  # (current scaling's first pass)
        shape = (grouped_amax_blocks(max(counts) * cols, x.element_size(), groups), groups, 1)
        args = (np.uintp(x.data_ptr()), np.uintp(amax.data_ptr()), np.uintp(table.data_ptr()), np.int64(cols))
        if not _fp8_cast.launch_grid(dev, ("grouped_amax", x.dtype), shape, args):
            return None
        return Quantized(None, None, amax, None)
    if not even:
        return None
    q = qt = None
    if scale is not None:
        if together:
            q, qt = carve(((rows, cols), (rows * cols,)), dtype, dev)
        else:
            q = torch.empty((rows, cols), dtype=dtype, device=dev)
            qt = torch.empty(rows * cols, dtype=dtype, device=dev)
    if not colsum:
        partial = None
    elif partial is None:
        partial = torch.zeros((groups, blocks, cols), dtype=torch.float32, device=dev)
    args = launch_args(x, q, qt, scale, amax, partial, table, cols, blocks)
    key = ("grouped", x.dtype, dtype)
    if _fp8_cast.vector_cast_applies(x):  # (the same argument vector; a quarter of the block columns)
        key, shape = ("grouped_vector", x.dtype, dtype), (-(-cols // _fp8_cast.VEC_COLS), *shape[1:])
    if not _fp8_cast.launch_grid(dev, key, shape, args):
        return None
    return Quantized(q, qt, amax, partial.sum(1) if colsum else None)


def grouped_amax_applies(x: torch.Tensor) -> bool:
    """Whether the amax-only pass over ``x``'s row groups runs the grouped reduction
    ``nvmath_amax_grouped`` (16-byte vectors of each group's contiguous rows) instead of the grouped
    cast-transpose without outputs: :data:`~._fp8_cast.VECTOR_AMAX` on, ``x`` 16-byte aligned and
    rows of whole 16-byte vectors (then every group's first row is aligned too)."""
    return _fp8_cast.VECTOR_AMAX and x.data_ptr() % 16 == 0 and x.shape[1] % (16 // x.element_size()) == 0


def grouped_amax_blocks(numel: int, element_size: int, groups: int) -> int:
    """Blocks per group of the grouped amax reduction: :func:`~._fp8_cast.amax_blocks` of the largest
    group's ``numel`` elements, at most ``2 * AMAX_BLOCKS / groups`` (about two blocks per resident
    block slot over all groups: tiny blocks of small groups cost more than they read; the H200 timed
    256 per group fastest for the 8-expert step, 1024 about 7% slower)."""
    return max(1, min(_fp8_cast.amax_blocks(numel, element_size), -(-2 * _fp8_cast.AMAX_BLOCKS // groups)))


def _torch_run(
    x: torch.Tensor, bounds: Bounds, groups: int, dtype: torch.dtype, scale: torch.Tensor | None,
    colsum: bool, amax_out: torch.Tensor | None = None,
) -> Quantized:  # fmt: skip
    """:func:`_kernel_run`'s values by torch's operations, group by group (a non-finite amax makes that
    group's ``q`` NaN, as :func:`~._fp8.quantize` does)."""
    cols = x.shape[1]
    amax = [torch.zeros((), dtype=torch.float32, device=x.device)] * groups
    sums = [torch.zeros(cols, dtype=torch.float32, device=x.device)] * groups
    qs = []
    for g, s, e in bounds:
        v = x[s:e]
        amax[g] = amax_of(v)
        if colsum:
            sums[g] = v.float().sum(0)
        if scale is not None:
            qs.append(quantize(v, scale[g], dtype, amax[g]))
    q = qt = None
    if scale is not None:
        q = torch.cat(qs) if qs else x.new_empty(x.shape, dtype=dtype)
        qt = torch.cat([p.T.reshape(-1) for p in qs]) if qs else q.reshape(-1)
    amaxes = torch.stack(amax) if amax_out is None else amax_out.copy_(torch.stack(amax))
    return Quantized(q, qt, amaxes, torch.stack(sums) if colsum else None)


def quantize_groups(
    x: torch.Tensor, bounds: Bounds, groups: int, dtype: torch.dtype, scale: torch.Tensor | None,
    colsum: bool = False, amax_out: torch.Tensor | None = None, partial_out: torch.Tensor | None = None,
    together: bool = False,
) -> Quantized:  # fmt: skip
    """``x`` (T, C), rows grouped by ``bounds``, quantized to ``dtype`` with ``scale[g]`` for group
    ``g``'s rows (``scale`` (G,) float32; ``None``: the amaxes only): see the module notes. ``amax_out``:
    a (G,) float32 zeros tensor the amaxes go into (the result's ``amax``), else a new one;
    ``partial_out``: zeros of :func:`partial_shape` the kernel's partial column sums go into (a step's
    scratch), else a new one; ``together``: the two FP8 copies in one allocation (:func:`_kernel_run`)."""
    if bounds and _fp8_cast.available(x):  # (a CUDA tensor the kernels take)
        made = _kernel_run(x, bounds, groups, dtype, scale, colsum, amax_out, partial_out, together)
        if made is not None:
            return made
    return _torch_run(x, bounds, groups, dtype, scale, colsum, amax_out)


def quantize_role(
    state: GroupedScalingState, role: str, x: torch.Tensor, bounds: Bounds, colsum: bool = False,
    amax_out: torch.Tensor | None = None, scratch: tuple = (None, None, False),
) -> tuple[Quantized, torch.Tensor]:  # fmt: skip
    """``(copies, used scales (G,))`` of ``x`` as ``role`` under ``state``'s recipe (the state not yet
    updated: :meth:`~GroupedScalingState.record` takes the amaxes and the scales used); ``amax_out``: as
    :func:`quantize_groups` (the quantizing pass's amaxes); ``scratch`` = ``(used_out, partial_out,
    together)``: current scaling's scales written into ``used_out`` ((G,) float32) where given, and
    :func:`quantize_groups`'s ``partial_out`` and ``together``."""
    dtype, groups = state.dtype(role), state.groups
    used_out, partial_out, together = scratch
    if state.recipe.delayed:
        scale = state.rows(ROLES.index(role))[0]
        made = quantize_groups(x, bounds, groups, dtype, scale, colsum, amax_out, partial_out, together)
        return made, scale
    # (the quantizing pass measures the same amaxes again into the amax-only pass's tensor: a max of
    # equal values, the same bits; no zeros tensor for the second pass)
    amax = quantize_groups(x, bounds, groups, dtype, None, amax_out=amax_out).amax
    scale = state.current_scale(role, amax, out=used_out)
    return quantize_groups(x, bounds, groups, dtype, scale, colsum, amax, partial_out, together), scale


def weight_fp8(
    state: GroupedScalingState, w: torch.Tensor, x_part: tuple | None = None, scratch: tuple | None = None
) -> tuple[tuple, torch.Tensor | None, torch.Tensor | None]:
    """``((qw (G, N, K), qw.T (G, K, N), 1 / sw (G,)), inv_x, both)``: the weight's FP8 copies, remade (and
    the weight role recorded) only when ``w`` changed; ``x_part`` = ``(amax (G,), used (G,), active)`` of
    the forward's input, recorded in the same update (its dequantization scales ``inv_x`` returned;
    ``both``: where the two roles were recorded together, the (2, G) tensor whose rows are ``inv_x``
    and ``1 / sw``, for the GEMMs' scale slots (:meth:`~._grouped_fp8_gemms.GroupedFP8Gemms.run`'s
    ``scales``), else ``None``).
    Inside a CUDA graph capture the forward's call (``x_part`` given) makes the copies again whatever
    the version, so every replay quantizes the weight's values of that moment (a replay moves no
    version counter); the backward reuses the forward's copies (saved with the other operands).
    ``x_part``'s ``amax`` is (2, G) float32: the input's amaxes in row 0, row 1 zeros (the weight's
    amaxes go there: the forward's two roles recorded from one tensor, no stacking). ``scratch`` =
    ``(used (2, G), block (3, G))``, the forward's (:func:`grouped_forward`): current scaling's input
    scales already in ``used``'s row 0 (the weight's go into row 1: the two roles' scales one tensor),
    and where both roles are recorded their dequantization scales go into ``block``'s rows 0 and 1
    (``both`` is that view)."""
    key = weight_key(w)
    old = state.weight_key
    fresh = old is None or old[1:] != key[1:] or state.weight_copies is None
    fresh = fresh or (x_part is not None and capturing(w))
    if not fresh:
        if x_part is None:
            return state.weight_copies, None, None
        amax, used, active = x_part
        return state.weight_copies, state.record("input", amax[:1], used[None], active)[0], None
    groups, n, k = w.shape
    flat = w.reshape(groups * n, k)
    everyone = bounds_of((n,) * groups)
    w_amax = None if x_part is None else x_part[0][1]  # (the forward's: row 1 of the input's (2, G) amaxes)
    used, block = (None, None) if scratch is None else scratch
    made, w_used = quantize_role(state, "weight", flat, everyone, amax_out=w_amax,
                                 scratch=(None if used is None else used[1], None, True))  # fmt: skip
    inv = None
    if x_part is None:
        inv_x, inv_w = None, state.record("weight", made.amax[None], w_used[None], None)[0]
    else:
        amax, x_used, active = x_part
        # (delayed: the scales used are the state's rows 0 and 1, one view; current: the scratch's rows,
        # else the two stacked)
        if state.recipe.delayed:
            used = state.forward_scales()
        elif used is None:
            used = torch.stack((x_used, w_used))
        # (active: the input's row only; every group's weight is recorded, the weight quantized whole)
        out = None if block is None else block[:2]
        inv = state.record("input", amax, used, active, active_rows=1, out=out)
        inv_x, inv_w = inv.unbind(0)  # (one call for the two rows)
    qt = made.qt.view(groups, k, n)
    state.keep_weight_copies(key, (made.q.view(groups, n, k), qt, inv_w))
    return state.weight_copies, inv_x, inv


_TABLES: dict[tuple, torch.Tensor] = {}
_CAPTURED: dict[tuple, torch.Tensor] = {}
"""The tables a CUDA graph capture read: kept for the process (a graph replays their memory)."""


def device_table(
    what: str, values: list, dtype: torch.dtype, like: torch.Tensor, counts: list[int]
) -> torch.Tensor:
    """``values`` (made from ``counts``) as a 1-D ``dtype`` tensor on ``like``'s device, made once per
    values (a small host-to-device copy: the counts' active-group mask, the row offsets of the grouped
    launches).

    Raises:
        CaptureError: inside a CUDA graph capture for values not seen before it (a host-to-device copy
            a graph cannot hold: run a warm-up step with these counts first)."""
    device = like.device
    key = (what, tuple(values), dtype, device)
    found = _TABLES.get(key)
    if found is None:
        found = _CAPTURED.get(key)
    if found is None:
        if capturing(like):
            raise CaptureError(
                f"an FP8 GroupedLinear met the counts {list(counts)} first inside a CUDA graph capture; "
                f"their device {what} is a host-to-device copy a graph cannot replay. Run a step with these "
                "counts before the capture (a warm-up iteration), then capture."
            )
        if len(_TABLES) > 512:
            _TABLES.clear()
        found = _TABLES[key] = torch.tensor(values, dtype=dtype, device=device)
    if key not in _CAPTURED and capturing(like):
        _CAPTURED[key] = found
    return found


def active_groups(counts: list[int], like: torch.Tensor) -> torch.Tensor | None:
    """The (G,) bool tensor of the groups with tokens on ``like``'s device (``None`` when all have some;
    cached per counts, :func:`device_table`).

    Raises:
        CaptureError: inside a CUDA graph capture for counts not seen before it."""
    if all(counts):
        return None
    return device_table("mask", [c > 0 for c in counts], torch.bool, like, counts)


def _forward_gemm(
    qx: Any, qw: Any, inv_x: Any, inv_w: Any, b: Any, cfg: Any, dtype: torch.dtype, gemm: Any, fused: Any
) -> Any:  # fmt: skip
    """One group's ``y_g`` (rows, N): the FP8 GEMM with the bias fused where the layer's dtype takes it
    (``cfg``, :func:`~._fp8_linear.epilog_config`: as an FP8 ``Linear``), else the plain GEMM and
    torch's bias add."""
    if cfg is not None and fused.supported(cfg, qw, qx):
        return fused(cfg, qw, qx, inv_w, inv_x, bias=b)[0].mT
    y = gemm(qx, qw, inv_x, inv_w, dtype)
    return y if b is None else y + b.to(y.dtype)


def aligned_scalars(t: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """``t`` (G,) as G 0-d tensors each on its own 16 bytes: cuBLASLt's FP8 kernels refuse scale pointers
    that are not 16-byte aligned (``NOT_SUPPORTED`` at the launch), which ``t.unbind(0)`` gives."""
    padded = t.new_zeros((t.shape[0], 4))
    padded[:, 0] = t
    return padded[:, 0].unbind(0)


def signature(counts: list[int], *tensors: torch.Tensor | None) -> tuple:
    """What fixes every group's view of ``tensors`` (the bases of a product's operands and result, each
    group's a slice at an offset the counts give): the counts, and each base's shape, strides, dtype,
    device and address modulo 256 (the grouped planners' ``signature``, :mod:`._grouped_fp8_gemms`)."""
    return (tuple(counts),
            *(None if t is None else (t.shape, t.stride(), t.dtype, t.device, t.data_ptr() % 256)
              for t in tensors))  # fmt: skip


def _join(parts: list[torch.Tensor]) -> torch.Tensor:
    return torch.cat(parts) if len(parts) > 1 else parts[0].contiguous()


def grouped_forward(
    x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None, counts: list[int], state: GroupedScalingState,
    gemm: Any, fused: Any, lean: Any,
) -> tuple[torch.Tensor, tuple]:  # fmt: skip
    """``(y, saved)``: the grouped layer's output and what :func:`grouped_backward` needs (the input's
    transposed FP8 copies and its and the weight's dequantization scales, and the (3, G) block holding
    both where the two roles were recorded together, else ``None``); updates ``state``'s input and (for
    a new weight version) weight roles in one update."""
    bounds = bounds_of(counts)
    active = active_groups(counts, x)
    # (the step's small float32 tensors in one zero-filled allocation: the dequantization scales (input,
    # weight; grad_output's row filled by the backward), the amaxes (input, weight), the scales quantized
    # with; the input's dequantization scales first: an operator's output at offset 0, as a tensor of its own)
    block, amaxes, used = carve(((3, state.groups), (2, state.groups), (2, state.groups)), torch.float32,
                                x.device, zero=True)  # fmt: skip
    qx, x_used = quantize_role(state, "input", x, bounds, amax_out=amaxes[0], scratch=(used[0], None, False))
    (qw, qwt, inv_w), inv_x, both = weight_fp8(state, w, (amaxes, x_used, active), (used, block))
    cfg = epilog_config(None, b is not None, x.dtype)
    saved = (qx.qt, x.shape[1], inv_x, qwt, inv_w, None if both is None else block)
    if lean.applies(x):  # (every group's product written into its rows of one y: no concatenation)
        y = torch.empty((x.shape[0], w.shape[1]), dtype=x.dtype, device=x.device)
        sig = signature(counts, qx.q, qw, b, y)
        if cfg is not None:  # (y.T = qw @ qx.T + b: the bias along D's rows, as FP8 Linear runs it)

            def fused_views() -> tuple:
                xs, qws, bs = qx.q.split(counts), qw.unbind(0), b.unbind(0)
                return ([(k, qws[k], xs[k]) for k, _, _ in bounds], [bs[k] for k, _, _ in bounds],
                        [y[s:e].mT for _, s, e in bounds])  # fmt: skip

            made = lean.run("forward-bias", fused_views, inv_w, inv_x, x.dtype, signature=sig,
                            bases=(qw, qx.q, y, b),
                            scales=None if both is None else (both, 1, 0))  # fmt: skip
        elif b is None:

            def views() -> tuple:
                xs, qws = qx.q.split(counts), qw.unbind(0)
                return [(k, xs[k], qws[k]) for k, _, _ in bounds], None, [y[s:e] for _, s, e in bounds]

            made = lean.run("forward", views, inv_x, inv_w, x.dtype, signature=sig, bases=(qx.q, qw, y, None),
                            scales=None if both is None else (both, 0, 1))  # fmt: skip
        else:  # (the bias added to each group's rows after its product)
            xs, qws, bs = qx.q.split(counts), qw.unbind(0), b.unbind(0)
            made = lean.run("forward", [(k, xs[k], qws[k]) for k, _, _ in bounds], inv_x, inv_w, x.dtype,
                            out=[y[s:e] for _, s, e in bounds], signature=sig,
                            scales=None if both is None else (both, 0, 1))  # fmt: skip
            for d, (k, _, _) in zip(made or (), bounds):
                d.add_(bs[k])
        if made:
            return y, saved
    # (the groups' views made by one call each, not one indexing per group and operand)
    xs, qws = qx.q.split(counts), qw.unbind(0)
    bs = [None] * len(counts) if b is None else b.unbind(0)
    ixs, iws = aligned_scalars(inv_x), aligned_scalars(inv_w)
    y = _join([_forward_gemm(xs[k], qws[k], ixs[k], iws[k], bs[k], cfg, x.dtype, gemm, fused)
               for k, _, _ in bounds])  # fmt: skip
    return y, saved


def _dgrad(
    qg: Quantized, qwt: torch.Tensor, inv_g: torch.Tensor, inv_w: torch.Tensor, bounds: Bounds,
    counts: list[int], g: torch.Tensor, cols: int, gemm: Any, lean: Any, scales: tuple | None = None,
) -> torch.Tensor:  # fmt: skip
    """``dx`` (T, K): every group's dgrad GEMM written into its rows (on the grouped planners; else the
    FP8 Linear caches' products, concatenated); ``scales``: the planners' ``run``'s."""
    if lean.applies(g):
        dx = torch.empty((g.shape[0], cols), dtype=g.dtype, device=g.device)

        def views() -> tuple:
            gs, wts = qg.q.split(counts), qwt.unbind(0)
            return [(k, gs[k], wts[k]) for k, _, _ in bounds], None, [dx[s:e] for _, s, e in bounds]

        if lean.run("dgrad", views, inv_g, inv_w, g.dtype, signature=signature(counts, qg.q, qwt, dx),
                    bases=(qg.q, qwt, dx, None), scales=scales):  # fmt: skip
            return dx
    gs, wts = qg.q.split(counts), qwt.unbind(0)
    igs, iws = aligned_scalars(inv_g), aligned_scalars(inv_w)
    return _join([gemm(gs[k], wts[k], igs[k], iws[k], g.dtype) for k, _, _ in bounds])


def _wgrad_pairs(qg: Quantized, qxt: torch.Tensor, cols: int, bounds: Bounds) -> list:
    """``[(k, g_k.T, x_k.T)]``: every group's FP8 transposes of the gradient and the input."""
    return [(k, qg.transposed(s, e), transposed_block(qxt, cols, s, e)) for k, s, e in bounds]


def _wgrad(
    qg: Quantized, qxt: torch.Tensor, cols: int, inv_g: torch.Tensor, inv_x: torch.Tensor, bounds: Bounds,
    counts: list[int], w_meta: tuple, g: torch.Tensor, gemm: Any, lean: Any, scales: tuple | None = None,
) -> torch.Tensor:  # fmt: skip
    """``dw`` (G, N, K): every group's wgrad GEMM written into its slice of one tensor (zero for groups
    without tokens; on the grouped planners, else the FP8 Linear caches' products stacked);
    ``scales``: the planners' ``run``'s."""
    w_dtype, w_shape = w_meta
    wdt = _fp8_cast.wgrad_dtype(w_dtype)
    if lean.applies(g):
        new = torch.empty if len(bounds) == w_shape[0] else torch.zeros
        dw = new(w_shape, dtype=wdt, device=g.device)
        sig = signature(counts, qg.q, qg.qt, qxt, dw)

        def views() -> tuple:
            return _wgrad_pairs(qg, qxt, cols, bounds), None, [dw[k] for k, _, _ in bounds]

        if lean.run("wgrad", views, inv_g, inv_x, wdt, signature=sig, bases=(qg.qt, qxt, dw, None),
                    scales=scales):  # fmt: skip
            return dw.to(w_dtype)
    pairs = _wgrad_pairs(qg, qxt, cols, bounds)
    igs, ixs = aligned_scalars(inv_g), aligned_scalars(inv_x)
    dws: list = [None] * w_shape[0]
    for k, a, b in pairs:
        dws[k] = gemm(a, b, igs[k], ixs[k], wdt)
    if len(bounds) < len(dws):
        zero = torch.zeros(w_shape[1:], dtype=wdt, device=g.device)
        dws = [zero if p is None else p for p in dws]
    return torch.stack(dws).to(w_dtype)


def grouped_backward(
    g: torch.Tensor, saved: tuple, w_meta: tuple, b_dtype: torch.dtype | None, counts: list[int],
    needs: tuple, state: GroupedScalingState, gemm: Any, lean: Any,
) -> tuple[torch.Tensor | None, torch.Tensor | None, torch.Tensor | None]:  # fmt: skip
    """``(dx, dw, db)`` of :func:`grouped_forward` (``None`` where ``needs`` says not needed; ``w_meta``:
    the weight's dtype and shape); updates ``state``'s grad_output role (one update for all groups).
    ``saved``'s last item: the forward's (3, G) block of dequantization scales (input and weight in
    rows 0, 1; this pass's go into row 2, so that both products' scale slots fill from it), or
    ``None``."""
    qxt, cols, inv_x, qwt, inv_w, block = saved
    bounds = bounds_of(counts)
    want_db = needs[2] and b_dtype is not None
    g = g.contiguous()
    groups = state.groups
    sums = want_db and bounds and _fp8_cast.available(g)  # (the kernel's partial sums: in the scratch)
    amax, used, own, partial = carve(((groups,), (groups,), (1, groups),
                                      partial_shape(bounds, groups, g.shape[1]) if sums else (0,)),
                                     torch.float32, g.device, zero=True)  # fmt: skip
    qg, g_used = quantize_role(state, "grad_output", g, bounds, colsum=want_db, amax_out=amax,
                               scratch=(used, partial if sums else None, True))  # fmt: skip
    inv_g = state.record("grad_output", qg.amax[None], g_used[None], active_groups(counts, g),
                         out=own if block is None else block[2:])[0]  # fmt: skip
    dx = dw = db = None
    src = None  # (both products: the three scales in one tensor, each product's slots filled from it)
    rows = (2, 1, 0) if block is not None else (0, 1, 2)  # (the rows of inv_g, inv_w, inv_x in src)
    if needs[0] and needs[1] and lean.applies(g):
        src = block if block is not None else torch.stack((inv_g, inv_w, inv_x))
    if needs[0]:
        dx = _dgrad(qg, qwt, inv_g, inv_w, bounds, counts, g, cols, gemm, lean,
                    None if src is None else (src, rows[0], rows[1]))
    if needs[1]:
        dw = _wgrad(qg, qxt, cols, inv_g, inv_x, bounds, counts, w_meta, g, gemm, lean,
                    None if src is None else (src, rows[0], rows[2]))
    if want_db:
        db = qg.colsum.to(b_dtype)
    return dx, dw, db
