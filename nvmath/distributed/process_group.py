"""Process groups: the host-side communicator ``nvmath.distributed`` bootstraps its engines over.

A :class:`ProcessGroup` moves small host buffers between the processes of one job: the NVSHMEM and
NCCL unique ids at :func:`~nvmath.distributed.initialize`, and the one agreement check a planner
makes (shapes, dtypes, distributions). The engines move the data; these never do.

Every collective nvmath issues through a group has a deadline (:attr:`ProcessGroup.timeout`,
seconds): a rank that never joins makes the others raise :class:`CollectiveTimeoutError` instead of
hanging. :class:`MPIProcessGroup` polls non-blocking MPI requests against it;
:class:`TorchProcessGroup` waits on asynchronous ``torch.distributed`` work with it.
"""

from __future__ import annotations

import abc
import enum
import logging
import pickle
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from nvmath._errors import NvmathError

__all__ = ["CollectiveTimeoutError", "MPIProcessGroup", "ProcessGroup", "ReductionOp", "TorchProcessGroup"]

DEFAULT_TIMEOUT = 300.0


class CollectiveTimeoutError(NvmathError, TimeoutError):
    """A collective issued by nvmath did not complete on every rank before the group's timeout."""


class ReductionOp(enum.Enum):
    """Element-wise reductions of :meth:`ProcessGroup.allreduce_buffer`."""

    SUM = "sum"
    MIN = "min"
    MAX = "max"
    PROD = "prod"


class ProcessGroup(abc.ABC):
    """The communicator of a distributed job, seen from one process (rank).

    Subclasses implement :attr:`rank`, :attr:`nranks`, :meth:`broadcast_buffer` and
    :meth:`allreduce_buffer` on host numpy arrays (in place); :meth:`allreduce_object` is built on
    :meth:`allreduce_buffer` (two calls) and needs no override.
    """

    #: Seconds a collective issued by nvmath may take before :class:`CollectiveTimeoutError`.
    timeout: float = DEFAULT_TIMEOUT

    @property
    @abc.abstractmethod
    def rank(self) -> int:
        """This process's rank, ``0 <= rank < nranks``."""

    @property
    @abc.abstractmethod
    def nranks(self) -> int:
        """The number of processes in the group."""

    @abc.abstractmethod
    def broadcast_buffer(self, array: np.ndarray, *, root: int = 0) -> None:
        """Overwrite ``array`` (a contiguous host numpy array, same shape and dtype on every rank)
        with ``root``'s."""

    @abc.abstractmethod
    def allreduce_buffer(self, array: np.ndarray, *, op: ReductionOp) -> None:
        """Reduce ``array`` element-wise over the ranks with ``op``; every rank gets the result in place."""

    def allreduce_object(self, obj: Any, *, op: Callable[[Any, Any], Any]) -> Any:
        """Reduce a picklable object over the ranks: ``op(op(obj_0, obj_1), obj_2) ...`` in rank order,
        the same value on every rank. Two :meth:`allreduce_buffer` calls (the longest pickle, then
        every rank's pickle in its own row)."""
        data = np.frombuffer(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL), dtype=np.uint8)
        longest = np.array([data.size], dtype=np.int64)
        self.allreduce_buffer(longest, op=ReductionOp.MAX)
        rows = np.zeros((self.nranks, int(longest[0]) + 8), dtype=np.uint8)
        rows[self.rank, :8] = np.frombuffer(np.int64(data.size).tobytes(), dtype=np.uint8)
        rows[self.rank, 8 : 8 + data.size] = data
        self.allreduce_buffer(rows, op=ReductionOp.SUM)  # one non-zero row per rank: exact
        values = []
        for row in rows:
            size = int(np.frombuffer(row[:8].tobytes(), dtype=np.int64)[0])
            values.append(pickle.loads(row[8 : 8 + size].tobytes()))
        result = values[0]
        for value in values[1:]:
            result = op(result, value)
        return result


def check_buffer(array: Any, what: str) -> np.ndarray:
    """``array`` if it is a C-contiguous numpy array, else a TypeError naming ``what``."""
    if not isinstance(array, np.ndarray) or not array.flags.c_contiguous:
        raise TypeError(f"{what}: expected a C-contiguous numpy array, got {type(array).__name__}")
    return array


def _check_root(root: Any, nranks: int) -> int:
    if not isinstance(root, int) or isinstance(root, bool) or not 0 <= root < nranks:
        raise ValueError(f"root={root!r}: expected a rank in [0, {nranks})")
    return root


