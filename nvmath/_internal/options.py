"""Option objects: creation from instances or dicts, reusable validators, ``memory_limit`` parsing.

Options classes have the mutability and argument order of their nvmath-python 1.0 counterparts:
plain mutable dataclasses built on :class:`MutableOptions` (advanced ``MatmulOptions`` and its
preferences, ``FFTOptions``), or ``@dataclass(frozen=True, kw_only=True)`` (``Execution*``,
``DirectSolverOptions``, the generic ``MatmulOptions``). Either way one function per class validates
the fields with the small validators below -- ``__post_init__`` for frozen classes,
``_check_field`` / ``_check_together`` for mutable ones (on assignment and when a planner takes the
object) -- with the offending value and the allowed set in the message, and planners take options
through :func:`check_or_create_options`, which returns a frozen snapshot of a mutable object::

    @dataclass(frozen=True, kw_only=True)
    class FFTOptions:
        result_layout: str = "optimized"
        blocking: Literal[True, "auto"] = "auto"

        def __post_init__(self):
            check_in("result_layout", self.result_layout, ("optimized", "natural"))
            check_blocking(self.blocking)

    options = check_or_create_options(FFTOptions, options, "FFT options")

Misuse raises ``TypeError`` (a value of the wrong kind) or ``ValueError`` (a value of the right kind
that is not allowed), as the error policy in :mod:`nvmath._errors` says.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import re
from collections.abc import Collection, Mapping
from typing import Any, TypeVar

__all__ = [
    "BLOCKING_VALUES",
    "check_blocking",
    "check_bool",
    "check_in",
    "check_int",
    "check_logger",
    "check_memory_limit",
    "check_nonnegative_int",
    "check_optional_positive_int",
    "check_or_create_options",
    "check_positive_int",
    "check_type",
    "freeze_options",
    "MutableOptions",
    "parse_memory_limit",
]

T = TypeVar("T")

BLOCKING_VALUES: tuple[Any, ...] = (True, "auto")
"""The values accepted for the ``blocking`` option."""


def _field_names(cls: type) -> list[str]:
    if dataclasses.is_dataclass(cls):
        return [f.name for f in dataclasses.fields(cls) if f.init]
    return []


def check_or_create_options(cls: type[T], value: T | Mapping[str, Any] | None, name: str) -> T:
    """Return an options object of type ``cls`` built from ``value``.

    Args:
        cls: the options class (usually a frozen dataclass).
        value: an instance of ``cls`` (returned as is), a dict of field values (passed to ``cls``
            as keyword arguments) or ``None`` (the defaults).
        name: what the object is called in messages, e.g. ``"matmul options"``.

    Returns:
        An instance of ``cls``; for a :class:`MutableOptions` class, its validated frozen snapshot
        (:func:`freeze_options`), so a later change to the caller's object never reaches a planner
        or a cache key.

    Raises:
        TypeError: ``value`` is of another kind, or the dict has keys that are not fields of ``cls``.
        ValueError: a field value is rejected by the class's own validation.
    """
    if value is None:
        return freeze_options(cls())
    if isinstance(value, cls):
        return freeze_options(value)
    if isinstance(value, Mapping):
        fields = _field_names(cls)
        unknown = sorted(str(k) for k in value if fields and k not in fields)
        if unknown:
            raise TypeError(
                f"{name}: unknown field(s) {', '.join(map(repr, unknown))} for {cls.__name__}; "
                f"the fields are {', '.join(fields)}"
            )
        return freeze_options(cls(**value))
    raise TypeError(
        f"{name} must be a {cls.__name__} object, a dict of its fields or None; "
        f"got {type(value).__name__}: {value!r}"
    )


def check_type(name: str, value: Any, types: type | tuple[type, ...]) -> None:
    """Raise ``TypeError`` unless ``isinstance(value, types)``."""
    if not isinstance(value, types):
        allowed = types if isinstance(types, tuple) else (types,)
        kinds = " or ".join(t.__name__ for t in allowed)
        raise TypeError(f"{name} must be {kinds}; got {type(value).__name__}: {value!r}")


def check_in(name: str, value: Any, allowed: Collection[Any]) -> None:
    """Raise ``ValueError`` unless ``value`` is one of ``allowed`` (``True`` never matches ``1``)."""
    for candidate in allowed:
        if value == candidate and isinstance(value, bool) == isinstance(candidate, bool):
            return
    choices = ", ".join(repr(a) for a in allowed)
    raise ValueError(f"{name} must be one of {choices}; got {value!r}")


def check_bool(name: str, value: Any) -> None:
    """Raise ``TypeError`` unless ``value`` is ``True`` or ``False``."""
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be True or False; got {type(value).__name__}: {value!r}")


def check_int(name: str, value: Any, *, minimum: int | None = None, maximum: int | None = None) -> None:
    """Raise ``TypeError`` unless ``value`` is an int (not a bool), ``ValueError`` when out of range."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int; got {type(value).__name__}: {value!r}")
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be >= {minimum}; got {value}")
    if maximum is not None and value > maximum:
        raise ValueError(f"{name} must be <= {maximum}; got {value}")


