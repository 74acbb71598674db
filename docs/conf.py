"""Sphinx configuration for the nvmath documentation.

Build (warnings are errors): ``python -m sphinx -W --keep-going -b html docs docs/_build/html``
or ``make -C docs html``.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

project = "nvmath"
author = "nvmath-kit developers"
copyright = "nvmath-kit developers"

try:
    import nvmath

    release = nvmath.__version__
except Exception:  # noqa: BLE001 - the documentation still builds from a partial tree
    release = "0.0.0"
version = release

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.viewcode",
]

# Google-style docstrings; type hints shown in the description, not in the signature.
napoleon_google_docstring = True
napoleon_numpy_docstring = False
autodoc_typehints = "description"
autodoc_member_order = "bysource"
autodoc_default_options = {"members": True, "show-inheritance": True}

# cuda.core / torch / cupy are never imported at module import time, so nothing needs mocking.
templates_path: list[str] = []
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store"]
html_theme = "alabaster"
html_static_path: list[str] = []
html_theme_options = {"description": "GPU math planners for any DLPack tensor", "fixed_sidebar": True}
