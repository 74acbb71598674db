"""FP8 training recipes and the per-tensor scaling state of :mod:`nvmath.torch`'s FP8 layers.

A recipe says how each tensor of a Linear layer (its input, its weight, the gradient of its output)
is quantized to FP8 for the GEMMs:

* :class:`CurrentScaling` -- per-tensor *current* scaling: the scale comes from this very tensor's
  absolute maximum (one reduction per tensor per use, no history).
* :class:`DelayedScaling` -- per-tensor *delayed* scaling: the scale comes from a history of the
  absolute maxima of earlier steps (``amax_history_len`` of them, reduced by ``amax_compute_algo``
  ``"max"`` or ``"most_recent"``); this step's amax is pushed to the history after the tensor is
  quantized, so the reduction never waits on the tensor it scales.
* :class:`MXFP8BlockScaling` -- 32-element blocks with power-of-two scales (MXFP8): needs compute
  capability 10.0; refused on older GPUs and on the CPU.

Formats (:class:`Format`): ``HYBRID`` quantizes forward tensors (input, weight) to e4m3 and gradients
to e5m2 (the wider range gradients need); ``E4M3`` uses e4m3 for all three.

The scale. A tensor ``x`` with amax ``a`` is stored as ``q = fp8(clamp(x * s, -F, F))`` with
``s = (F / a) / 2**margin`` (``F``: the format's largest finite value, 448 for e4m3, 57344 for e5m2);
the GEMM multiplies by ``1 / s`` (the *dequantization* scale) in its epilogue. The cast rounds to
nearest even and saturates finite values (as ``cvt.rn.satfinite`` does on the GPU). An amax of 0
keeps the previous scale (initially 1).

Non-finite amax: skip-step policy. An infinite or NaN amax means the step overflowed upstream. Then:

* the scale :meth:`ScalingState.quantize` returns is NaN, so the GEMM that dequantizes by it yields
  NaN (the torch path's quantized tensor is all NaN too): the outputs and gradients of the step are
  visibly non-finite, never silently wrong;
* the scaling state is left as it was (the amax is not pushed into the history, the scale is not
  changed) and the state's ``found_inf`` flag is set;
* :func:`optimizer_step` (call it instead of ``optimizer.step()``) then skips the optimizer's step and
  clears the flags, as ``torch.cuda.amp.GradScaler.step`` skips a step with non-finite gradients.

All updates are tensor operations on the state's device (no host synchronisation per call); only
:func:`optimizer_step` reads the flags to the host, once per step.
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import os
import threading
from collections.abc import Iterator
from typing import Any

import torch

from nvmath.torch._capture import capturing

__all__ = [
    "FP8_MAX",
    "CurrentScaling",
    "DelayedScaling",
    "Format",
    "MXFP8BlockScaling",
    "ScalingState",
    "amax_of",
    "current_recipe",
    "dequantize",
    "fp8_autocast",
    "optimizer_step",
    "quantize",
    "scale_from_amax",
]

FP8_MAX: dict[torch.dtype, float] = {torch.float8_e4m3fn: 448.0, torch.float8_e5m2: 57344.0}
"""The largest finite value of each FP8 format."""

ROLES = ("input", "weight", "grad_output")
"""The tensors of a Linear layer that an FP8 recipe quantizes."""

LEAN_SCALING = os.environ.get("NVMATH_FP8_LEAN_SCALING", "1") != "0"
"""Update the scaling state in about half the tiny device operations (the same values, bit for bit:
``tests/torch/test__fp8.py`` compares both paths). ``NVMATH_FP8_LEAN_SCALING=0`` at import runs the
former sequence (roll, clones, separate finiteness tests). The per-step host cost of FP8 layers is
mostly these launches."""

_INF = float("inf")
_NANS: dict[torch.device, torch.Tensor] = {}


def _nan_like(t: torch.Tensor) -> torch.Tensor:
    """A float32 NaN of shape () on ``t``'s device, made once (``torch.where`` with a Python NaN would
    fill a new one on every call: one more launch). Inside a CUDA graph capture a new one, not kept:
    its fill runs only when the graph replays, so it must not serve eager calls (a warm-up step before
    the capture makes the kept one)."""
    device = t.device
    nan = _NANS.get(device)
    if nan is None:
        nan = torch.full((), _INF - _INF, dtype=torch.float32, device=device)
        if not capturing(t):
            _NANS[device] = nan
    return nan


class Format(enum.Enum):
    """Which FP8 format each tensor of a layer uses."""

    E4M3 = "e4m3"
    """e4m3 for the input, the weight and the gradients."""
    HYBRID = "hybrid"
    """e4m3 forward (input, weight), e5m2 for the gradients (Transformer Engine's default)."""

    def dtype(self, role: str) -> torch.dtype:
        """The torch FP8 dtype of ``role`` (``"input"``, ``"weight"`` or ``"grad_output"``)."""
        if role == "grad_output" and self is Format.HYBRID:
            return torch.float8_e5m2
        return torch.float8_e4m3fn


def _check_format(fmt: Any) -> Format:
    if isinstance(fmt, str):
        try:
            return Format(fmt.lower())
        except ValueError:
            pass
    if isinstance(fmt, Format):
        return fmt
    raise ValueError(f"fp8_format must be a Format or one of 'e4m3', 'hybrid'; got {fmt!r}")


def _check_margin(margin: Any) -> int:
    if isinstance(margin, bool) or not isinstance(margin, int) or margin < 0:
        raise ValueError(f"margin must be an int >= 0 (the scale is divided by 2**margin); got {margin!r}")
    return margin


@dataclasses.dataclass(frozen=True)
class CurrentScaling:
    """Per-tensor current scaling: each tensor is scaled by its own amax when it is quantized.

    Args:
        margin: the scale is divided by ``2**margin`` (headroom below the format's largest value).
        fp8_format: :class:`Format` (or ``"hybrid"`` / ``"e4m3"``).
    """

    margin: int = 0
    fp8_format: Format = Format.HYBRID

    def __post_init__(self) -> None:
        object.__setattr__(self, "margin", _check_margin(self.margin))
        object.__setattr__(self, "fp8_format", _check_format(self.fp8_format))

    delayed = False
    history_len = 1


@dataclasses.dataclass(frozen=True)
class DelayedScaling:
    """Per-tensor delayed scaling: the scale comes from the amax history of earlier uses.

    Args:
        margin: as :class:`CurrentScaling`.
        fp8_format: as :class:`CurrentScaling`.
        amax_history_len: how many earlier amax values are kept (>= 1).
        amax_compute_algo: ``"max"`` (the largest in the history) or ``"most_recent"``.
    """

    margin: int = 0
    fp8_format: Format = Format.HYBRID
    amax_history_len: int = 1024
    amax_compute_algo: str = "max"

    def __post_init__(self) -> None:
        object.__setattr__(self, "margin", _check_margin(self.margin))
        object.__setattr__(self, "fp8_format", _check_format(self.fp8_format))
        n = self.amax_history_len
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"amax_history_len must be an int >= 1; got {n!r}")
        if self.amax_compute_algo not in ("max", "most_recent"):
            raise ValueError(
                f"amax_compute_algo must be 'max' or 'most_recent'; got {self.amax_compute_algo!r}"
            )

    delayed = True

    @property
    def history_len(self) -> int:
        return self.amax_history_len


