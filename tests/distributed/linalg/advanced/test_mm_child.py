"""The GPU tests' child runner (gpu_child.py) on the CPU: a hung child fails the test with its stack
and the output printed before the hang, within the timeout; a failing child's diagnostic lines come
first; ``SKIP:`` skips; a good child's stdout is returned."""

from __future__ import annotations

import time

import mm_child as gpu_child
import pytest


def test_hung_child_fails_with_its_stack_and_partial_output():
    """The watchdog dumps the stack of a child stuck in a call and ends it; what it printed is kept."""
    start = time.monotonic()
    with pytest.raises(pytest.fail.Exception) as info:
        gpu_child.run("print('step 1 done')\nimport time\ntime.sleep(60)\n", timeout=20, watchdog=2)
    message = str(info.value)
    assert time.monotonic() - start < 15
    assert "step 1 done" in message and "Timeout (0:00:02)!" in message
    assert 'File "<string>", line 5 in <module>' in message  # the sleep (after the watchdog's 2 lines)


def test_child_past_the_timeout_is_killed_with_partial_output():
    """Without a working watchdog (a longer one) the parent kills the child at its timeout and still
    shows what the child printed."""
    with pytest.raises(pytest.fail.Exception, match=r"(?s)killed after the 2 s timeout.*step 1 done"):
        gpu_child.run("print('step 1 done')\nimport time\ntime.sleep(60)\n", timeout=2, watchdog=30)


def test_failing_child_shows_diagnostic_lines_first():
    with pytest.raises(pytest.fail.Exception) as info:
        gpu_child.run(
            "print('x' * 9000)\nprint('Invalid value: nbA must be equal to mbB')\nraise SystemExit(3)\n"
        )
    message = str(info.value)
    assert message.startswith("child exit status 3\n--- diagnostic lines (1")
    assert message.index("nbA must be") < message.index("--- stdout")


def test_skip_and_success():
    assert gpu_child.run("import os\nprint('ok', os.environ['NCCL_NVLS_ENABLE'])\n") == "ok 0\n"
    with pytest.raises(pytest.skip.Exception, match="no wheels"):
        gpu_child.run("print('SKIP: no wheels')\n")
