"""The autotune cache writes and deletes only its own regular files: odd paths (``~``, blank names,
directories, paths under plain files, names too long, FIFOs, devices, sockets, symbolic links) are
refused in their own words or resolved on purpose, nothing blocks, and invalid records are refused
before they can damage a file. CPU only. /dev/null is only ever *refused* here (no write is tried)."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import stat
import sys
from pathlib import Path

import pytest

from nvmath.linalg.advanced import _autotune_cache as C
from nvmath.linalg.advanced import _cache_files as F

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX file kinds")

RECORD = C._record_size()
GOOD = C.render({"k": {"algorithm": (b"\x01" * RECORD).hex()}})


@contextlib.contextmanager
def _deadline(seconds: int = 10):
    """Fail instead of hanging forever (a blocked FIFO open)."""

    def _boom(*_):
        raise TimeoutError("the cache blocked")

    old = signal.signal(signal.SIGALRM, _boom)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def _forced(path: Path) -> C.AutotuneCache:
    """A cache whose file was swapped for ``path`` after enable() (what store/clear must survive)."""
    cache = C.AutotuneCache()
    cache._path, cache._env_checked = path, True
    return cache


def test_record_size_is_the_heuristic_result_size():
    """The stored algorithm is one cublasLtMatmulHeuristicResult_t: 96 bytes."""
    assert RECORD == 96


@pytest.mark.parametrize(
    ("key", "algorithm", "info", "error", "match"),
    [
        ("k", b"\x00" * 3, {}, ValueError, "3 bytes.*96"),
        ("k", b"\x00" * 97, {}, ValueError, "97 bytes"),
        ("k", "00" * 96, {}, TypeError, "must be bytes"),
        ("k", None, {}, TypeError, "must be bytes"),
        (7, b"\x00" * 96, {}, TypeError, "key must be a str"),
        ("k", b"\x00" * 96, {"median_ms": object()}, TypeError, "JSON-able"),
    ],
)
def test_store_refuses_invalid_records_and_keeps_the_good_ones(tmp_path, key, algorithm, info, error, match):
    """store() validates every record (str key, bytes algorithm of exactly 96 bytes, JSON-able info)
    with a clear TypeError/ValueError; the entries already stored stay readable."""
    path = tmp_path / "tune.json"
    cache = C.AutotuneCache(path)
    cache.store("good", b"\x02" * RECORD)
    with pytest.raises(error, match=match):
        cache.store(key, algorithm, **info)
    assert C.AutotuneCache(path).lookup("good")["algorithm"] == b"\x02" * RECORD


def test_tilde_is_expanded(tmp_path, monkeypatch):
    """'~/x.json' names a file in the home directory, never a literal './~' folder."""
    home, cwd = tmp_path / "home", tmp_path / "cwd"
    home.mkdir(), cwd.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(cwd)
    cache = C.AutotuneCache("~/x.json")
    cache.store("k", b"\x03" * RECORD)
    assert cache.path == home / "x.json" and (home / "x.json").is_file()
    assert not (cwd / "~").exists()


@pytest.mark.parametrize("name", [" ", "   ", "\t", "sub/  "])
def test_blank_names_are_refused(tmp_path, monkeypatch, name):
    """An all-whitespace file name is refused (ValueError) and nothing is created."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match="all-whitespace"):
        C.AutotuneCache(name)
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("bad", ["", b"x.json", 3, None])
def test_non_paths_are_type_errors(bad):
    """Empty strings, bytes, numbers are TypeErrors."""
    with pytest.raises(TypeError, match="non-empty str"):
        C.AutotuneCache().enable(bad)


def test_nul_in_path_is_refused():
    """A NUL in the path is refused as open() does (ValueError)."""
    with pytest.raises(ValueError, match="NUL"):
        C.AutotuneCache("a\0b.json")


def test_odd_paths_have_their_own_messages(tmp_path):
    """A directory, a path under a plain file and a name too long each get a distinct message."""
    plain = tmp_path / "plain.txt"
    plain.write_text("x")
    with pytest.raises(ValueError, match="is a directory"):
        C.AutotuneCache(tmp_path)
    with pytest.raises(ValueError, match="which is a plain file"):
        C.AutotuneCache(plain / "tune.json")
    with pytest.raises(ValueError, match="which is a plain file"):
        C.AutotuneCache(plain / "deeper" / "tune.json")
    with pytest.raises(ValueError, match="name too long"):
        C.AutotuneCache(tmp_path / ("x" * 300 + ".json"))
    assert plain.read_text() == "x"


