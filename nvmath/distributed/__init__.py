"""Scale-out across GPUs and processes: cuFFTMp over NVSHMEM, cuBLASMp over NCCL.

What exists (CPU-tested against fake engines; the GPU lane has not run yet): the runtime --
:func:`initialize`, :func:`finalize`, :func:`get_context`, the process groups
(:class:`ProcessGroup`, :class:`MPIProcessGroup`, :class:`TorchProcessGroup`), symmetric memory
(:func:`allocate_symmetric_memory`, :func:`free_symmetric_memory`) -- the raw bindings
``nvmath.bindings.{nvshmem, nccl, cufftMp, cublasMp}``, the distributions
(``nvmath.distributed.distribution``), the slab FFT (``nvmath.distributed.fft``) and the matmul
without epilogs (``nvmath.distributed.linalg.advanced``).

Importing this package loads no engine: they load at :func:`initialize`, which raises an
ImportError naming the ``[distributed]`` extra when they are not installed.
"""

from __future__ import annotations

import importlib
from typing import Any

from ._agreement import RankDisagreementError
from ._runtime import DistributedContext, finalize, get_context, initialize
from ._symmetric import allocate_symmetric_memory, free_symmetric_memory
from .process_group import (
    CollectiveTimeoutError,
    MPIProcessGroup,
    ProcessGroup,
    ReductionOp,
    TorchProcessGroup,
)

__all__ = [
    "CollectiveTimeoutError",
    "DistributedContext",
    "MPIProcessGroup",
    "ProcessGroup",
    "RankDisagreementError",
    "ReductionOp",
    "TorchProcessGroup",
    "allocate_symmetric_memory",
    "finalize",
    "free_symmetric_memory",
    "get_context",
    "initialize",
]


def __getattr__(name: str) -> Any:
    # The distribution subpackage is imported on first use: `import nvmath.distributed` stays light.
    if name == "distribution":
        return importlib.import_module(f"{__name__}.distribution")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