class MPIProcessGroup(ProcessGroup):
    """A :class:`ProcessGroup` on an mpi4py communicator (``mpi4py`` is imported here, not before).

    Args:
        mpi_comm: an ``mpi4py.MPI.Comm`` (for example ``MPI.COMM_WORLD``).
    """

    def __init__(self, mpi_comm: Any):
        try:
            from mpi4py import MPI
        except ImportError as exc:
            raise ImportError(
                "MPIProcessGroup needs mpi4py: pip install mpi4py (or nvmath-kit[distributed])"
            ) from exc
        if not isinstance(mpi_comm, MPI.Comm):
            raise TypeError(f"mpi_comm: expected an mpi4py.MPI.Comm, got {type(mpi_comm).__name__}")
        self._mpi = MPI
        self._comm = mpi_comm
        self._ops = {ReductionOp.SUM: MPI.SUM, ReductionOp.MIN: MPI.MIN, ReductionOp.MAX: MPI.MAX,
                     ReductionOp.PROD: MPI.PROD}  # fmt: skip

    @property
    def rank(self) -> int:
        return self._comm.Get_rank()

    @property
    def nranks(self) -> int:
        return self._comm.Get_size()

    @property
    def mpi_comm(self) -> Any:
        """The wrapped communicator."""
        return self._comm

    def broadcast_buffer(self, array: np.ndarray, *, root: int = 0) -> None:
        check_buffer(array, "broadcast_buffer")
        self._wait(self._comm.Ibcast(array, root=_check_root(root, self.nranks)), "broadcast_buffer")

    def allreduce_buffer(self, array: np.ndarray, *, op: ReductionOp) -> None:
        check_buffer(array, "allreduce_buffer")
        if not isinstance(op, ReductionOp):
            raise TypeError(f"op={op!r}: expected a ReductionOp ({', '.join(o.name for o in ReductionOp)})")
        self._wait(self._comm.Iallreduce(self._mpi.IN_PLACE, array, op=self._ops[op]), "allreduce_buffer")

    def _wait(self, request: Any, what: str) -> None:
        deadline = time.monotonic() + self.timeout
        delay = 1e-5
        while not request.Test():
            if time.monotonic() > deadline:
                raise CollectiveTimeoutError(
                    f"{what} on rank {self.rank} of {self.nranks}: not every rank joined within "
                    f"{self.timeout} s (a rank failed or took another code path); set ProcessGroup.timeout "
                    "to wait longer"
                )
            time.sleep(delay)
            delay = min(delay * 2, 1e-2)


class TorchProcessGroup(ProcessGroup):
    """A :class:`ProcessGroup` on a ``torch.distributed`` process group.

    Args:
        device_id: where the group's backend wants buffers: ``"cpu"`` (gloo) or a CUDA device
            ordinal (nccl).
        torch_process_group: the group (default: the default group, which must be initialized).
        logger: a :class:`logging.Logger` (default: this module's).
    """

    def __init__(self, *, device_id: int | str, torch_process_group: Any = None, logger: Any = None):
        import torch.distributed as dist

        if not dist.is_available() or not dist.is_initialized():
            raise RuntimeError(
                "TorchProcessGroup: torch.distributed is not initialized: call "
                "torch.distributed.init_process_group(...) first (torchrun sets its environment)"
            )
        is_ordinal = isinstance(device_id, int) and not isinstance(device_id, bool) and device_id >= 0
        if device_id != "cpu" and not is_ordinal:
            raise ValueError(f"device_id={device_id!r}: expected 'cpu' or a CUDA device ordinal >= 0")
        self._dist = dist
        self._group = torch_process_group
        self._device = "cpu" if device_id == "cpu" else f"cuda:{device_id}"
        self.device_id = device_id
        self.logger = logger or logging.getLogger(__name__)

    @property
    def rank(self) -> int:
        return self._dist.get_rank(self._group)

    @property
    def nranks(self) -> int:
        return self._dist.get_world_size(self._group)

    def broadcast_buffer(self, array: np.ndarray, *, root: int = 0) -> None:
        check_buffer(array, "broadcast_buffer")
        _check_root(root, self.nranks)
        global_root = root if self._group is None else self._dist.get_global_rank(self._group, root)
        self._run(array, lambda t: self._dist.broadcast(t, global_root, group=self._group, async_op=True),
                  "broadcast_buffer")  # fmt: skip

    def allreduce_buffer(self, array: np.ndarray, *, op: ReductionOp) -> None:
        check_buffer(array, "allreduce_buffer")
        if not isinstance(op, ReductionOp):
            raise TypeError(f"op={op!r}: expected a ReductionOp ({', '.join(o.name for o in ReductionOp)})")
        torch_op = getattr(self._dist.ReduceOp, {"prod": "PRODUCT"}.get(op.value, op.name))
        self._run(array, lambda t: self._dist.all_reduce(t, torch_op, group=self._group, async_op=True),
                  "allreduce_buffer")  # fmt: skip

    def _run(self, array: np.ndarray, start: Callable[[Any], Any], what: str) -> None:
        import datetime

        import torch

        tensor = torch.from_numpy(array.view(np.uint8) if array.dtype == np.bool_ else array)
        if self._device != "cpu":
            tensor = tensor.to(self._device)
        work = start(tensor)
        try:
            done = work.wait(timeout=datetime.timedelta(seconds=self.timeout))
        except RuntimeError as exc:  # gloo and nccl report a timeout as a RuntimeError
            raise CollectiveTimeoutError(
                f"{what} on rank {self.rank} of {self.nranks}: not completed within {self.timeout} s ({exc})"
            ) from exc
        if done is False:
            raise CollectiveTimeoutError(f"{what} on rank {self.rank}: not completed within {self.timeout} s")
        if self._device != "cpu":
            array[...] = tensor.cpu().numpy().reshape(array.shape)
