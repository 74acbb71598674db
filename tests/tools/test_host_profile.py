"""tools/host_profile.py: the step of each profiled function, the table and JSON, the file trace, and
one fake-GPU row end to end (CPU only; the GPU rows run on the GPU machine)."""

from __future__ import annotations

import importlib.util
import json
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]

_NO_GPU_ONLY = pytest.mark.skipif(
    importlib.util.find_spec("torch") is not None and __import__("torch").cuda.is_available(),
    reason="checks the behaviour without a GPU; this machine has one",
)


@pytest.fixture(scope="module")
def hp():
    spec = importlib.util.spec_from_file_location("host_profile", ROOT / "tools" / "host_profile.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    ("filename", "name", "step"),
    [
        ("/r/nvmath/bindings/_unchecked/cublasLt.py", "matmul", "library call"),
        ("/r/nvmath/linalg/advanced/_launch.py", "call", "library call"),
        ("/r/nvmath/linalg/advanced/_launch.py", "_run", "nvmath (rest)"),
        ("~", "<method 'run' of 'nvmath._fastcall.FFTHit' objects>", "library call"),
        ("/r/nvmath/_internal/streams.py", "record_done", "done-event rule"),
        ("/r/nvmath/_internal/streams.py", "resolve", "stream resolution"),
        ("/r/nvmath/_internal/devices.py", "__enter__", "context"),
        ("~", "<built-in method torch.empty_strided>", "output allocation"),
        ("/r/nvmath/_internal/plan_cache.py", "get", "plan-cache lookup"),
        ("/r/nvmath/_internal/tensors/dispatch.py", "wrap", "operand wrapping"),
        ("<guard of Matmul.execute>", "_nvm_guarded", "argument checks"),
        ("/usr/lib/python3/site-packages/torch/autograd/__init__.py", "backward", "torch"),
        ("~", "<method 'get' of 'dict' objects>", "other"),
    ],
)
def test_classify_puts_each_function_in_its_step(hp, filename, name, step):
    """Functions are attributed to the step of their module (and name, where the module has several)."""
    assert hp.classify(filename, name) == step


def test_render_lists_every_step_that_has_time(hp):
    """The table has a header with the steps that occur and one line per row with the total first."""
    rows = [
        {"row": "a", "us": 3.0, "steps": {"library call": 1.0, "context": 2.0}},
        {"row": "bb", "us": 1.5, "steps": {"library call": 1.5}},
    ]
    lines = hp.render(rows).splitlines()
    assert len(lines) == 3 and "us/call" in lines[0] and "context" in lines[0] and "torch" not in lines[0]
    assert lines[1].split()[:2] == ["a", "3.00"] and lines[2].split()[:2] == ["bb", "1.50"]


def test_files_touched_lists_package_files_only(hp):
    """The trace names the package files one call runs (relative, sorted), nothing outside nvmath."""
    from nvmath._internal import streams

    files = hp.files_touched(lambda: streams.current_getter("numpy"))
    assert files == ["nvmath/_internal/streams.py"]


def test_fake_row_end_to_end(hp, capsys):
    """--fake --json on the rows of one name (allocating and in place): each a positive time split into
    steps that add up to it, and its files: on the compiled path the allocating call runs only the
    planner's frame (its compiled hit makes the launch), otherwise the launch module too."""
    pytest.importorskip("torch")
    from nvmath._internal import fastpath

    hp.main(["--fake", "--json", "--rows", "Matmul.execute", "--calls", "20"])
    out = json.loads(capsys.readouterr().out)
    names = [r["row"] for r in out["rows"]]
    assert out["meta"]["fake"] is True and names == ["Matmul.execute", "Matmul.execute inplace"]
    for row in out["rows"]:
        assert row["us"] > 0 and sum(row["steps"].values()) == pytest.approx(row["us"], rel=0.05)
        one_call = fastpath.available() and row["row"] == "Matmul.execute"
        assert "nvmath/linalg/advanced/_planner.py" in row["files"]
        assert ("nvmath/linalg/advanced/_launch.py" in row["files"]) is not one_call
        if one_call:
            assert row["steps"].get("library call", 0) > 0  # (MatmulExecuteHit.run, seen by the profiler)


def test_fake_create_plan_free_row(hp, capsys):
    """--fake on the create+plan+free row: a positive time, through the planner, its plan and the
    recycled descriptors."""
    pytest.importorskip("torch")
    hp.main(["--fake", "--json", "--rows", "create+plan+free", "--calls", "20"])
    out = json.loads(capsys.readouterr().out)
    assert [r["row"] for r in out["rows"]] == ["Matmul create+plan+free"]
    row = out["rows"][0]
    assert row["us"] > 0
    assert {"nvmath/linalg/advanced/_planner.py", "nvmath/linalg/advanced/_descriptors.py"} <= set(row["files"])


def test_fake_backward_row_runs_the_nvmath_backward(hp, capsys):
    """--fake on the retained-graph backward row: nvmath's backward files, and no torch-compute row."""
    pytest.importorskip("torch")
    hp.main(["--fake", "--json", "--rows", "bwd (retained graph)", "--calls", "20"])
    out = json.loads(capsys.readouterr().out)
    assert [r["row"] for r in out["rows"]] == ["nvmath.torch.linear bwd (retained graph)"]
    assert {"nvmath/torch/_functions.py", "nvmath/torch/_kernels.py"} <= set(out["rows"][0]["files"])


