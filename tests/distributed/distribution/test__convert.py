"""Distribution.to(): exact conversions succeed and round-trip; inexact or unknowable ones raise ConvertDistributionError."""

from __future__ import annotations

import math

import numpy as np
import pytest

from nvmath.distributed.distribution import (
    BlockCyclic,
    BlockNonCyclic,
    Box,
    ConvertDistributionError,
    Distribution,
    ProcessGrid,
    Slab,
)
from nvmath.distributed.distribution._ownership import same_ownership

ROW, COL = ProcessGrid.Layout.ROW_MAJOR, ProcessGrid.Layout.COL_MAJOR
EXTENTS = [1, 2, 3, 5, 7, 8, 12, 13, 16]


def slab_equals_chunks(extent: int, nranks: int) -> bool:
    """Independent check: np.array_split sizes equal ceil-chunk sizes."""
    split = [len(p) for p in np.array_split(np.arange(extent), nranks)]
    chunk = math.ceil(extent / nranks)
    return split == [max(0, min(chunk, extent - r * chunk)) for r in range(nranks)]


def test_slab_to_slab(runtime):
    """Same type: self, or a copy with copy=True; a larger ndim gives a Slab of that ndim (bound shape padded with 1)."""
    runtime(2)
    assert Slab.X.to(Slab) is Slab.X
    copied = Slab.X.to(Slab, copy=True)
    assert copied is not Slab.X and copied == Slab.X
    assert Slab.Y.to(Slab, ndim=3).ndim == 3
    promoted = Slab.Y.bind((4, 6)).to(Slab, ndim=4)
    assert promoted.global_shape == (4, 6, 1, 1) and promoted.partition_dim == 1


@pytest.mark.parametrize("nranks", range(1, 9))
@pytest.mark.parametrize("extent", EXTENTS)
@pytest.mark.parametrize("slab", [Slab.X, Slab.Y], ids=["X", "Y"])
def test_bound_slab_to_block_noncyclic_round_trips_when_exact(runtime, nranks, extent, slab):
    """A bound Slab becomes a P x 1 / 1 x P BlockNonCyclic exactly when the splits coincide, and converts back."""
    runtime(nranks)
    shape = (extent, 3) if slab is Slab.X else (3, extent)
    bound = slab.bind(shape)
    if not slab_equals_chunks(extent, nranks):
        with pytest.raises(ConvertDistributionError, match="differently"):
            bound.to(BlockNonCyclic)
        return
    block = bound.to(BlockCyclic)
    assert isinstance(block, BlockNonCyclic) and block.global_shape == shape
    assert block.process_grid.shape == ((nranks, 1) if slab is Slab.X else (1, nranks))
    assert same_ownership(bound, block, shape, nranks)
    back = block.to(Slab)
    assert back.global_shape == shape and same_ownership(back, bound, shape, nranks)
    assert back == slab or nranks == 1  # one rank: a 1 x 1 grid reads as Slab.X, the same ownership


def test_unbound_slab_to_block_is_structural(runtime):
    """Unbound, the grid comes from the partition dimension (ndim required), as in nvmath-python."""
    runtime(4)
    block = Slab.Y.to(BlockNonCyclic, ndim=2)
    assert block.process_grid.shape == (1, 4) and block.global_shape is None
    with pytest.raises(ConvertDistributionError, match="pass ndim"):
        Slab.X.to(BlockCyclic)
    with pytest.raises(ValueError, match="must exceed the partition dimension"):
        Slab.Z.to(BlockCyclic, ndim=2)


@pytest.mark.parametrize("nranks", range(1, 9))
def test_slab_to_box_is_this_ranks_slab(runtime, nranks):
    """On every rank, a bound Slab converts to the Box np.array_split gives that rank."""
    shape = (4, 13)
    for rank, piece in enumerate(np.array_split(np.arange(shape[1]), nranks)):
        runtime(nranks, rank=rank)
        box = Slab.Y.bind(shape).to(Box)
        assert box.global_shape == shape and box.box_shape == Slab.Y.shape(rank, shape)
        if piece.size:
            assert (box.lower, box.upper) == ((0, int(piece[0])), (4, int(piece[-1]) + 1))
    with pytest.raises(ConvertDistributionError, match="not bound"):
        Slab.Y.to(Box)


def test_box_conversions(runtime):
    """A Box promotes to more dimensions (size-1) but converts to nothing else."""
    runtime(2, rank=0)
    box = Box((1, 0), (3, 5))
    assert box.to(Box) is box and box.to(Box, copy=True) == box
    assert box.to(Box, ndim=3) == Box((1, 0, 0), (3, 5, 1))
    assert box.bind((4, 5)).to(Box, ndim=3).global_shape == (4, 5, 1)
    for cls in (Slab, BlockCyclic, BlockNonCyclic):
        with pytest.raises(ConvertDistributionError, match="only this process's part"):
            box.to(cls)