def test_fifo_is_refused_and_never_blocks(tmp_path, monkeypatch, caplog):
    """A FIFO as the path (argument, environment variable, or swapped in later) is refused at once:
    enable() raises, the variable is ignored, store() warns, clear() raises; the FIFO stays."""
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    with _deadline():
        with pytest.raises(ValueError, match="FIFO"):
            C.AutotuneCache(fifo)
        monkeypatch.setenv(C.ENV_VAR, str(fifo))
        with caplog.at_level(logging.WARNING, logger=C.__name__):
            assert C.AutotuneCache().path is None
            cache = _forced(fifo)
            assert cache.lookup("k") is None
            cache.store("k", b"\x00" * RECORD)
        with pytest.raises(ValueError, match="FIFO"):
            cache.clear()
    assert "FIFO" in caplog.text
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_fifo_lock_file_does_not_block(tmp_path, caplog):
    """A FIFO planted at '<path>.lock' makes the store a warning, not a hang."""
    path = tmp_path / "tune.json"
    os.mkfifo(tmp_path / "tune.json.lock")
    with _deadline(), caplog.at_level(logging.WARNING, logger=C.__name__):
        C.AutotuneCache(path).store("k", b"\x00" * RECORD)
    assert "could not be written" in caplog.text and not path.exists()


def test_socket_is_refused(tmp_path):
    """A Unix socket as the path is refused and left alone by store() and clear()."""
    path = tmp_path / "s.json"
    with socket.socket(socket.AF_UNIX) as sock:
        try:
            sock.bind(str(path))
        except OSError as exc:  # pragma: no cover - a path too long for AF_UNIX
            pytest.skip(f"cannot bind a socket here: {exc}")
        with pytest.raises(ValueError, match="socket"):
            C.AutotuneCache(path)
        cache = _forced(path)
        cache.store("k", b"\x00" * RECORD)
        with pytest.raises(ValueError, match="socket"):
            cache.clear()
        assert stat.S_ISSOCK(os.lstat(path).st_mode)


@pytest.mark.skipif(not Path("/dev/null").exists(), reason="no /dev/null")
def test_device_is_refused_before_anything_is_written(tmp_path, monkeypatch, caplog):
    """/dev/null (directly, through a link, through the environment variable) is refused by the
    checks that run before any write; nothing is written, renamed or deleted."""
    assert F.refusal(Path("/dev/null"), C.MARKER.encode()).startswith("is a character device")
    with pytest.raises(ValueError, match="character device"):
        C.AutotuneCache("/dev/null")
    link = tmp_path / "null.json"
    link.symlink_to("/dev/null")
    with pytest.raises(ValueError, match="symbolic link.*character device"):
        C.AutotuneCache(link)
    monkeypatch.setenv(C.ENV_VAR, "/dev/null")
    with caplog.at_level(logging.WARNING, logger=C.__name__):
        assert C.AutotuneCache().path is None
    assert "character device" in caplog.text
    assert stat.S_ISCHR(os.lstat("/dev/null").st_mode) and link.is_symlink()


def test_symlink_to_a_cache_file_updates_the_target_and_keeps_the_link(tmp_path):
    """A link to a cache file is resolved on purpose: stores update the target; the link remains."""
    target = tmp_path / "real.json"
    target.write_text(GOOD)
    link = tmp_path / "link.json"
    link.symlink_to(target)
    cache = C.AutotuneCache(link)
    assert cache.path == target.resolve()
    cache.store("new", b"\x04" * RECORD)
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert C.AutotuneCache(target).lookup("new")["algorithm"] == b"\x04" * RECORD
    assert C.AutotuneCache(target).lookup("k") is not None


def test_dangling_symlink_creates_its_target(tmp_path):
    """A link to a not-yet-existing file in an existing directory: the target is created, the link stays."""
    link = tmp_path / "link.json"
    link.symlink_to(tmp_path / "later.json")
    C.AutotuneCache(link).store("k", b"\x05" * RECORD)
    assert link.is_symlink() and (tmp_path / "later.json").is_file()


def test_symlink_to_a_foreign_file_is_refused(tmp_path):
    """A link to a user's file is refused, naming the link."""
    notes = tmp_path / "notes.txt"
    notes.write_text("mine")
    link = tmp_path / "link.json"
    link.symlink_to(notes)
    with pytest.raises(ValueError, match="symbolic link.*not an nvmath autotune cache"):
        C.AutotuneCache(link)


def test_symlink_swapped_in_later_is_not_followed(tmp_path, caplog):
    """A link put in place of the cache file after enable() is neither followed nor replaced."""
    path = tmp_path / "tune.json"
    cache = C.AutotuneCache(path)
    cache.store("a", b"\x06" * RECORD)
    path.unlink()
    target = tmp_path / "elsewhere.json"
    target.write_text(GOOD)
    path.symlink_to(target)
    with caplog.at_level(logging.WARNING, logger=C.__name__):
        cache.store("b", b"\x07" * RECORD)
    with pytest.raises(ValueError, match="symbolic link"):
        cache.clear()
    assert path.is_symlink() and target.read_text() == GOOD and "symbolic link" in caplog.text
