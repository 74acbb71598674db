"""The README's Python blocks run as written (the CPU tour in every run, the GPU tour on a GPU).

Each ```python block of README.md is preceded by ``<!-- readme-test: cpu -->``,
``<!-- readme-test: cpu-torch -->`` (torch CPU tensors) or ``<!-- readme-test: gpu -->``; each runs as a script in a fresh interpreter, from an empty
folder, with the checkout on ``PYTHONPATH``, and must exit 0.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from nvmath._diagnostics import requirements

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
KINDS = {"cpu": ("scipy",), "cpu-torch": ("scipy", "torch"), "gpu": ("gpu", "torch")}  # what each kind needs
_BLOCK = re.compile(r"(?:<!-- readme-test: (?P<kind>[\w-]+) -->\n)?```python\n(?P<code>.*?)^```", re.S | re.M)


def readme_blocks(text: str) -> list[tuple[str | None, str, int]]:
    """``(kind or None, code, line number)`` of every ```python block of ``text``."""
    return [
        (m["kind"], m["code"], text.count("\n", 0, m.start("code")) + 1) for m in _BLOCK.finditer(text)
    ]


BLOCKS = readme_blocks(README.read_text())


def test_the_block_parser_finds_marks_and_lines():
    """The parser returns each block's mark, code and first line, and None for an unmarked block."""
    text = "intro\n<!-- readme-test: cpu -->\n```python\nx = 1\n```\n\n```python\ny = 2\n```\n```bash\nls\n```\n"
    assert readme_blocks(text) == [("cpu", "x = 1\n", 4), (None, "y = 2\n", 8)]


def test_every_python_block_is_marked_cpu_or_gpu():
    """No README block goes untested: each is marked ``cpu``, ``cpu-torch`` or ``gpu``; CPU and GPU ones exist."""
    kinds = [kind for kind, _, _ in BLOCKS]
    unmarked = [line for kind, _, line in BLOCKS if kind not in KINDS]
    assert not unmarked, f"README.md blocks at lines {unmarked} need <!-- readme-test: cpu|cpu-torch|gpu -->"
    assert {"cpu", "gpu"} <= set(kinds)


def _params() -> list:
    return [
        pytest.param(kind, code, line, id=f"{kind}-line{line}", marks=[pytest.mark.gpu] if kind == "gpu" else [])
        for kind, code, line in BLOCKS
        if kind in KINDS
    ]


@pytest.mark.parametrize(("kind", "code", "line"), _params())
def test_readme_block_runs(kind, code, line, tmp_path):
    """The block runs to completion in a fresh interpreter (its own asserts check the results)."""
    missing = requirements.unmet(KINDS[kind])
    if missing:
        pytest.skip(f"README.md line {line} {missing}")
    script = tmp_path / f"readme_line{line}.py"
    script.write_text(code)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    proc = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600, check=False
    )
    assert proc.returncode == 0, f"README.md block at line {line} failed:\n{proc.stdout[-2000:]}{proc.stderr[-4000:]}"
