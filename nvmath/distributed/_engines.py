"""Bootstrap of the communication engines (NVSHMEM, NCCL) from a unique id broadcast over a
:class:`~nvmath.distributed.ProcessGroup`.

The raw calls go through ``nvmath.bindings.nvshmem`` / ``nvmath.bindings.nccl``; this module only
sequences them. :func:`load` is the one place the libraries are loaded (at
:func:`~nvmath.distributed.initialize`, never at import), and the tests replace it with fakes.
"""

from __future__ import annotations

import importlib
import logging
from dataclasses import dataclass
from types import ModuleType

import numpy as np

from nvmath._errors import LibraryNotFoundError

from .process_group import ProcessGroup

__all__ = ["BACKENDS", "NvshmemState", "load", "start_nccl", "start_nvshmem", "stop_nccl", "stop_nvshmem"]

logger = logging.getLogger(__name__)

BACKENDS = ("nvshmem", "nccl")
_LIBRARY = {"nvshmem": "nvshmem_host", "nccl": "nccl"}
_WHEEL = {"nvshmem": "nvidia-nvshmem-cu13", "nccl": "nvidia-nccl-cu13"}

# Sizes and versions fixed by the NVSHMEM 3.x ABI (bootstrap_device_host/nvshmem_uniqueid.h and
# device_host/nvshmem_types.h static_asserts): the unique id is 128 bytes, the init attribute 144.
NVSHMEM_UNIQUEID_BYTES = 128
NVSHMEM_INIT_ATTR_BYTES = 144
NCCL_UNIQUE_ID_BYTES = 128
# nvshmemx_init_status(): NVSHMEM_STATUS_IS_INITIALIZED and above mean a live instance.
NVSHMEM_STATUS_IS_INITIALIZED = 2


def load(backends: tuple[str, ...]) -> dict[str, ModuleType]:
    """``{backend: binding module}`` with each library loaded; ImportError naming the extra if not."""
    from nvmath.bindings import _loader

    modules, missing = {}, []
    for backend in backends:
        try:
            _loader.library_info(_LIBRARY[backend])
        except LibraryNotFoundError as exc:
            missing.append(f"{backend} ({_WHEEL[backend]}): {exc}")
            continue
        modules[backend] = importlib.import_module(f"nvmath.bindings.{backend}")
    if missing:
        raise ImportError(
            "nvmath.distributed.initialize: the distributed engines are not installed: "
            + "; ".join(missing)
            + ". Install them with `pip install nvmath-kit[distributed]` (cuFFTMp, cuBLASMp, NVSHMEM, NCCL)."
        )
    return modules


@dataclass
class NvshmemState:
    """What :func:`start_nvshmem` found or made; ``owned`` is False when torch had started NVSHMEM."""

    owned: bool


def _buffer(nbytes: int) -> np.ndarray:
    return np.zeros(nbytes, dtype=np.uint8)


# nvshmemx_init_attr_t (v2, 144 bytes; device_host/nvshmem_types.h) as NVSHMEMX_INIT_ATTR_INITIALIZER
# fills it: {int version; void* mpi_comm; {int version; {int version; uid* id; int myrank; int nranks}
# uid_args; int cuda_device_id; char content[92]} args}. Byte offsets of its fields on x86-64/aarch64:
INIT_ATTR_FIELDS = {
    "version": (0, np.int32, (2 << 16) + NVSHMEM_INIT_ATTR_BYTES),
    "args.version": (16, np.int32, (2 << 16) + 128),
    "args.uid_args.version": (24, np.int32, (1 << 16) + 24),
    "args.uid_args.id": (32, np.uint64, 0),
    "args.uid_args.myrank": (40, np.int32, -1),
    "args.uid_args.nranks": (44, np.int32, -1),
    "args.cuda_device_id": (48, np.int32, -1),
}


def init_attr_buffer() -> np.ndarray:
    """A ``nvshmemx_init_attr_t`` holding NVSHMEM's initializer (versions set, ids and ranks unset)."""
    attr = _buffer(NVSHMEM_INIT_ATTR_BYTES)
    for offset, dtype, value in INIT_ATTR_FIELDS.values():
        attr[offset : offset + np.dtype(dtype).itemsize] = np.frombuffer(dtype(value).tobytes(), np.uint8)
    return attr


def read_field(buffer: np.ndarray, field: str) -> int:
    """One field of a buffer made by :func:`init_attr_buffer`."""
    offset, dtype, _ = INIT_ATTR_FIELDS[field]
    return int(np.frombuffer(buffer[offset : offset + np.dtype(dtype).itemsize].tobytes(), dtype)[0])


def _address(array: np.ndarray) -> int:
    return array.ctypes.data


def start_nvshmem(nvshmem: ModuleType, group: ProcessGroup) -> NvshmemState:
    """Reuse a running NVSHMEM (torch's) or start one from rank 0's unique id; checks the PE layout."""
    if nvshmem.init_status() >= NVSHMEM_STATUS_IS_INITIALIZED:
        logger.info("NVSHMEM already initialized (by torch?): reusing it, nvmath will not finalize it")
        state = NvshmemState(owned=False)
    else:
        uid = _buffer(NVSHMEM_UNIQUEID_BYTES)
        if group.rank == 0:
            nvshmem.get_uniqueid(_address(uid))
        group.broadcast_buffer(uid, root=0)
        attr = init_attr_buffer()
        nvshmem.set_attr_uniqueid_args(group.rank, group.nranks, _address(uid), _address(attr))
        nvshmem.hostlib_init_attr(nvshmem.Flags.WITH_UNIQUEID, _address(attr))
        state = NvshmemState(owned=True)
    pe, npes = nvshmem.my_pe(), nvshmem.n_pes()
    if (pe, npes) != (group.rank, group.nranks):
        if state.owned:
            nvshmem.hostlib_finalize()
        raise RuntimeError(
            f"NVSHMEM sees PE {pe} of {npes}, but the process group says rank {group.rank} of "
            f"{group.nranks}: the bootstrap is wrong (each rank would plan the whole problem alone). "
            "Start NVSHMEM over the same processes as the process group."
        )
    return state


def stop_nvshmem(nvshmem: ModuleType, state: NvshmemState) -> None:
    """Finalize NVSHMEM if nvmath started it."""
    if state.owned:
        nvshmem.hostlib_finalize()


def start_nccl(nccl: ModuleType, group: ProcessGroup) -> int:
    """A NCCL communicator over the group's ranks (rank 0's unique id, broadcast)."""
    uid = _buffer(NCCL_UNIQUE_ID_BYTES)
    if group.rank == 0:
        nccl.get_unique_id(_address(uid))
    group.broadcast_buffer(uid, root=0)
    comm = nccl.comm_init_rank_scalable(group.nranks, group.rank, 1, _address(uid), None)
    rank, count = nccl.comm_user_rank(comm), nccl.comm_count(comm)
    if (rank, count) != (group.rank, group.nranks):
        nccl.comm_destroy(comm)
        raise RuntimeError(
            f"NCCL communicator is rank {rank} of {count}, but the process group says rank {group.rank} "
            f"of {group.nranks}: the bootstrap is wrong."
        )
    return comm


def stop_nccl(nccl: ModuleType, comm: int) -> None:
    """Flush and destroy a communicator."""
    nccl.comm_finalize(comm)
    nccl.comm_destroy(comm)

