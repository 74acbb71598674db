"""Every ``.. code-block:: python`` of the Sphinx pages runs as written.

Each block is preceded by an rST comment naming what it needs, ``.. docs-test: cpu`` (numpy / scipy
on the CPU), ``.. docs-test: cpu-torch`` (torch CPU tensors too), ``.. docs-test: gpu`` (a GPU and
torch) or ``.. docs-test: gpu-numba`` (and numba-cuda able to compile an FFT callback there: an
installed numba-cuda that cannot -- numba-cuda 0.30 against numpy 2.5, say -- skips with its error,
as the FFT callback tests do); the GPU ones are marked ``gpu``, so it runs on the GPU machine and skips
elsewhere with the reason). Each block
runs by itself -- no names carried over from an earlier block -- as a script in a fresh interpreter,
from an empty folder, with the checkout on ``PYTHONPATH``, and must exit 0. The blocks' own asserts
check their results.
"""

from __future__ import annotations

import ast
import functools
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from nvmath._diagnostics import requirements

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
KINDS = {
    "cpu": ("scipy",),
    "cpu-torch": ("scipy", "torch"),
    "gpu": ("gpu", "torch"),
    "gpu-numba": ("gpu", "torch", "numba"),  # FFT callbacks compile with numba-cuda
}
# Programs of several processes (``torchrun`` / ``mpirun``, nvmath.distributed): they cannot run as one
# script here; each page's own test checks what it shows (tests/distributed/...), the multi-process lane
# runs them.
MULTI_PROCESS = "multi-process"
_BLOCK = re.compile(
    r"(?:^ *\.\. docs-test: (?P<kind>[\w-]+)\n\n)?"
    r"^(?P<indent> *)\.\. code-block:: python\n(?: +:[^\n]*\n)*\n(?P<body>(?:(?:(?P=indent) +[^\n]*)?\n)+)",
    re.M,
)


def python_blocks(text: str) -> list[tuple[str | None, int, str]]:
    """``(kind or None, line, dedented code)`` of each ``.. code-block:: python`` directive of ``text``."""
    return [
        (m["kind"], text.count("\n", 0, m.start("body")) + 1, textwrap.dedent(m["body"]))
        for m in _BLOCK.finditer(text)
    ]


def test_block_parser_reads_marks_and_indented_directives():
    """The parser takes the mark, the indented body after the blank line, and stops at the dedent."""
    text = "x\n\n   .. code-block:: python\n\n      a = 1\n\n      b = 2\n   after\n"
    assert python_blocks(text) == [(None, 5, "a = 1\n\nb = 2\n")]
    marked = ".. docs-test: gpu\n\n.. code-block:: python\n\n   y = 1\n"
    assert python_blocks(marked) == [("gpu", 5, "y = 1\n")]


PAGES = sorted(DOCS.glob("*.rst")) + sorted((DOCS / "api").glob("*.rst"))
BLOCKS = [(page, *block) for page in PAGES for block in python_blocks(page.read_text())]


def test_the_pages_show_python():
    """The parser finds the pages' examples (a guard against a regex that matches nothing)."""
    assert len(BLOCKS) >= 15


def test_every_block_is_marked():
    """No block goes unrun: each says ``cpu``, ``cpu-torch``, ``gpu`` or ``multi-process``, and the quick start
    starts on the CPU."""
    unmarked = [f"{p.name}:{line}" for p, kind, line, _ in BLOCKS if kind not in KINDS and kind != MULTI_PROCESS]
    assert not unmarked, f"blocks without '.. docs-test: cpu|cpu-torch|gpu|multi-process': {unmarked}"
    quick = [kind for p, kind, _, _ in BLOCKS if p.name == "quickstart.rst"]
    assert quick[0].startswith("cpu") and "gpu" in quick


def test_no_page_sends_users_to_private_modules():
    """The user pages name no private module (``nvmath._x``) except the contributors' architecture page
    and the internals API page."""
    private = re.compile(r"nvmath(?:\.\w+)*\._[a-z]\w*")
    allowed = {"architecture.rst", "internals.rst"}
    found = [
        f"{p.relative_to(DOCS)}:{text.count(chr(10), 0, m.start()) + 1}: {m[0]}"
        for p in PAGES
        if p.name not in allowed
        for text in [p.read_text()]
        for m in private.finditer(text)
    ]
    assert not found, "pages point users at private modules:\n" + "\n".join(found)


def _params() -> list:
    return [
        pytest.param(
            kind, code, id=f"{page.stem}-line{line}", marks=[pytest.mark.gpu] if kind.startswith("gpu") else []
        )
        for page, kind, line, code in BLOCKS
        if kind in KINDS
    ]


@functools.cache
def numba_cannot_compile() -> str | None:
    """Why numba-cuda cannot compile an FFT callback in this environment (the ``RuntimeError`` of
    :func:`nvmath.fft.compile_epilog`), or None when it can."""
    import nvmath.fft as nf

    def copy(data_out, offset, value, user_info, unused):
        data_out[offset] = value

    try:
        nf.compile_epilog(copy, "complex64", "float32")
    except RuntimeError as exc:
        return str(exc)
    return None


@pytest.mark.parametrize(("kind", "code"), _params())
def test_docs_block_runs(kind, code, tmp_path, request):
    """The block parses and runs to completion in a fresh interpreter."""
    ast.parse(code)
    missing = requirements.unmet(KINDS[kind])
    if missing:
        pytest.skip(f"this docs block {missing}")
    if kind == "gpu-numba" and (reason := numba_cannot_compile()):
        pytest.skip(f"numba cannot compile FFT callbacks here: {reason}")
    script = tmp_path / "block.py"
    script.write_text(code)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    proc = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600, check=False
    )
    assert proc.returncode == 0, f"{request.node.callspec.id} failed:\n{proc.stdout[-2000:]}{proc.stderr[-4000:]}"


def test_numba_probe_reports_why_it_cannot_compile(monkeypatch):
    """A numba that cannot compile FFT callbacks (compile_epilog's RuntimeError) gives its reason, which
    the gpu-numba blocks skip with; one that can gives None."""
    import nvmath.fft as nf

    def refuse(*args, **kwargs):
        raise RuntimeError("numba 0.68.0 could not compile the epilog")

    numba_cannot_compile.cache_clear()
    monkeypatch.setattr(nf, "compile_epilog", refuse)
    assert numba_cannot_compile() == "numba 0.68.0 could not compile the epilog"
    numba_cannot_compile.cache_clear()
    monkeypatch.setattr(nf, "compile_epilog", lambda *args, **kwargs: b"lto")
    assert numba_cannot_compile() is None
    numba_cannot_compile.cache_clear()
