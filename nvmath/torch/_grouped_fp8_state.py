"""The scaling state of an FP8 :class:`~nvmath.torch.GroupedLinear`: every group's scales and amax
histories as stacked tensors, updated for all groups at once.

Each group (expert) keeps its own per-tensor scales, as a loop of FP8 ``Linear`` layers would (each
expert's activations, weights and gradients have their own ranges), but not as one
:class:`~._fp8_linear.FP8LinearState` per group: :class:`GroupedScalingState` holds, per role
(:data:`~._fp8.ROLES`: input, weight, grad_output) and group, a scale, an amax history and a
``found_inf`` count in three buffers, role-major so that a role's scales of all groups are one
contiguous row (the FP8 kernels read group ``g``'s scale at its address):

* ``scale`` (3, G) float32, ``amax_history`` (history_len, 3, G) float32, ``found_inf`` (3, G) int32.

:meth:`GroupedScalingState.record` updates one or more adjacent roles of all groups with a few
vectorised torch operations (the same values as each group's :class:`~._fp8.ScalingState` update:
the recipe's history push, scale and skip-step policy), so a training step runs two updates (the
forward's input and weight roles together, the backward's grad_output role) whatever the number of
groups. Groups without tokens in a step are left as they were (their amax is not pushed), as in a
loop where such a group's layer does not run.

It is a :class:`~._fp8.ScalingState` for :func:`~._fp8.optimizer_step` (which reads and clears the
``found_inf`` counts of every state in the modules it is given); the per-tensor methods of that class
(``quantize`` and friends) do not apply to a grouped state and raise ``TypeError``.

Checkpoints: the buffers are in ``state_dict`` as ``fp8_state.scale`` etc.; checkpoints of the former
layout (one state per group, ``fp8_states.<g>.scale`` (3,), ``.amax_history`` (L, 3), ``.found_inf``
(3,)) are converted on load by :func:`load_old_keys` (a load-state-dict pre-hook of the layer).
"""

from __future__ import annotations

from typing import Any

import torch

from nvmath.torch import _fp8_cast
from nvmath.torch._fp8 import FP8_MAX, LEAN_SCALING, ROLES, Recipe, ScalingState, scale_from_amax
from nvmath.torch._fp8_linear import register_state

__all__ = ["GroupedScalingState", "load_old_keys"]

_INF = float("inf")
_NANS: dict[torch.device, torch.Tensor] = {}
_BUFFERS = ("scale", "amax_history", "found_inf")


def _nan_on(device: torch.device) -> torch.Tensor:
    """A float32 NaN of shape () on ``device``, made once (no fill launch per call)."""
    nan = _NANS.get(device)
    if nan is None:
        nan = _NANS[device] = torch.full((), _INF - _INF, dtype=torch.float32, device=device)
    return nan


