"""The one collective agreement check: values every rank must agree on, compared in one collective.

A planner (or :func:`~nvmath.distributed.allocate_symmetric_memory`) calls :func:`check_agreement`
with the facts every rank must share (global shape, dtype, distribution, FFT type...). Each rank
contributes ``{rank: facts}`` to one :meth:`~nvmath.distributed.ProcessGroup.allreduce_object`
that merges the dictionaries, so every rank sees every rank's facts and raises the *same* error,
naming the ranks that disagree: no rank goes on alone to a collective the others never reach.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .process_group import ProcessGroup

__all__ = ["RankDisagreementError", "check_agreement", "compare_facts", "gather_by_rank"]


class RankDisagreementError(ValueError):
    """Ranks passed different values where they must agree; raised on every rank.

    Attributes:
        disagreeing: ``{name: {rank: value}}`` of the values that differ from rank 0's.
    """

    def __init__(self, message: str, disagreeing: dict[str, dict[int, Any]]):
        super().__init__(message)
        self.disagreeing = disagreeing


def _merge(a: dict, b: dict) -> dict:
    return {**a, **b}


def gather_by_rank(process_group: ProcessGroup, value: Any) -> dict[int, Any]:
    """``{rank: value}`` of every rank, on every rank (one ``allreduce_object``)."""
    return process_group.allreduce_object({process_group.rank: value}, op=_merge)


def check_agreement(process_group: ProcessGroup, what: str, facts: Mapping[str, Any]) -> dict[int, Any]:
    """Raise :class:`RankDisagreementError` on every rank unless all ranks passed equal ``facts``.

    Args:
        process_group: the job's group.
        what: the operation, for the message (``"FFT"``, ``"allocate_symmetric_memory"``).
        facts: ``{name: value}``; values compare with ``==`` (use tuples, strings, numbers).

    Returns:
        ``{rank: facts}`` of every rank (callers may need the others' local shapes).
    """
    everyone = gather_by_rank(process_group, dict(facts))
    compare_facts(everyone, what, process_group.rank)
    return everyone


def compare_facts(everyone: Mapping[int, Mapping[str, Any]], what: str, rank: int) -> None:
    """Raise :class:`RankDisagreementError` unless every rank's facts equal rank 0's (pure: every
    rank holding the same ``{rank: facts}`` raises the same error).

    Args:
        everyone: ``{rank: {name: value}}`` of every rank (from :func:`gather_by_rank`).
        what: the operation, for the message.
        rank: this rank (the message says where it was seen).
    """
    reference = everyone[0]
    disagreeing: dict[str, dict[int, Any]] = {}
    for other in sorted(everyone):
        theirs = everyone[other]
        for name in sorted(set(reference) | set(theirs)):
            if theirs.get(name) != reference.get(name):
                disagreeing.setdefault(name, {0: reference.get(name)})[other] = theirs.get(name)
    if disagreeing:
        lines = [
            f"{name}: rank 0 has {values[0]!r}, "
            + ", ".join(f"rank {r} has {v!r}" for r, v in sorted(values.items()) if r != 0)
            for name, values in disagreeing.items()
        ]
        ranks = sorted({r for values in disagreeing.values() for r in values if r != 0})
        raise RankDisagreementError(
            f"{what}: the ranks must pass the same values, but rank(s) {ranks} differ from rank 0 "
            f"(seen on rank {rank}): " + "; ".join(lines),
            disagreeing,
        )
