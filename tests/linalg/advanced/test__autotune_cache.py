"""The persistent autotune cache cannot hurt: damage reads as an empty cache (a warning, never an
exception), only its own files are written or deleted, and concurrent processes lose no entries and
never see a torn file. CPU only: entries are fake algorithm records of the right size."""

from __future__ import annotations

import json
import logging
import multiprocessing
import os
import sys
from pathlib import Path

import pytest

from nvmath.linalg.advanced import _autotune_cache as C

RECORD = C._record_size()


def _record(i: int) -> bytes:
    return bytes([i % 256]) * RECORD


def _entries(n: int) -> dict:
    return {f"key{i}": {"algorithm": _record(i).hex(), "median_ms": 0.1 * i} for i in range(n)}


GOOD = C.render(_entries(2))
DAMAGED = {
    "not json": C.MARKER + " 2, {{{",
    "truncated": GOOD[: len(GOOD) // 2],
    "entries is a list": C.MARKER + ' 2, "entries": [1, 2]}',
    "entries is a string": C.MARKER + ' 2, "entries": "x"}',
    "entry is a string": C.MARKER + ' 2, "entries": {"k": "abc"}}',
    "entry is a number": C.MARKER + ' 2, "entries": {"k": 3}}',
    "entry is null": C.MARKER + ' 2, "entries": {"k": null}}',
    "missing algorithm": C.MARKER + ' 2, "entries": {"k": {"median_ms": 1.0}}}',
    "algorithm is a number": C.MARKER + ' 2, "entries": {"k": {"algorithm": 12}}}',
    "non-hex algorithm": C.MARKER + ' 2, "entries": {"k": {"algorithm": "zz"}}}',
    "odd-length hex": C.MARKER + ' 2, "entries": {"k": {"algorithm": "abc"}}}',
    "record too short": C.MARKER + ' 2, "entries": {"k": {"algorithm": "0102"}}}',
    "record too long": C.MARKER + f' 2, "entries": {{"k": {{"algorithm": "{"00" * (RECORD + 1)}"}}}}}}',
    "deeply nested": C.MARKER + ' 2, "entries": ' + "[" * 100_000 + "]" * 100_000 + "}",
    "unknown version": C.MARKER + ' 99, "entries": {}}',
    "top level is a list": "[1, 2]",  # not ours: refused by enable, but read damage-free if forced
    "binary garbage": C.MARKER + " 2, \xff\xfe\x00",
}


@pytest.mark.parametrize("name", sorted(DAMAGED))
def test_damaged_file_is_a_warning_and_an_empty_cache(tmp_path, caplog, name):
    """Any damage to the file is logged and reads as an empty cache; lookups and stores never raise,
    and the next store writes a valid file."""
    path = tmp_path / "tune.json"
    path.write_text(DAMAGED[name], encoding="utf-8", errors="surrogateescape")
    cache = C.AutotuneCache()
    cache._path, cache._env_checked = path, True  # force it even on a file enable() would refuse
    with caplog.at_level(logging.WARNING, logger=C.__name__):
        assert cache.lookup("k") is None and len(cache) == 0
    assert "using an empty cache" in caplog.text
    if C.is_cache_file(path):
        cache.store("new", _record(3), median_ms=1.0)
        assert C.AutotuneCache(path).lookup("new")["algorithm"] == _record(3)


@pytest.mark.parametrize("content", ["my notes\n", '{"a": 1}', "[1, 2]", "#!/bin/sh\n"])
def test_foreign_files_are_refused_and_never_touched(tmp_path, content):
    """enable()/AutotuneCache(path) refuse an existing file without the format marker (ValueError); a
    file replaced by a foreign one is neither overwritten by store() nor deleted by clear()."""
    notes = tmp_path / "my_notes.txt"
    notes.write_text(content)
    with pytest.raises(ValueError, match="not an nvmath autotune cache file"):
        C.AutotuneCache(notes)
    with pytest.raises(ValueError, match="not an nvmath autotune cache file"):
        C.AutotuneCache().enable(notes)
    path = tmp_path / "tune.json"
    cache = C.AutotuneCache(path)
    cache.store("a", _record(1))
    path.write_text(content)  # replaced behind the cache's back
    cache.store("b", _record(2))  # a warning, not a write
    assert path.read_text() == content
    with pytest.raises(ValueError, match="no longer an nvmath autotune cache"):
        cache.clear()
    assert path.read_text() == content


def test_directories_and_system_files_are_refused(tmp_path):
    """A directory and /etc/passwd are refused as cache files, each in its own words."""
    with pytest.raises(ValueError, match="is a directory"):
        C.AutotuneCache(tmp_path)
    if Path("/etc/passwd").exists():
        with pytest.raises(ValueError, match="/etc/passwd.*not an nvmath autotune cache"):
            C.AutotuneCache("/etc/passwd")


def test_environment_variable_naming_a_foreign_file_is_ignored(monkeypatch, caplog):
    """NVMATH_AUTOTUNE_CACHE=/etc/passwd: a warning, the cache stays disabled, nothing is written."""
    if not Path("/etc/passwd").exists():
        pytest.skip("no /etc/passwd here")
    before = Path("/etc/passwd").read_bytes()
    monkeypatch.setenv(C.ENV_VAR, "/etc/passwd")
    cache = C.AutotuneCache()
    with caplog.at_level(logging.WARNING, logger=C.__name__):
        assert not cache.enabled and cache.path is None
    assert "stays disabled" in caplog.text
    cache.store("k", _record(1))
    assert Path("/etc/passwd").read_bytes() == before


def test_empty_and_unmarked_first_format_files_are_not_ours(tmp_path):
    """An empty file and a JSON file shaped like the first format but without the marker are a
    user's files: refused by enable(), never rewritten by a store nor deleted by clear()."""
    empty = tmp_path / "empty.json"
    empty.write_text("")
    with pytest.raises(ValueError, match="empty file"):
        C.AutotuneCache(empty)
    old = tmp_path / "old.json"
    text = json.dumps({"format": 1, "entries": _entries(2)}, indent=1, sort_keys=True)
    old.write_text(text)
    with pytest.raises(ValueError, match="carries no nvmath marker"):
        C.AutotuneCache(old)
    cache = C.AutotuneCache(tmp_path / "new.json")
    cache._path = old  # swapped behind the cache's back
    cache.store("key9", _record(9))
    with pytest.raises(ValueError, match="no longer"):
        cache.clear()
    assert old.read_text() == text and empty.read_text() == ""


def test_store_merges_what_other_writers_stored(tmp_path):
    """Two cache objects on one file (two processes): each store keeps the other's entries, and a
    lookup sees entries stored by the other after its first read."""
    path = tmp_path / "tune.json"
    one, two = C.AutotuneCache(path), C.AutotuneCache(path)
    one.store("a", _record(1))
    assert two.lookup("a")["algorithm"] == _record(1)
    two.store("b", _record(2))
    one.store("c", _record(3))
    assert sorted(json.loads(path.read_text())["entries"]) == ["a", "b", "c"]
    assert one.lookup("b")["algorithm"] == _record(2)


def _writer(path: str, worker: int, count: int) -> None:
    cache = C.AutotuneCache(path)
    for i in range(count):
        cache.store(f"w{worker}-{i}", _record(worker * count + i), median_ms=float(i))


def _reader(path: str, stop, torn) -> None:
    while not stop.is_set():
        try:
            text = Path(path).read_text()
        except FileNotFoundError:
            continue
        try:
            C.parse(text, RECORD)
        except C.DamagedCache:
            torn.value += 1


@pytest.mark.skipif(sys.platform == "win32", reason="fcntl locking is POSIX")
def test_four_processes_storing_at_once_lose_nothing_and_never_tear_the_file(tmp_path):
    """4 processes store 25 entries each into one file at the same time while a fifth reads it in a
    loop: all 100 entries are there at the end and no read ever saw a torn file."""
    path = str(tmp_path / "tune.json")
    ctx = multiprocessing.get_context(
        "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    )
    stop, torn = ctx.Event(), ctx.Value("i", 0)
    reader = ctx.Process(target=_reader, args=(path, stop, torn))
    reader.start()
    writers = [ctx.Process(target=_writer, args=(path, w, 25)) for w in range(4)]
    for p in writers:
        p.start()
    for p in writers:
        p.join(120)
    stop.set()
    reader.join(30)
    assert all(p.exitcode == 0 for p in writers) and reader.exitcode == 0
    entries = C.parse(Path(path).read_text(), RECORD)
    assert sorted(entries) == sorted(f"w{w}-{i}" for w in range(4) for i in range(25))
    assert torn.value == 0
    assert not [f for f in os.listdir(tmp_path) if f.startswith(".autotune-")]  # no temporaries left