MXFP8_MIN_CC = (10, 0)


@dataclasses.dataclass(frozen=True)
class MXFP8BlockScaling:
    """MXFP8: 32-element blocks along K with power-of-two (e8m0) scales, e4m3 data.

    cuBLASLt runs it on compute capability 10.0 (Blackwell) and newer. nvmath.torch refuses it on
    older GPUs (Hopper, H100/H200 = 9.0, has no MXFP8 GEMM) and on CPU tensors, naming
    the capability; it does not run it yet on Blackwell either (no such GPU to validate it on).
    """

    fp8_format: Format = Format.E4M3

    def __post_init__(self) -> None:
        object.__setattr__(self, "fp8_format", _check_format(self.fp8_format))


Recipe = CurrentScaling | DelayedScaling


def check_recipe(recipe: Any, device: torch.device) -> Recipe:
    """Return ``recipe`` when FP8 layers can run it on ``device``; raise naming what is missing.

    Raises:
        TypeError: not a recipe.
        RuntimeError: an FP8 recipe on a GPU below compute capability 8.9, or MXFP8 below 10.0 / on CPU.
    """
    if not isinstance(recipe, CurrentScaling | DelayedScaling | MXFP8BlockScaling):
        raise TypeError(
            f"recipe must be nvmath.torch.fp8.CurrentScaling, DelayedScaling or MXFP8BlockScaling; got {recipe!r}"
        )
    cc = torch.cuda.get_device_capability(device) if device.type == "cuda" else None
    if isinstance(recipe, MXFP8BlockScaling):
        where = f"compute capability {cc[0]}.{cc[1]}" if cc else "CPU tensors"
        if cc is None or cc < MXFP8_MIN_CC:
            raise RuntimeError(
                f"MXFP8 block scaling needs a GPU of compute capability >= 10.0 (Blackwell); got {where}. "
                "Use CurrentScaling or DelayedScaling (per-tensor FP8) instead."
            )
        raise NotImplementedError("MXFP8 block scaling layers are not implemented yet in nvmath.torch")
    if cc is not None and cc < (8, 9):
        raise RuntimeError(
            f"FP8 GEMMs need a GPU of compute capability >= 8.9 (Ada, Hopper or newer); device {device} has "
            f"compute capability {cc[0]}.{cc[1]}. Train in bfloat16 there."
        )
    return recipe


