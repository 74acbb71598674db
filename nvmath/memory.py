"""Memory-manager protocols for the ``allocator`` option (call-compatible with nvmath-python 1.0).

A custom allocator is an object with either

* ``memalloc(size) -> obj`` (:class:`BaseCUDAMemoryManager`), called with the device's context
  current, or
* ``memalloc_async(size, stream) -> obj`` (:class:`BaseCUDAMemoryManagerAsync`), where ``stream``
  is a ``cuda.core.Stream``;

``obj`` exposes the device address as ``.device_ptr`` (or ``.device_pointer``, ``.ptr``,
``.pointer``) and frees the memory when it is garbage collected (or through ``obj.free()``).
:class:`MemoryPointer` is a ready-made such object. Without an allocator, nvmath uses the operands'
package allocator: torch's caching allocator, cupy's memory pool, or cuda.core's stream-ordered pool.
"""

from __future__ import annotations

from nvmath._internal.memory import BaseCUDAMemoryManager, BaseCUDAMemoryManagerAsync, MemoryPointer

__all__ = ["BaseCUDAMemoryManager", "BaseCUDAMemoryManagerAsync", "MemoryPointer"]
