"""The runtime hook: (rank, nranks) from nvmath.distributed.get_context(), a clear error before initialize."""

from __future__ import annotations

import pytest

from nvmath.distributed.distribution import ProcessGrid, Slab
from nvmath.distributed.distribution._runtime import current_process


def test_reads_rank_and_nranks(runtime):
    """An initialized runtime's process group gives (rank, nranks)."""
    runtime(6, rank=4)
    assert current_process() == (4, 6)


def test_uninitialized_runtime_says_to_initialize(runtime):
    """Before initialize, anything needing the process count raises RuntimeError naming initialize."""
    runtime(None)
    for call in (current_process, lambda: Slab.X.shape(0, (8, 8)), lambda: ProcessGrid(shape=(1,))):
        with pytest.raises(RuntimeError, match=r"nvmath\.distributed\.initialize"):
            call()
