"""Distributed suite: FFT on cuFFTMp and GEMM on cuBLASMp across the GPUs of a job, run under torchrun.

Every rank runs the same command and times the same collective calls::

    torchrun --nproc-per-node 8 -m benchmarks distributed --libs nvmath,torch
    torchrun --nproc-per-node 1 -m benchmarks distributed            # the 1-GPU baseline

(``mpirun -n N python -m benchmarks distributed`` works too: the world comes from torch's
environment or Open MPI's.) Only rank 0 prints and writes the results (``benchmarks/cli.py``);
each rank measures on its ``LOCAL_RANK`` GPU. A case's iteration count is agreed over the ranks
(the smallest), so a collective is never called a different number of times on two ranks
(:func:`agree_iterations`, installed in the run context for cases tagged ``collective``).

Cases (issue 20's Benchmarks section), on P = the job's ranks:

* ``fft-c2c-fp32-{256,512,1024,2048}``: strong scaling of an in-place C2C complex64 FFT of N^3 on
  ``Slab.X`` (``FFT.execute``, forward, on the same buffer every call); ``fft-c2c-fp32-weak-512``:
  (512 P) x 512 x 512 (weak scaling); ``fft-r2c-fp32-{512,1024}``: R2C float32. A problem whose slab
  (with cuFFTMp's scratch) would not fit in 80% of a GPU is skipped with the size it needs.
* ``gemm-{bf16,fp32}-{8192,16384,32768}``: square GEMMs, ``a`` split by rows, ``b`` and ``d`` by
  columns (cuBLASMp's AllGather + GEMM, overlapped); ``tp-colwise-8192x28672x8192`` (M=8192 tokens,
  N=28672, K=8192; same layout) and ``tp-rowwise-8192x8192x28672`` (``a`` and ``b`` split along K,
  ``d`` by rows: GEMM + ReduceScatter) -- the tensor-parallel MLP shapes.

Rows: ``nvmath`` (ours: cuFFTMp / cuBLASMp); ``nvmath-python`` (``--nvmath-python-path DIR``: the same
calls in nvmath-python 1.0's process, one per rank, which form their own job on ``MASTER_PORT + 1``;
its NCCL backend needs nccl4py, without which its GEMM rows skip saying so); ``torch`` (GEMMs:
``torch.matmul`` of DTensors with the same placements, the result redistributed to ``d``'s, torch's
collectives around a local cuBLAS GEMM; FFTs: torch has no distributed FFT -- DTensor shards only
batch dimensions -- so its row is skipped); ``nvmath-1gpu`` (a baseline, never a peer: the *global*
problem on one GPU through our single-GPU cuFFT / cuBLASLt -- in-place C2C, out-of-place R2C, ``Matmul``
-- the base of the report's efficiency lines, ``t_1gpu / (P t_P)``; at P = 1 this is the cost of the
distributed engine over the single-GPU library, not a scaling number).

Each row's note gives the plan time (``plan()``; nvmath, nvmath-python, nvmath-1gpu), the
setup + plan + first-call time, the device memory those took (every
allocator's: NCCL's and NVSHMEM's too; ``mem_get_info``), the memory then in use on the GPU by all
processes (the per-GPU peak of that row: later calls reuse what the first one allocated), and ``initialize``'s
time (NVSHMEM + NCCL bootstrap). nvmath-python's process runs while ours waits holding its own engines:
its "in use" includes ours. Cases skip with a reason where the engines (the ``[distributed]``
wheels) are missing.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import time
from collections.abc import Callable, Mapping
from typing import Any

from benchmarks.registry import Case, Prepared, Skip, register
from benchmarks.suites._data import torch_on_ctx_stream

__all__ = [
    "FftProblem", "GemmProblem", "World", "agree_iterations", "backend_attempts", "fft_bytes_per_rank",
    "footprint_note", "world_from_env",
]  # fmt: skip

SUITE = "distributed"
FIT_FRACTION = 0.8
"""A case runs only when its per-GPU bytes fit in this fraction of the GPU's memory."""


