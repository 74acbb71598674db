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
    """FFT C2C fp32 at 512^3/1024^3/2048^3 and 512^3 per GPU, R2C; GEMM bf16/fp32 8k-32k and the
    tensor-parallel shapes; every case is a collective with nvmath, torch and nvmath-python rows."""
    cases = {c.name: c for c in registry.load_suite("distributed")}
    assert {"fft-c2c-fp32-512", "fft-c2c-fp32-1024", "fft-c2c-fp32-2048", "fft-c2c-fp32-weak-512",
            "fft-r2c-fp32-512", "tp-colwise-8192x28672x8192", "tp-rowwise-8192x8192x28672"} <= set(cases)  # fmt: skip
    assert {f"gemm-{d}-{n}" for d in ("bf16", "fp32") for n in (8192, 16384, 32768)} <= set(cases)
    for case in cases.values():
        assert case.tags == ("collective",) and set(case.setups) == {"nvmath", "torch", "nvmath-python"}
    assert cases["gemm-bf16-8192"].flops == 2 * 8192**3
    assert cases["tp-rowwise-8192x8192x28672"].flops == 2 * 8192 * 8192 * 28672


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
    monkeypatch.setattr(cli, "_run", lambda args, cases: ([], ctx, {}))
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
