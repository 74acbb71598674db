"""The GPU lane's child-process harness (``gpu_child.py``) on the CPU: a child's stdout comes back;
``SKIP:`` skips; a hang is cut by the child's own watchdog (every thread's stack printed) or, when
that cannot fire, by the parent's kill, and fails with the last progress marker and the partial
output; after ``MAX_HANGS`` hangs later children are skipped; a hung rank fails its group."""

from __future__ import annotations

import gpu_child
import pytest


@pytest.fixture(autouse=True)
def fresh_hangs(monkeypatch):
    monkeypatch.setattr(gpu_child, "HANGS", [])
    monkeypatch.setattr(gpu_child, "MAX_HANGS", 2)


def test_finished_child_returns_its_stdout():
    out = gpu_child.run_child('STEP("one")\nprint("result", 6 * 7)', timeout=30)
    assert "STEP one" in out and "result 42" in out and not gpu_child.HANGS


def test_skip_marker_skips():
    with pytest.raises(pytest.skip.Exception, match="no wheels here"):
        gpu_child.run_child('print("SKIP: no wheels here")\nraise SystemExit(0)', timeout=30)


def test_failure_shows_the_last_marker_and_both_streams():
    with pytest.raises(pytest.fail.Exception) as info:
        code = 'STEP("plan")\nprint("partial out")\nraise ValueError("boom")'
        gpu_child.run_child(code, name="t", timeout=30)
    text = str(info.value)
    assert "t: FAILED" in text and "last marker: STEP plan" in text and "partial out" in text
    assert "ValueError: boom" in text and not gpu_child.HANGS


def test_hang_is_cut_by_the_childs_watchdog_with_stacks():
    code = 'import time\nSTEP("exec")\ndef stuck_in_engine():\n    time.sleep(60)\nstuck_in_engine()'
    with pytest.raises(pytest.fail.Exception) as info:
        gpu_child.run_child(code, name="h", timeout=20)  # the watchdog fires at 5 s
    text = str(info.value)
    assert "HUNG: the child's watchdog fired" in text and "last marker: STEP exec" in text
    assert "stuck_in_engine" in text  # the stack at the hang
    assert [h.last_step.split(" (")[0] for h in gpu_child.HANGS] == ["STEP exec"]


def test_hang_without_watchdog_is_killed_and_later_children_skip():
    code = ('import time\n_fh.cancel_dump_traceback_later()\nSTEP("wait")\nprint("before", flush=True)\n'
            'time.sleep(60)')
    for _ in range(2):
        with pytest.raises(pytest.fail.Exception) as info:
            gpu_child.run_child(code, name="k", timeout=3)
        assert "HUNG: killed after 3 s" in str(info.value) and "before" in str(info.value)
    with pytest.raises(pytest.skip.Exception, match="2 earlier distributed GPU children hung.*first: k"):
        gpu_child.run_child('print("never")', timeout=30)


def test_one_hung_rank_fails_the_group_with_every_ranks_output():
    code = ('import os, time\n_fh.cancel_dump_traceback_later()\nSTEP("rank " + os.environ["RANK"])\n'
            'if os.environ["RANK"] == "1":\n    time.sleep(60)\nprint("done", os.environ["WORLD_SIZE"])')
    with pytest.raises(pytest.fail.Exception) as info:
        gpu_child.run_ranks(code, 2, name="g", timeout=4)
    text = str(info.value)
    assert "g [rank 1]: HUNG" in text and "STEP rank 1" in text and "g [rank 0]" not in text
    assert len(gpu_child.HANGS) == 1 and gpu_child.HANGS[0].several
    with pytest.raises(pytest.skip.Exception, match="an earlier multi-process check hung: g"):
        gpu_child.run_ranks('print("never")', 2, timeout=30)
    assert gpu_child.run_child('print("one process still runs")', timeout=30) == "one process still runs\n"


def test_ranks_see_their_rank_and_world_size():
    code = 'import os\ne = os.environ\nprint("r", e["RANK"], e["WORLD_SIZE"], bool(e["MASTER_PORT"]))'
    assert gpu_child.run_ranks(code, 3, timeout=30) == [f"r {r} 3 True\n" for r in range(3)]


def _gpu_modules():
    import importlib
    import sys
    from pathlib import Path

    here = Path(__file__).resolve().parent
    for folder in (here / "fft", here / "distribution"):
        if str(folder) not in sys.path:
            sys.path.insert(0, str(folder))
    names = ("test_gpu_fft", "test_gpu_box_fft", "test_gpu_redistribute", "test_gpu_runtime")
    return [importlib.import_module(m) for m in names]


def test_every_gpu_child_program_compiles(monkeypatch):
    """Every child program of the distributed FFT / Redistribute GPU modules (each parametrization,
    the canary, the multi-rank ones), with the harness in front, is valid Python that uses STEP/WAIT
    markers: the one GPU run cannot be lost to a typo."""
    import inspect

    programs = []

    def capture(code, *args, **kwargs):
        programs.append(gpu_child.program(code, 90))
        compile(programs[-1], "<child>", "exec")
        return "ok"

    monkeypatch.setattr(gpu_child, "run_child", capture)
    monkeypatch.setattr(gpu_child, "run_ranks", lambda code, n=2, **k: [capture(code)] * n)
    gpu_child._canary.cache_clear()
    try:
        for module in _gpu_modules():
            for name, function in vars(module).items():
                if not (name.startswith("test_") and inspect.isfunction(function)):
                    continue
                marks = [m for m in getattr(function, "pytestmark", []) if m.name == "parametrize"]
                cases = [()]
                if marks:
                    names, values = marks[0].args
                    several = not isinstance(names, str) or "," in names
                    cases = [tuple(v) if several else (v,) for v in values]
                for case in cases:
                    function(*case)
    finally:
        gpu_child._canary.cache_clear()
    assert len(programs) >= 15
    assert all("STEP(" in p and "dump_traceback_later" in p for p in programs)
    bodies = [p.split('STEP(f"done {what}")', 1)[1] for p in programs]  # the code after the harness
    assert sum("WAIT(" in body for body in bodies) >= 10 and any("VERSIONS" in body for body in bodies)
