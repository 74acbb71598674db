"""Checks of a grouped Linear call (operands and per-group counts), before any launch; shared by
:mod:`._grouped` and the FP8 form :mod:`._grouped_fp8`."""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["check_counts", "check_operands"]

_SEQUENCE_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def check_counts(counts: Any, num_groups: int, tokens: int) -> list[int]:
    """The per-group token counts as host ints, checked: ``num_groups`` non-negative ints summing to ``tokens``.

    Args:
        counts: a 1-D integer tensor (any device) or a sequence of ints.

    Raises:
        TypeError: not integers (a float or bool tensor, a float in the list, ...).
        ValueError: wrong length, a negative count, or a sum other than ``tokens``.
    """
    if isinstance(counts, torch.Tensor):
        if counts.dtype.is_floating_point or counts.dtype.is_complex or counts.dtype == torch.bool:
            raise TypeError(
                f"counts must be an integer tensor (e.g. torch.int64 or torch.int32); got {counts.dtype}"
            )
        if counts.dim() != 1:
            raise ValueError(f"counts must be 1-D (one count per group); got shape {tuple(counts.shape)}")
        values = [int(c) for c in counts.tolist()]
    elif isinstance(counts, list | tuple):
        # (plain ints, the common case, in one pass; else each checked: an int subclass other than bool)
        plain = all(type(c) is int for c in counts)
        if not plain and not all(isinstance(c, int) and not isinstance(c, bool) for c in counts):
            raise TypeError(f"counts must hold ints; got {[type(c).__name__ for c in counts]}")
        values = list(counts)
    else:
        raise TypeError(
            f"counts must be an integer tensor or a sequence of ints; got {type(counts).__name__}"
        )
    if len(values) != num_groups:
        raise ValueError(f"counts must have one entry per group ({num_groups}); got {len(values)}")
    if any(c < 0 for c in values):
        raise ValueError(f"counts must be >= 0; got {values}")
    if sum(values) != tokens:
        raise ValueError(
            f"counts sum to {sum(values)} but the input has {tokens} tokens (rows); each token belongs to "
            "exactly one group"
        )
    return values


def check_operands(x: Any, weight: Any, bias: Any, counts: Any) -> list[int]:
    """Check a grouped Linear call's operands (types, dtypes, devices, shapes) and its counts (see
    :func:`check_counts`), before any launch; return the counts as host ints.

    Raises:
        TypeError, RuntimeError, ValueError: as :func:`grouped_linear` says.
    """
    for name, t in (("input", x), ("weight", weight), ("bias", bias)):
        if t is not None and not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor; got {type(t).__name__}")
        if t is not None and (t.dtype != weight.dtype or t.device != weight.device):
            raise RuntimeError(
                f"{name} must have weight's dtype and device ({weight.dtype}, {weight.device}); got {t.dtype}, {t.device}"
            )
    if weight.dtype not in _SEQUENCE_DTYPES:
        raise TypeError(
            f"GroupedLinear computes in {', '.join(map(str, _SEQUENCE_DTYPES))}; got {weight.dtype}"
        )
    if weight.dim() != 3 or x.dim() != 2 or x.shape[1] != weight.shape[2]:
        raise RuntimeError(
            f"input of shape {tuple(x.shape)} (tokens, in_features) does not fit weight of shape "
            f"{tuple(weight.shape)} (num_groups, out_features, in_features)"
        )
    if bias is not None and tuple(bias.shape) != tuple(weight.shape[:2]):
        raise RuntimeError(f"bias must have shape {tuple(weight.shape[:2])}; got {tuple(bias.shape)}")
    return check_counts(counts, weight.shape[0], x.shape[0])
