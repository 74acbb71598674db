"""numpy dtypes of C structs and of cuBLASLt attribute values, and Python-value attribute setters.

Hand-written helpers used by the generated modules (the tables they are given are generated from
the headers). numpy is imported only when a dtype is first needed, so importing the bindings
stays cheap.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

__all__ = ["attribute_buffer", "attribute_getter", "attribute_setter", "dtype_getter", "struct_dtype"]

logger = logging.getLogger(__name__)

FieldSpec = tuple[str, str, tuple[int, ...]]


def struct_dtype(name: str, specs: Mapping[str, Sequence[FieldSpec]], namespace: dict[str, Any]):
    """Build (once) the aligned numpy structured dtype ``name`` from its generated field specs.

    Args:
        name: the dtype's public name, e.g. ``"matmul_heuristic_result_dtype"``.
        specs: ``{dtype name: ((field, numpy type or other dtype name, shape), ...)}``.
        namespace: the module globals where the dtype is cached.

    Returns:
        ``numpy.dtype`` with the C layout (``align=True``).
    """
    cached = namespace.get(name)
    if cached is not None:
        return cached
    import numpy as np

    fields = []
    for field, type_name, shape in specs[name]:
        base = struct_dtype(type_name, specs, namespace) if type_name in specs else np.dtype(type_name)
        fields.append((field, base, shape) if shape else (field, base))
    dtype = np.dtype(fields, align=True)
    namespace[name] = dtype
    return dtype


def dtype_getter(name: str, enum: type, table: Mapping[str, str]) -> Callable[[int], Any]:
    """A ``get_<kind>_attribute_dtype(attr) -> numpy.dtype`` function for one attribute enum.

    Args:
        name: the function name (for messages).
        enum: the attribute ``IntEnum``.
        table: member name -> numpy type name; a trailing ``[]`` marks a variable-length array.
    """
    types = {int(enum[member]): type_name for member, type_name in table.items()}
    arrays = frozenset(attr for attr, type_name in types.items() if type_name.endswith("[]"))
    cache: dict[int, Any] = {}

    def get_dtype(attr: int):
        dtype = cache.get(attr)
        if dtype is None:
            try:
                type_name = types[attr]
            except KeyError:
                raise ValueError(
                    f"{name}: unknown attribute {attr!r}; known: {sorted(enum(a) for a in types)}"
                ) from None
            import numpy as np

            dtype = cache[attr] = np.dtype(type_name.rstrip("[]"))
        return dtype

    get_dtype.__name__ = get_dtype.__qualname__ = name
    get_dtype.__doc__ = f"The numpy dtype of the value of a ``{enum.__name__}`` attribute."
    get_dtype.arrays = arrays  # type: ignore[attr-defined]
    return get_dtype


def attribute_setter(
    name: str, set_attribute: Callable, get_dtype: Callable
) -> Callable[[int, int, Any], None]:
    """``<kind>_set(obj, attr, value)``: converts ``value`` to the attribute's dtype and sets it.

    ``value`` may be a Python scalar, an enum member, a sequence (array attributes) or a numpy array.
    """

    def set_value(obj: int, attr: int, value: Any) -> None:
        buffer = attribute_buffer(f"{name}(): attribute {attr!r}", value, get_dtype(attr))
        set_attribute(obj, attr, buffer.ctypes.data, buffer.nbytes)

    set_value.__name__ = set_value.__qualname__ = name
    set_value.__doc__ = f"Set an attribute from a Python value (wraps ``{set_attribute.__name__}``)."
    return set_value


def attribute_buffer(where: str, value: Any, dtype: Any) -> Any:
    """``value`` as a contiguous 1-D numpy array of ``dtype``, refusing what C would silently mangle.

    Integer attributes take ints (or ``__index__`` objects, numpy integer arrays) inside the type's
    range: a float is never truncated, a negative never wrapped. Float attributes take real numbers.

    Raises:
        TypeError: a value of the wrong kind; OverflowError: an integer outside the type's range.
    """
    import numpy as np

    try:
        given = np.asarray(value)
    except Exception as exc:  # noqa: BLE001 - any conversion failure is the caller's wrong value
        raise TypeError(f"{where}: cannot convert {type(value).__name__} to {dtype}: {exc}") from None
    kind = given.dtype.kind
    if dtype.kind in "iu":
        if kind == "O":
            given = np.asarray([_index(where, v) for v in given.reshape(-1)], dtype=object)
        elif kind not in "iub":
            raise TypeError(f"{where} takes integers ({dtype}), not {given.dtype} ({value!r})")
        info = np.iinfo(dtype)
        if given.size and (int(given.min()) < info.min or int(given.max()) > info.max):
            raise OverflowError(f"{where}: {value!r} is out of range for {dtype} [{info.min}, {info.max}]")
    elif kind not in "iubf":
        raise TypeError(f"{where} takes real numbers ({dtype}), not {given.dtype} ({value!r})")
    return np.ascontiguousarray(given.astype(dtype).reshape(-1))


def _index(where: str, item: Any) -> int:
    import operator

    try:
        return operator.index(item)
    except TypeError:
        raise TypeError(f"{where} takes integers, not {type(item).__name__} ({item!r})") from None


def attribute_getter(name: str, get_attribute: Callable, get_dtype: Callable) -> Callable[[int, int], Any]:
    """``<kind>_get(obj, attr)``: the attribute's value as a Python scalar (a numpy array for arrays)."""

    def get_value(obj: int, attr: int) -> Any:
        import numpy as np

        dtype = get_dtype(attr)
        if attr in get_dtype.arrays:
            needed = get_attribute(obj, attr, 0, 0)
            buffer = np.zeros(max(needed // dtype.itemsize, 1), dtype=dtype)
            written = get_attribute(obj, attr, buffer.ctypes.data, buffer.nbytes)
            return buffer[: written // dtype.itemsize]
        buffer = np.zeros(1, dtype=dtype)
        get_attribute(obj, attr, buffer.ctypes.data, buffer.nbytes)
        return buffer[0].item()

    get_value.__name__ = get_value.__qualname__ = name
    get_value.__doc__ = f"Get an attribute as a Python value (wraps ``{get_attribute.__name__}``)."
    return get_value