# ------------------------------------------------------------------------------------ the world
@dataclasses.dataclass(frozen=True)
class World:
    """The job as the environment describes it."""

    rank: int
    nranks: int
    local_rank: int
    launcher: str  # "torchrun", "mpirun" or "single"


def world_from_env(env: Mapping[str, str]) -> World:
    """The job's rank, size and local rank from torchrun's (``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``)
    or Open MPI's (``OMPI_COMM_WORLD_*``) variables; one process otherwise.

    Raises:
        ValueError: a variable that is not a number, or a rank outside the job.
    """
    for launcher, prefix, names in (
        ("torchrun", "", ("RANK", "WORLD_SIZE", "LOCAL_RANK")),
        ("mpirun", "OMPI_COMM_WORLD_", ("RANK", "SIZE", "LOCAL_RANK")),
    ):
        keys = [prefix + n for n in names]
        if keys[0] in env and keys[1] in env:
            try:
                rank, size = int(env[keys[0]]), int(env[keys[1]])
                local = int(env.get(keys[2], rank))
            except ValueError:
                raise ValueError(
                    f"{launcher}'s environment is not numeric: {[env.get(k) for k in keys]}"
                ) from None
            if not 0 <= rank < size:
                raise ValueError(f"{launcher}: rank {rank} is outside a job of {size}")
            return World(rank, size, local, launcher)
    return World(0, 1, 0, "single")


_STATE: dict[str, Any] = {}


def _init_torch(world: World, device_id: int) -> Any:
    import torch
    import torch.distributed as dist

    if not dist.is_initialized():
        if world.launcher == "mpirun":
            os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
            os.environ.setdefault("MASTER_PORT", "29512")
            os.environ["RANK"], os.environ["WORLD_SIZE"] = str(world.rank), str(world.nranks)
        if world.launcher == "single":
            store = dist.HashStore()
            dist.init_process_group(
                "nccl", store=store, rank=0, world_size=1, device_id=torch.device("cuda", device_id)
            )
        else:
            dist.init_process_group("nccl", device_id=torch.device("cuda", device_id))
    return dist


def agree_iterations(dist: Any, device_id: int) -> Callable[[int, int], tuple[int, int]]:
    """``(warmup, iterations) -> the smallest over the ranks`` (one all-reduce)."""

    def agree(warmup: int, iterations: int) -> tuple[int, int]:
        import torch

        t = torch.tensor([-warmup, -iterations], device=f"cuda:{device_id}")  # MIN as -MAX(-x)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return int(-t[0]), int(-t[1])

    return agree


def _importable(name: str) -> bool:
    """Whether ``import name`` works (it is imported: a module that is there but fails to import,
    e.g. nccl4py without its libnccl, counts as missing)."""
    try:
        importlib.import_module(name)
    except Exception:  # noqa: BLE001 - any failure to import is "not available"
        return False
    return True


def backend_attempts(
    peer: bool, has_module: Callable[[str], bool] = _importable
) -> tuple[list[list[str]], dict[str, str]]:
    """The backend sets to try to ``initialize`` with, in order, and why some are left out.

    nvmath-python (``peer``) starts NVSHMEM before it imports nccl4py for NCCL, and leaves NVSHMEM
    started when that import fails: so without nccl4py only NVSHMEM is tried (a retry would start it
    twice). Ours loads every engine before starting any, so a failed set can be retried smaller.
    """
    if peer and not has_module("nccl.core"):
        reason = "nvmath-python's NCCL backend needs nccl4py (the 'nccl.core' module), which does not import"
        return [["nvshmem"]], {"nccl": reason}
    return [["nvshmem", "nccl"], ["nccl"], ["nvshmem"]], {}


