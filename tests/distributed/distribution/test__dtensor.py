"""DTensor placements <-> distributions on a 1-D mesh, with torch.chunk as the reference for Shard."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from nvmath.distributed.distribution import BlockNonCyclic, ConvertDistributionError, ProcessGrid, Slab
from nvmath.distributed.distribution._dtensor import (
    distribution_from_placements,
    placement_spec,
    placement_specs_for,
    placements_for,
    shard_matches_slab,
)
from nvmath.distributed.distribution._ownership import ownership_map


def torch_chunk_rows(extent: int, nranks: int) -> list[list[int]]:
    """The indices DTensor's Shard gives each rank: torch.chunk, padded with empty chunks."""
    torch = pytest.importorskip("torch")
    chunks = [c.tolist() for c in torch.arange(extent).chunk(nranks)]
    return chunks + [[] for _ in range(nranks - len(chunks))]


class FakeShard:
    def __init__(self, dim):
        self.dim = dim

    def is_shard(self, dim=None):
        return True

    def is_replicate(self):
        return False

    def is_partial(self):
        return False


@pytest.mark.parametrize("nranks", range(1, 9))
@pytest.mark.parametrize("extent", [1, 2, 3, 5, 7, 8, 10, 13, 16])
def test_shard_is_block_noncyclic_and_sometimes_a_slab(runtime, nranks, extent):
    """Shard(0)'s rows are torch.chunk's; kind='block' always maps, kind='slab' exactly when array_split agrees."""
    runtime(nranks)
    rows = torch_chunk_rows(extent, nranks)
    block = distribution_from_placements([FakeShard(0)], (extent, 3), kind="block")
    assert isinstance(block, BlockNonCyclic) and block.process_grid.shape == (nranks, 1)
    owned = ownership_map(block, (extent, 3), nranks)
    assert [[i for a, b in own[0] for i in range(a, b)] for own in owned] == rows
    split = [p.tolist() for p in np.array_split(np.arange(extent), nranks)]
    assert shard_matches_slab(extent, nranks) == (split == rows)
    if split == rows:
        assert distribution_from_placements([FakeShard(0)], (extent, 3)) == Slab(0, 2)
    else:
        with pytest.raises(ConvertDistributionError, match="kind='block'"):
            distribution_from_placements([FakeShard(0)], (extent, 3))


def test_torch_placements_round_trip(runtime):
    """Shard(1) <-> Slab.Y and 1 x P BlockNonCyclic, Replicate <-> None, with torch's own placement objects."""
    pytest.importorskip("torch")
    from torch.distributed.tensor import Partial, Replicate, Shard

    runtime(4)
    assert distribution_from_placements([Shard(1)], (5, 8)) == Slab.Y
    assert distribution_from_placements([Shard(-1)], (5, 8), kind="block").process_grid.shape == (1, 4)
    assert distribution_from_placements([Replicate()], (5, 8)) is None
    assert placements_for(Slab.Y, (5, 8)) == (Shard(1),)
    assert placements_for(BlockNonCyclic(ProcessGrid(shape=(4, 1))), (6, 8)) == (Shard(0),)
    assert placements_for(None, (5, 8)) == (Replicate(),)
    with pytest.raises(ValueError, match="pending reduction"):
        distribution_from_placements([Partial()], (5, 8))


def test_unmappable_layouts_are_refused(runtime):
    """Uneven slabs, cyclic or 2-D grids and multi-dimensional meshes have no 1-D-mesh placement."""
    runtime(4)
    with pytest.raises(ConvertDistributionError, match="not a Shard or Replicate"):
        placement_specs_for(Slab.X, (6, 4), 4)
    from nvmath.distributed.distribution import BlockCyclic

    with pytest.raises(ConvertDistributionError, match="not a Shard or Replicate"):
        placement_specs_for(BlockCyclic(ProcessGrid(shape=(4, 1)), (1, 4)), (8, 4), 4)
    with pytest.raises(ConvertDistributionError, match="not a Shard or Replicate"):
        placement_specs_for(
            BlockNonCyclic(ProcessGrid(shape=(2, 2), layout=ProcessGrid.Layout.ROW_MAJOR)), (8, 4), 4
        )
    assert placement_specs_for(BlockCyclic(ProcessGrid(shape=(4, 1)), (2, 4)), (8, 4), 4) == (("shard", 0),)
    with pytest.raises(ValueError, match="only a 1-D device mesh"):
        distribution_from_placements([("shard", 0), ("replicate", None)], (8, 4))
    assert distribution_from_placements([("replicate", None), ("replicate", None)], (8, 4)) is None
    with pytest.raises(ValueError, match=r"Shard\(2\) is out of range"):
        distribution_from_placements([FakeShard(2)], (8, 4))
    with pytest.raises(ValueError, match="kind must be"):
        distribution_from_placements([FakeShard(0)], (8, 4), kind="cyclic")
    with pytest.raises(TypeError, match="expected a DTensor placement"):
        placement_spec("Shard(0)")


def test_module_does_not_import_torch():
    """The placement mapping reads placements by duck typing: importing it loads no torch."""
    code = "import sys, nvmath.distributed.distribution._dtensor; assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)