def scale_from_amax(amax: torch.Tensor, old_scale: torch.Tensor, fp8_max: float, margin: int) -> torch.Tensor:
    """``(fp8_max / amax) / 2**margin`` where ``amax`` is finite and > 0, else ``old_scale`` (float32)."""
    if LEAN_SCALING:
        return _lean_scale(amax.float(), old_scale, fp8_max, margin, None)
    amax = amax.float()
    new = (fp8_max / amax) / float(2**margin)
    inf = float("inf")
    good = (amax > 0) & (amax < inf) & (new < inf)  # (NaN compares false; new > 0 where amax is)
    return torch.where(good, new, old_scale)


def _lean_scale(
    amax: torch.Tensor, old_scale: torch.Tensor, fp8_max: float, margin: int, ok: torch.Tensor | None,
    out: torch.Tensor | None = None,
) -> torch.Tensor:  # fmt: skip
    """:func:`scale_from_amax` in fewer operations, the same values: ``fp8_max / amax`` is what torch
    computes as ``reciprocal(amax) * fp8_max``; ``amax > 0 and amax < inf`` is ``reciprocal(amax) > 0``
    (the reciprocal of +inf is 0, of 0 / -0 / a negative value not > 0, of NaN NaN) and the quotient
    ``< inf`` excludes the rest. ``ok``: a further condition (the amax pushed was finite); ``out``:
    write the result there (it may be ``old_scale`` itself)."""
    new = torch.reciprocal(amax)
    good = new > 0
    new.mul_(fp8_max)
    if margin:
        new.div_(float(2**margin))
    good.logical_and_(new < _INF)
    if ok is not None:
        good.logical_and_(ok)
    if out is None:
        return torch.where(good, new, old_scale)
    return torch.where(good, new, old_scale, out=out)


def _finite(t: torch.Tensor) -> torch.Tensor:
    """``torch.isfinite(t)`` in two elementwise operations instead of four (``|t| < inf``; NaN compares
    false): the scaling-state updates are many tiny launches per step."""
    return t.abs() < float("inf")