def check_positive_int(name: str, value: Any) -> None:
    """Raise unless ``value`` is an int >= 1."""
    check_int(name, value, minimum=1)


def check_nonnegative_int(name: str, value: Any) -> None:
    """Raise unless ``value`` is an int >= 0."""
    check_int(name, value, minimum=0)


def check_optional_positive_int(name: str, value: Any) -> None:
    """Raise unless ``value`` is ``None`` or an int >= 1."""
    if value is not None:
        check_positive_int(name, value)


def check_blocking(value: Any, name: str = "blocking") -> None:
    """Raise ``ValueError`` unless ``value`` is ``True`` or ``"auto"``."""
    if value is True or (isinstance(value, str) and value == "auto"):
        return
    raise ValueError(f"{name} must be True or 'auto'; got {value!r}")


def check_logger(value: Any, name: str = "logger") -> None:
    """Raise ``TypeError`` unless ``value`` is ``None``, a ``logging.Logger`` or a ``LoggerAdapter``."""
    if value is not None and not isinstance(value, (logging.Logger, logging.LoggerAdapter)):
        raise TypeError(
            f"{name} must be a logging.Logger, a logging.LoggerAdapter or None; "
            f"got {type(value).__name__}: {value!r}"
        )


_UNIT_RE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([kmgt]?)(i?)b\s*$", re.IGNORECASE)
_PERCENT_RE = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*%\s*$")
_POWERS = {"": 0, "k": 1, "m": 2, "g": 3, "t": 4}
_MEMORY_LIMIT_HELP = (
    "an int number of bytes (> 0), a float fraction of the device memory in (0, 1], "
    "a percentage string such as '80%', or a size string such as '512 MiB', '2gb', '1.5 GiB'"
)


def _parse_memory_string(value: str) -> tuple[str, float]:
    """Return ("fraction", f) or ("bytes", n) for a memory-limit string."""
    m = _PERCENT_RE.match(value)
    if m:
        percent = float(m.group(1))
        if not 0 < percent <= 100:
            raise ValueError(f"memory_limit percentage must be in (0, 100]; got {value!r}")
        return "fraction", percent / 100.0
    m = _UNIT_RE.match(value)
    if m:
        number, prefix, binary = m.groups()
        base = 1024 if binary else 1000
        if binary and not prefix:
            raise ValueError(f"memory_limit {value!r}: 'ib' needs a prefix (KiB, MiB, GiB, TiB)")
        nbytes = float(number) * base ** _POWERS[prefix.lower()]
        if nbytes < 1:
            raise ValueError(f"memory_limit must be at least one byte; got {value!r}")
        return "bytes", nbytes
    raise ValueError(f"memory_limit {value!r} is not understood; use {_MEMORY_LIMIT_HELP}")


def _classify_memory_limit(value: Any) -> tuple[str, float]:
    if isinstance(value, bool):
        raise TypeError(f"memory_limit must be {_MEMORY_LIMIT_HELP}; got {value!r}")
    if isinstance(value, int):
        if value <= 0:
            raise ValueError(f"memory_limit in bytes must be > 0; got {value}")
        return "bytes", value
    if isinstance(value, float):
        if not (math.isfinite(value) and 0 < value <= 1):
            raise ValueError(f"memory_limit as a float is a fraction in (0, 1]; got {value!r}")
        return "fraction", value
    if isinstance(value, str):
        return _parse_memory_string(value)
    raise TypeError(f"memory_limit must be {_MEMORY_LIMIT_HELP}; got {type(value).__name__}: {value!r}")


