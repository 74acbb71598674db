"""Check that the committed ``nvmath/bindings`` modules are what the pinned headers generate.

Usage (CI, after ``pip install -r tools/bindings-requirements.txt``)::

    python tools/check_bindings.py

Exit status: 0 up to date; 1 the committed modules differ from a fresh generation (a diff summary
is printed); 2 the installed wheels are not the pinned ones (the comparison would be meaningless).
"""

from __future__ import annotations

import re
import sys
from importlib import metadata
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import gen_bindings

REQUIREMENTS = Path(__file__).resolve().parent / "bindings-requirements.txt"
# The distributed engines' header wheels, installed with --no-deps (see that file).
REQUIREMENTS_NODEPS = REQUIREMENTS.with_name("bindings-requirements-nodeps.txt")


def pinned_versions(*paths: Path) -> dict[str, str]:
    """``{distribution: version}`` for every ``name==version`` line of the requirements files
    (default: both of tools/)."""
    pins = {}
    for line in "\n".join(p.read_text() for p in (paths or (REQUIREMENTS, REQUIREMENTS_NODEPS))).splitlines():
        match = re.match(r"\s*([A-Za-z0-9_.-]+)\s*==\s*([^\s#;]+)", line)
        if match:
            pins[match.group(1)] = match.group(2)
    return pins


def version_mismatches(pins: dict[str, str]) -> list[str]:
    """One line per pinned distribution whose installed version differs (or is missing)."""
    problems = []
    for name, wanted in sorted(pins.items()):
        try:
            installed = metadata.version(name)
        except metadata.PackageNotFoundError:
            problems.append(f"{name}: pinned {wanted}, not installed")
            continue
        if installed != wanted:
            problems.append(f"{name}: pinned {wanted}, installed {installed}")
    return problems


def main() -> int:
    problems = version_mismatches(pinned_versions())
    if problems:
        print("the installed NVIDIA wheels are not the pinned ones:\n  " + "\n  ".join(problems))
        print(
            f"run: pip install -r {REQUIREMENTS.relative_to(gen_bindings.REPO)} && pip install --no-deps "
            f"-r {REQUIREMENTS_NODEPS.relative_to(gen_bindings.REPO)}"
        )
        return 2
    return gen_bindings.check(gen_bindings.find_include())


if __name__ == "__main__":
    raise SystemExit(main())
