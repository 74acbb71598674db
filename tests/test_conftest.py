"""The test suite's own summary: skipped tests are tallied by reason (tests/conftest.py)."""

from __future__ import annotations

from pathlib import Path

pytest_plugins = ["pytester"]

CONFTEST = Path(__file__).resolve().parent / "conftest.py"

INNER = '''
import pytest

@pytest.mark.parametrize("i", range(5))
def test_needs_gpu(i):
    pytest.skip("needs a GPU: none here")

def test_other():
    pytest.skip("torch is not installed")

def test_passes():
    pass
'''


def test_skips_are_tallied_by_reason_without_one_line_per_test(pytester):
    """Five skips of one reason and one of another make two tally lines, most frequent first."""
    pytester.makeconftest(CONFTEST.read_text())
    pytester.makepyfile(test_inner=INNER)
    result = pytester.runpytest("-q", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, skipped=6)
    result.stdout.fnmatch_lines(["*6 skipped, by reason*", "    5  needs a GPU: none here", "    1  torch is not installed"])
    assert "SKIPPED [" not in result.stdout.str()


def test_rs_still_lists_each_skipped_test(pytester):
    """With ``-rs`` pytest's own per-test list is shown and the tally is left out."""
    pytester.makeconftest(CONFTEST.read_text())
    pytester.makepyfile(test_inner=INNER)
    result = pytester.runpytest("-q", "-rs", "-p", "no:cacheprovider")
    assert "SKIPPED [" in result.stdout.str() and "by reason" not in result.stdout.str()
