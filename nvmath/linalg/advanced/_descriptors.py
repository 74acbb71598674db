"""RAII owners of cuBLASLt objects: the matmul descriptor, matrix layouts and the preference.

Each class owns one cuBLASLt object (an ``int`` handle), destroys it exactly once in :meth:`close`
(idempotent; also on garbage collection and in ``with`` blocks) and never raises from cleanup.
Attribute values are passed through ``ctypes`` scalars (about 1 us per attribute; the bindings'
numpy-based ``*_set`` helpers cost twice that), with the C type taken from the bindings' attribute
dtype tables. Attributes are named as the members of the bindings' enums (``"EPILOGUE"``,
``"MAX_WORKSPACE_BYTES"``, ...).

Recycling: a matrix layout, and a matmul descriptor whose attributes were all given at construction
(no pointer attribute, no later ``set``), is in a state fixed by its construction arguments. Closing
one hands its handle to a bounded :class:`HandlePool` under those arguments instead of destroying it,
and the next object built with the same arguments takes it from there: a ``Matmul`` created, planned
and freed again and again for one problem makes no create, set or destroy call after the first
(:data:`LAYOUTS`, :data:`DESCRIPTORS`; registered caches, so ``caches.clear_all()`` destroys them).
The closed object's own ``ptr`` is 0 as before: a handle has one owner at a time.
"""

from __future__ import annotations

import ctypes
import logging
import threading
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from typing import Any, Self

from nvmath._errors import warn_cleanup_failure
from nvmath._internal import caches
from nvmath._internal import dtypes as _dt
from nvmath._internal.state import freed_on_error
from nvmath.bindings import cublasLt as lt
from nvmath.linalg.advanced import _traits

__all__ = [
    "HandlePool",
    "LayoutSet",
    "MatmulDesc",
    "MatrixLayout",
    "PointerAttribute",
    "Preference",
    "ctype_of",
]

logger = logging.getLogger(__name__)

_CTYPES: dict[tuple[str, int], Any] = {
    ("i", 1): ctypes.c_int8,
    ("i", 2): ctypes.c_int16,
    ("i", 4): ctypes.c_int32,
    ("i", 8): ctypes.c_int64,
    ("u", 1): ctypes.c_uint8,
    ("u", 2): ctypes.c_uint16,
    ("u", 4): ctypes.c_uint32,
    ("u", 8): ctypes.c_uint64,
    ("f", 4): ctypes.c_float,
    ("f", 8): ctypes.c_double,
}
_CTYPE_CACHE: dict[tuple[Callable, int], Any] = {}


def ctype_of(get_dtype: Callable[[int], Any], attr: int) -> Any:
    """The ctypes scalar type of attribute ``attr`` (per the bindings' dtype getter ``get_dtype``)."""
    key = (get_dtype, attr)
    ct = _CTYPE_CACHE.get(key)
    if ct is None:
        dt = get_dtype(attr)
        ct = _CTYPE_CACHE[key] = _CTYPES[(dt.kind, dt.itemsize)]
    return ct


def _set(setter: Callable, get_dtype: Callable, obj: int, attr: int, value: Any) -> None:
    buf = ctype_of(get_dtype, attr)(value)
    setter(obj, attr, ctypes.addressof(buf), ctypes.sizeof(buf))


@dataclass(frozen=True)
class PoolStats:
    """A :class:`HandlePool`'s counters: ``size`` handles kept now, ``maxsize`` the bound, ``reuses``
    the handles taken again so far."""

    size: int
    maxsize: int
    reuses: int


class HandlePool:
    """Configured handles of closed objects, by configuration key, for the next object of that key.

    Bounded: a handle given back to a full pool destroys the oldest key's oldest handle (``maxsize``
    0: every handle is destroyed, nothing is recycled). Thread-safe.

    Args:
        name: the name it is registered under (:mod:`nvmath._internal.caches`).
        destroy: the library's destroy function of the handles.
        maxsize: the most handles kept.
    """

    __slots__ = ("_count", "_destroy", "_free", "_lock", "maxsize", "name", "reuses")

    def __init__(self, name: str, destroy: Callable[[int], None], maxsize: int = 128):
        self.name, self._destroy, self.maxsize = name, destroy, maxsize
        self._free: dict[Hashable, list[int]] = {}
        self._count = 0
        self._lock = threading.Lock()
        self.reuses = 0

    def take(self, key: Hashable) -> int:
        """A kept handle of configuration ``key`` (the caller owns it now), or 0."""
        if not self._count:
            return 0
        with self._lock:
            free = self._free.get(key)
            if not free:
                return 0
            self._count -= 1
            self.reuses += 1
            ptr = free.pop()
            if not free:  # no empty lists: give() takes its victim from the oldest key's list
                del self._free[key]
            return ptr

    def give(self, key: Hashable, ptr: int) -> None:
        """Keep ``ptr``, configured as ``key`` says (the pool owns it now)."""
        with self._lock:
            if self._count < self.maxsize:
                self._count += 1
                self._free.setdefault(key, []).append(ptr)
                return
            victim = ptr  # full: the oldest key's oldest handle makes room (an empty pool keeps none)
            if self._free:
                oldest = next(iter(self._free))
                victims = self._free[oldest]
                victim = victims.pop(0)
                if not victims:
                    del self._free[oldest]
                self._free.setdefault(key, []).append(ptr)
        self._destroy_quietly(victim)

    def clear(self) -> None:
        """Destroy every kept handle."""
        with self._lock:
            free, self._free, self._count = self._free, {}, 0
        for ptrs in free.values():
            for ptr in ptrs:
                self._destroy_quietly(ptr)

    @property
    def stats(self) -> PoolStats:
        """A :class:`PoolStats` snapshot."""
        return PoolStats(self._count, self.maxsize, self.reuses)

    def _destroy_quietly(self, ptr: int) -> None:
        try:
            self._destroy(ptr)
        except Exception as exc:  # noqa: BLE001 - cleanup failures warn, never raise
            warn_cleanup_failure(f"destroying a pooled handle of {self.name}", exc)


