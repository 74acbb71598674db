"""An opt-in, persistent cache of autotuning results, so that a second process skips tuning.

``Matmul.autotune()`` looks the problem up before timing anything and stores the winner after
tuning. Entries are keyed by the GPU (name and compute capability), the cuBLASLt version and the
problem signature (dtypes, compute and scale types, ops, the four layouts, the epilog attributes,
the pointer alignments and the workspace cap), so a stored algorithm is only reused where it is
valid. The file is JSON (``{key: {"algorithm": hex record, "median_ms": ..., ...}}``), written
atomically (a temporary file then ``os.replace``); concurrent writers may lose each other's newest
entries, never corrupt the file.

Enable it with ``nvmath.linalg.advanced.autotune_cache.enable(path)`` or the environment variable
``NVMATH_AUTOTUNE_CACHE=path`` (read on first use); ``disable()`` turns it off, ``clear()`` empties
it (and deletes the file).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

__all__ = ["ENV_VAR", "AutotuneCache", "autotune_cache", "problem_key"]

logger = logging.getLogger(__name__)

ENV_VAR = "NVMATH_AUTOTUNE_CACHE"
"""Environment variable naming the cache file (opt-in)."""

FORMAT_VERSION = 1


def problem_key(parts: Iterable[Any]) -> str:
    """A stable key (hex SHA-256) of the ``repr`` of the signature parts."""
    text = "|".join(repr(p) for p in parts)
    return hashlib.sha256(text.encode()).hexdigest()


class AutotuneCache:
    """A JSON file of autotuning winners (see the module documentation).

    Args:
        path: the file; ``None`` leaves the cache disabled until :meth:`enable`.
    """

    def __init__(self, path: str | os.PathLike | None = None):
        self._lock = threading.Lock()
        self._path: Path | None = None
        self._entries: dict[str, dict[str, Any]] | None = None
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
        """Use ``path`` as the cache file (created on the first store)."""
        if not isinstance(path, (str, os.PathLike)) or not str(path):
            raise TypeError(f"path must be a non-empty str or os.PathLike; got {path!r}")
        with self._lock:
            self._path, self._entries, self._env_checked = Path(path), None, True

    def disable(self) -> None:
        """Stop using a file (nothing is deleted)."""
        with self._lock:
            self._path, self._entries, self._env_checked = None, None, True

    def clear(self) -> None:
        """Forget every entry and delete the file."""
        with self._lock:
            self._entries = {}
            if self._path is not None and self._path.exists():
                self._path.unlink()

    def _check_env(self) -> None:
        if not self._env_checked:
            self._env_checked = True
            value = os.environ.get(ENV_VAR)
            if value:
                self._path = Path(value)

    def _load(self) -> dict[str, dict[str, Any]]:
        """The entries, read from the file on first use (a missing or unreadable file is empty)."""
        if self._entries is None:
            entries: dict[str, dict[str, Any]] = {}
            if self._path is not None and self._path.exists():
                try:
                    data = json.loads(self._path.read_text())
                    if data.get("format") == FORMAT_VERSION:
                        entries = dict(data.get("entries", {}))
                except (OSError, ValueError, AttributeError) as exc:
                    logger.warning("autotune cache %s is unreadable (%s); starting empty", self._path, exc)
            self._entries = entries
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
        """Store ``algorithm`` (record bytes) and JSON-able ``info`` under ``key``, then write the file."""
        if self.path is None:
            return
        with self._lock:
            entries = self._load()
            entries[key] = {"algorithm": algorithm.hex(), **info}
            self._write(entries)
            self.stores += 1

    def _write(self, entries: dict[str, dict[str, Any]]) -> None:
        assert self._path is not None
        self._path.parent.mkdir(parents=True, exist_ok=True)
        payload = json.dumps({"format": FORMAT_VERSION, "entries": entries}, indent=1, sort_keys=True)
        fd, tmp = tempfile.mkstemp(prefix=".autotune-", dir=self._path.parent)
        try:
            with os.fdopen(fd, "w") as f:
                f.write(payload)
            os.replace(tmp, self._path)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise

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


autotune_cache = AutotuneCache()
"""The process-wide autotune cache (disabled unless enabled or ``NVMATH_AUTOTUNE_CACHE`` is set)."""
