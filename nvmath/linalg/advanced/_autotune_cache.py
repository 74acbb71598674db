"""An opt-in, persistent cache of autotuning results, so that a second process skips tuning.

``Matmul.autotune()`` looks the problem up before timing anything and stores the winner after
tuning. Entries are keyed by the GPU (name and compute capability), the cuBLASLt version and the
problem signature (dtypes, compute and scale types, ops, the four layouts, the epilog attributes,
the pointer alignments and the workspace cap), so a stored algorithm is only reused where it is
valid -- and cuBLASLt checks it (``cublasLtMatmulAlgoCheck``) before it is used.

Enable it with ``nvmath.linalg.advanced.autotune_cache.enable(path)`` or the environment variable
``NVMATH_AUTOTUNE_CACHE=path`` (read on first use); ``disable()`` turns it off, ``clear()`` empties
it (and deletes the file).

The cache can never hurt:

* **Its own files only.** The file starts with the format marker ``{"nvmath_autotune_cache":``.
  Only an absent path or a regular file carrying that marker is ever written or deleted: a
  directory, a path under a plain file, a name too long, a FIFO, a device, a socket, an empty file,
  a first-format file without the marker or any other file is refused, each in its own words
  (:mod:`._cache_files`). ``enable()`` / ``AutotuneCache(path)`` / ``clear()`` raise ``ValueError``;
  the environment variable is ignored with a warning; a store is skipped with a warning. ``~`` is
  expanded. A symbolic link to a cache file is resolved on purpose: its target is updated and the
  link stays. Files are opened only after ``lstat`` says they are regular, with ``O_NOFOLLOW |
  O_NONBLOCK``, and checked again with ``fstat``: nothing ever blocks on a FIFO.
* **Valid records only.** ``store()`` raises ``TypeError`` for a key that is not a ``str``, an
  algorithm that is not ``bytes`` or info that is not JSON-able, and ``ValueError`` for an algorithm
  record that is not exactly ``cublasLtMatmulHeuristicResult_t``'s size (96 bytes): one bad record
  never damages the stored ones.
* **Damage is a warning, never an exception.** A file that is not JSON, too deeply nested, of
  another layout, or holding an entry that is not ``{"algorithm": <hex record of the right
  size>, ...}`` is logged and read as an empty cache (the next store rewrites it).
* **Concurrent processes.** Each store takes an exclusive lock (``fcntl.flock`` on
  ``<path>.lock``), re-reads the file, adds its entry and writes a temporary file in the same
  directory that replaces the cache atomically (``os.replace``, only over a file that is still
  ours): readers never see a torn file and no writer loses another's entries. Lookups re-read the
  file when it changed since the last read.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import tempfile
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from nvmath.linalg.advanced import _cache_files

try:  # POSIX; elsewhere stores are atomic but not serialized between processes
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

__all__ = ["ENV_VAR", "FORMAT_VERSION", "MARKER", "AutotuneCache", "autotune_cache", "problem_key"]

logger = logging.getLogger(__name__)

ENV_VAR = "NVMATH_AUTOTUNE_CACHE"
"""Environment variable naming the cache file (opt-in)."""

FORMAT_VERSION = 2
"""The file format written (1: the first format, still read)."""

MARKER = '{"nvmath_autotune_cache":'
"""The first bytes of every cache file this module writes."""


def problem_key(parts: Iterable[Any]) -> str:
    """A stable key (hex SHA-256) of the ``repr`` of the signature parts."""
    text = "|".join(repr(p) for p in parts)
    return hashlib.sha256(text.encode()).hexdigest()


class DamagedCache(ValueError):
    """The cache file's content is not a valid cache (internal: read as an empty cache)."""


def _record_size() -> int:
    """Bytes of one ``cublasLtMatmulHeuristicResult_t`` record (the stored algorithm)."""
    from nvmath.bindings import cublasLt

    return int(cublasLt.matmul_heuristic_result_dtype.itemsize)


def is_cache_file(path: Path) -> bool:
    """Whether ``path`` may be written or deleted by the cache: absent, or a regular file of its own."""
    return _cache_files.refusal(path, MARKER.encode()) is None


def _why_not(path: Path) -> str | None:
    return _cache_files.refusal(path, MARKER.encode())


