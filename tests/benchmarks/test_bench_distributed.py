"""The distributed suite's plumbing on the CPU (benchmarks/suites/distributed.py and its hooks in
measure.py / cli.py): the job read from torchrun's and Open MPI's environment, the cases of issue 20's
Benchmarks section, FLOP counts and the per-GPU memory check, the iteration count agreed over the
ranks for collective cases, the device from the local rank and only rank 0 reporting."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from benchmarks import cli, measure, registry
from benchmarks.context import Context, Settings
from benchmarks.suites import distributed as suite


@pytest.mark.parametrize(
    ("env", "expected"),
    [({"RANK": "3", "WORLD_SIZE": "8", "LOCAL_RANK": "3"}, suite.World(3, 8, 3, "torchrun")),
     ({"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "2", "OMPI_COMM_WORLD_LOCAL_RANK": "1"},
      suite.World(1, 2, 1, "mpirun")),
     ({"RANK": "0", "WORLD_SIZE": "1"}, suite.World(0, 1, 0, "torchrun")),
     ({}, suite.World(0, 1, 0, "single"))],
)  # fmt: skip
def test_world_from_env(env, expected):
    """torchrun's RANK/WORLD_SIZE/LOCAL_RANK, else Open MPI's, else one process."""
    assert suite.world_from_env(env) == expected


@pytest.mark.parametrize("env", [{"RANK": "x", "WORLD_SIZE": "2"}, {"RANK": "2", "WORLD_SIZE": "2"}])
def test_world_from_env_bad(env):
    """A non-numeric variable or a rank outside the job raises ValueError."""
    with pytest.raises(ValueError, match="torchrun"):
        suite.world_from_env(env)


def test_cases_of_the_issue():
    """FFT C2C fp32 at 256^3-2048^3 and 512^3 per GPU, R2C; GEMM bf16/fp32 8k-32k and the
    tensor-parallel shapes; every case is a collective with nvmath, torch, nvmath-python rows and the
    one-GPU baseline."""
    cases = {c.name: c for c in registry.load_suite("distributed")}
    assert {"fft-c2c-fp32-256", "fft-c2c-fp32-512", "fft-c2c-fp32-1024", "fft-c2c-fp32-2048",
            "fft-c2c-fp32-weak-512", "fft-r2c-fp32-512", "tp-colwise-8192x28672x8192",
            "tp-rowwise-8192x8192x28672"} <= set(cases)  # fmt: skip
    assert {f"gemm-{d}-{n}" for d in ("bf16", "fp32") for n in (8192, 16384, 32768)} <= set(cases)
    for case in cases.values():
        assert case.tags == ("collective",)
        assert set(case.setups) == {"nvmath", "torch", "nvmath-python", "nvmath-1gpu"}
    assert cases["gemm-bf16-8192"].flops == 2 * 8192**3
    assert cases["tp-rowwise-8192x8192x28672"].flops == 2 * 8192 * 8192 * 28672


def test_quick_selection_is_the_one_gpu_table():
    """--quick picks exactly the one-GPU table's cases (C2C 256^3 and 512^3, R2C 512^3, bf16 and fp32
    8192^3 GEMMs, the bf16 tensor-parallel 8192x8192x28672), in registration order."""
    registry.load_suite("distributed")
    quick = [c.name for c in registry.REGISTRY.cases("distributed", quick=True)]
    assert quick == ["fft-c2c-fp32-256", "fft-c2c-fp32-512", "fft-r2c-fp32-512", "gemm-bf16-8192",
                     "gemm-fp32-8192", "tp-rowwise-8192x8192x28672"]  # fmt: skip
    tp = suite.GEMMS["tp-rowwise-8192x8192x28672"]
    assert (tp.m, tp.n, tp.k, tp.dtype) == (8192, 8192, 28672, "bfloat16")


def test_one_gpu_baseline_is_never_a_peer():
    """nvmath-1gpu runs whenever a case has it (whatever --libs says) and never counts as the best
    peer: at one GPU it is the base of the efficiency lines, not a competitor."""
    from benchmarks import report, runner

    case = registry.load_suite("distributed")[0]
    assert ("nvmath-1gpu" in {lib for _, lib in runner.plan_runs([case], ["nvmath"])})
    _, vs_peer = report.ratios({"nvmath": 2.0, "nvmath-1gpu": 1.0, "nvmath-python": 4.0})
    assert vs_peer == 2.0


def test_fft_problem_sizes():
    """Weak scaling grows the first extent with the job; C2C FLOPs are 5 N log2 N (R2C half);
    a rank's bytes are two slabs (data and cuFFTMp's scratch), the larger of the two splits."""
    weak = suite.FftProblem((512, 512, 512), weak=True)
    assert weak.global_shape(4) == (2048, 512, 512)
    n = 512**3
    assert suite.FftProblem((512, 512, 512)).flops() == pytest.approx(5 * n * math.log2(n))
    assert suite.FftProblem((512, 512, 512), "R2C").flops() == pytest.approx(2.5 * n * math.log2(n))
    assert suite.fft_bytes_per_rank((2048, 2048, 2048), "C2C", 8) == 2 * 2048**3 // 8 * 8
    assert suite.fft_bytes_per_rank((10, 4, 6), "R2C", 3) == 2 * max(4 * 4, 10 * 2) * 4 * 8


def test_gemm_layouts():
    """colwise: a by rows, b and d by columns (AllGather + GEMM); rowwise: a and b along K, d by rows."""
    assert suite.GemmProblem(8, 8, 8).shard_dims() == (0, 1, 1)
    assert suite.GemmProblem(8, 8, 8, layout="rowwise").shard_dims() == (1, 0, 0)


def test_torch_fft_row_skips_with_reason():
    """torch's FFT row says why it cannot run (no distributed FFT in torch)."""
    with pytest.raises(registry.Skip, match="no distributed FFT"):
        suite._torch_fft(None)


