"""The measure of issue #16: every in-scope public name of nvmath-python 1.0 is call-compatible here.

Runs ``tools/compat_surface.py`` against the nvmath-python 1.0 wheel (skipped when the wheel is not
on this machine) and checks its checker on small hand-made signatures.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

_TOOL = Path(__file__).resolve().parents[2] / "tools" / "compat_surface.py"


@pytest.fixture(scope="module")
def surface():
    spec = importlib.util.spec_from_file_location("compat_surface", _TOOL)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop(spec.name, None)


def test_in_scope_surface_is_fully_compatible(surface, capsys):
    """advanced matmul, helpers, FFT and the root enums: 100% of constructors, methods and members."""
    if not surface.DEFAULT_WHEEL.exists():
        pytest.skip(f"needs the nvmath-python 1.0 wheel in .whl/ or ${surface.WHEEL_ENV}: {surface.WHEEL_HINT}")
    status = surface.main([])
    out = capsys.readouterr().out
    assert status == 0, out
    assert "100.0%" in out.splitlines()[-1] or "in scope" in out


def P(surface, name, kind, default=False):
    return surface.Param(name, kind, default)


def test_checker_accepts_extra_optional_and_rejects_renamed_positional(surface):
    """Extra optional parameters are fine; a renamed positional-or-keyword parameter is not."""
    theirs = [P(surface, "a", "pos"), P(surface, "b", "pok", True), P(surface, "c", "kw", True)]
    ours = [P(surface, "a", "pos"), P(surface, "b", "pok", True), P(surface, "c", "kw", True),
            P(surface, "d", "kw", True)]  # fmt: skip
    assert surface.compatible(theirs, ours) == ""
    renamed = [P(surface, "a", "pos"), P(surface, "x", "pok", True), P(surface, "c", "kw", True)]
    assert "'b'" in surface.compatible(theirs, renamed)


def test_checker_rejects_keyword_only_where_positional_allowed(surface):
    """A parameter nvmath-python takes positionally must not be keyword-only here."""
    theirs = [P(surface, "a", "pok"), P(surface, "options", "pok", True)]
    ours = [P(surface, "a", "pok"), P(surface, "options", "kw", True)]
    assert surface.compatible(theirs, ours)


def test_checker_rejects_required_where_optional(surface):
    """A parameter callers may omit there must be optional here."""
    theirs = [P(surface, "ltoir", "pok", True)]
    ours = [P(surface, "ltoir", "pok", False)]
    assert "optional" in surface.compatible(theirs, ours)


def test_behaviour_section_is_fully_compatible(surface):
    """Every behaviour probe (CPU calls as nvmath-python users write them) behaves as nvmath-python."""
    items = surface.behaviour_items()
    assert len(items) >= 15
    bad = [f"{it.what}: {it.why}" for it in items if not it.ok]
    assert not bad, bad
