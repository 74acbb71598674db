"""The file-system side of the autotune cache: which paths it may read, write and delete.

The rules (see :mod:`nvmath.linalg.advanced._autotune_cache`):

* A path is normalized once (:func:`normalize`): ``~`` is expanded, an empty or all-whitespace file
  name is refused, and a symbolic link is resolved **on purpose** when it points to a cache file (or
  to nothing yet in an existing directory): the cache then reads and updates the link's target and
  the link itself stays in place. A link to anything else is refused.
* A path may be written or deleted only when it is absent or a *regular* file that starts with the
  cache's marker (:func:`refusal` says why not otherwise, in words of its own for a directory, a
  path under a plain file, a name too long, a FIFO, a device, a socket, a symbolic link, an empty
  file and a foreign file). An empty file is not ours.
* Files are only opened after an ``lstat`` says they are regular, with ``O_NOFOLLOW | O_NONBLOCK``
  (a FIFO swapped in meanwhile cannot block the process), and the opened descriptor is checked
  again with ``fstat`` before a byte is read.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

__all__ = ["normalize", "open_regular", "read_regular", "refusal"]

_PEEK = 4096  # bytes read to recognize a file
_FLAGS = getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)

_KINDS = {
    stat.S_ISFIFO: "a FIFO (named pipe)",
    stat.S_ISCHR: "a character device",
    stat.S_ISBLK: "a block device",
    stat.S_ISSOCK: "a socket",
}


def normalize(path: object, marker: bytes) -> Path:
    """The cache file ``path`` names: ``~`` expanded, a link to a cache file resolved.

    Raises:
        TypeError: not a non-empty ``str`` or ``os.PathLike`` of ``str``.
        ValueError: an all-whitespace name, an embedded NUL, or a link to something that is not a
            cache file.
    """
    text = os.fspath(path) if isinstance(path, os.PathLike) else path
    if not isinstance(text, str) or not text:
        raise TypeError(f"path must be a non-empty str or os.PathLike; got {path!r}")
    if "\0" in text:
        raise ValueError(f"path {text!r} contains a NUL character")
    result = Path(text).expanduser()
    if not result.name.strip():
        raise ValueError(f"path {text!r} has an empty or all-whitespace file name; name a file")
    try:
        is_link = stat.S_ISLNK(os.lstat(result).st_mode)
    except OSError:  # absent, too long, under a plain file...: refusal() words it
        is_link = False
    if is_link:
        target = Path(os.path.realpath(result))
        why = refusal(target, marker)
        if why is not None or not target.parent.is_dir():
            raise ValueError(
                f"{result} is a symbolic link to {target}, which "
                f"{why or 'is in a directory that does not exist'}; the cache follows a link only to "
                "one of its own files (or to a new file in an existing directory)"
            )
        return target
    return result


def open_regular(path: Path, flags: int = os.O_RDONLY, mode: int = 0o644) -> int:
    """A descriptor of the regular file ``path`` (never a link, FIFO, device or socket).

    Raises:
        OSError: ``path`` cannot be opened, or is not a regular file once opened.
    """
    fd = os.open(path, flags | _FLAGS, mode)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_regular(path: Path, limit: int | None = None) -> bytes | None:
    """The bytes (the first ``limit`` ones) of the regular file ``path``; ``None`` when absent.

    Raises:
        OSError: anything but a regular file (checked before and after opening) or unreadable.
    """
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    if not stat.S_ISREG(st.st_mode):
        raise OSError(errno.EINVAL, "not a regular file", str(path))
    try:
        fd = open_regular(path)
    except FileNotFoundError:
        return None
    with os.fdopen(fd, "rb") as f:
        return f.read() if limit is None else f.read(limit)


def refusal(path: Path, marker: bytes) -> str | None:
    """Why the cache may not write or delete ``path`` (a phrase), or ``None`` when it may.

    It may when ``path`` is absent in a directory that exists or can be created, or is a regular
    file starting with ``marker``.
    """
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return _missing_refusal(path)
    except NotADirectoryError:
        return _missing_refusal(path) or "is under a plain file, not a directory"
    except OSError as exc:
        return _os_refusal(path, exc)
    mode = st.st_mode
    if stat.S_ISDIR(mode):
        return "is a directory, not a file (name a file inside it, e.g. <dir>/autotune.json)"
    if stat.S_ISLNK(mode):
        return f"is a symbolic link (to {os.readlink(path)!r}); the cache does not follow it here"
    for test, kind in _KINDS.items():
        if test(mode):
            return f"is {kind}, not a regular file; the cache never opens one"
    if not stat.S_ISREG(mode):
        return "is not a regular file"
    try:
        head = read_regular(path, _PEEK)
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})"
    return _content_refusal(head, marker)


def _content_refusal(head: bytes | None, marker: bytes) -> str | None:
    if head is None or head.startswith(marker):
        return None  # vanished meanwhile (absent) or ours
    if not head.strip():
        return "is an empty file that nvmath did not write; it is not an nvmath autotune cache file"
    if head.lstrip().startswith(b'{\n "entries": {'):
        return (
            "looks like a first-format autotune cache but carries no nvmath marker; it is not an "
            "nvmath autotune cache file this version rewrites (move it aside to start a new cache)"
        )
    return f"is not an nvmath autotune cache file (it does not start with {marker.decode()!r})"


def _missing_refusal(path: Path) -> str | None:
    """``None`` when the nearest existing ancestor of the missing ``path`` is a directory."""
    for parent in path.parents:
        try:
            st = os.stat(parent)
        except (FileNotFoundError, NotADirectoryError):
            continue
        except OSError as exc:
            return _os_refusal(path, exc)
        if stat.S_ISDIR(st.st_mode):
            return None
        return f"is under {parent}, which is a plain file, not a directory"
    return None


def _os_refusal(path: Path, exc: OSError) -> str:
    if exc.errno == errno.ENAMETOOLONG:
        longest = max((len(p) for p in path.parts), default=0)
        return (
            f"has a name too long for the file system ({longest} characters in one part, "
            f"{len(str(path))} in all)"
        )
    return f"cannot be examined ({exc.strerror or exc})"