def check_record(key: object, algorithm: object, info: dict[str, Any]) -> None:
    """Refuse a record ``store()`` could not write and read back.

    Raises:
        TypeError: ``key`` not a ``str``, ``algorithm`` not ``bytes``, ``info`` not JSON-able.
        ValueError: ``algorithm`` not exactly one heuristic-result record long.
    """
    if not isinstance(key, str):
        raise TypeError(f"the cache key must be a str; got {type(key).__name__} {key!r:.60}")
    if not isinstance(algorithm, (bytes, bytearray)):
        raise TypeError(
            f"the algorithm must be bytes (a heuristic-result record); got {type(algorithm).__name__}"
        )
    size = _record_size()
    if len(algorithm) != size:
        raise ValueError(
            f"the algorithm record has {len(algorithm)} bytes; a cuBLASLt heuristic result has {size}"
        )
    try:
        json.dumps(info)
    except (TypeError, ValueError) as exc:
        raise TypeError(
            f"the entry's info must be JSON-able (numbers, str, lists, dicts): {exc}"
        ) from None


def parse(text: str, record_size: int) -> dict[str, dict[str, Any]]:
    """The entries of a cache file's text.

    Raises:
        DamagedCache: anything but a well-formed cache (the reason in the message).
    """
    if not text.strip():
        return {}
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise DamagedCache(f"not JSON ({type(exc).__name__}: {str(exc)[:120]})") from None
    if not isinstance(data, dict):
        raise DamagedCache(f"the top level is a {type(data).__name__}, not an object")
    version = data.get("nvmath_autotune_cache", data.get("format"))
    if version not in (1, FORMAT_VERSION):
        raise DamagedCache(f"unknown format {version!r}")
    entries = data.get("entries")
    if not isinstance(entries, dict):
        raise DamagedCache(f"'entries' is a {type(entries).__name__}, not an object")
    for key, entry in entries.items():
        _check_entry(key, entry, record_size)
    return entries


def _check_entry(key: str, entry: Any, record_size: int) -> None:
    where = f"entry {key[:16]!r}"
    if not isinstance(entry, dict):
        raise DamagedCache(f"{where} is a {type(entry).__name__}, not an object")
    algorithm = entry.get("algorithm")
    if not isinstance(algorithm, str):
        raise DamagedCache(f"{where} has no 'algorithm' string")
    try:
        raw = bytes.fromhex(algorithm)
    except ValueError:
        raise DamagedCache(f"{where}: 'algorithm' is not hex") from None
    if record_size and len(raw) != record_size:
        raise DamagedCache(f"{where}: the algorithm record has {len(raw)} bytes, not {record_size}")


def render(entries: dict[str, dict[str, Any]]) -> str:
    """The file text of ``entries`` (starts with :data:`MARKER`)."""
    body = json.dumps(entries, indent=1, sort_keys=True)
    return f'{MARKER} {FORMAT_VERSION},\n "entries": {body}\n}}\n'


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    """An exclusive inter-process lock on ``<path>.lock`` (a no-op without ``fcntl``)."""
    if fcntl is None:  # pragma: no cover
        yield
        return
    fd = _cache_files.open_regular(path.with_name(path.name + ".lock"), os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def _stat(path: Path) -> tuple[int, int, int] | None:
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_size)


