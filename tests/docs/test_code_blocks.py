"""Every ``.. code-block:: python`` of the Sphinx pages is valid Python (they show GPU code, so they
are parsed here, not run; the README's tour is run, see ``test_readme.py``)."""

from __future__ import annotations

import ast
import re
import textwrap
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[2] / "docs"
_BLOCK = re.compile(r"^(?P<indent> *)\.\. code-block:: python\n(?: +:[^\n]*\n)*\n(?P<body>(?:(?:\1 +[^\n]*)?\n)+)", re.M)


def python_blocks(text: str) -> list[tuple[int, str]]:
    """``(line, dedented code)`` of each ``.. code-block:: python`` directive of ``text``."""
    return [
        (text.count("\n", 0, m.start("body")) + 1, textwrap.dedent(m["body"])) for m in _BLOCK.finditer(text)
    ]


def test_block_parser_reads_an_indented_directive():
    """The parser takes the indented body after the blank line and stops at the dedent."""
    text = "x\n\n   .. code-block:: python\n\n      a = 1\n\n      b = 2\n   after\n"
    assert python_blocks(text) == [(5, "a = 1\n\nb = 2\n")]


PAGES = sorted(DOCS.glob("*.rst"))


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_python_blocks_parse(page):
    """Each Python code block of the page parses (a typo in a shown example fails here)."""
    for line, code in python_blocks(page.read_text()):
        try:
            ast.parse(code)
        except SyntaxError as exc:
            pytest.fail(f"{page.name}:{line + (exc.lineno or 1) - 1}: {exc.msg}\n{code}")


def test_the_pages_show_python():
    """The parser finds the pages' examples (a guard against a regex that matches nothing)."""
    assert sum(len(python_blocks(p.read_text())) for p in PAGES) >= 10
