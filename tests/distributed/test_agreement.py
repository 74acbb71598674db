"""The collective agreement check: one allreduce_object, the same error on every rank naming the ranks
that disagree, never a hang (threads as ranks)."""

from __future__ import annotations

import pytest
from dist_fakes import ThreadGroup

from nvmath.distributed import RankDisagreementError
from nvmath.distributed._agreement import check_agreement, gather_by_rank


@pytest.mark.parametrize("nranks", [1, 2, 4, 8])
def test_agreeing_ranks_get_everyones_facts(nranks):
    """When all ranks agree, every rank gets {rank: facts} of all ranks (one collective, two buffers)."""
    group = ThreadGroup(nranks)
    facts = {"shape": (64, 32), "dtype": "complex64"}
    results = group.run(lambda r: check_agreement(group, "FFT", facts))
    assert results == [{r: facts for r in range(nranks)}] * nranks
    assert group.calls == ["allreduce_buffer", "allreduce_buffer"]


def test_disagreement_raises_on_every_rank_naming_the_rank():
    """Rank 2 passing another dtype makes all four ranks raise the same error naming rank 2."""
    group = ThreadGroup(4)
    def facts(rank):
        return {"shape": (8, 8), "dtype": "float64" if rank == 2 else "float32"}

    results = group.run(lambda r: check_agreement(group, "FFT", facts(r)))
    assert all(isinstance(e, RankDisagreementError) for e in results), results
    messages = {str(e).split("(seen on rank")[0] for e in results}
    assert len(messages) == 1
    assert "rank(s) [2] differ from rank 0" in messages.pop()
    assert results[0].disagreeing == {"dtype": {0: "float32", 2: "float64"}}
    assert "rank 0 has 'float32', rank 2 has 'float64'" in str(results[3])


def test_missing_fact_counts_as_disagreement():
    """A fact one rank omits is reported as None for that rank."""
    group = ThreadGroup(2)
    results = group.run(lambda r: check_agreement(group, "matmul", {"m": 4} if r == 0 else {"m": 4, "k": 2}))
    assert all(isinstance(e, RankDisagreementError) for e in results)
    assert results[1].disagreeing == {"k": {0: None, 1: 2}}


def test_gather_by_rank_keys_every_rank():
    """gather_by_rank returns each rank's own value under its rank."""
    group = ThreadGroup(3)
    assert group.run(lambda r: gather_by_rank(group, r * r)) == [{0: 0, 1: 1, 2: 4}] * 3
