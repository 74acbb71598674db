"""Logging helpers: named loggers, phase timers and lazy DEBUG messages.

nvmath logs through named loggers only (``logging.getLogger("nvmath....")``), never through the root
logger: INFO for phases (specification, planning, autotuning, execution) with their host time in
milliseconds, DEBUG for descriptors, layouts and allocations. A user's ``options.logger`` replaces
the module logger for that object. When a level is disabled the helpers cost one
``isEnabledFor`` check and nothing else::

    log = get_logger(__name__, options.logger)
    with log_phase(log, "planning"):
        ...
    debug(log, "layout of A: %s", lazy(describe_layout, a))
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, Self

__all__ = ["AnyLogger", "Lazy", "debug", "get_logger", "lazy", "log_phase"]

AnyLogger = logging.Logger | logging.LoggerAdapter


def get_logger(name: str, user_logger: AnyLogger | None = None) -> AnyLogger:
    """Return the logger to use: the user's (from options) if given, else the named logger ``name``.

    Args:
        name: a dotted logger name, usually ``__name__``; the root logger is refused.
        user_logger: ``options.logger``; ``None`` selects ``logging.getLogger(name)``.

    Raises:
        TypeError: ``user_logger`` is not a ``Logger``/``LoggerAdapter``.
        ValueError: ``name`` is empty or ``"root"``.
    """
    if user_logger is not None:
        if not isinstance(user_logger, (logging.Logger, logging.LoggerAdapter)):
            raise TypeError(
                f"logger must be a logging.Logger or LoggerAdapter; got {type(user_logger).__name__}: "
                f"{user_logger!r}"
            )
        return user_logger
    if not isinstance(name, str) or not name or name == "root":
        raise ValueError(f"nvmath never logs to the root logger; give a module name, got {name!r}")
    return logging.getLogger(name)


class _NullPhase:
    """The context returned when the level is disabled: does nothing."""

    __slots__ = ()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


_NULL_PHASE = _NullPhase()
_UNSET = object()


class _Phase:
    """Times a phase with ``perf_counter_ns`` and logs its duration on exit."""

    __slots__ = ("level", "logger", "phase", "start")

    def __init__(self, logger: AnyLogger, phase: str, level: int):
        self.logger, self.phase, self.level, self.start = logger, phase, level, 0

    def __enter__(self) -> Self:
        self.logger.log(self.level, "%s: started", self.phase)
        self.start = time.perf_counter_ns()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: object, tb: object) -> None:
        ms = (time.perf_counter_ns() - self.start) / 1e6
        if exc_type is None:
            self.logger.log(self.level, "%s: done in %.3f ms", self.phase, ms)
        else:
            self.logger.log(self.level, "%s: failed after %.3f ms (%s)", self.phase, ms, exc_type.__name__)


def log_phase(logger: AnyLogger, phase: str, *, level: int = logging.INFO) -> _Phase | _NullPhase:
    """Return a context manager that logs ``phase`` and its host time in ms at ``level``.

    The timer runs only if ``logger`` is enabled for ``level``; otherwise a shared no-op context is
    returned. The time is host wall time: GPU work enqueued inside the phase is not waited for.

    Args:
        logger: the logger (see :func:`get_logger`).
        phase: the phase name, e.g. ``"planning"``.
        level: the logging level (INFO by default).
    """
    if logger.isEnabledFor(level):
        return _Phase(logger, phase, level)
    return _NULL_PHASE


class Lazy:
    """A value computed only when formatted (``str``/``repr``), i.e. only if the record is emitted.

    The value is computed once, then reused by every handler that formats the record.
    """

    __slots__ = ("_value", "args", "fn")

    def __init__(self, fn: Callable[..., Any], *args: Any):
        self.fn, self.args, self._value = fn, args, _UNSET

    def value(self) -> Any:
        """Compute (once) and return ``fn(*args)``."""
        if self._value is _UNSET:
            self._value = self.fn(*self.args)
        return self._value

    def __str__(self) -> str:
        return str(self.value())

    def __repr__(self) -> str:
        return repr(self.value())


def lazy(fn: Callable[..., Any], *args: Any) -> Lazy:
    """Wrap ``fn(*args)`` so that it runs only if the log message is formatted."""
    return Lazy(fn, *args)


def debug(logger: AnyLogger, msg: str, *args: Any) -> None:
    """Log ``msg % args`` at DEBUG; nothing is formatted (and no :class:`Lazy` runs) when disabled."""
    if logger.isEnabledFor(logging.DEBUG):
        logger.debug(msg, *args, stacklevel=2)
