"""Bootstrap of the communication engines (NVSHMEM, NCCL) from a unique id broadcast over a
:class:`~nvmath.distributed.ProcessGroup`.

The raw calls go through ``nvmath.bindings.nvshmem`` / ``nvmath.bindings.nccl``; this module only
sequences them. :func:`load` is the one place the libraries are loaded (at
:func:`~nvmath.distributed.initialize`, never at import), and the tests replace it with fakes.
"""

from __future__ import annotations

import ctypes
import importlib
import logging
import os
import warnings
from dataclasses import dataclass
from types import ModuleType

import numpy as np

from nvmath._errors import LibraryNotFoundError, NvmathWarning

from .process_group import ProcessGroup

__all__ = [
    "BACKENDS",
    "CUFFTMP_NVSHMEM",
    "NvshmemState",
    "check_nvshmem_for_cufftmp",
    "check_nvshmem_host",
    "load",
    "mapped_libraries",
    "nvshmem_host_version",
    "start_nccl",
    "start_nvshmem",
    "stop_nccl",
    "stop_nvshmem",
]

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
    if "nvshmem" in modules:
        check_nvshmem_host(nvshmem_host_version())
        copies = mapped_libraries("libnvshmem_host")
        if len(copies) > 1:
            warnings.warn(
                f"{len(copies)} NVSHMEM host libraries are mapped in this process ({', '.join(copies)}): "
                "each is its own NVSHMEM; cuFFTMp may use one nvmath did not initialize (and hang "
                "bootstrapping it).",
                NvmathWarning,
                stacklevel=3,
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



# ------------------------------------------------------------------------ library agreement checks
# The NVSHMEM each cuFFTMp release was built with: cuFFTMp links NVSHMEM's *device* library statically
# and uses the host library (libnvshmem_host.so.3) of the process, which must be of the same major
# version and not older (NVSHMEM 3's host/device compatibility rule; an older host library refuses
# cuFFTMp's modules). Read from the build paths in libcufftMp.so.12 12.1.3
# (".../external/nvshmem/3.3.24/agnostic/x86_64/13.0/include/host/nvshmem_api.h").
CUFFTMP_NVSHMEM = {(12, 1, 3): (3, 3, 24)}
# The NVSHMEM 3.x ABI the bootstrap above is written for (init attribute layout, unique id size).
NVSHMEM_MAJOR = 3


def nvshmem_host_version() -> tuple[int, int, int] | None:
    """``(major, minor, patch)`` of the loaded NVSHMEM host library (``nvshmemx_vendor_get_version_info``;
    the generated bindings only have the OpenSHMEM spec version), or ``None`` if it cannot be read."""
    from nvmath.bindings import _loader

    try:
        address = _loader.symbol_address("nvshmem_host", "nvshmemx_vendor_get_version_info")
    except Exception:  # noqa: BLE001 - an NVSHMEM without the query: not checked
        return None
    query = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)(address)
    parts = [ctypes.c_int(-1) for _ in range(3)]
    query(*(ctypes.addressof(p) for p in parts))
    version = tuple(p.value for p in parts)
    return None if min(version) < 0 else version  # type: ignore[return-value]


def _text(version: tuple[int, ...] | None) -> str:
    return "unknown" if version is None else ".".join(map(str, version))


def check_nvshmem_host(host: tuple[int, int, int] | None) -> None:
    """Refuse an NVSHMEM host library of another major version than the bootstrap's ABI.

    Raises:
        RuntimeError: naming the version found and the one needed.
    """
    if host is not None and host[0] != NVSHMEM_MAJOR:
        raise RuntimeError(
            f"NVSHMEM host library {_text(host)} is loaded; nvmath.distributed needs NVSHMEM "
            f"{NVSHMEM_MAJOR}.x (pip install 'nvidia-nvshmem-cu13>=3.3,<4')"
        )


def check_nvshmem_for_cufftmp(
    host: tuple[int, int, int] | None, cufftmp: tuple[int, int, int] | None
) -> None:
    """Refuse a host NVSHMEM that cuFFTMp's statically linked device part cannot run with (another
    major version, or older than the one cuFFTMp was built with), instead of failing or hanging
    inside cuFFTMp. Unknown versions are not checked (logged).

    Raises:
        RuntimeError: naming both versions and the fix.
    """
    needed = CUFFTMP_NVSHMEM.get(cufftmp) if cufftmp is not None else None
    if host is None or needed is None:
        logger.info("NVSHMEM host %s with cuFFTMp %s: compatibility not checked", _text(host), _text(cufftmp))
        return
    if host[0] != needed[0] or host < needed:
        raise RuntimeError(
            f"cuFFTMp {_text(cufftmp)} was built with NVSHMEM {_text(needed)} (its device part is linked "
            "in), "
            f"but the NVSHMEM host library loaded is {_text(host)}: install a host library of the same major "
            f"version and at least {_text(needed)} (pip install 'nvidia-nvshmem-cu13>={_text(needed)},"
            f"<{needed[0] + 1}')"
        )
    logger.info("NVSHMEM host %s with cuFFTMp %s (built with %s): compatible", _text(host), _text(cufftmp),
                _text(needed))  # fmt: skip


def mapped_libraries(stem: str, maps: str | None = None) -> list[str]:
    """Distinct files named ``<stem>.so*`` mapped into this process (``/proc/self/maps``; empty
    where there is none), resolved through symlinks."""
    if maps is None:
        try:
            with open("/proc/self/maps") as handle:
                maps = handle.read()
        except OSError:
            return []
    found: list[str] = []
    for line in maps.splitlines():
        path = line.split(maxsplit=5)[5].strip() if len(line.split(maxsplit=5)) == 6 else ""
        if os.path.basename(path).startswith(stem + ".so"):
            real = os.path.realpath(path) if os.path.exists(path) else path
            if real not in found:
                found.append(real)
    return found
