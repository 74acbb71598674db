"""Package-native stream objects (``torch.cuda.Stream``, ``cupy.cuda.Stream``) for a
:class:`~nvmath._internal.streams.StreamHandle`, made once per handle (re-exported by
:mod:`nvmath._internal.streams`)."""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["native_stream"]


def native_stream(handle: Any, package: str | None = None) -> Any:
    """Return a ``torch.cuda.Stream`` / ``cupy.cuda.Stream`` for ``handle``.

    Args:
        handle: the stream.
        package: "torch" or "cupy"; defaults to ``handle.package``.

    The user's own stream object is returned when it is of that package; otherwise an external
    stream wrapping ``handle.ptr`` is made (once, kept in ``handle.native`` for ``handle.package``).
    """
    if package is None or package == handle.package:
        package = handle.package
        if handle.native is not None:
            return handle.native
        native = _make_native(handle, package)
        handle.native = native
        return native
    return _make_native(handle, package)


def _make_native(handle: Any, package: str) -> Any:
    obj = handle.obj
    if package == "torch":
        torch = sys.modules["torch"]
        if isinstance(obj, torch.cuda.Stream):
            return obj
        if handle.ptr == 0:
            return torch.cuda.default_stream(handle.device_id)
        return torch.cuda.ExternalStream(handle.ptr, device=torch.device("cuda", handle.device_id))
    if package == "cupy":
        cupy = sys.modules["cupy"]
        if type(obj).__module__.split(".", 1)[0] == "cupy" and hasattr(obj, "ptr"):
            return obj
        if handle.ptr == 0:
            return cupy.cuda.Stream.null
        return cupy.cuda.ExternalStream(handle.ptr, handle.device_id)
    raise ValueError(f"no native stream type for package {package!r}; expected 'torch' or 'cupy'")