def _case(tags):
    return registry.Case(suite="t", name="c", setups={"nvmath": lambda ctx: None}, tags=tags)


@pytest.mark.parametrize("tags", [("collective",), ()])
def test_collective_cases_agree_on_iterations(monkeypatch, tags):
    """A collective case times the iteration count the ranks agreed on (here: the agreement halves
    it); other cases ignore the agreement."""
    calls = []

    def fake_time(fn, stream, *, warmup, iterations):
        calls.append((warmup, iterations))
        return [1.0] * iterations

    monkeypatch.setattr(measure.timing, "time_on_stream", fake_time)
    ctx = Context(settings=Settings(warmup=5, iterations=30), stream=object())
    ctx.extras["agree_iterations"] = lambda w, i: (w, i // 2)
    samples = measure._measure(lambda: None, _case(tags), ctx)
    assert calls[0] == (0, 1)  # the probe
    assert len(samples) == (15 if tags else 30)


def test_device_defaults_to_the_local_rank(monkeypatch):
    """--device defaults to torchrun's LOCAL_RANK, else Open MPI's, else 0."""
    monkeypatch.setenv("LOCAL_RANK", "3")
    assert cli.parse_args(["distributed"]).device == 3
    monkeypatch.delenv("LOCAL_RANK")
    monkeypatch.setenv("OMPI_COMM_WORLD_LOCAL_RANK", "1")
    assert cli.parse_args(["distributed"]).device == 1


def test_only_rank_zero_reports(monkeypatch, tmp_path, capsys):
    """A rank other than 0 measures but neither prints the report nor writes files."""
    ctx = SimpleNamespace(gpu_name="GPU", has_gpu=True, settings=Settings())
    monkeypatch.setattr(cli, "_run", lambda args, cases, checkpoint=None: ([], ctx, {}))
    monkeypatch.setenv("RANK", "1")
    assert cli.main(["distributed", "--out", str(tmp_path), "--cases", "gemm-bf16-8192"]) == 0
    assert not list(tmp_path.iterdir()) and "gemm" not in capsys.readouterr().out


def test_peer_rows_form_their_own_job(monkeypatch):
    """nvmath-python's per-rank processes rendezvous on MASTER_PORT + 1 with their own store (not
    torchrun's agent store, which holds the parents' group), then run the same setup."""
    monkeypatch.setattr(suite, "_STATE", {})
    for key, value in {"RANK": "1", "WORLD_SIZE": "2", "MASTER_PORT": "29600",
                       "TORCHELASTIC_USE_AGENT_STORE": "True"}.items():  # fmt: skip
        monkeypatch.setenv(key, value)
    seen = []
    assert suite._peer(lambda ctx: seen.append(ctx) or "fn")("ctx") == "fn"
    assert seen == ["ctx"]
    import os

    assert os.environ["MASTER_PORT"] == "29601" and os.environ["TORCHELASTIC_USE_AGENT_STORE"] == "False"


@pytest.mark.parametrize(
    ("peer", "has_nccl4py", "attempts"),
    [(False, False, [["nvshmem", "nccl"], ["nccl"], ["nvshmem"]]),
     (True, True, [["nvshmem", "nccl"], ["nccl"], ["nvshmem"]]),
     (True, False, [["nvshmem"]])],
)  # fmt: skip
def test_backend_attempts(peer, has_nccl4py, attempts):
    """Ours tries both engines, then each alone; nvmath-python without nccl4py tries NVSHMEM only
    (its initialize leaves NVSHMEM started when the nccl4py import fails) and says why."""
    got, reasons = suite.backend_attempts(peer, has_module=lambda name: has_nccl4py and name == "nccl.core")
    assert got == attempts
    assert ("nccl4py" in reasons.get("nccl", "")) == (peer and not has_nccl4py)


class _FakeNd:
    """``nvmath.distributed``'s initialize and TorchProcessGroup, failing as told per backend set."""

    def __init__(self, failures):
        self.failures, self.calls = failures, []

    def TorchProcessGroup(self, *, device_id):  # noqa: N802 - the API's name
        return ("group", device_id)

    def initialize(self, device_id, group, *, backends):
        self.calls.append(list(backends))
        exc = self.failures.get(",".join(backends))
        if exc is not None:
            raise exc


@pytest.mark.parametrize(
    ("failures", "calls", "started"),
    [({}, [["nvshmem", "nccl"]], ["nvshmem", "nccl"]),
     ({"nvshmem,nccl": ImportError("no NCCL"), "nccl": ImportError("no NCCL")},
      [["nvshmem", "nccl"], ["nccl"], ["nvshmem"]], ["nvshmem"]),
     ({"nvshmem,nccl": RuntimeError("bootstrap failed")}, [["nvshmem", "nccl"]], [])],
)  # fmt: skip
def test_initialize_falls_back_only_on_missing_engines(monkeypatch, failures, calls, started):
    """A missing engine (ImportError) makes the next, smaller backend set be tried; any other failure
    stops there (the engines' state is unknown); the reasons and initialize's time are recorded."""
    import nvmath

    import sys

    fake = _FakeNd(failures)
    monkeypatch.setattr(suite, "_STATE", {})
    monkeypatch.setattr(nvmath, "distributed", fake, raising=False)
    monkeypatch.setitem(sys.modules, "nvmath.distributed", fake)
    world = suite.World(0, 1, 0, "torchrun")
    suite._initialize(world, 0)
    assert fake.calls == calls
    assert suite._STATE["backends"] == started and suite._STATE["world"] == world
    assert suite._STATE["init_s"] >= 0
    assert set(suite._STATE["reasons"]) == set(failures)


def test_peer_marks_the_process(monkeypatch):
    """The peer wrapper marks the process as nvmath-python's (backend_attempts reads it)."""
    monkeypatch.setattr(suite, "_STATE", {"world": "w"})
    suite._peer(lambda ctx: None)(None)
    assert suite._STATE["peer"] is True


def test_footprint_note():
    """A row's note: ranks, what ran, plan time, setup+plan+first call time, memory taken and in use,
    init time."""
    note = suite.footprint_note(1, "colwise", 1234.4, 512.2, 3.25, 0.5)
    assert note == ("1 GPU(s), colwise; setup+plan+first call 1234 ms, +512 MiB; 3.2 GiB in use on the GPU; "
                    "initialize 0.50 s")  # fmt: skip
    with_plan = suite.footprint_note(2, "rowwise", 900.0, 0.0, 1.0, 0.25, plan_ms=120.4)
    assert with_plan.startswith("2 GPU(s), rowwise; plan 120 ms, setup+plan+first call 900 ms, +0 MiB")


def test_the_suites_calls_bind_to_the_api():
    """Every call the suite's setups make binds to our API (the one nvmath-python 1.0's follows:
    the peer runs the same calls): keyword names, and the option values it passes are accepted."""
    import inspect

    import nvmath.distributed as nd
    import nvmath.fft as nf
    from nvmath.distributed import fft as dfft
    from nvmath.distributed.linalg import advanced as dla
    from nvmath.linalg import advanced as la

    x, a, b = object(), object(), object()
    inspect.signature(nd.initialize).bind(0, object(), backends=["nvshmem", "nccl"])
    inspect.signature(nd.TorchProcessGroup).bind(device_id=0)
    inspect.signature(nd.free_symmetric_memory).bind(x)
    inspect.signature(dfft.allocate_operand).bind(
        (8, 8, 8), object(), input_dtype=object(), distribution=object(), memory_space="cuda", fft_type="R2C"
    )
    inspect.signature(dfft.FFT).bind(x, distribution=object(), options={"fft_type": "C2C"})
    inspect.signature(dla.Matmul).bind(a, b, distributions=[object()] * 3, options={"inplace": False})
    inspect.signature(nf.FFT).bind(x, options={"inplace": True})
    inspect.signature(la.Matmul).bind(a, b)
    for kind in ("C2C", "R2C"):
        dfft.FFTOptions(fft_type=kind)
    dla.MatmulOptions(inplace=False)
    nf.FFTOptions(inplace=True)
    nf.FFTOptions(fft_type="R2C")