def _initialize(world: World, device_id: int) -> None:
    """``nvmath.distributed.initialize`` with the most backends that start; records what did and why."""
    import nvmath.distributed as nd

    group = nd.TorchProcessGroup(device_id=device_id)
    attempts, reasons = backend_attempts(bool(_STATE.get("peer")))
    started: list[str] = []
    start = time.perf_counter()
    for backends in attempts:
        try:
            nd.initialize(device_id, group, backends=backends)
            started = backends
            break
        except ImportError as exc:
            reasons[",".join(backends)] = f"{type(exc).__name__}: {exc}"
        except Exception as exc:  # noqa: BLE001 - an engine failed to start: its state is unknown, stop
            reasons[",".join(backends)] = f"{type(exc).__name__}: {exc}"
            break
    _STATE.update(world=world, backends=started, reasons=reasons, init_s=time.perf_counter() - start)


def _world(ctx: Any, backend: str | None) -> World:
    """Start torch.distributed and nvmath.distributed once per process (both backends when the
    wheels are there); raise Skip naming what is missing for ``backend`` (None: rows that need none
    of the distributed engines). Every library runs on the harness's stream (torch's current one)."""
    torch_on_ctx_stream(ctx)
    if "world" not in _STATE:
        world = world_from_env(os.environ)
        _STATE["dist"] = _init_torch(world, ctx.device_id)
        _initialize(world, ctx.device_id)
    ctx.extras["agree_iterations"] = agree_iterations(_STATE["dist"], ctx.device_id)
    if backend is not None and backend not in _STATE["backends"]:
        raise Skip(f"the {backend} engine is not available: {'; '.join(_STATE['reasons'].values())}")
    return _STATE["world"]


def footprint_note(
    nranks: int, what: str, setup_ms: float, taken_mib: float, used_gib: float, init_s: float,
    plan_ms: float | None = None,
) -> str:  # fmt: skip
    """The note of a measured row (see the module docstring)."""
    plan = "" if plan_ms is None else f"plan {plan_ms:.0f} ms, "
    return (f"{nranks} GPU(s), {what}; {plan}setup+plan+first call {setup_ms:.0f} ms, +{taken_mib:.0f} MiB; "
            f"{used_gib:.1f} GiB in use on the GPU; initialize {init_s:.2f} s")  # fmt: skip


class _Footprint:
    """Setup time and device memory taken (all allocators: NCCL's and NVSHMEM's too) by a setup."""

    def __init__(self, device_id: int):
        import torch

        self.torch, self.device_id, self.plan_ms = torch, device_id, None
        torch.cuda.synchronize(device_id)
        torch.cuda.empty_cache()  # earlier rows' cached blocks would hide this row's torch allocations
        self.free0, self.t0 = torch.cuda.mem_get_info(device_id)[0], time.perf_counter()

    def plan(self, plan: Callable[[], Any]) -> None:
        """Call ``plan`` and keep its time for the note."""
        start = time.perf_counter()
        plan()
        self.torch.cuda.synchronize(self.device_id)
        self.plan_ms = (time.perf_counter() - start) * 1e3

    def note(self, world: World, what: str) -> str:
        """Call after the setup's first call of the timed function."""
        self.torch.cuda.synchronize(self.device_id)
        ms = (time.perf_counter() - self.t0) * 1e3
        free, total = self.torch.cuda.mem_get_info(self.device_id)
        return footprint_note(world.nranks, what, ms, (self.free0 - free) / 2**20, (total - free) / 2**30,
                              _STATE.get("init_s", 0.0), self.plan_ms)  # fmt: skip


# -------------------------------------------------------------------------------------- the FFT
@dataclasses.dataclass(frozen=True)
class FftProblem:
    """A 3-D FFT of ``shape`` (``weak``: the first extent is per GPU) of ``kind`` C2C or R2C."""

    shape: tuple[int, int, int]
    kind: str = "C2C"
    weak: bool = False

    def global_shape(self, nranks: int) -> tuple[int, int, int]:
        x, y, z = self.shape
        return (x * nranks, y, z) if self.weak else (x, y, z)

    def flops(self, nranks: int = 1) -> float:
        import math

        n = math.prod(self.global_shape(nranks))
        return (5.0 if self.kind == "C2C" else 2.5) * n * math.log2(n)