def check_memory_limit(value: Any) -> None:
    """Validate the syntax of a ``memory_limit`` value without knowing the device's memory size.

    Raises:
        TypeError: ``value`` is not an int, float or str.
        ValueError: ``value`` is out of range or not understood.
    """
    _classify_memory_limit(value)


def parse_memory_limit(value: float | str, total_bytes: int) -> int:
    """Convert a ``memory_limit`` value to a number of bytes.

    Args:
        value: an int number of bytes; a float fraction of ``total_bytes`` in (0, 1]; ``"N%"``
            (0 < N <= 100) of ``total_bytes``; or ``"x [k|m|g|t][i]b"`` (case-insensitive, decimal
            prefixes without ``i``, binary with it), e.g. ``"512 MiB"``, ``"2gb"``, ``"100 b"``.
        total_bytes: the device memory size that fractions and percentages refer to.

    Returns:
        The limit in bytes (at least 1; not capped at ``total_bytes``).

    Raises:
        TypeError: ``value`` is not an int, float or str.
        ValueError: ``value`` is out of range or not understood, or ``total_bytes`` is not positive.
    """
    kind, amount = _classify_memory_limit(value)
    if kind == "bytes":
        return int(amount)
    check_positive_int("total_bytes", total_bytes)
    return max(1, int(amount * total_bytes))


_FROZEN = "_nvmath_frozen"
_SNAPSHOT = "_nvmath_snapshot"


class MutableOptions:
    """Base of the options dataclasses that nvmath-python 1.0 has mutable and positional.

    Subclasses are plain ``@dataclass(unsafe_hash=True)`` classes (advanced ``MatmulOptions``,
    ``MatmulPlanPreferences``, ``MatmulEpilogPreferences``, ``MatmulQuantizationScales``,
    ``FFTOptions``, and ``nvmath.fft.DeviceCallable``). Validation is the same as for the frozen classes, in one place per class:

    * :meth:`_check_field` checks and normalizes one field; it runs on construction and on every
      assignment (``o.result_type = ...``), so a bad value is reported where it is set;
    * :meth:`_check_together` checks rules across fields; it runs on construction and when a planner
      takes the object (:func:`freeze_options`), so fields can be changed in any order.

    A planner never keeps the caller's object: it takes a frozen, validated snapshot (an instance of
    the same class whose assignment raises ``dataclasses.FrozenInstanceError``), made once per state of
    the object, so stateless plan caches can key on it safely.
    """

    _nested_fields: tuple[str, ...] = ()
    """The fields that hold another :class:`MutableOptions` object (snapshotted with their parent)."""

    def _check_field(self, name: str, value: Any) -> Any:
        """Check one field's value; return it normalized (override per class)."""
        return value

    def _check_together(self) -> None:
        """Check the rules that span several fields (override per class)."""

    def __post_init__(self) -> None:
        self._check_together()

    def __setattr__(self, name: str, value: Any) -> None:
        d = self.__dict__
        if d.get(_FROZEN):
            raise dataclasses.FrozenInstanceError(
                f"cannot assign to field {name!r}: this {type(self).__name__} is the snapshot a planner "
                "took; change the object you passed and pass it again"
            )
        if name in self.__dataclass_fields__:
            value = self._check_field(name, value)
        object.__setattr__(self, name, value)
        d.pop(_SNAPSHOT, None)

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"cannot delete field {name!r} of {type(self).__name__}")

    def _snapshot(self) -> Any:
        d = self.__dict__
        if d.get(_FROZEN):
            return self
        snap = d.get(_SNAPSHOT)
        if snap is not None and all(
            freeze_options(getattr(self, n)) is getattr(snap, n) for n in self._nested_fields
        ):
            return snap
        self._check_together()
        values = {name: freeze_options(getattr(self, name)) for name in self.__dataclass_fields__}
        snap = object.__new__(type(self))
        snap.__dict__.update(values)
        snap.__dict__[_FROZEN] = True
        d[_SNAPSHOT] = snap
        return snap


def freeze_options(value: T) -> T:
    """Return the validated frozen snapshot of a :class:`MutableOptions` object (else ``value``)."""
    if isinstance(value, MutableOptions):
        return value._snapshot()
    return value
