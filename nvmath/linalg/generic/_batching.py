"""Batching helpers (pure): strided-batch collapse of implicit batches, and explicit sequences.

*Implicit* batches (N-D operands, numpy.matmul broadcasting) run as strided-batched launches: the
innermost run of batch dimensions that every operand can step through with one stride is one
launch, and the remaining outer dimensions (there are some only when broadcasting mixes, e.g.
``(4, 1)`` with ``(3,)``) are a short loop of launches at precomputed offsets.

*Explicit* batches are Python sequences of operands of different shapes; a length-1 sequence (of
operands, alphas, betas or qualifiers) is broadcast to the others' length (:func:`zip_broadcast`).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

__all__ = ["BatchPlan", "batch_plan", "is_sequence", "zip_broadcast"]


class BatchPlan(NamedTuple):
    """How to walk a batch.

    Attributes:
        count: matrices per launch (the collapsed inner run; 1 when launches are per matrix).
        strides: per operand, the stride between those matrices.
        offsets: per launch, the element offset of each operand's first matrix.
    """

    count: int
    strides: dict[str, int]
    offsets: list[dict[str, int]]


def batch_plan(
    batch: tuple[int, ...], strides: Mapping[str, tuple[int, ...]], strided: bool = True
) -> BatchPlan:
    """Split ``batch`` into an inner strided run and outer launches.

    Args:
        batch: the batch shape.
        strides: per operand, its strides over ``batch`` (0 where broadcast).
        strided: ``False`` gives one launch per matrix (routines without a batched form).
    """
    dims = [i for i, d in enumerate(batch) if d != 1]
    inner: list[int] = []
    if strided and dims:
        inner = [dims[-1]]
        for i in reversed(dims[:-1]):
            j = inner[0]
            if all(s[i] == s[j] * batch[j] for s in strides.values()):
                inner.insert(0, i)
            else:
                break
    count = math.prod(batch[i] for i in inner) if inner else 1
    last = inner[-1] if inner else None
    inner_strides = {name: (s[last] if last is not None else 0) for name, s in strides.items()}
    outer = [i for i in dims if i not in inner]
    offsets = []
    for index in itertools.product(*(range(batch[i]) for i in outer)):
        offsets.append({name: sum(s[i] * x for i, x in zip(outer, index)) for name, s in strides.items()})
    return BatchPlan(count, inner_strides, offsets)


def is_sequence(value: Any) -> bool:
    """Whether ``value`` is an explicit batch: a list or tuple (not a tensor)."""
    return isinstance(value, (list, tuple))


def zip_broadcast(named: Mapping[str, Any]) -> tuple[int, dict[str, list[Any]]]:
    """Broadcast sequences of one length (length-1 sequences repeat; non-sequences repeat).

    Returns:
        ``(length, {name: list})``.

    Raises:
        ValueError: two sequences have different lengths (other than 1), or one is empty.
    """
    lengths = {name: len(v) for name, v in named.items() if is_sequence(v)}
    if any(n == 0 for n in lengths.values()):
        raise ValueError(f"empty operand sequence(s): {', '.join(n for n, x in lengths.items() if x == 0)}")
    sizes = set(lengths.values()) - {1}
    if len(sizes) > 1:
        detail = ", ".join(f"{n} has {x}" for n, x in lengths.items())
        raise ValueError(f"the sequences must have one length (or length 1, broadcast); {detail}")
    length = sizes.pop() if sizes else 1
    out = {}
    for name, value in named.items():
        if is_sequence(value):
            out[name] = list(value) * length if len(value) == 1 else list(value)
        else:
            out[name] = [value] * length
    return length, out
