"""Shared start-up of the distributed examples: one process per GPU, launched by torchrun, by
mpirun, or alone (one rank). Not an example itself (the leading underscore)."""

from __future__ import annotations

import os
import sys

SKIP = 77


def world() -> tuple[int, int, int]:
    """``(rank, nranks, local_rank)`` from torchrun's or Open MPI's environment; ``(0, 1, 0)`` alone."""
    for rank, size, local in (("RANK", "WORLD_SIZE", "LOCAL_RANK"),
                              ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK")):  # fmt: skip
        if rank in os.environ and size in os.environ:
            return int(os.environ[rank]), int(os.environ[size]), int(os.environ.get(local, os.environ[rank]))
    return 0, 1, 0


def start(backends: list[str]):
    """Start torch.distributed (NCCL) and nvmath.distributed with ``backends`` on this rank's GPU;
    exit with status 77 ("skipped") where the GPUs or the engines are missing. Returns
    ``(torch, torch.distributed, nvmath.distributed, rank, nranks, device)``."""
    import torch
    import torch.distributed as dist

    import nvmath.distributed as nd

    rank, nranks, local = world()
    if torch.cuda.device_count() <= local:
        print(f"skipped: rank {rank} needs GPU {local}; this machine has {torch.cuda.device_count()}")
        sys.exit(SKIP)
    torch.cuda.set_device(local)
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29533")
    dist.init_process_group("nccl", init_method="env://", rank=rank, world_size=nranks,
                            device_id=torch.device("cuda", local))  # fmt: skip
    try:
        nd.initialize(local, nd.TorchProcessGroup(device_id=local), backends=backends)
    except ImportError as exc:  # the [distributed] wheels are not installed
        print(f"skipped: {exc}")
        dist.destroy_process_group()
        sys.exit(SKIP)
    return torch, dist, nd, rank, nranks, local


def stop(dist, nd) -> None:
    """Finalize nvmath.distributed, then torch.distributed (in that order)."""
    nd.finalize()
    dist.destroy_process_group()