class GroupedScalingState(ScalingState):
    """Per-group FP8 scaling state of ``groups`` groups under ``recipe`` (see the module notes), and
    the FP8 copies of the stacked weight (made once per weight version: ``weight_updates`` counts how
    many times)."""

    def __init__(self, recipe: Recipe, groups: int, device: Any = None):
        super().__init__(recipe, device)
        self.groups = groups
        n = len(ROLES)
        self.register_buffer("scale", torch.ones(n, groups, dtype=torch.float32, device=device))
        self.register_buffer(
            "amax_history", torch.zeros(recipe.history_len, n, groups, dtype=torch.float32, device=device)
        )
        self.register_buffer("found_inf", torch.zeros(n, groups, dtype=torch.int32, device=device))
        self.weight_key: tuple | None = None
        """What the weight copies were made from (the tensor, its version, address, layout)."""
        self.weight_copies: tuple | None = None
        """``(qw (G, N, K), per-group qw.T (G, K, N), 1 / sw (G,))`` of the weight in ``weight_key``."""
        self.weight_updates = 0
        self.checked_device: torch.device | None = None
        """The device the recipe was last checked for."""
        self._rows: tuple | None = None
        """:meth:`rows`' views and the buffers they were cut from (made again when a buffer is replaced)."""
        self.op_number = register_state(self)
        """This state's number in the registry of the ``torch.compile`` custom ops
        (:mod:`._grouped_fp8_ops`)."""

    def __setstate__(self, state: dict) -> None:
        # a copy (copy.deepcopy, pickle) is another state: its own number in the custom ops' registry
        super().__setstate__(state)
        self.op_number = register_state(self)
        self._rows = None

    def _apply(self, fn: Any, recurse: bool = True) -> Any:
        self.weight_key = self.weight_copies = None  # (moved or cast: the copies are stale)
        self._rows = None
        return super()._apply(fn, recurse)

    def rows(self, i: int) -> tuple:
        """Role ``i``'s (:data:`~._fp8.ROLES` index) views ``(scale (G,), history (L, G), found_inf (G,),
        constants)`` (``constants``: the record kernel's ``(delayed, use_max, fp8_max, margin)``), made
        once per buffers (no indexing per step: each a torch dispatch)."""
        made, now = self._rows, self._buffers  # (this module's own buffers: a replaced one makes them again)
        if made is None or made[0][0] is not now["scale"] or made[0][1] is not now["amax_history"] or (
            made[0][2] is not now["found_inf"]
        ):
            bufs = scale, hist, found = now["scale"], now["amax_history"], now["found_inf"]
            recipe = self.recipe
            use_max = getattr(recipe, "amax_compute_algo", "") == "max"
            per_role = tuple(
                (scale[r], hist[:, r], found[r], (recipe.delayed, use_max, FP8_MAX[self.dtype(ROLES[r])],
                                                 recipe.margin))
                for r in range(len(ROLES))
            )  # fmt: skip
            made = (bufs, per_role, scale[:2])
            vars(self)["_rows"] = made  # (a plain attribute: no Module.__setattr__ bookkeeping)
        return made[1][i]

    def forward_scales(self) -> torch.Tensor:
        """The (2, G) view of the input's and the weight's scales (rows 0, 1 of ``scale``; :meth:`rows`)."""
        self.rows(0)
        return self._rows[2]

    def keep_weight_copies(self, key: tuple, copies: tuple) -> None:
        """Set ``weight_copies`` made from ``key`` (``weight_key``) and count them (``weight_updates``)."""
        vars(self).update(weight_key=key, weight_copies=copies, weight_updates=self.weight_updates + 1)

    def _per_tensor(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError("a grouped FP8 scaling state updates all groups at once (GroupedScalingState.record)")

    quantize = quantize_by = delayed_scale = record_amax = _per_tensor  # type: ignore[assignment]

    def fp8_max(self, role: str) -> float:
        """The largest finite value of ``role``'s FP8 format."""
        return FP8_MAX[self.dtype(role)]

    def current_scale(self, role: str, amax: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
        """Current scaling: the (G,) scales of ``role`` from this tensor's per-group ``amax`` (each
        group's previous scale where its amax is 0 or not finite); into ``out`` ((G,) float32,
        contiguous: a row of a step's scratch) where given."""
        scale, _, _, (_, _, fp8_max, margin) = self.rows(ROLES.index(role))
        if LEAN_SCALING:  # (CUDA: one launch, the same values)
            made = _fp8_cast.grouped_scale(amax, scale, fp8_max, margin, out=out)
            if made is not None:
                return made
        made = scale_from_amax(amax, scale, fp8_max, margin)
        return made if out is None else out.copy_(made)

    def record(
        self, first: str, amax: torch.Tensor, used: torch.Tensor, active: torch.Tensor | None,
        active_rows: int = 1, out: torch.Tensor | None = None,
    ) -> torch.Tensor:  # fmt: skip
        """Record the per-group amaxes ``amax`` (R, G) of ``R`` adjacent roles from ``first`` (input and
        weight together: ``R = 2``, one FP8 format), measured on tensors quantized with the scales
        ``used`` (R, G): the state's own scales (delayed), or :meth:`current_scale`'s (current). Returns
        the scales to dequantize by, (R, G): ``1 / used``, NaN where an amax is not finite (the skip-step
        policy of :class:`~._fp8.ScalingState`: the GEMMs of that group yield NaN, its state is left
        as it was and its ``found_inf`` count moves). ``active`` (G,) bool: the groups that ran in the
        first ``active_rows`` roles (the others are left as they were; later roles ran in every
        group), ``None``: all. ``out``: a contiguous (R, G) float32 tensor the result is written into
        (rows of a step's scratch; its version counter is not moved), else a new one. CUDA state: one kernel launch
        (:func:`~._fp8_cast.grouped_record`, the same values); elsewhere a few vectorised torch
        operations."""
        i = ROLES.index(first)
        if LEAN_SCALING:
            scale, hist, found, constants = self.rows(i)
            made = _fp8_cast.grouped_record(amax, used, active, active_rows, hist, scale, found, *constants,
                                            out=out)  # fmt: skip
            if made is not None:
                return made
        made = self._torch_record(i, amax, used, active, active_rows)
        if out is None:
            return made
        # (written as the kernel writes it, without moving ``out``'s version counter: ``out`` may be a row
        # of a tensor autograd saved -- the backward's row of the forward's scale block -- whose other rows
        # a second backward (retain_graph) reads again)
        out.data.copy_(made)
        return out

    def _torch_record(
        self, i: int, amax: torch.Tensor, used: torch.Tensor, active: torch.Tensor | None, active_rows: int
    ) -> torch.Tensor:
        """:meth:`record`'s update by torch's operations (roles from index ``i``)."""
        if active is not None and active_rows < amax.shape[0]:
            ran = active.new_ones((amax.shape[0] - active_rows, active.shape[0]))
            active = torch.cat((active.expand(active_rows, -1), ran))
        rows = slice(i, i + amax.shape[0])
        ok = amax < _INF  # (an amax is >= 0 or NaN; NaN compares false)
        out = torch.where(ok, used.reciprocal(), _nan_on(used.device))  # (before the state's scales change)
        bad = ~ok
        push = ok if active is None else ok & active
        hist = self.amax_history[:, rows]
        if hist.shape[0] == 1:
            torch.where(push, amax, hist, out=hist)
        else:
            torch.where(push, torch.cat((amax.unsqueeze(0), hist[:-1])), hist, out=hist)
        self.found_inf[rows].add_(bad if active is None else bad & active)
        scale = self.scale[rows]
        if not self.recipe.delayed:
            # (current: ``used`` is scale_from_amax of this amax, the old scale where it was 0 or not finite)
            torch.where(push, used, scale, out=scale)
            return out
        reduced = hist.amax(0) if self.recipe.amax_compute_algo == "max" else hist[0]
        new = scale_from_amax(reduced, scale, FP8_MAX[self.dtype(ROLES[i])], self.recipe.margin)
        torch.where(push, new, scale, out=scale)
        return out


def load_old_keys(
    module: torch.nn.Module, state_dict: dict, prefix: str, *args: Any, **kwargs: Any
) -> None:
    """A ``load_state_dict`` pre-hook of an FP8 ``GroupedLinear``: a checkpoint with one scaling state
    per group (``fp8_states.<g>.scale`` (3,), ``.amax_history`` (L, 3), ``.found_inf`` (3,), the former
    layout) becomes the stacked ``fp8_state.*`` buffers (the groups along the last axis)."""
    old = f"{prefix}fp8_states."
    if not any(k.startswith(old) for k in state_dict):
        return
    groups = getattr(module, "num_groups", 0)
    for name in _BUFFERS:
        keys = [f"{old}{g}.{name}" for g in range(groups)]
        if all(k in state_dict for k in keys):
            state_dict[f"{prefix}fp8_state.{name}"] = torch.stack([state_dict.pop(k) for k in keys], -1)
