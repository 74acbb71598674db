"""How a global array is split across processes: ``nvmath.distributed.distribution``.

``Slab`` and ``Box`` describe the layouts of the distributed FFT (cuFFTMp); ``BlockCyclic`` and
``BlockNonCyclic`` over a ``ProcessGrid`` describe those of the distributed matmul (cuBLASMp).
``shape(rank, global_shape)`` gives a process's local shape and ``to(cls)`` converts between
types where the conversion is exact. :class:`Redistribute` / :func:`redistribute` move a
distributed array between Box or Slab distributions on cuFFTMp's reshape. Names and behaviour
follow nvmath-python 1.0.
"""

from . import _convert  # noqa: F401  (registers Distribution.to's converter)
from ._block import BlockCyclic, BlockNonCyclic
from ._distribution import Box, Distribution, Slab
from ._errors import BindDistributionError, ConvertDistributionError
from ._grid import ProcessGrid
from ._redistribute import InvalidRedistributeState, Redistribute, RedistributeOptions, redistribute

__all__ = [
    "BindDistributionError",
    "BlockCyclic",
    "BlockNonCyclic",
    "Box",
    "ConvertDistributionError",
    "Distribution",
    "InvalidRedistributeState",
    "ProcessGrid",
    "Redistribute",
    "RedistributeOptions",
    "Slab",
    "redistribute",
]