def test_python_function_baseline_matches_torch_gradients(hp):
    """The Python-Function baseline row computes F.linear and its input and weight gradients."""
    torch = pytest.importorskip("torch")
    x = torch.randn(5, 4, dtype=torch.float64, requires_grad=True)
    w = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    b, g = torch.randn(3, dtype=torch.float64), torch.randn(5, 3, dtype=torch.float64)
    y = hp._python_function_linear()(x, w, b)
    y.backward(g)
    xr, wr = x.detach().clone().requires_grad_(), w.detach().clone().requires_grad_()
    yr = torch.nn.functional.linear(xr, wr, b)
    yr.backward(g)
    torch.testing.assert_close(y, yr)
    torch.testing.assert_close(x.grad, xr.grad)
    torch.testing.assert_close(w.grad, wr.grad)


@_NO_GPU_ONLY
def test_bench_rows_without_a_gpu_say_why_none_runs(hp):
    """--bench SUITE:CASES sets up the harness's own host rows; without a GPU every setup skips, and the
    tool exits naming the cases and the reason (an unknown case says so too)."""
    closers = []
    with pytest.raises(SystemExit, match="host-64-stateless"):
        hp.bench_rows("matmul:host-64-*", closers)
    for close in closers:
        close()
    with pytest.raises(SystemExit, match="no such case"):
        hp.bench_rows("matmul:no-such-case", [])


def test_stream_option_parses_and_default_keeps_the_current_stream(hp):
    """--stream takes default / pooled / external (anything else is refused by argparse); ``default``
    changes nothing (the rows keep torch's legacy default stream)."""
    assert hp.use_stream("default") is None
    with pytest.raises(SystemExit):
        hp.main(["--stream", "sideways"])


def test_render_shows_the_gpu_time_when_measured(hp):
    """With a GPU time per call in some row the table gets a ``GPU us`` column after the host time ('-'
    where a row has none); without any, no such column."""
    rows = [
        {"row": "a", "us": 3.0, "gpu_us": 4.5, "steps": {"library call": 1.0}},
        {"row": "b", "us": 2.0, "steps": {"library call": 2.0}},
    ]
    lines = hp.render(rows).splitlines()
    assert "GPU us" in lines[0]
    assert lines[1].split()[:3] == ["a", "3.00", "4.50"] and lines[2].split()[:3] == ["b", "2.00", "-"]
    assert "GPU us" not in hp.render(rows[1:]).splitlines()[0]


@_NO_GPU_ONLY
def test_gpu_time_is_none_without_cuda(hp):
    """Without torch's CUDA (this machine, the fake rows) there is no GPU time to measure: None, and the
    call is not run."""
    calls = []
    assert hp.gpu_per_call(lambda: calls.append(1)) is None and calls == []


def test_fake_generic_hit_row_runs_the_gpu_route(hp, capsys):
    """--fake on the generic matmul hit: the GPU route of the generic matmul, served by the compiled hit
    on the compiled path (Python code only in the public entry, ``_internal/compiled_hits.py``), else by
    the plan cache's last call (the torch GEMM entry and its cuBLAS launch)."""
    pytest.importorskip("torch")
    from nvmath._internal import compiled_hits

    hp.main(["--fake", "--json", "--rows", "generic matmul (hit)", "--calls", "20"])
    out = json.loads(capsys.readouterr().out)
    assert [r["row"] for r in out["rows"]] == ["generic matmul (hit)"]
    row = out["rows"][0]
    assert row["us"] > 0
    if compiled_hits.ENABLED:
        assert set(row["files"]) == {"nvmath/_internal/compiled_hits.py"}
    else:
        assert {"nvmath/linalg/generic/_fast.py", "nvmath/linalg/generic/_stateless.py"} <= set(row["files"])
    assert "nvmath/_internal/plan_cache.py" not in row["files"]  # (the last call: no cache lookup)


def test_rows_option_takes_several_substrings(hp, capsys):
    """--rows a,b selects every row whose name contains a or b (here the FFT rows of the fake)."""
    pytest.importorskip("torch")
    hp.main(["--fake", "--json", "--rows", "FFT.execute,fft.fft", "--calls", "20"])
    out = json.loads(capsys.readouterr().out)
    assert [r["row"] for r in out["rows"]] == ["FFT.execute", "fft.fft (hit)"]


def test_rows_option_selects_a_row_exactly_with_equals(hp):
    """--rows =NAME selects that row only (not the rows whose names merely contain it); plain items are
    substrings."""
    names = ["F.linear", "F.linear fwd+bwd", "F.linear loop fwd+bwd (8 groups)", "torch.matmul"]
    pick = [n for n in names if any(hp._row_matches(n, p) for p in "=F.linear,torch".split(","))]
    assert pick == ["F.linear", "torch.matmul"]
    assert [n for n in names if hp._row_matches(n, "fwd+bwd")] == names[1:3]


def test_interleave_times_the_selected_rows_in_turn(hp, capsys, monkeypatch):
    """--interleave: every selected row is timed in each round, the rows taking turns (one loop each per
    round), and the table reports each row's best round; the split and files are still there."""
    pytest.importorskip("torch")
    order = []
    real = hp.measure_interleaved

    def spy(fns, sync, calls, rounds=5):
        wrapped = {k: (lambda k=k, f=f: (order.append(k), f())[1]) for k, f in fns.items()}
        return real(wrapped, sync, calls, rounds)

    monkeypatch.setattr(hp, "measure_interleaved", spy)
    hp.main(["--fake", "--json", "--interleave", "--rows", "FFT.execute,fft.fft", "--calls", "3"])
    out = json.loads(capsys.readouterr().out)
    assert out["meta"]["interleave"] is True
    assert [r["row"] for r in out["rows"]] == ["FFT.execute", "fft.fft (hit)"]
    assert all(r["us"] > 0 and r["steps"] and r["files"] for r in out["rows"])
    names = ["FFT.execute", "fft.fft (hit)"]
    assert order == [n for _ in range(7) for n in names for _ in range(3)]
