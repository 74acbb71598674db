"""RAII owners of cuBLASLt objects: the matmul descriptor, matrix layouts and the preference.

Each class owns one cuBLASLt object (an ``int`` handle), destroys it exactly once in :meth:`close`
(idempotent; also on garbage collection and in ``with`` blocks) and never raises from cleanup.
Attribute values are passed through ``ctypes`` scalars (about 1 us per attribute; the bindings'
numpy-based ``*_set`` helpers cost twice that), with the C type taken from the bindings' attribute
dtype tables. Attributes are named as the members of the bindings' enums (``"EPILOGUE"``,
``"MAX_WORKSPACE_BYTES"``, ...).
"""

from __future__ import annotations

import ctypes
import logging
from collections.abc import Callable, Iterable
from typing import Any, Self

from nvmath._errors import warn_cleanup_failure
from nvmath._internal.state import freed_on_error
from nvmath._internal import dtypes as _dt
from nvmath.bindings import cublasLt as lt
from nvmath.linalg.advanced import _traits

__all__ = [
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


class _LtObject:
    """Owns one cuBLASLt object; subclasses set ``_destroy`` and ``kind``."""

    __slots__ = ("__weakref__", "ptr")
    kind = "cuBLASLt object"
    _destroy: Callable[[int], None]

    def __init__(self, ptr: int):
        self.ptr = ptr

    @property
    def closed(self) -> bool:
        """Whether the object has been destroyed."""
        return not self.ptr

    def close(self) -> None:
        """Destroy the cuBLASLt object (idempotent; a failure warns, it never raises)."""
        ptr, self.ptr = self.ptr, 0
        if ptr:
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
    """

    __slots__ = ("_pointers", "attributes")
    kind = "cuBLASLt matmul descriptor"
    _destroy = staticmethod(lt.matmul_desc_destroy)

    def __init__(self, compute_type: int, scale_type: int):
        super().__init__(lt.matmul_desc_create(int(compute_type), int(scale_type)))
        self.attributes: dict[str, int] = {}
        self._pointers: dict[str, PointerAttribute] = {}

    def set(self, name: str, value: int) -> None:
        """Set a scalar attribute (by ``MatmulDescAttribute`` member name)."""
        attr = int(lt.MatmulDescAttribute[name])
        _set(lt.matmul_desc_set_attribute, lt.get_matmul_desc_attribute_dtype, self.ptr, attr, int(value))
        self.attributes[name] = int(value)

    def get(self, name: str) -> Any:
        """Read an attribute back (for tests and logging)."""
        return lt.matmul_desc_get(self.ptr, lt.MatmulDescAttribute[name])

    def pointer(self, name: str) -> PointerAttribute:
        """The :class:`PointerAttribute` for a pointer attribute (made once per name)."""
        slot = self._pointers.get(name)
        if slot is None:
            slot = self._pointers[name] = PointerAttribute(self, name)
        return slot


class MatrixLayout(_LtObject):
    """A ``cublasLtMatrixLayout_t`` built from a :class:`~._traits.MatrixLayout`."""

    __slots__ = ("layout",)
    kind = "cuBLASLt matrix layout"
    _destroy = staticmethod(lt.matrix_layout_destroy)

    def __init__(self, layout: _traits.MatrixLayout):
        super().__init__(
            lt.matrix_layout_create(_dt.cuda_data_type(layout.dtype), layout.rows, layout.cols, layout.ld)
        )
        self.layout = layout
        with freed_on_error(self):
            if layout.order != lt.Order.COL:
                self._set("ORDER", int(layout.order))
            if layout.batch_count > 1:
                self._set("BATCH_COUNT", layout.batch_count)
                self._set("STRIDED_BATCH_OFFSET", layout.batch_offset)

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
            self.c = self.d if problem.c == problem.d else MatrixLayout(problem.c)
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
