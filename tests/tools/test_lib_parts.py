"""tools/lib_parts.py: a file split into parts joins back byte for byte; a missing or corrupt part
is named and nothing is written."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

TOOL = Path(__file__).resolve().parents[2] / "tools" / "lib_parts.py"
_spec = importlib.util.spec_from_file_location("lib_parts", TOOL)
lib_parts = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(lib_parts)


@pytest.fixture
def blob(tmp_path):
    data = np.random.default_rng(1).integers(0, 256, 10_000, dtype=np.uint8).tobytes()
    path = tmp_path / "engine.whl"
    path.write_bytes(data)
    return path, data


@pytest.mark.parametrize("part_bytes", [1_000, 3_333, 10_000, 50_000])
def test_split_then_join_restores_the_file(tmp_path, blob, part_bytes):
    """Parts of any size join into the original bytes; the manifest counts them."""
    path, data = blob
    manifest = lib_parts.split(path, tmp_path / "parts", part_bytes)
    assert len(manifest["parts"]) == -(-len(data) // part_bytes)
    lib_parts.join(tmp_path / "parts", tmp_path / "out" / "engine.whl")
    assert (tmp_path / "out" / "engine.whl").read_bytes() == data


def test_missing_or_corrupt_part_is_named(tmp_path, blob):
    """join refuses a missing or altered part, naming it, and writes no target."""
    path, _ = blob
    lib_parts.split(path, tmp_path / "parts", 4_000)
    (tmp_path / "parts" / "part-01").write_bytes(b"x")
    with pytest.raises(ValueError, match="part-01 of engine.whl is corrupt"):
        lib_parts.join(tmp_path / "parts", tmp_path / "joined")
    (tmp_path / "parts" / "part-02").unlink()
    with pytest.raises(ValueError, match="part-01 of engine.whl is corrupt|part-02 .* missing"):
        lib_parts.join(tmp_path / "parts", tmp_path / "joined")
    assert not (tmp_path / "joined").exists()


def test_command_line(tmp_path, blob):
    """The CLI splits and joins (exit 0), and exits 1 with the reason when a part is missing."""
    path, data = blob
    run = [sys.executable, str(TOOL)]
    subprocess.run([*run, "split", str(path), str(tmp_path / "p")], check=True, capture_output=True)
    subprocess.run([*run, "join", str(tmp_path / "p"), str(tmp_path / "j")], check=True, capture_output=True)
    assert (tmp_path / "j").read_bytes() == data
    (tmp_path / "p" / "part-00").unlink()
    joined = tmp_path / "k"
    done = subprocess.run([*run, "join", str(tmp_path / "p"), str(joined)], capture_output=True, text=True)
    assert done.returncode == 1 and "part-00 of engine.whl is missing" in done.stderr
