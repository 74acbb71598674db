"""Test-suite wide markers and fixtures.

* ``@pytest.mark.gpu`` tests run only where an NVIDIA GPU and driver are present; elsewhere they
  are skipped with a visible reason: the summary ends with one line per skip reason and its count
  (``pytest -rs`` lists every skipped test).
* ``@pytest.mark.slow`` marks long sweeps; deselect them with ``-m "not slow"``.
"""

from __future__ import annotations

import collections
import functools
import importlib
import importlib.abc
import importlib.machinery
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

# Test modules are imported with ``--import-mode=importlib`` and the test folders are not
# packages, so shared helper modules living in this folder (``example_runner``) are made
# importable by putting the folder itself on ``sys.path`` (their asserts rewritten like a test's).
_TESTS_DIR = str(Path(__file__).resolve().parent)
if _TESTS_DIR not in sys.path:
    sys.path.insert(0, _TESTS_DIR)
pytest.register_assert_rewrite("example_runner")


class _NoTestFolderPackages(importlib.abc.MetaPathFinder):
    """Keep the test folders on ``sys.path`` from posing as packages of the same name.

    ``tests/torch`` (no ``__init__.py``) would otherwise be imported as a namespace package
    ``torch`` where torch is not installed: ``pytest.importorskip("torch")`` then "succeeds" and
    the tests fail with AttributeErrors instead of being skipped. A top-level import named like a
    test folder is resolved without this folder; nothing found is a ``ModuleNotFoundError``.
    """

    names = frozenset(p.name for p in Path(_TESTS_DIR).iterdir() if p.is_dir() and p.name.isidentifier())

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if path is not None or name not in self.names:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, [p for p in sys.path if p != _TESTS_DIR])
        if spec is None:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return spec


sys.meta_path.insert(0, _NoTestFolderPackages())


@functools.cache
def gpu_status() -> tuple[bool, str]:
    """Return (available, reason) without raising, probing the driver once per session."""
    if os.environ.get("NVMATH_TEST_NO_GPU"):
        return False, "NVMATH_TEST_NO_GPU is set"
    try:
        from cuda.bindings import driver
    except Exception as exc:  # pragma: no cover - cuda-bindings is a dependency
        return False, f"cuda-bindings not importable: {exc}"
    try:
        (err,) = driver.cuInit(0)
        if int(err) != 0:
            return False, f"no CUDA driver/GPU on this machine (cuInit: {err.name})"
        err, count = driver.cuDeviceGetCount()
        if int(err) != 0 or count == 0:
            return False, "no CUDA device found"
    except Exception as exc:
        return False, f"no CUDA driver on this machine ({type(exc).__name__})"
    return True, ""


def pytest_collection_modifyitems(config, items):
    available, reason = gpu_status()
    if available:
        return
    skip = pytest.mark.skip(reason=f"needs a GPU: {reason}")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


#: How to get a module a test imports with ``pytest.importorskip`` (top-level import name -> hint);
#: the optional packages of nvmath-kit name their extra (``nvmath._diagnostics.requirements``).
_INSTALL_HINTS = {
    "cuda": "pip install -e . (cuda-core and cuda-bindings are dependencies of nvmath-kit)",
    "nvidia": "pip install -e . (the NVIDIA library wheels are dependencies of nvmath-kit)",
    "rich": "pip install -e '.[bench]'",
    "matplotlib": "pip install -e '.[bench]'",
}


def importorskip_hint(message: str) -> str:
    """``pytest.importorskip``'s "could not import 'x.y': ..." with how to install ``x`` appended."""
    if not message.startswith("could not import '") or "pip install" in message:
        return message
    top = message.split("'", 2)[1].split(".")[0]
    hint = _INSTALL_HINTS.get(top)
    if hint is None:
        from nvmath._diagnostics.requirements import install_hint

        hint = install_hint(top)
    return f"{message} ({hint})"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Skips of ``pytest.importorskip`` say how to install what is missing (a reason a user can act on)."""
    outcome = yield
    report = outcome.get_result()
    if report.skipped and isinstance(report.longrepr, tuple) and len(report.longrepr) == 3:
        path, line, text = report.longrepr
        prefix = "Skipped: " if text.startswith("Skipped: ") else ""
        report.longrepr = (path, line, prefix + importorskip_hint(text.removeprefix("Skipped: ")))


def _skip_reason(report) -> str:
    reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
    return reason.removeprefix("Skipped: ")


def skip_tally(reports) -> list[tuple[int, str]]:
    """``(count, reason)`` per distinct skip reason, the most frequent first."""
    counts = collections.Counter(_skip_reason(r) for r in reports)
    return sorted(((n, reason) for reason, n in counts.items()), key=lambda item: (-item[0], item[1]))


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """One line per skip reason with its count, instead of one line per skipped test."""
    tally = skip_tally(terminalreporter.stats.get("skipped", []))
    if not tally or "s" in (config.getoption("reportchars", "") or ""):
        return
    total = sum(n for n, _ in tally)
    terminalreporter.section(f"{total} skipped, by reason (pytest -rs lists each test)", sep="-")
    width = 110
    for n, reason in tally:
        line = " ".join(reason.split())
        terminalreporter.write_line(f"{n:5d}  {line if len(line) <= width else line[: width - 3] + '...'}")


def _optional(module: str):
    try:
        return importlib.import_module(module)
    except Exception:
        return None


@pytest.fixture
def rng() -> np.random.Generator:
    """A seeded random generator; tests draw fresh, never-zero data from it."""
    return np.random.default_rng(12345)


@pytest.fixture
def torch():
    """The torch module, or skip when torch is not installed."""
    mod = _optional("torch")
    if mod is None:
        pytest.skip("torch is not installed (pip install -e '.[torch]'; a CPU build: docs/install.rst)")
    return mod


@pytest.fixture
def torch_cuda(torch):
    """The torch module with CUDA available, or skip."""
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA device here")
    return torch


@pytest.fixture
def cupy():
    """The cupy module with a usable device, or skip."""
    mod = _optional("cupy")
    if mod is None:
        pytest.skip("cupy is not installed (pip install -e '.[cupy]', on a machine with a GPU)")
    try:
        mod.cuda.runtime.getDeviceCount()
    except Exception as exc:
        pytest.skip(f"cupy has no device: {exc}")
    return mod
