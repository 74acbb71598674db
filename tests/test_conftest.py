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


def test_importorskip_reasons_name_the_install(pytester):
    """A skip from pytest.importorskip ends with how to install the module (the extra for optional ones)."""
    pytester.makeconftest(CONFTEST.read_text())
    pytester.makepyfile(
        test_inner="""
import pytest

def test_a():
    pytest.importorskip("scipy_not_here_xyz")

def test_b():
    pytest.importorskip("numba_missing_mod")
"""
    )
    result = pytester.runpytest("-q", "-p", "no:cacheprovider", "-rs")
    result.assert_outcomes(skipped=2)
    result.stdout.fnmatch_lines(["*could not import 'scipy_not_here_xyz'*(pip install scipy_not_here_xyz)*"])


def test_importorskip_hint_for_known_modules():
    """Optional packages name their nvmath-kit extra; dependencies say pip install -e ."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("suite_conftest", CONFTEST)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert "'torch' extra" in mod.importorskip_hint("could not import 'torch': No module named 'torch'")
    assert "pip install -e ." in mod.importorskip_hint("could not import 'cuda.core': x")
    assert mod.importorskip_hint("torch is not installed") == "torch is not installed"


def test_skip_messages_in_the_suite_say_how_to_install():
    """Every literal ``pytest.skip`` message of the suite that says something "is not installed" also says
    how to install it (``pip install ...``)."""
    import ast

    bad = []
    for path in Path(__file__).resolve().parent.rglob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "skip" and node.args):
                continue
            text = "".join(
                part.value for part in ast.walk(node.args[0]) if isinstance(part, ast.Constant) and isinstance(part.value, str)
            )
            if "not installed" in text and "pip install" not in text and path.name != "test_conftest.py":
                bad.append(f"{path.name}:{node.lineno}: {text}")
    assert not bad, "skip reasons without an install hint:\n" + "\n".join(bad)
