"""Fixtures of the binding tests: the generator's modules (tools/) on sys.path, and the pinned headers.

GPU tests are marked ``@pytest.mark.gpu``; the root ``tests/conftest.py`` skips them without a GPU.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

TOOLS = Path(__file__).resolve().parents[2] / "tools"
if str(TOOLS) not in sys.path:
    sys.path.insert(0, str(TOOLS))


@pytest.fixture(scope="session")
def include_dir() -> Path:
    """The header directory of the pinned NVIDIA wheels (skips when other versions are installed)."""
    import check_bindings
    import gen_bindings

    mismatches = check_bindings.version_mismatches(check_bindings.pinned_versions())
    if mismatches:
        pytest.skip(
            "needs the pinned NVIDIA header wheels (pip install -r tools/bindings-requirements.txt): "
            + "; ".join(mismatches)
        )
    try:
        return gen_bindings.find_include()
    except (SystemExit, RuntimeError) as exc:
        pytest.skip(f"NVIDIA headers not found: {exc}")


@pytest.fixture(scope="session")
def headers(include_dir: Path):
    """The headers parsed by the generator's parser."""
    import gen_bindings

    return gen_bindings.parse_headers(include_dir)
