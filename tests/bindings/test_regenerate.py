"""Reproducibility: regenerating from the pinned headers gives the committed modules byte for byte."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import gen_bindings


def test_regenerated_modules_equal_committed(include_dir: Path) -> None:
    """A fresh generation equals nvmath/bindings/*.py (skipped unless the pinned wheels are installed)."""
    for name, source in gen_bindings.generate(include_dir).items():
        assert (gen_bindings.OUT_DIR / name).read_text() == source, (
            f"{name} is stale: run tools/gen_bindings.py"
        )


def test_generation_ignores_hash_seed(include_dir: Path, tmp_path: Path) -> None:
    """Output does not depend on set/dict iteration order (another PYTHONHASHSEED gives the same bytes)."""
    env = dict(os.environ, PYTHONHASHSEED="12345")
    script = Path(gen_bindings.__file__)
    subprocess.run(
        [sys.executable, str(script), "--include", str(include_dir), "--out", str(tmp_path)],
        env=env,
        check=True,
    )
    written = sorted(tmp_path.rglob("*.py"))
    assert {p.relative_to(tmp_path).as_posix() for p in written} == set(gen_bindings.generate(include_dir))
    for path in written:
        name = path.relative_to(tmp_path).as_posix()
        assert path.read_text() == (gen_bindings.OUT_DIR / name).read_text(), name


def test_generated_files_are_marked_and_path_free() -> None:
    """Each generated file says it is generated and do-not-edit, names its header versions, has no path."""
    for spec in gen_bindings.MODULES:
        text = (gen_bindings.OUT_DIR / f"{spec.module}.py").read_text()
        head = text.splitlines()[:3]
        assert "GENERATED" in head[0] and "DO NOT EDIT" in head[0]
        assert f"{spec.pretty} " in head[1] and "headers" in head[1]
        assert "/work/" not in text and "site-packages" not in text


def test_check_script_passes(include_dir: Path) -> None:
    """tools/check_bindings.py exits 0 on the committed modules."""
    script = Path(gen_bindings.__file__).with_name("check_bindings.py")
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def test_check_reports_a_stale_module(include_dir: Path, tmp_path: Path, capsys) -> None:
    """The check exits 1 and prints a diff when a committed module differs."""
    gen_bindings.write(gen_bindings.generate(include_dir), tmp_path)
    stale = tmp_path / "cufft.py"
    stale.write_text(stale.read_text().replace("def create():", "def create_renamed():"))
    assert gen_bindings.check(include_dir, tmp_path) == 1
    out = capsys.readouterr().out
    assert "cufft.py: differs" in out and "create_renamed" in out


def test_check_reports_a_stale_unchecked_module(include_dir: Path, tmp_path: Path, capsys) -> None:
    """The unchecked twins are checked too: an edited or missing ``_unchecked`` module fails the check."""
    gen_bindings.write(gen_bindings.generate(include_dir), tmp_path)
    stale = tmp_path / "_unchecked" / "cublasLt.py"
    stale.write_text(stale.read_text().replace("def matmul(", "def matmul_renamed("))
    (tmp_path / "_unchecked" / "cufft.py").unlink()
    assert gen_bindings.check(include_dir, tmp_path) == 1
    out = capsys.readouterr().out
    assert "_unchecked/cublasLt.py: differs" in out and "matmul_renamed" in out
    assert "_unchecked/cufft.py: differs" in out
