"""The process-wide distributed context: :func:`initialize`, :func:`finalize`, :func:`get_context`.

One context per process. :func:`initialize` validates everything locally first (device, group,
backends), loads the engines (an ImportError naming the ``[distributed]`` extra when they are
missing), makes the device's CUDA context current (NVSHMEM needs one), then bootstraps NVSHMEM and
NCCL from unique ids broadcast over the process group. :func:`finalize` refuses while plans or
symmetric allocations are alive, then tears down in a fixed order: NCCL, then NVSHMEM (only if
nvmath started it), then the context.
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from . import _engines
from .process_group import MPIProcessGroup, ProcessGroup

__all__ = [
    "DistributedContext",
    "before_finalize",
    "context",
    "finalize",
    "get_context",
    "initialize",
    "register_plan",
]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class DistributedContext:
    """What :func:`initialize` set up (read it with :func:`get_context`)."""

    device_id: int
    process_group: ProcessGroup
    nvshmem_available: bool
    nccl_comm: int | None


@dataclass
class _State:
    context: DistributedContext
    engines: dict[str, ModuleType]
    nvshmem: _engines.NvshmemState | None
    plans: weakref.WeakSet
    symmetric: dict[int, Any]  # address -> bookkeeping (see _symmetric.py)


_LOCK = threading.RLock()
_STATE: _State | None = None
_BEFORE_FINALIZE: list[Callable[[], None]] = []


def _activate_device(device_id: int) -> None:
    """Make ``device_id``'s primary context current (NVSHMEM and NCCL need a CUDA context)."""
    from nvmath._internal import devices

    devices.check_device_id(device_id)
    devices.set_current_context(devices.primary_context(device_id))


def _as_process_group(process_group: Any) -> ProcessGroup:
    if isinstance(process_group, ProcessGroup):
        return process_group
    if hasattr(process_group, "Get_rank") and hasattr(process_group, "Iallreduce"):
        return MPIProcessGroup(process_group)
    raise TypeError(
        f"process_group: expected an nvmath.distributed.ProcessGroup (MPIProcessGroup, TorchProcessGroup) "
        f"or an mpi4py communicator, got {type(process_group).__name__}"
    )


def _check_backends(backends: Sequence[str] | None) -> tuple[str, ...]:
    if backends is None:
        return _engines.BACKENDS
    if isinstance(backends, str) or not isinstance(backends, Sequence):
        raise TypeError(f"backends={backends!r}: expected a sequence of {list(_engines.BACKENDS)}")
    chosen = tuple(backends)
    bad = [b for b in chosen if b not in _engines.BACKENDS]
    if bad or not chosen or len(set(chosen)) != len(chosen):
        raise ValueError(
            f"backends={backends!r}: expected a non-empty sequence of distinct names from "
            f"{list(_engines.BACKENDS)} ('nvshmem' for the FFT, 'nccl' for the matmul)"
        )
    return chosen


def initialize(device_id: int, process_group: Any, backends: Sequence[str] | None = None) -> None:
    """Start nvmath's distributed runtime on this process (collective: every rank calls it).

    Args:
        device_id: the CUDA device this process uses (one process per GPU).
        process_group: a :class:`~nvmath.distributed.ProcessGroup` or an mpi4py communicator.
        backends: engines to start, from ``("nvshmem", "nccl")`` (default: both). The FFT needs
            NVSHMEM (cuFFTMp), the matmul NCCL (cuBLASMp).

    Raises:
        RuntimeError: already initialized (call :func:`finalize` first), or the engines disagree
            with the process group about the ranks.
        ImportError: the engines are not installed (``pip install nvmath-kit[distributed]``).
    """
    global _STATE
    with _LOCK:
        if _STATE is not None:
            raise RuntimeError(
                "nvmath.distributed is already initialized on this process; call "
                "nvmath.distributed.finalize() before initializing again"
            )
        if isinstance(device_id, bool) or not isinstance(device_id, int) or device_id < 0:
            raise TypeError(f"device_id={device_id!r}: expected a CUDA device ordinal (int >= 0)")
        group = _as_process_group(process_group)
        chosen = _check_backends(backends)
        engines = _engines.load(chosen)
        _activate_device(device_id)
        nvshmem_state = _engines.start_nvshmem(engines["nvshmem"], group) if "nvshmem" in engines else None
        try:
            comm = _engines.start_nccl(engines["nccl"], group) if "nccl" in engines else None
        except BaseException:
            if nvshmem_state is not None:
                _engines.stop_nvshmem(engines["nvshmem"], nvshmem_state)
            raise
        context = DistributedContext(device_id, group, nvshmem_state is not None, comm)
        _STATE = _State(context, engines, nvshmem_state, weakref.WeakSet(), {})
        logger.info(
            "initialized rank %d of %d on device %d with %s", group.rank, group.nranks, device_id, chosen
        )