def fft_bytes_per_rank(shape: tuple[int, int, int], kind: str, nranks: int) -> int:
    """Bytes one rank needs: its slab (the larger of the two slab splits, R2C padded) twice (cuFFTMp's
    scratch is up to one more slab)."""
    x, y, z = shape
    zc = z if kind == "C2C" else z // 2 + 1
    rows = max(-(-x // nranks) * y, x * -(-y // nranks))
    return 2 * rows * zc * 8


def _check_fits(shape: tuple[int, int, int], kind: str, nranks: int, device_id: int) -> None:
    import torch

    need = fft_bytes_per_rank(shape, kind, nranks)
    total = torch.cuda.get_device_properties(device_id).total_memory
    if need > FIT_FRACTION * total:
        raise Skip(f"{shape} {kind} needs ~{need / 2**30:.0f} GiB per GPU on {nranks} GPU(s)")


def _fft_setup(p: FftProblem) -> Callable[[Any], Any]:
    """The distributed FFT (``nvmath.distributed.fft.FFT``, in place on the symmetric heap)."""

    def setup(ctx: Any) -> Prepared:
        world = _world(ctx, "nvshmem")
        import torch

        import nvmath.distributed as nd
        from nvmath.distributed.distribution import Slab
        from nvmath.distributed.fft import FFT, allocate_operand

        shape = p.global_shape(world.nranks)
        _check_fits(shape, p.kind, world.nranks, ctx.device_id)
        footprint = _Footprint(ctx.device_id)
        local = Slab.X.shape(world.rank, shape)
        dtype = torch.complex64 if p.kind == "C2C" else torch.float32
        x = allocate_operand(local, torch, input_dtype=dtype, distribution=Slab.X, memory_space="cuda",
                             fft_type=p.kind)  # nvmath-python requires memory_space for torch
        fft = None
        try:
            x.copy_(torch.randn(x.shape, dtype=dtype, device=x.device))
            fft = FFT(x, distribution=Slab.X, options={"fft_type": p.kind})
            footprint.plan(fft.plan)
            fft.execute()
            note = footprint.note(world, f"global {shape}")
        except BaseException:
            if fft is not None:
                fft.free()
            nd.free_symmetric_memory(x)  # collective, as the allocation was: every rank gets here
            raise

        def teardown() -> None:
            fft.free()
            nd.free_symmetric_memory(x)

        return Prepared(fn=fft.execute, teardown=teardown, note=note)

    return setup


def _fft_1gpu(p: FftProblem) -> Callable[[Any], Any]:
    """The global problem on one GPU through our cuFFT planner (C2C in place, R2C out of place)."""

    def setup(ctx: Any) -> Prepared:
        world = _world(ctx, None)
        import torch

        import nvmath.fft as nf

        shape = p.global_shape(world.nranks)
        _check_fits(shape, p.kind, 1, ctx.device_id)
        footprint = _Footprint(ctx.device_id)
        dtype = torch.complex64 if p.kind == "C2C" else torch.float32
        x = torch.randn(shape, dtype=dtype, device=f"cuda:{ctx.device_id}")
        options = {"inplace": True} if p.kind == "C2C" else {"fft_type": "R2C"}
        fft = nf.FFT(x, options=options)
        try:
            footprint.plan(fft.plan)
            fft.execute()
            note = footprint.note(world, f"{shape} on one GPU, {'in' if p.kind == 'C2C' else 'out of'} place")
        except BaseException:
            fft.free()
            raise
        return Prepared(fn=fft.execute, teardown=fft.free, note=note)

    return setup


def _torch_fft(ctx: Any) -> None:
    raise Skip("torch has no distributed FFT (DTensor shards only the batch dimensions of an FFT)")


# ------------------------------------------------------------------------------------- the GEMM
@dataclasses.dataclass(frozen=True)
class GemmProblem:
    """``(M, K) @ (K, N)`` in ``dtype``; ``layout`` "colwise" (a by rows, b and d by columns:
    AllGather + GEMM) or "rowwise" (a by columns and b by rows, d by rows: GEMM + ReduceScatter)."""

    m: int
    n: int
    k: int
    dtype: str = "bfloat16"
    layout: str = "colwise"

    @property
    def flops(self) -> float:
        return 2.0 * self.m * self.n * self.k

    def shard_dims(self) -> tuple[int, int, int]:
        """The shard dimension of a, b and d."""
        return (0, 1, 1) if self.layout == "colwise" else (1, 0, 0)


def _local_operands(p: GemmProblem, world: World, device_id: int) -> tuple[Any, Any, Any]:
    import torch

    dt = getattr(torch, p.dtype)
    gen = torch.Generator(device=f"cuda:{device_id}").manual_seed(1234 + world.rank)
    da, db, _ = p.shard_dims()
    shapes = [[p.m, p.k], [p.k, p.n]]
    for shape, dim in zip(shapes, (da, db), strict=True):
        if shape[dim] % world.nranks:
            raise Skip(f"{shape[dim]} does not split over {world.nranks} GPUs")
        shape[dim] //= world.nranks
    # Fortran order locally: cuBLASMp's native layout, and the one nvmath-python takes
    a, b = (torch.randn(s[::-1], device=f"cuda:{device_id}", dtype=dt, generator=gen).t() for s in shapes)
    return torch, a, b


def _gemm_setup(p: GemmProblem) -> Callable[[Any], Any]:
    """The distributed GEMM (``nvmath.distributed.linalg.advanced.Matmul`` on cuBLASMp)."""

    def setup(ctx: Any) -> Prepared:
        world = _world(ctx, "nccl")
        from nvmath.distributed.distribution import Slab
        from nvmath.distributed.linalg.advanced import Matmul

        _, a, b = _local_operands(p, world, ctx.device_id)
        footprint = _Footprint(ctx.device_id)
        slab = {0: Slab.X, 1: Slab.Y}
        dists = [slab[d] for d in p.shard_dims()]
        mm = Matmul(a, b, distributions=dists, options={"inplace": False})
        try:
            footprint.plan(mm.plan)
            mm.execute()  # the first call registers the workspace (counted in the footprint)
            note = footprint.note(world, p.layout)
        except BaseException:
            mm.free()
            raise
        return Prepared(fn=mm.execute, teardown=mm.free, note=note)

    return setup


def _gemm_1gpu(p: GemmProblem) -> Callable[[Any], Any]:
    """The global GEMM on one GPU through our cuBLASLt ``Matmul`` (operands in the same layout)."""

    def setup(ctx: Any) -> Prepared:
        world = _world(ctx, None)
        from nvmath.linalg.advanced import Matmul

        _, a, b = _local_operands(p, World(0, 1, 0, "single"), ctx.device_id)
        footprint = _Footprint(ctx.device_id)
        mm = Matmul(a, b)
        try:
            footprint.plan(mm.plan)
            mm.execute()
            note = footprint.note(world, "the whole GEMM on one GPU")
        except BaseException:
            mm.free()
            raise
        return Prepared(fn=mm.execute, teardown=mm.free, note=note)

    return setup


def _torch_gemm(p: GemmProblem) -> Callable[[Any], Any]:
    """``torch.matmul`` of DTensors sharded as the distributed GEMM's operands."""

    def setup(ctx: Any) -> Prepared:
        world = _world(ctx, None)
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.tensor import DTensor, Shard

        torch, a, b = _local_operands(p, world, ctx.device_id)
        mesh = init_device_mesh("cuda", (world.nranks,))
        da, db, dd = p.shard_dims()
        footprint = _Footprint(ctx.device_id)
        ta = DTensor.from_local(a, mesh, [Shard(da)], run_check=False)
        tb = DTensor.from_local(b, mesh, [Shard(db)], run_check=False)

        def call() -> Any:  # d sharded as cuBLASMp's (a Partial d would skip the ReduceScatter)
            return torch.matmul(ta, tb).redistribute(mesh, [Shard(dd)])

        call()
        return Prepared(fn=call, note=footprint.note(world, p.layout))

    return setup


PEER_PORT_OFFSET = 1
"""nvmath-python's processes (one per rank, started by the CLI's peer runner) form their own job on
``MASTER_PORT + 1``: the ranks' peers start together, since every rank reaches its peer step at the
same point of the run."""


def _peer(setup: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """``setup`` run in nvmath-python's process (where ``import nvmath`` is nvmath-python, whose
    distributed API this suite's calls follow), joining the other ranks' peers."""

    def peer_setup(ctx: Any) -> Any:
        _STATE["peer"] = True  # nvmath-python's initialize: see backend_attempts
        if "world" not in _STATE:
            world = world_from_env(os.environ)
            if world.launcher != "single":
                port = int(os.environ.get("MASTER_PORT", "29512"))
                os.environ["MASTER_PORT"] = str(port + PEER_PORT_OFFSET)
                # torchrun's agent store holds the parents' group: the peers make their own store
                os.environ["TORCHELASTIC_USE_AGENT_STORE"] = "False"
        return setup(ctx)

    return peer_setup


# ------------------------------------------------------------------------------------- the cases
FFTS = {
    "fft-c2c-fp32-256": FftProblem((256, 256, 256)),
    "fft-c2c-fp32-512": FftProblem((512, 512, 512)),
    "fft-c2c-fp32-1024": FftProblem((1024, 1024, 1024)),
    "fft-c2c-fp32-2048": FftProblem((2048, 2048, 2048)),
    "fft-c2c-fp32-weak-512": FftProblem((512, 512, 512), weak=True),
    "fft-r2c-fp32-512": FftProblem((512, 512, 512), "R2C"),
    "fft-r2c-fp32-1024": FftProblem((1024, 1024, 1024), "R2C"),
}
GEMMS = {
    **{f"gemm-{short}-{n}": GemmProblem(n, n, n, dtype) for short, dtype in (("bf16", "bfloat16"), ("fp32", "float32"))
       for n in (8192, 16384, 32768)},
    "tp-colwise-8192x28672x8192": GemmProblem(8192, 28672, 8192),
    "tp-rowwise-8192x8192x28672": GemmProblem(8192, 8192, 28672, layout="rowwise"),
}  # fmt: skip
QUICK = frozenset({"fft-c2c-fp32-256", "fft-c2c-fp32-512", "fft-r2c-fp32-512", "gemm-bf16-8192",
                   "gemm-fp32-8192", "tp-rowwise-8192x8192x28672"})  # fmt: skip
"""``--quick``: the one-GPU selection (one H200 call of ~2 minutes, every library included)."""


def _register() -> None:
    nranks = world_from_env(os.environ).nranks  # the weak-scaling problems grow with the job
    for name, p in FFTS.items():
        setups = {"nvmath": _fft_setup(p), "torch": _torch_fft, "nvmath-python": _peer(_fft_setup(p)),
                  "nvmath-1gpu": _fft_1gpu(p)}
        register(Case(suite=SUITE, name=name, setups=setups,
                      flops=p.flops(nranks), quick=name in QUICK, tags=("collective",),
                      description=f"{p.kind} {'x'.join(map(str, p.shape))}{' per GPU' if p.weak else ''} Slab.X"))  # fmt: skip
    for name, g in GEMMS.items():
        setups = {"nvmath": _gemm_setup(g), "torch": _torch_gemm(g), "nvmath-python": _peer(_gemm_setup(g)),
                  "nvmath-1gpu": _gemm_1gpu(g)}
        register(Case(suite=SUITE, name=name, setups=setups,
                      flops=g.flops, quick=name in QUICK, tags=("collective",),
                      description=f"{g.dtype} M={g.m} N={g.n} K={g.k} {g.layout}"))  # fmt: skip


_register()