LAYOUTS = caches.register(
    "nvmath.linalg.advanced: matrix layouts", HandlePool("cuBLASLt matrix layouts", lt.matrix_layout_destroy)
)
"""Closed plans' matrix layouts, by the fields of their :class:`~._traits.MatrixLayout`."""

DESCRIPTORS = caches.register(
    "nvmath.linalg.advanced: matmul descriptors",
    HandlePool("cuBLASLt matmul descriptors", lt.matmul_desc_destroy),
)
"""Closed plans' matmul descriptors without pointer attributes, by compute type, scale type and attributes."""


class _LtObject:
    """Owns one cuBLASLt object; subclasses set ``_destroy`` and ``kind``."""

    __slots__ = ("__weakref__", "_key", "ptr")
    kind = "cuBLASLt object"
    _destroy: Callable[[int], None]
    _pool: HandlePool | None = None

    def __init__(self, ptr: int, key: Hashable = None):
        self.ptr = ptr
        self._key = key  # the configuration the handle goes back to the pool under (None: destroyed)

    @property
    def closed(self) -> bool:
        """Whether the object has been destroyed."""
        return not self.ptr

    def close(self) -> None:
        """Destroy the cuBLASLt object, or hand a recyclable one to its pool (idempotent; a failure
        warns, it never raises)."""
        ptr, self.ptr = self.ptr, 0
        if not ptr:
            return
        key, pool = self._key, self._pool
        if key is not None and pool is not None:
            pool.give(key, ptr)
            return
        try:
            type(self)._destroy(ptr)
        except Exception as exc:  # noqa: BLE001 - cleanup failures warn, never raise
            warn_cleanup_failure(f"destroying a {self.kind}", exc)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        if getattr(self, "ptr", 0):  # unset when the create call of __init__ failed
            self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"{self.ptr:#x}"
        return f"{type(self).__name__}({state})"


class PointerAttribute:
    """A device-pointer attribute of a :class:`MatmulDesc`, cheap to update on the hot path.

    :meth:`set` costs one ``ctypes`` call when the pointer changes and nothing otherwise.
    """

    __slots__ = ("_addr", "_buf", "attr", "desc", "value")

    def __init__(self, desc: MatmulDesc, name: str):
        self.desc = desc
        self.attr = int(lt.MatmulDescAttribute[name])
        self._buf = ctypes.c_uint64(0)
        self._addr = ctypes.addressof(self._buf)
        self.value = -1

    def set(self, ptr: int) -> None:
        """Point the attribute at device address ``ptr``."""
        if ptr != self.value:
            self._buf.value = ptr
            lt.matmul_desc_set_attribute(self.desc.ptr, self.attr, self._addr, 8)
            self.value = ptr


