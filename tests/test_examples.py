"""Rules every script under examples/ follows (each folder's own test module runs its scripts).

* It states what it needs once, in code, before importing it: ``require("gpu", "torch")`` from
  :mod:`nvmath._diagnostics.requirements`; on a machine without a GPU a GPU example exits with
  status 77 ("skipped") and a message, never with a traceback.
* ``examples/README.md`` lists it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from example_runner import ROOT, SKIP_EXIT_CODE, require_calls, requires, run_script

EXAMPLES = sorted(p for p in ROOT.glob("examples/**/*.py") if not p.name.startswith("_"))
GPU_EXAMPLES = [p for p in EXAMPLES if "gpu" in requires(p)]
OPTIONAL = ("torch", "cupy", "numba")  # packages an example may import only after require()-ing them


def _rel(path: Path) -> str:
    return path.relative_to(ROOT / "examples").as_posix()


def _top_level_imports(path: Path) -> list[tuple[int, str]]:
    out = []
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name.split(".")[0]) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.append((node.lineno, node.module.split(".")[0]))
    return out


def test_there_are_gpu_and_cpu_examples():
    """The glob finds the examples, some of them for the GPU and some for the CPU."""
    assert len(GPU_EXAMPLES) >= 10 and len(EXAMPLES) - len(GPU_EXAMPLES) >= 8


@pytest.mark.parametrize("path", EXAMPLES, ids=_rel)
def test_example_requires_what_it_imports_before_importing_it(path):
    """An example importing torch, cupy or numba at top level require()s it first; a GPU example requires "gpu"."""
    calls = require_calls(path)
    first = min((line for line, _ in calls), default=None)
    required = set().union(*(needs for _, needs in calls))
    for line, module in _top_level_imports(path):
        if module in OPTIONAL:
            assert module in required and first < line, f"{_rel(path)}:{line} imports {module} without require()"
    if "gpu" in requires(path):
        assert "gpu" in required, f"{_rel(path)} needs a GPU: call require('gpu', ...) before its imports"


@pytest.mark.parametrize("path", GPU_EXAMPLES, ids=_rel)
def test_gpu_example_skips_cleanly_without_a_gpu(path):
    """With no visible GPU, a GPU example exits 77 and says why, before importing torch or cupy."""
    proc = run_script(path, CUDA_VISIBLE_DEVICES="")
    assert proc.returncode == SKIP_EXIT_CODE, proc.stdout[-1000:] + proc.stderr[-2000:]
    assert proc.stdout.strip() and "Traceback" not in proc.stderr, proc.stdout + proc.stderr[-2000:]


def test_examples_readme_lists_every_example():
    """examples/README.md names every example script by its path under examples/."""
    readme = (ROOT / "examples" / "README.md").read_text()
    missing = [_rel(p) for p in EXAMPLES if _rel(p) not in readme]
    assert not missing, f"examples/README.md does not list {missing}"