class AutotuneCache:
    """A JSON file of autotuning winners (see the module documentation).

    Args:
        path: the file; ``None`` leaves the cache disabled until :meth:`enable`.

    Raises:
        ValueError: ``path`` names an existing file that is not an autotune cache.
    """

    def __init__(self, path: str | os.PathLike | None = None):
        self._lock = threading.Lock()
        self._path: Path | None = None
        self._entries: dict[str, dict[str, Any]] | None = None
        self._seen: tuple[int, int, int] | None = None  # the file's stat when last read
        self._env_checked = path is not None
        self.hits = self.misses = self.stores = 0
        if path is not None:
            self.enable(path)

    @property
    def path(self) -> Path | None:
        """The cache file, or ``None`` when disabled."""
        self._check_env()
        return self._path

    @property
    def enabled(self) -> bool:
        """Whether lookups and stores go to a file."""
        return self.path is not None

    def enable(self, path: str | os.PathLike) -> None:
        """Use ``path`` as the cache file (created on the first store).

        Raises:
            TypeError: not a path. ValueError: an existing file that is not an autotune cache.
        """
        path = _cache_files.normalize(path, MARKER.encode())
        why = _why_not(path)
        if why is not None:
            raise ValueError(f"{path} {why}; refusing to use it as the autotune cache -- choose another path")
        with self._lock:
            self._path, self._entries, self._seen, self._env_checked = path, None, None, True

    def disable(self) -> None:
        """Stop using a file (nothing is deleted)."""
        with self._lock:
            self._path, self._entries, self._seen, self._env_checked = None, None, None, True

    def clear(self) -> None:
        """Forget every entry and delete the file.

        Raises:
            ValueError: the file was replaced by one that is not an autotune cache (it is kept).
        """
        with self._lock:
            self._entries = {}
            path = self._path
            if path is None or not path.parent.is_dir():
                return
            why = _why_not(path)
            if why is None and os.path.lexists(path):
                with _file_lock(path):
                    why = _why_not(path)
                    if why is None:
                        with contextlib.suppress(FileNotFoundError):
                            path.unlink()
            if why is not None:
                raise ValueError(
                    f"{path} is no longer an nvmath autotune cache file: it {why}; not deleting it"
                )
            self._seen = None

    def _check_env(self) -> None:
        if not self._env_checked:
            self._env_checked = True
            value = os.environ.get(ENV_VAR)
            if value:
                try:
                    path = _cache_files.normalize(value, MARKER.encode())
                    why = _why_not(path)
                except ValueError as exc:
                    why = str(exc)
                if why is None:
                    self._path = path
                else:
                    logger.warning("%s=%s %s; the autotune cache stays disabled", ENV_VAR, value, why)

    def _read(self) -> dict[str, dict[str, Any]]:
        """The file's entries (empty, with a warning, when it is unreadable or damaged)."""
        assert self._path is not None
        self._seen = _stat(self._path)
        if self._seen is None:
            return {}
        try:
            raw = _cache_files.read_regular(self._path)
            return {} if raw is None else parse(raw.decode("utf-8", errors="strict"), _record_size())
        except (OSError, UnicodeDecodeError, DamagedCache) as exc:
            logger.warning("autotune cache %s is unreadable (%s); using an empty cache", self._path, exc)
        except Exception as exc:  # noqa: BLE001 - the cache never raises from a lookup
            logger.warning("autotune cache %s could not be read (%r); using an empty cache", self._path, exc)
        return {}

    def _load(self) -> dict[str, dict[str, Any]]:
        """The entries, re-read when the file changed since the last read."""
        if self._entries is None or (self._path is not None and _stat(self._path) != self._seen):
            self._entries = self._read()
        return self._entries

    def lookup(self, key: str) -> dict[str, Any] | None:
        """The entry stored under ``key`` (``{"algorithm": bytes, ...}``), or ``None``."""
        if self.path is None:
            return None
        with self._lock:
            entry = self._load().get(key)
        if entry is None:
            self.misses += 1
            return None
        self.hits += 1
        return {**entry, "algorithm": bytes.fromhex(entry["algorithm"])}

    def store(self, key: str, algorithm: bytes, **info: Any) -> None:
        """Store ``algorithm`` (record bytes) and JSON-able ``info`` under ``key``, then write the file.

        Never raises for the file: a foreign or unwritable file is a logged warning.

        Raises:
            TypeError, ValueError: the record itself is invalid (see :func:`check_record`).
        """
        check_record(key, algorithm, info)
        if self.path is None:
            return
        with self._lock:
            path = self._path
            assert path is not None
            try:
                why = _why_not(path)
                if why is None:
                    path.parent.mkdir(parents=True, exist_ok=True)
                    with _file_lock(path):
                        why = _why_not(path)
                        if why is None:
                            self._store_locked(path, key, algorithm, info)
                if why is not None:
                    logger.warning("%s %s; not writing the autotune cache to it", path, why)
            except OSError as exc:
                logger.warning("autotune cache %s could not be written (%s); entry not stored", path, exc)

    def _store_locked(self, path: Path, key: str, algorithm: bytes, info: dict[str, Any]) -> None:
        """Merge the entry into the file's current entries and replace the file (the lock held)."""
        entries = dict(self._read())  # what the other processes stored meanwhile
        entries[key] = {"algorithm": bytes(algorithm).hex(), **info}
        _write_atomically(path, render(entries))
        self._entries, self._seen = entries, _stat(path)
        self.stores += 1

    def __len__(self) -> int:
        if self.path is None:
            return 0
        with self._lock:
            return len(self._load())

    def __repr__(self) -> str:
        return (
            f"AutotuneCache(path={str(self.path) if self.path else None!r}, hits={self.hits}, "
            f"misses={self.misses}, stores={self.stores})"
        )


def _write_atomically(path: Path, text: str) -> None:
    """Write ``text`` to a temporary file next to ``path`` and move it over ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".autotune-", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


autotune_cache = AutotuneCache()
"""The process-wide autotune cache (disabled unless enabled or ``NVMATH_AUTOTUNE_CACHE`` is set)."""