class MatmulDesc(_LtObject):
    """A ``cublasLtMatmulDesc_t``.

    Args:
        compute_type: the cuBLAS compute type.
        scale_type: the ``cudaDataType`` of alpha and beta.
        attributes: ``(MatmulDescAttribute member name, int value)`` pairs to set; a descriptor that
            gets no other attribute later is recycled (see the module notes).
    """

    __slots__ = ("_pointers", "attributes")
    kind = "cuBLASLt matmul descriptor"
    _destroy = staticmethod(lt.matmul_desc_destroy)
    _pool = DESCRIPTORS

    def __init__(self, compute_type: int, scale_type: int, attributes: tuple[tuple[str, int], ...] = ()):
        key = (int(compute_type), int(scale_type), attributes)
        ptr = DESCRIPTORS.take(key)
        if ptr:
            super().__init__(ptr, key)
        else:
            super().__init__(lt.matmul_desc_create(key[0], key[1]))
            with freed_on_error(self):
                for name, value in attributes:
                    self._set(name, value)
            self._key = key
        self.attributes: dict[str, int] = dict(attributes)
        self._pointers: dict[str, PointerAttribute] = {}

    def _set(self, name: str, value: int) -> None:
        attr = int(lt.MatmulDescAttribute[name])
        _set(lt.matmul_desc_set_attribute, lt.get_matmul_desc_attribute_dtype, self.ptr, attr, int(value))

    def set(self, name: str, value: int) -> None:
        """Set a scalar attribute (by ``MatmulDescAttribute`` member name); the descriptor is then
        destroyed, not recycled, when closed."""
        self._key = None
        self._set(name, value)
        self.attributes[name] = int(value)

    def get(self, name: str) -> Any:
        """Read an attribute back (for tests and logging)."""
        return lt.matmul_desc_get(self.ptr, lt.MatmulDescAttribute[name])

    def close(self) -> None:
        """As :meth:`_LtObject.close`; also drops the pointer attributes (each refers to the descriptor:
        a closed one is then freed when dropped, not by the garbage collector)."""
        self._pointers.clear()
        super().close()

    def pointer(self, name: str) -> PointerAttribute:
        """The :class:`PointerAttribute` for a pointer attribute (made once per name); the descriptor
        is then destroyed, not recycled, when closed."""
        self._key = None
        slot = self._pointers.get(name)
        if slot is None:
            slot = self._pointers[name] = PointerAttribute(self, name)
        return slot


_COL = int(lt.Order.COL)


class MatrixLayout(_LtObject):
    """A ``cublasLtMatrixLayout_t`` built from a :class:`~._traits.MatrixLayout` (recycled: see the
    module notes)."""

    __slots__ = ("layout",)
    kind = "cuBLASLt matrix layout"
    _destroy = staticmethod(lt.matrix_layout_destroy)
    _pool = LAYOUTS

    def __init__(self, layout: _traits.MatrixLayout):
        self.layout = layout
        order = int(layout.order)
        # the pool key: a plain tuple (hashed in C; the dataclass's hash is Python code)
        key = (layout.rows, layout.cols, layout.ld, order, layout.dtype, layout.batch_count, layout.batch_offset)
        ptr = LAYOUTS.take(key)
        if ptr:
            super().__init__(ptr, key)
            return
        super().__init__(
            lt.matrix_layout_create(_dt.cuda_data_type(layout.dtype), layout.rows, layout.cols, layout.ld)
        )
        if order != _COL or layout.batch_count > 1:
            with freed_on_error(self):
                if order != _COL:
                    self._set("ORDER", order)
                if layout.batch_count > 1:
                    self._set("BATCH_COUNT", layout.batch_count)
                    self._set("STRIDED_BATCH_OFFSET", layout.batch_offset)
        self._key = key

    def _set(self, name: str, value: int) -> None:
        attr = int(lt.MatrixLayoutAttribute[name])
        _set(lt.matrix_layout_set_attribute, lt.get_matrix_layout_attribute_dtype, self.ptr, attr, value)


class LayoutSet:
    """The four layouts A, B, C, D of a problem; C and D share one object when they are equal."""

    __slots__ = ("a", "b", "c", "d")

    def __init__(self, problem: _traits.MatmulProblem):
        made: list[MatrixLayout] = []
        try:
            for name in ("a", "b", "d"):
                made.append(MatrixLayout(getattr(problem, name)))
            self.a, self.b, self.d = made
            self.c = self.d if problem.c is problem.d or problem.c == problem.d else MatrixLayout(problem.c)
        except BaseException:
            for layout in made:
                layout.close()
            raise

    @property
    def ptrs(self) -> tuple[int, int, int, int]:
        """The A, B, C, D handles."""
        return self.a.ptr, self.b.ptr, self.c.ptr, self.d.ptr

    def close(self) -> None:
        """Destroy all four layouts (idempotent)."""
        for layout in (self.a, self.b, self.c, self.d):
            layout.close()


class Preference(_LtObject):
    """A ``cublasLtMatmulPreference_t``.

    Args:
        settings: ``(MatmulPreferenceAttribute member name, value)`` pairs to set.
    """

    __slots__ = ("settings",)
    kind = "cuBLASLt matmul preference"
    _destroy = staticmethod(lt.matmul_preference_destroy)

    def __init__(self, settings: Iterable[tuple[str, Any]]):
        super().__init__(lt.matmul_preference_create())
        self.settings = tuple(settings)
        with freed_on_error(self):
            for name, value in self.settings:
                attr = int(lt.MatmulPreferenceAttribute[name])
                _set(
                    lt.matmul_preference_set_attribute,
                    lt.get_matmul_preference_attribute_dtype,
                    self.ptr,
                    attr,
                    value,
                )

    def get(self, name: str) -> Any:
        """Read an attribute back (for tests and logging)."""
        return lt.matmul_preference_get(self.ptr, lt.MatmulPreferenceAttribute[name])