def amax_of(x: torch.Tensor) -> torch.Tensor:
    """``max |x|`` as a float32 scalar tensor (0 for an empty tensor; NaN / inf propagate)."""
    if not x.numel():
        return torch.zeros((), dtype=torch.float32, device=x.device)
    return torch.linalg.vector_norm(x, float("inf")).float()


def quantize(
    x: torch.Tensor, scale: torch.Tensor, dtype: torch.dtype, amax: torch.Tensor | None = None
) -> torch.Tensor:
    """``fp8(clamp(x * scale))``: the product in float32, rounded to nearest even, finite values
    saturated to the format's largest; when ``x`` holds a non-finite value (``amax``, computed here
    when not given, is inf or NaN) the whole result is NaN -- never a saturated value in its place."""
    fp8_max = FP8_MAX[dtype]
    if amax is None:
        amax = amax_of(x)
    poisoned = scale + (amax - amax)  # (amax - amax: 0 when finite, NaN otherwise; no extra pass over x)
    return (x.float() * poisoned).clamp_(-fp8_max, fp8_max).to(dtype)


def _fused_quantize(x: torch.Tensor, scale: torch.Tensor, dtype: torch.dtype) -> tuple | None:
    """``(q, amax)`` in one pass for a CUDA tensor (:mod:`._fp8_kernels`), else ``None``."""
    if not x.is_cuda:
        return None
    from nvmath.torch import _fp8_kernels

    if not _fp8_kernels.available(x):
        return None
    return _fp8_kernels.fused_quantize(x, scale, dtype)


def weight_key(w: torch.Tensor) -> tuple:
    """What a weight's FP8 copies were made from: the tensor itself (held, so its memory cannot become
    another tensor's), torch's version counter (it moves on every in-place update, once per optimizer
    step), its address, layout and dtype. Copies made under key ``old`` are current for ``w`` while
    ``old[1:] == weight_key(w)[1:]`` (under torch.compile the op is handed an alias of the same memory).
    """
    return (w, w._version, w.data_ptr(), w.shape, w.stride(), w.dtype)


