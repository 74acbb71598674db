"""Fakes for the distributed runtime's CPU tests (imported as ``dist_fakes``): a process group of
threads and fake engine bindings.

``ThreadGroup`` runs N ranks as N threads of this process: each thread sees its own ``rank``
(thread-local) and the collectives meet at a barrier with a timeout, so a rank that skips a
collective makes the others fail (``threading.BrokenBarrierError``) instead of hanging the suite.
``FakeNvshmem`` / ``FakeNccl`` stand in for ``nvmath.bindings.nvshmem`` / ``nccl``: they record
every call and check what a real bootstrap must guarantee (all ranks got rank 0's unique id).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import numpy as np
from nvmath.distributed import _engines
from nvmath.distributed.process_group import ProcessGroup, ReductionOp

_NUMPY_OPS = {ReductionOp.SUM: np.add, ReductionOp.MIN: np.minimum, ReductionOp.MAX: np.maximum,
              ReductionOp.PROD: np.multiply}  # fmt: skip


class ThreadGroup(ProcessGroup):
    """``nranks`` ranks as threads; run a function on all of them with :meth:`run`."""

    def __init__(self, nranks: int, barrier_timeout: float = 10.0):
        self._n = nranks
        self._local = threading.local()
        self._barrier = threading.Barrier(nranks, timeout=barrier_timeout)
        self._slots: list[Any] = [None] * nranks
        self.calls: list[str] = []

    @property
    def rank(self) -> int:
        return getattr(self._local, "rank", 0)

    @property
    def nranks(self) -> int:
        return self._n

    def _exchange(self, array: np.ndarray) -> list[np.ndarray]:
        self._slots[self.rank] = array.copy()
        self._barrier.wait()
        values = list(self._slots)
        self._barrier.wait()
        return values

    def broadcast_buffer(self, array: np.ndarray, *, root: int = 0) -> None:
        if self.rank == 0:
            self.calls.append("broadcast_buffer")
        array[...] = self._exchange(array)[root]

    def allreduce_buffer(self, array: np.ndarray, *, op: ReductionOp) -> None:
        if self.rank == 0:
            self.calls.append("allreduce_buffer")
        values = self._exchange(array)
        result = values[0]
        for value in values[1:]:
            result = _NUMPY_OPS[op](result, value)
        array[...] = result

    def run(self, function: Callable[[int], Any]) -> list[Any]:
        """``[function(rank) for each rank]`` run concurrently; exceptions are returned, not raised."""
        results: list[Any] = [None] * self._n

        def body(rank: int) -> None:
            self._local.rank = rank
            try:
                results[rank] = function(rank)
            except BaseException as exc:  # noqa: BLE001 - handed back to the test
                results[rank] = exc  # no barrier.abort(): it would break ranks still leaving a wait

        threads = [threading.Thread(target=body, args=(r,)) for r in range(self._n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=30)
            assert not t.is_alive(), "a rank hung"
        return results


class SingleRank(ProcessGroup):
    """Rank ``rank`` of ``nranks`` whose collectives return what rank 0 / the reduction would
    (the others are simulated: broadcast fills ``root_value``, allreduce leaves the buffer)."""

    def __init__(self, rank: int = 0, nranks: int = 1, root_value: int = 7):
        self._rank, self._n, self.root_value = rank, nranks, root_value
        self.calls: list[str] = []

    @property
    def rank(self) -> int:
        return self._rank

    @property
    def nranks(self) -> int:
        return self._n

    def broadcast_buffer(self, array: np.ndarray, *, root: int = 0) -> None:
        self.calls.append("broadcast_buffer")
        if self._rank != root:
            array[...] = self.root_value

    def allreduce_buffer(self, array: np.ndarray, *, op: ReductionOp) -> None:
        self.calls.append("allreduce_buffer")


class FakeFlags:
    WITH_UNIQUEID = 8  # nvmath.bindings.nvshmem.Flags.WITH_UNIQUEID


class FakeNvshmem:
    """A fake ``nvmath.bindings.nvshmem``: addresses from a counter, every call logged. With
    ``reuse_freed`` set, ``malloc`` hands out a freed address of the same size again first (as the
    real symmetric heap does)."""

    Flags = FakeFlags

    def __init__(self, group: ProcessGroup, status: int = 0, layout: tuple[int, int] | None = None):
        self.group, self.status, self.layout = group, status, layout
        self.log: list[tuple] = []
        self.uids: dict[int, bytes] = {}
        self.next_address = 0x10000
        self.lock = threading.Lock()
        self.reuse_freed = False
        self.freed: dict[int, int] = {}  # address -> size, of freed allocations
        self.sizes: dict[int, int] = {}

    def _buf(self, address: int, nbytes: int) -> np.ndarray:
        import ctypes

        return np.ctypeslib.as_array((ctypes.c_uint8 * nbytes).from_address(address))

    def init_status(self) -> int:
        return self.status

    def get_uniqueid(self, address: int) -> None:
        self.log.append(("get_uniqueid", self.group.rank))
        self._buf(address, _engines.NVSHMEM_UNIQUEID_BYTES)[:] = 42

    def set_attr_uniqueid_args(self, rank: int, nranks: int, uid: int, attr: int) -> None:
        self.uids[rank] = self._buf(uid, _engines.NVSHMEM_UNIQUEID_BYTES).tobytes()
        self.log.append(("set_attr_uniqueid_args", rank, nranks))

    def hostlib_init_attr(self, flags: int, attr: int) -> None:
        self.log.append(("hostlib_init_attr", flags))
        self.status = _engines.NVSHMEM_STATUS_IS_INITIALIZED

    def hostlib_finalize(self) -> None:
        self.log.append(("hostlib_finalize",))

    def my_pe(self) -> int:
        return self.layout[0] if self.layout else self.group.rank

    def n_pes(self) -> int:
        return self.layout[1] if self.layout else self.group.nranks

    def malloc(self, size: int) -> int | None:
        with self.lock:
            self.log.append(("malloc", size))
            again = [a for a, n in self.freed.items() if n == size] if self.reuse_freed else []
            if again:
                address = again[0]
                del self.freed[address]
            else:
                address, self.next_address = self.next_address, self.next_address + size + 256
            self.sizes[address] = size
        return address

    def free(self, address: int) -> None:
        self.log.append(("free", address))
        with self.lock:
            self.freed[address] = self.sizes.pop(address, 0)


class FakeNccl:
    """A fake ``nvmath.bindings.nccl``."""

    def __init__(self, group: ProcessGroup, fail_init: bool = False):
        self.group, self.fail_init = group, fail_init
        self.log: list[tuple] = []
        self.uids: dict[int, bytes] = {}

    def get_unique_id(self, address: int) -> None:
        import ctypes

        self.log.append(("get_unique_id",))
        ctypes.memset(address, 9, _engines.NCCL_UNIQUE_ID_BYTES)

    def comm_init_rank_scalable(self, nranks: int, rank: int, n_id: int, ids: int, config: Any) -> int:
        import ctypes

        if self.fail_init:
            raise RuntimeError("ncclCommInitRankScalable failed (fake)")
        self.uids[rank] = ctypes.string_at(ids, _engines.NCCL_UNIQUE_ID_BYTES)
        self.log.append(("comm_init_rank_scalable", nranks, rank, n_id))
        return 0xC0 + rank

    def comm_user_rank(self, comm: int) -> int:
        return comm - 0xC0

    def comm_count(self, comm: int) -> int:
        return self.group.nranks

    def comm_finalize(self, comm: int) -> None:
        self.log.append(("comm_finalize", comm))

    def comm_destroy(self, comm: int) -> None:
        self.log.append(("comm_destroy", comm))