def test_block_cyclic_to_noncyclic_needs_equal_blocks(runtime):
    """BlockCyclic -> BlockNonCyclic when bound and its blocks are the ceil blocks; refused otherwise."""
    runtime(4)
    grid = ProcessGrid(shape=(2, 2), layout=COL)
    converted = BlockCyclic(grid, (5, 3)).bind((10, 6)).to(BlockNonCyclic)
    assert isinstance(converted, BlockNonCyclic) and converted.block_sizes == (5, 3)
    with pytest.raises(ConvertDistributionError, match="differently"):
        BlockCyclic(grid, (2, 3)).bind((10, 6)).to(BlockNonCyclic)
    with pytest.raises(ConvertDistributionError, match="not bound"):
        BlockCyclic(grid, (5, 3)).to(BlockNonCyclic)
    noncyclic = BlockNonCyclic(grid)
    assert noncyclic.to(BlockCyclic) is noncyclic


def test_block_to_slab(runtime):
    """Only one-dimensional grids become Slabs: bound when the ownership matches, unbound when ranks run in order."""
    runtime(4)
    row = ProcessGrid(shape=(4, 1))
    assert BlockCyclic(row, (2, 5)).bind((8, 5)).to(Slab) == Slab(0, 2)
    assert BlockNonCyclic(row).to(Slab) == Slab.X
    with pytest.raises(ConvertDistributionError, match="cyclic layout rarely"):
        BlockCyclic(row, (2, 5)).to(Slab)
    with pytest.raises(ConvertDistributionError, match="differently"):
        BlockCyclic(row, (1, 5)).bind((8, 5)).to(Slab)
    with pytest.raises(ConvertDistributionError, match="first block to rank 0"):
        BlockNonCyclic(row, first_process=(1, 0)).to(Slab)
    with pytest.raises(ConvertDistributionError, match="first block to rank 0"):
        BlockNonCyclic(ProcessGrid(process_array=[[1], [0], [2], [3]])).to(Slab)
    with pytest.raises(ConvertDistributionError, match="more than one dimension"):
        BlockNonCyclic(ProcessGrid(shape=(2, 2), layout=ROW)).to(Slab)


@pytest.mark.parametrize("layout", [ROW, COL])
def test_block_noncyclic_to_box_on_a_2x2_grid(runtime, layout):
    """Each rank of a bound 2x2 BlockNonCyclic converts to its own block as a Box."""
    order = "C" if layout == ROW else "F"
    for rank in range(4):
        runtime(4, rank=rank)
        i, j = np.unravel_index(rank, (2, 2), order=order)
        box = BlockNonCyclic(ProcessGrid(shape=(2, 2), layout=layout)).bind((7, 4)).to(Box)
        assert (box.lower, box.upper) == ((4 * i, 2 * j), (min(4 * i + 4, 7), 2 * j + 2))
    with pytest.raises(ConvertDistributionError, match="not one contiguous box"):
        BlockCyclic(ProcessGrid(shape=(2, 2), layout=layout), (1, 1)).bind((7, 4)).to(Box)


def test_block_promotion_keeps_ownership(runtime):
    """to(BlockCyclic, ndim=3) appends a unit grid dimension, block 1 and first process 0; the bound shape gains a 1."""
    runtime(4)
    dist = BlockCyclic(ProcessGrid(shape=(2, 2), layout=COL), (2, 3), first_process=(1, 0)).bind((7, 8))
    promoted = dist.to(BlockCyclic, ndim=3)
    assert promoted.process_grid.shape == (2, 2, 1) and promoted.block_sizes == (2, 3, 1)
    assert promoted.first_process == (1, 0, 0) and promoted.global_shape == (7, 8, 1)
    assert [promoted.shape(r) for r in range(4)] == [dist.shape(r) + (1,) for r in range(4)]


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda: Slab.X.to("Slab"), TypeError, "cls must be a Distribution class"),
        (lambda: Slab.X.to(int), ValueError, "concrete Distribution class"),
        (lambda: Slab.X.to(Distribution), ValueError, "concrete Distribution class"),
        (lambda: Slab(0, 3).to(Slab, ndim=2), ValueError, r"ndim \(2\) must be >= the dimensionality"),
        (lambda: Slab.X.to(Slab, ndim=0), ValueError, "ndim must be an integer >= 1"),
        (lambda: Slab.X.to(Slab, ndim=2.0), TypeError, "ndim must be an integer"),
    ],
)
def test_bad_targets(runtime, call, error, match):
    """Non-classes, non-distribution classes and a shrinking or invalid ndim are refused."""
    runtime(2)
    with pytest.raises(error, match=match):
        call()