def get_context() -> DistributedContext | None:
    """The context :func:`initialize` made, or ``None`` when the runtime is not initialized (as in
    nvmath-python 1.0, this never raises; nvmath's own code uses the checked :func:`context`)."""
    state = _STATE
    return None if state is None else state.context


def context() -> DistributedContext:
    """The context :func:`initialize` made, for callers that need a running runtime.

    Raises:
        RuntimeError: not initialized (the message says to call :func:`initialize`).
    """
    return _state().context


def _state() -> _State:
    state = _STATE
    if state is None:
        raise RuntimeError(
            "nvmath.distributed is not initialized: call "
            "nvmath.distributed.initialize(device_id, process_group) first"
        )
    return state


def engine(name: str) -> ModuleType:
    """The binding module of a started engine (``"nvshmem"`` or ``"nccl"``)."""
    state = _state()
    if name not in state.engines:
        raise RuntimeError(
            f"this operation needs the {name!r} backend, which was not started: pass "
            f"backends=[..., {name!r}] to nvmath.distributed.initialize"
        )
    return state.engines[name]


def register_plan(plan: Any) -> None:
    """Record a live plan (weakly); :func:`finalize` refuses while one is alive and not freed."""
    _state().plans.add(plan)


def unregister_plan(plan: Any) -> None:
    """A plan's ``free()`` calls this."""
    if _STATE is not None:
        _STATE.plans.discard(plan)


def symmetric_registry() -> dict[int, Any]:
    """Live symmetric allocations of this process (address -> record), for ``_symmetric.py``."""
    return _state().symmetric


def before_finalize(callback: Callable[[], None]) -> None:
    """Run ``callback`` at the start of every :func:`finalize` (collective, like finalize): plan
    caches register their ``clear`` here so that cached plans do not block finalize."""
    if callback not in _BEFORE_FINALIZE:
        _BEFORE_FINALIZE.append(callback)


def abandon() -> None:
    """Forget the context without tearing anything down (tests; a job whose engines already died)."""
    global _STATE
    with _LOCK:
        _STATE = None


def finalize() -> None:
    """Stop the distributed runtime (collective; NCCL, then NVSHMEM, then the context).

    Raises:
        RuntimeError: not initialized, or plans / symmetric allocations are still alive (free them
            first: ``plan.free()``, :func:`~nvmath.distributed.free_symmetric_memory`).
    """
    global _STATE
    with _LOCK:
        state = _state()
        callbacks = list(_BEFORE_FINALIZE)  # a copy: a callback may register another
        for callback in callbacks:
            callback()
        live = len(state.plans)
        if live or state.symmetric:
            raise RuntimeError(
                f"nvmath.distributed.finalize: {live} plan(s) and {len(state.symmetric)} symmetric "
                "allocation(s) are still alive on this rank; call .free() on every plan and "
                "free_symmetric_memory(...) on every tensor first (on every rank)"
            )
        try:
            if state.context.nccl_comm is not None:
                _engines.stop_nccl(state.engines["nccl"], state.context.nccl_comm)
        finally:
            try:
                if state.nvshmem is not None:
                    _engines.stop_nvshmem(state.engines["nvshmem"], state.nvshmem)
            finally:
                _STATE = None
        logger.info("finalized")