def dequantize(q: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """``q / scale`` in float32 (what the GEMM's dequantization scale ``1 / scale`` computes)."""
    return q.float() * scale.reciprocal()


class ScalingState(torch.nn.Module):
    """The FP8 scaling state of one layer: per role (input, weight, grad_output) a scale, an amax
    history and a ``found_inf`` flag, all buffers (so they are in ``state_dict`` and follow ``.to()``).

    Buffers: ``scale`` (3,), ``amax_history`` (history_len, 3), ``found_inf`` (3,) (a count of skipped
    updates since the last :func:`optimizer_step`), in :data:`ROLES` order.
    """

    def __init__(self, recipe: Recipe, device: Any = None):
        super().__init__()
        self.recipe = recipe
        self.register_buffer("scale", torch.ones(len(ROLES), dtype=torch.float32, device=device))
        self.register_buffer(
            "amax_history", torch.zeros(recipe.history_len, len(ROLES), dtype=torch.float32, device=device)
        )
        self.register_buffer("found_inf", torch.zeros(len(ROLES), dtype=torch.int32, device=device))
        self._batch: list | None = None

    @contextlib.contextmanager
    def batched(self) -> Iterator[None]:
        """Inside the block, the lean updates of delayed-scaling roles are collected and applied on
        exit (also on an error) as one operation sequence over their columns of the buffers (an FP8
        forward quantizes the input and the weight of a layer back to back: one update instead of
        two, the same values). A role collected twice, or read by :meth:`delayed_scale`, applies what
        was collected first."""
        if not LEAN_SCALING or getattr(self, "_batch", None) is not None:
            yield
            return
        self._batch = []
        try:
            yield
        finally:
            self._flush()
            self._batch = None

    def _flush(self) -> None:
        """Apply the collected updates (one sequence over adjacent columns of one format, else each)."""
        batch = getattr(self, "_batch", None)
        if not batch:
            return
        self._batch = []
        batch.sort(key=lambda r: r[0])
        cols = [r[0] for r in batch]
        if len(batch) == 1 or cols != list(range(cols[0], cols[-1] + 1)) or len({r[3] for r in batch}) > 1:
            for i, amax, ok, fp8_max, margin in batch:
                self._record_lean(i, amax, ok, fp8_max, margin, None)
            return
        cut = slice(cols[0], cols[-1] + 1)
        amax, ok = torch.stack([r[1] for r in batch]), torch.stack([r[2] for r in batch])
        self._record_lean(cut, amax, ok, batch[0][3], batch[0][4], None)

    def _apply(self, fn: Any, recurse: bool = True) -> Any:
        # .to(device) moves the state; .to(dtype) / .bfloat16() on a model must not narrow it: scales
        # and amax histories stay float32
        before = dict(self._buffers)
        super()._apply(fn, recurse)
        for name, old in before.items():
            new = self._buffers[name]
            if old is not None and new is not None and new.dtype != old.dtype:
                self._buffers[name] = old.to(new.device)  # (the original values, not a narrowed copy)
        return self

    def dtype(self, role: str) -> torch.dtype:
        """The FP8 dtype of ``role`` under this recipe."""
        return self.recipe.fp8_format.dtype(role)

    def quantize(self, x: torch.Tensor, role: str) -> tuple[torch.Tensor, torch.Tensor]:
        """Quantize ``x`` as ``role``: ``(q, scale)`` (``scale``: the float32 scale used, shape (); NaN
        when ``x`` holds a non-finite value, so that dequantizing by it poisons whatever it touches)
        and update the state by the recipe (in place, on the device, no host synchronisation).

        CUDA tensors are quantized by one fused kernel (:mod:`._fp8_kernels`) where it is available:
        with delayed scaling one pass yields ``q`` and the amax; with current scaling an amax pass
        precedes it."""
        i = ROLES.index(role)
        dtype = self.dtype(role)
        fp8_max = FP8_MAX[dtype]
        margin = self.recipe.margin
        delayed = self.recipe.delayed
        self._ready(i)
        with torch.no_grad():
            x = x.detach()
            # (the state's own scale is read by the launches below before _update changes it: stream order)
            scale = self.scale[i]
            fused = _fused_quantize(x, scale, dtype) if delayed else None
            if fused is not None:  # (a CUDA tensor: q and amax in one pass, the scale known beforehand)
                q, amax = fused
            else:
                amax = amax_of(x)
                if not delayed:
                    scale = scale_from_amax(amax, scale, fp8_max, margin)
                fused = _fused_quantize(x, scale, dtype)
                q = fused[0] if fused is not None else quantize(x, scale, dtype, amax)
            # NaN when amax is not finite: the GEMM that dequantizes by it yields NaN
            return q, self._update(i, amax.reshape(()).float(), scale, fp8_max, margin, not delayed)

    def quantize_by(self, role: str, run: Any, finish: Any = None) -> tuple[Any, torch.Tensor]:
        """Quantize ``role``'s tensor through ``run(scale) -> (outputs, amax)`` (a kernel that writes the
        FP8 copies and measures the amax in one pass) and update the state as :meth:`quantize` does:
        ``(outputs, scale)``, the scale NaN when the amax is not finite. Delayed scaling runs
        ``run(scale)`` once; current scaling first runs ``run(None)`` (an amax-only pass: its outputs
        are ignored) and then ``run`` with the scale of that amax.

        ``finish(amax, scale, hist, found_inf, fp8_max, margin)``: current scaling's update of the
        role's elements of the buffers in one launch (:func:`._fp8_cast.current_update`: the new
        scale written in place, returning the scale to dequantize by, or ``None`` to let this
        method's torch operations do it); the second pass then reads the state's new scale."""
        i = ROLES.index(role)
        fp8_max = FP8_MAX[self.dtype(role)]
        margin = self.recipe.margin
        delayed = self.recipe.delayed
        self._ready(i)
        with torch.no_grad():
            if delayed:
                scale = self.scale[i]  # (read by run's launch before _update changes it: stream order)
                out, amax = run(scale)
            else:
                amax = run(None)[1]
                if finish is not None and LEAN_SCALING and self.amax_history.shape[0] == 1:
                    hist, flag = self.amax_history[0, i], self.found_inf[i]
                    used = finish(amax, self.scale[i], hist, flag, fp8_max, margin)
                    if used is not None:
                        return run(self.scale[i])[0], used
                scale = scale_from_amax(amax, self.scale[i], fp8_max, margin)
                out = run(scale)[0]
            return out, self._update(i, amax.reshape(()).float(), scale, fp8_max, margin, not delayed)

    def delayed_scale(self, role: str) -> torch.Tensor:
        """The scale a delayed recipe quantizes ``role`` with now (a copy, shape ()): what a GEMM writing
        that tensor in FP8 is given as its D scale (before the tensor's amax is known)."""
        if not self.recipe.delayed:
            raise RuntimeError("only delayed scaling knows a tensor's scale before its amax")
        i = ROLES.index(role)
        self._ready(i)
        return self.scale[i].clone()

    def _ready(self, i: int) -> None:
        """Apply the collected updates when role ``i`` is among them (its scale is about to be read)."""
        if any(r[0] == i for r in getattr(self, "_batch", None) or ()):
            self._flush()

    def record_amax(self, role: str, amax: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
        """Record the amax of ``role``'s tensor measured elsewhere (by the GEMM that wrote it in FP8
        with ``scale``, e.g. cuBLASLt's ``result_amax``) as :meth:`quantize` would; return ``scale``,
        NaN when ``amax`` is not finite (the poisoned dequantization of :meth:`quantize`)."""
        i = ROLES.index(role)
        fp8_max = FP8_MAX[self.dtype(role)]
        with torch.no_grad():
            amax = amax.detach().reshape(()).float()
            return self._update(i, amax, scale, fp8_max, self.recipe.margin, False, amax.abs())

    def _update(
        self, i: int, amax: torch.Tensor, scale: torch.Tensor, fp8_max: float, margin: int, computed: bool,
        magnitude: torch.Tensor | None = None,
    ) -> torch.Tensor:  # fmt: skip
        """Record role ``i``'s ``amax`` (float32, shape ()) of a tensor quantized with ``scale`` and
        return that scale (a new tensor), NaN when ``amax`` is not finite. ``computed``: ``scale`` is
        the new scale already (current scaling: :func:`scale_from_amax` of this amax). ``magnitude``:
        what is compared with inf (default ``amax``, which, as an absolute maximum, is >= 0 or NaN)."""
        if not LEAN_SCALING:  # (the former sequence)
            used = scale.clone()
            self._record(i, amax, _finite(amax), fp8_max, margin)
            return used + (amax - amax)
        ok = (amax if magnitude is None else magnitude) < _INF  # (NaN compares false)
        used = torch.where(ok, scale, _nan_like(scale))  # (before the state's scale changes)
        batch = getattr(self, "_batch", None)
        if batch is None or computed:
            self._record_lean(i, amax, ok, fp8_max, margin, scale if computed else None)
        else:  # (batched: applied by _flush; a role already collected is applied first)
            self._ready(i)
            self._batch.append((i, amax, ok, fp8_max, margin))
        return used

    def _record_lean(
        self, i: int | slice, amax: torch.Tensor, ok: torch.Tensor, fp8_max: float, margin: int,
        computed: torch.Tensor | None,
    ) -> None:  # fmt: skip
        """:meth:`_record` in fewer operations (the same values): the history pushed by one ``cat``
        and one ``where`` written in place, the flag added as a bool, the scale by
        :func:`_lean_scale` written in place (or ``computed``, the scale current scaling already made:
        ``scale_from_amax`` of a finite amax, the old scale otherwise, what the update yields)."""
        hist = self.amax_history[:, i]  # (i: a slice of adjacent roles, amax and ok stacked, from _flush)
        if hist.shape[0] == 1:
            torch.where(ok, amax, hist, out=hist)
        else:
            torch.where(ok, torch.cat((amax.reshape(1, *hist.shape[1:]), hist[:-1])), hist, out=hist)
        self.found_inf[i if isinstance(i, slice) else slice(i, i + 1)].add_(~ok)
        scale = self.scale[i]
        if computed is not None:
            scale.copy_(computed)
            return
        if self.recipe.delayed:
            reduced = hist.amax(0) if self.recipe.amax_compute_algo == "max" else hist[0]
        else:
            reduced = amax
        _lean_scale(reduced, scale, fp8_max, margin, ok, out=scale)

    def _record(self, i: int, amax: torch.Tensor, finite: torch.Tensor, fp8_max: float, margin: int) -> None:
        """Push a finite amax into role ``i``'s history and update its scale; flag a non-finite one."""
        hist = self.amax_history[:, i]
        rolled = torch.roll(hist, 1)
        rolled[0] = amax
        hist.copy_(torch.where(finite, rolled, hist))
        self.found_inf[i] += (~finite).int()
        if self.recipe.delayed:
            reduced = hist.amax() if self.recipe.amax_compute_algo == "max" else hist[0]
        else:
            reduced = amax
        self.scale[i] = torch.where(
            finite, scale_from_amax(reduced, self.scale[i], fp8_max, margin), self.scale[i]
        )

    def nonfinite_count(self) -> int:
        """How many amax updates were skipped (non-finite) since the flags were last cleared (syncs)."""
        return int(self.found_inf.sum())

    def clear_flags(self) -> None:
        """Clear the ``found_inf`` flags."""
        self.found_inf.zero_()

    def extra_repr(self) -> str:
        return f"recipe={self.recipe!r}"


# ---------------------------------------------------------------- fp8_autocast
_local = threading.local()

autocast_blocks: list[None] = []
"""One entry per :func:`fp8_autocast` block open in any thread (``list.append`` / ``pop`` are atomic):
the layers' per-call query reads this list, and asks :func:`current_recipe` only while it is not empty."""


def current_recipe() -> Recipe | None:
    """The recipe of the innermost :func:`fp8_autocast` with ``enabled=True`` in this thread, else ``None``."""
    stack = getattr(_local, "stack", ())
    return stack[-1] if stack else None


@contextlib.contextmanager
def fp8_autocast(recipe: Recipe | None = None, enabled: bool = True) -> Iterator[None]:
    """Run nvmath.torch ``Linear`` / ``MLP`` layers created with ``fp8="auto"`` in FP8 under ``recipe``.

    Args:
        recipe: a :class:`CurrentScaling` or :class:`DelayedScaling` (default: ``DelayedScaling()``).
        enabled: ``False`` runs the layers in their parameters' dtype inside the block.
    """
    if recipe is None:
        recipe = DelayedScaling()
    if not isinstance(recipe, CurrentScaling | DelayedScaling | MXFP8BlockScaling):
        raise TypeError(f"recipe must be an nvmath.torch.fp8 recipe; got {recipe!r}")
    stack = list(getattr(_local, "stack", ()))
    _local.stack = (*stack, recipe if enabled else None)
    autocast_blocks.append(None)
    try:
        yield
    finally:
        _local.stack = tuple(stack)
        autocast_blocks.pop()


def optimizer_step(optimizer: Any, *modules: torch.nn.Module) -> bool:
    """``optimizer.step()`` unless an FP8 layer of ``modules`` saw a non-finite amax this step.

    Reads every :class:`ScalingState` in ``modules`` (one host synchronisation), clears their flags
    and returns whether the step was taken. A skipped step leaves the parameters and the optimizer's
    state untouched (zero the gradients as usual before the next step).
    """
    states = [m for mod in modules for m in mod.modules() if isinstance(m, ScalingState)]
    flags = [s.found_inf.sum() for s in states]
    bad = bool(torch.stack(flags).sum()) if flags else False
    for s in states:
        s.clear_flags()
    if not bad:
        optimizer.step()
    return not bad
